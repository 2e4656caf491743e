"""Summation kernels of the engines: direct summation (``direct``, ``gemm``), fast zonal sums
(``harmonics``, ``spectral``, ``gegenbauer``) and the finite-volume passes on the circle (``circle``,
``dyadic``)."""
