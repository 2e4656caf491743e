r"""The paper's full attention model (any Q, K, V) on the cells of a density engine.

.. math::

    X[\mu_h](c_i) = \sum_h P_{c_i} \frac{\sum_j m_j e^{\beta_h \langle Q_h c_i, K_h c_j \rangle} V_h c_j}{Z_h(c_i)},
    \qquad \mu_h = \sum_j m_j \delta_{c_j}, \quad m_j = \rho_j w_j,

the particles' field (``particles.attention_field``) of the cell measure (generators c_j, cell sizes
w_j), from ``general_field.GeneralField`` built once per mesh: the exact per-target Funk–Hecke /
Fourier expansion (two BLAS products per head and stage) or direct log-sum-exp quadrature.

What the engines take from here:

- ``isotropic_equivalent``: a model whose kernel is isotropic after all (Q^T K = c I with c >= 0,
  V = ±I: scalars, or matrices such as Q = K = R for a rotation R) as the isotropic model at
  β' = c β, so that the engines' isotropic fast paths run unchanged for it;
- ``CellField``: for the others, the cell velocities, their slopes along face normals (the
  second-order face extrapolation of flux="upwind2"), the potential of the two-point fluxes where
  the field is a gradient (V = ±Q^T K symmetric, head by head), the energy E_V, and the
  well-balancing correction: the field of the discrete uniform density minus the exact one
  (``general_field.uniform_field``), i.e. the quadrature error of the cell-centre atoms, removed
  as the isotropic sphere engine removes it (the uniform state is not at rest in general, so the
  exact uniform field is kept).
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from meanfield.models import SA, USA, MultiHead, as_model
from meanfield.theory import speed_bound

from . import general_field
from .kernels import spectral

__all__ = ["isotropic_equivalent", "potential_signs", "energy_direction", "CellField", "ISOTROPY_TOL"]

#: Q^T K and V are taken as c I and ±I when every entry is within this (relative) distance of them
ISOTROPY_TOL = 1e-13


def _heads(model):
    return getattr(model, "heads", (model,))


def _isotropic_head(head, d):
    """The isotropic head at β' = cβ equal to ``head``, or None."""
    if head.is_isotropic:
        return head
    A, V = head.interaction(d)
    c = float(np.trace(A)) / d
    v = float(np.trace(V)) / d
    scale = max(abs(c), 1.0)
    if c < 0 or np.abs(A - c * np.eye(d)).max() > ISOTROPY_TOL * scale or abs(abs(v) - 1.0) > ISOTROPY_TOL \
            or np.abs(V - np.sign(v) * np.eye(d)).max() > ISOTROPY_TOL:
        return None
    return type(head)(beta=c * head.beta, V=None if v > 0 else -1.0)


def isotropic_equivalent(model: SA | USA | MultiHead, d: int) -> SA | USA | MultiHead | None:
    r"""The isotropic model with the same field on S^{d-1}, or None.

    .. math::

        Q^T K = c I, \ c \ge 0, \ V = \pm I \quad \Longrightarrow \quad
        e^{\beta \langle Q x, K y \rangle} V y = e^{(c \beta) \langle x, y \rangle} (\pm y),

    so the model is SA/USA(β' = cβ, V = ±1), entries within ``ISOTROPY_TOL`` (relative) of c I and
    ±I (e.g. Q = K = R for a rotation R); a MultiHead when every head is (no feed-forward term).

    Parameters
    ----------
    model : SA, USA or MultiHead
        Constant weights.
    d : int
        The dimension of the points.

    Returns
    -------
    SA, USA, MultiHead or None

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers.full_model import isotropic_equivalent
    >>> c, s = np.cos(0.3), np.sin(0.3)
    >>> R = np.array([[c, -s], [s, c]])
    >>> isotropic_equivalent(mf.SA(2.0, Q=R, K=R), 2), isotropic_equivalent(mf.USA(1.5, Q=2.0, V=-1.0), 2)
    (SA(beta=2), USA(beta=3, V=-1.0))
    >>> isotropic_equivalent(mf.SA(2.0, Q=np.diag([1.0, 2.0])), 2) is None
    True
    """
    model = as_model(model, multihead=True)
    if getattr(model, "feedforward", None) is not None:
        return None
    heads = [_isotropic_head(head, d) for head in _heads(model)]
    if any(h is None for h in heads):
        return None
    return MultiHead(heads=tuple(heads)) if hasattr(model, "heads") else heads[0]


def potential_signs(model: SA | USA | MultiHead, d: int) -> tuple[list[int] | None, str]:
    """Per head +1 (V = Q^T K symmetric) or -1 (V = -Q^T K): the field is then Σ_h ∇ P_h with
    P_h = ±log Φ_h/β_h (SA) or ±Φ_h/β_h (USA); None and the reason otherwise.

    Parameters
    ----------
    model : SA, USA or MultiHead
    d : int

    Returns
    -------
    signs : list of int or None
    reason : str

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers.full_model import potential_signs
    >>> A = np.diag([1.0, 2.0])
    >>> potential_signs(mf.SA(1.0, Q=A, V=A), 2)
    ([1], 'V = ±Q^T K symmetric for every head')
    >>> potential_signs(mf.SA(1.0, V=A), 2)[0] is None
    True
    """
    if getattr(model, "feedforward", None) is not None:
        return None, "the feed-forward term is not the gradient of a potential"
    signs = []
    for head in _heads(model):
        sign, reason = general_field.gradient_sign(head, d)
        if sign == 0:
            return None, reason.replace("not a gradient flow", "no potential")
        signs.append(sign)
    return signs, "V = ±Q^T K symmetric for every head"


def energy_direction(model: SA | USA | MultiHead, d: int) -> tuple[float, str]:
    """The direction in which the flow moves its energy, and why: the sign of V = ±I for an isotropic
    model (1 for a MultiHead, whose energy the engines give only for USA heads), else that of V = ±Q^T K
    symmetric (0: not a gradient flow, E_V is NaN).

    Parameters
    ----------
    model : SA, USA or MultiHead
    d : int

    Returns
    -------
    sign : float
    reason : str

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers.full_model import energy_direction
    >>> energy_direction(mf.SA(1.0, V=-1.0), 2)
    (-1.0, 'isotropic: V = -I')
    >>> energy_direction(mf.SA(1.0, Q=np.diag([1.0, 2.0])), 2)
    (0, 'not a gradient flow: V is neither Q^T K nor -Q^T K')
    """
    if model.is_isotropic:
        sign = getattr(model, "sign", 1.0)
        return sign, f"isotropic: V = {'-' if sign < 0 else ''}I"
    return general_field.gradient_sign(model, d)


class CellField:
    r"""The full model's field on the cell measure Σ_j ρ_j w_j δ_{c_j} of one fixed mesh.

    .. math::

        X_i = X[\mu_h](c_i) - \lambda_i \bigl(X[\mu^U_h](c_i) - X[\sigma](c_i)\bigr), \qquad
        \lambda_i = Z_i \min\Bigl(1, \frac{\Phi_i}{M \Phi^U_i}\Bigr),

    the second term only with ``balanced``: μ^U_h the cell measure of the uniform density of unit mass,
    σ the uniform measure (exact field ``general_field.uniform_field``), M the mass, Z = 1 (SA) or M (USA)
    (the field's homogeneity in the masses); λ fades the correction where Φ is below its uniform value
    (as in ``sphere.balanced_field``), one λ per head.

    Parameters
    ----------
    model : SA, USA or MultiHead
        Constant, non-causal weights, no feed-forward term.
    points : array_like, shape (N, d)
        Cell generators (unit vectors, d = 2 or 3).
    weights : array_like, shape (N,)
        Cell sizes w_j (masses m_j = ρ_j w_j).
    summation : {"auto", "direct", "fast", "expansion"}
        "fast" is "expansion" (``general_field.GeneralField``); with ``slopes`` "auto" takes the
        expansion wherever it applies (the slopes need it).
    balanced : bool
        Subtract the quadrature error of the discrete uniform state.
    slopes : bool
        Whether ``stage`` will be called (second-order face velocities).

    Attributes
    ----------
    info : dict
        summation, degree (per head), tolerance, the bound the face speeds are clipped to.
    energy_sign, energy_reason : int, str
        +1 (E_V non-decreasing), -1 (non-increasing) or 0 (not a gradient flow: E_V is NaN), and why.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers.full_model import CellField
    >>> theta = (np.arange(64) + 0.5) * 2 * np.pi / 64
    >>> x = np.column_stack([np.cos(theta), np.sin(theta)])
    >>> field = CellField(mf.SA(2.0, Q=np.diag([1.0, 2.0])), x, np.full(64, 2 * np.pi / 64))
    >>> X = field.velocity(np.full(64, 1 / (2 * np.pi)))
    >>> X.shape, field.info["summation"]
    ((64, 2), ['expansion'])
    """

    def __init__(self, model: SA | USA | MultiHead, points: ArrayLike, weights: ArrayLike, summation: str = "auto",
                 balanced: bool = False, slopes: bool = False):
        self.model = as_model(model, multihead=True)
        self.points = np.ascontiguousarray(points, dtype=np.float64)
        self.weights = np.asarray(weights, dtype=np.float64)
        d = self.points.shape[1]
        summation = "expansion" if summation == "fast" else summation
        if slopes and summation == "auto" and d in (2, 3) and all(
                h.beta * np.linalg.norm(h.interaction(d)[0], 2) <= spectral.MAX_BETA for h in _heads(self.model)):
            summation = "expansion"
        self.field = general_field.GeneralField(self.model, self.points, summation=summation)
        self.slopes = slopes and all(s == "expansion" for s in self.field.info["summation"])
        self.signs, self.potential_reason = potential_signs(self.model, d)
        self.energy_sign, self.energy_reason = energy_direction(self.model, d)
        self.info = dict(self.field.info, speed_bound=speed_bound(self.model))
        self.correction = None
        if balanced:
            unit = self.weights / self.weights.sum()
            self.correction = []
            for head in _heads(self.model):
                own = self.field if len(_heads(self.model)) == 1 else general_field.GeneralField(
                    head, self.points, summation=summation)
                X, log_phi = own(unit)
                self.correction.append((X - general_field.uniform_field(head, self.points)[0], log_phi[0]))

    def bound(self, mass: float) -> float:
        """The speed bound of the measure of mass M (Σ_h of the heads', USA heads' times M)."""
        return float(sum(speed_bound(h) * (1.0 if h.normalised else mass) for h in _heads(self.model)))

    def _balance(self, X, log_phi, masses):
        if self.correction is None:
            return X
        mass = float(masses.sum())
        for head, lp, (XU, lpU) in zip(_heads(self.model), log_phi, self.correction):
            lam = np.minimum(1.0, np.exp(lp - lpU - np.log(mass))) * (1.0 if head.normalised else mass)
            X = X - lam[:, None] * XU
        return X

    def velocity(self, rho: ArrayLike) -> np.ndarray:
        """The (balanced) cell velocities X_i, shape (N, d)."""
        masses = np.asarray(rho) * self.weights
        X, log_phi = self.field(masses)
        return self._balance(X, log_phi, masses)

    def stage(self, rho: ArrayLike, cells: ArrayLike, tangents: ArrayLike
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(X (N, d) balanced, slopes (K,), trusted (K,)) of ``GeneralField.stage`` at the pairs (cells, tangents);
        slopes 0 and trusted False everywhere when the field is summed directly."""
        masses = np.asarray(rho) * self.weights
        if not self.slopes:
            X, log_phi = self.field(masses)
            k = np.asarray(cells).size
            return self._balance(X, log_phi, masses), np.zeros(k), np.zeros(k, dtype=bool)
        X, log_phi, slopes, trusted = self.field.stage(masses, cells, tangents)
        return self._balance(X, log_phi, masses), slopes, trusted

    def angular(self, rho: ArrayLike, flux: str) -> tuple[np.ndarray, float]:
        r"""On S^1: (u, u', P) at the cell centres, (3, N), for a circle flux, and the speed bound.

        u_i = ⟨X_i, t_i⟩ with t_i = (-sin θ_i, cos θ_i), u'_i = du/dθ (``stage``; 0 where the expansion
        is not trusted or the field is summed directly) for "upwind2", u for "upwind", the potential
        P (``potential``) for "muscl" and "tpfa": the arrays ``circle_kernels.flux_pass`` reads.

        Parameters
        ----------
        rho : array_like, shape (N,)
        flux : {"upwind2", "upwind", "muscl", "tpfa"}

        Returns
        -------
        centre : ndarray, shape (3, N)
        bound : float
        """
        rho = np.asarray(rho)
        n = self.points.shape[0]
        tangents = self.points[:, ::-1] * [-1.0, 1.0]
        centre = np.zeros((3, n))
        if flux in ("muscl", "tpfa"):
            centre[2] = self.potential(rho)
        elif flux == "upwind2":
            X, slopes, trusted = self.stage(rho, np.arange(n), tangents)
            centre[0] = np.sum(X * tangents, axis=1)
            centre[1] = np.where(trusted, slopes, 0.0)
        else:
            centre[0] = np.sum(self.velocity(rho) * tangents, axis=1)
        return centre, self.bound(float(rho @ self.weights))

    def potential(self, rho: ArrayLike) -> np.ndarray:
        r"""P with X = ∇_S P: Σ_h s_h log Φ_h/β_h (SA), s_h Φ_h/β_h (USA), s_h ⟨A_h c, Σ m c⟩/Z (β_h = 0).

        Raises
        ------
        ValueError
            Where the field is not a gradient (``potential_signs``).
        """
        if self.signs is None:
            raise ValueError(f"the two-point fluxes (tpfa, muscl) need a potential: {self.potential_reason}; "
                             f"use flux='upwind2' or 'upwind'")
        masses = np.asarray(rho) * self.weights
        _, log_phi = self.field(masses)
        pot = np.zeros(self.points.shape[0])
        for head, sign, lp, (A, _) in zip(_heads(self.model), self.signs, log_phi, self.field.interactions):
            if head.beta == 0:
                p = self.points @ (A @ (masses @ self.points))
                pot += sign * (p / masses.sum() if head.normalised else p)
            else:
                pot += sign * (lp if head.normalised else np.exp(lp)) / head.beta
        return pot

    def energy(self, rho: ArrayLike) -> tuple[float, str]:
        """E_V of the cell measure and why (``general_field.energy``: NaN with the reason where the flow
        is not a gradient flow of it), with this mesh's tables."""
        return general_field.energy(self.model, self.points, np.asarray(rho) * self.weights, field=self.field)
