"""Optimal transport between point measures: the geodesic cost (``cost``), on the sphere (``sphere``), exact on
the circle (``circle``), coarse-to-fine with a certificate (``multiscale``), and between causal tokens and
a causal density (``causal``)."""
from .causal import binned_w1, causal_tokens
from .circle import circle_wp_cost, level_median_w1, shift_cost
from .cost import geodesic_cost
from .multiscale import multiscale_wasserstein
from .sphere import EXACT_LIMIT, series_method, wasserstein

__all__ = ["wasserstein", "series_method", "geodesic_cost", "EXACT_LIMIT", "multiscale_wasserstein",
           "level_median_w1", "shift_cost", "circle_wp_cost", "causal_tokens", "binned_w1"]
