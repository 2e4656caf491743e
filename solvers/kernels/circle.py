"""Numba kernels of the circle's finite-volume stage: the field by a truncated Fourier sum, the centre
velocities, and one fused pass for reconstruction, face velocities, fluxes, divergence and the
positivity rate.

Truncated Fourier sum.  On the grid of N cells (index angles φ_i = 2πi/N) the circulant convolution
of the cell densities ρ with a kernel κ whose discrete spectrum is κ̂_k is

    (κ * ρ)_i = (1/N) Σ_{k=0}^{N-1} κ̂_k ρ̂_k e^{ikφ_i},   ρ̂_k = Σ_j ρ_j e^{-ikφ_j} = a_k - i b_k.

The kernels of the attention field (e^{β(cos δ - 1)} times 1, sin δ, β sin² δ - cos δ) have Fourier
coefficients e^{-β} I_k(β) times a polynomial in k of degree <= 2, so modes beyond K ≈ a few dozen
are below round-off: ``degree`` chooses the smallest K whose dropped modes bound the absolute error by
``TRUNCATION`` times the mass (the FFT's own round-off is ~1e-16 log2 N times the mass).  The sum runs
over the K + 1 kept modes only, folded about φ = 0: with s_i = ρ_i + ρ_{N-i}, d_i = ρ_i - ρ_{N-i},

    a_k = Σ_{i <= N/2} s_i cos kφ_i,    b_k = Σ_{i <= N/2} d_i sin kφ_i,
    (κ * ρ)_{i, N-i} = E_i ± O_i,  E_i = Σ_k α_k cos kφ_i,  O_i = Σ_k γ_k sin kφ_i,

α_k = w_k Re(κ̂_k ρ̂_k), γ_k = -w_k Im(κ̂_k ρ̂_k), w_k = 2/N (1/N for k = 0 and k = N/2): O(N K) work
on a table of cos kφ_i, sin kφ_i (i <= N/2), all in one call.  With K = N/2 the sum is the exact DFT.

Positivity rate.  A forward-Euler stage ρ_i - (dt/h)(out_i - in_i) keeps ρ_i >= 0 when
dt · out_i / (h ρ_i) <= 1, out_i the flux leaving cell i through its two faces; the pass returns
rate = max_i out_i / (h ρ_i) (+ 2D/h² with diffusion D, whose stage loses 2Dρ_i/h²).  For the
reconstructed fluxes out_i <= 2 ρ_i max|u| and for the first-order ones out_i = ρ_i |u_i|, so the rate
never exceeds the global bound the fixed step uses, and it is the actual one.
"""
from .. import _numba_env  # noqa: F401

import math

import numpy as np
from numba import njit
from scipy.special import ive

TRUNCATION = 1e-16      # dropped Fourier modes bound the field's absolute error by this times the mass
UNRESOLVED = 0.5        # upwind2 falls back to the first-order upwind flux at faces of such cells
FLUX_CODES = {"upwind2": 0, "upwind": 1, "muscl": 2, "tpfa": 3}


def degree(beta, cells, tolerance=TRUNCATION):
    r"""Smallest K with 4 Σ_{k>K} (k²/β) e^{-β} I_k(β) <= tolerance, capped at N/2 (then the sum is the DFT).

    The field kernels expm1(β(cos δ - 1))/β, e^{β(cos δ - 1)} sin δ and its δ-derivative have Fourier
    coefficients of modulus e^{-β} I_k(β) times 1/β, k/β and k²/β (up to the sign and the USA scale e^β,
    which multiplies the velocity too); a dropped mode of the sampled kernel is at most twice the continuous
    one (aliasing from |k| >= N/2), and ±k count twice, so the absolute error of every field is at most
    ``tolerance`` times the mass.  At β = 0 the kernels are cos δ - 1, -sin δ, -cos δ: K = 1.

    .. math::

        K = \min\Big\{K' : 4 \sum_{k > K'} \frac{k^2}{\beta} e^{-\beta} I_k(\beta) \le \mathrm{tolerance}\Big\}
        \wedge \frac{N}{2}.

    Parameters
    ----------
    beta : float
        β >= 0.
    cells : int
        N, the number of cells.
    tolerance : float
        The absolute error allowed per unit mass.

    Returns
    -------
    int

    Examples
    --------
    >>> from meanfield.solvers.kernels.circle import degree
    >>> degree(3.0, 4096), degree(50.0, 4096), degree(3.0, 16)
    (22, 66, 8)
    """
    half = cells // 2
    if beta == 0:
        return min(1, half)
    k = np.arange(1, half + 1, dtype=float)
    terms = 4.0 * k * k * ive(k, beta) / beta
    tail = np.cumsum(terms[::-1])[::-1]           # tail[j] = Σ_{k >= j+1} terms
    above = np.flatnonzero(tail > tolerance)
    return int(min(half, above[-1] + 1 if above.size else 0))


def fourier_tables(cells, K):
    r"""cos kφ_i and sin kφ_i for k = 0..K (rows) and i = 0..N/2 (columns), φ_i = 2πi/N, from the exact
    residues ki mod N.

    .. math::

        \cos k\varphi_i = \cos\big(2\pi\, (k i \bmod N) / N\big), \quad \text{likewise } \sin k\varphi_i.

    Parameters
    ----------
    cells : int
        N.
    K : int
        The largest mode.

    Returns
    -------
    cos_t, sin_t : ndarray, shape (K + 1, N // 2 + 1)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.kernels.circle import fourier_tables
    >>> cos_t, sin_t = fourier_tables(8, 2)
    >>> cos_t.shape, np.round(sin_t[2], 12) + 0.0
    ((3, 5), array([ 0.,  1.,  0., -1.,  0.]))
    """
    phase = (np.outer(np.arange(K + 1), np.arange(cells // 2 + 1)) % cells) * (2 * np.pi / cells)
    return np.cos(phase), np.sin(phase)


@njit(cache=True)
def _analyse(rho, cos_t, sin_t, fold, ab):
    """ab[0, k] = a_k, ab[1, k] = b_k (module docstring) for the K + 1 rows of the tables (BLAS gemv)."""
    n = rho.shape[0]
    m = cos_t.shape[1]
    for i in range(m):
        if i == 0 or 2 * i == n:
            fold[0, i] = rho[i]
            fold[1, i] = 0.0
        else:
            fold[0, i] = rho[i] + rho[n - i]
            fold[1, i] = rho[i] - rho[n - i]
    np.dot(cos_t, fold[0, :m], ab[0])
    np.dot(sin_t, fold[1, :m], ab[1])


@njit(cache=True)
def _synthesise(ab, spectra, cos_t, sin_t, coef, fold, out):
    """out[f] = (κ_f * ρ) for the kernels' spectra (F, K+1, 2) (real, imaginary parts), from ab (BLAS gemv)."""
    n = out.shape[1]
    m = cos_t.shape[1]
    for f in range(spectra.shape[0]):
        for k in range(cos_t.shape[0]):
            w = 1.0 / n if (k == 0 or 2 * k == n) else 2.0 / n
            x = spectra[f, k, 0]
            y = spectra[f, k, 1]
            coef[0, k] = w * (x * ab[0, k] + y * ab[1, k])
            coef[1, k] = -w * (y * ab[0, k] - x * ab[1, k])
        np.dot(coef[0], cos_t, fold[0, :m])
        np.dot(coef[1], sin_t, fold[1, :m])
        row = out[f]
        for i in range(m):
            row[i] = fold[0, i] + fold[1, i]
            if i > 0 and 2 * i != n:
                row[n - i] = fold[0, i] - fold[1, i]


@njit(cache=True)
def fourier_fields(rho, spectra, cos_t, sin_t, fold, small, out):
    r"""out[f] = (κ_f * ρ)_i, i = 0..N-1, for the kernels whose first K + 1 DFT coefficients are
    spectra[f] (F, K+1, 2) (the truncated sum of the module docstring).  Scratch: fold (2, >= N/2 + 1),
    small (4, K + 1).

    .. math::

        (\kappa_f * \rho)_i = \frac1N \sum_{|k| \le K} \hat\kappa_{f,k}\, \hat\rho_k\, e^{ik\varphi_i}.

    Parameters
    ----------
    rho : ndarray, shape (N,)
        Cell values.
    spectra : ndarray, shape (F, K + 1, 2)
        Real and imaginary parts of the kernels' DFT coefficients κ̂_0..κ̂_K.
    cos_t, sin_t : ndarray, shape (K + 1, N // 2 + 1)
        ``fourier_tables(N, K)``.
    fold, small : ndarray
        Scratch, shapes (2, >= N/2 + 1) and (4, K + 1).
    out : ndarray, shape (F, N)
        Receives the convolutions.

    Returns
    -------
    None

    Examples
    --------
    With K = N/2 the sum is the exact circular convolution:

    >>> import numpy as np
    >>> from meanfield.solvers.kernels.circle import fourier_fields, fourier_tables
    >>> N = 8
    >>> rho, k_hat = np.arange(1.0, N + 1), np.fft.rfft(np.cos(2 * np.pi * np.arange(N) / N))
    >>> spectra = np.ascontiguousarray(np.stack([k_hat.real, k_hat.imag], axis=-1)[None])
    >>> out = np.empty((1, N))
    >>> fourier_fields(rho, spectra, *fourier_tables(N, N // 2), np.empty((2, N)), np.empty((4, N // 2 + 1)), out)
    >>> bool(np.allclose(out[0], np.fft.irfft(np.fft.rfft(rho) * k_hat, N)))
    True
    """
    _analyse(rho, cos_t, sin_t, fold, small[:2])
    _synthesise(small[:2], spectra, cos_t, sin_t, small[2:], fold, out)


@njit(cache=True)
def centre_velocities(fields, mass, beta, sign, normalised, flux, floor, accumulate, u, slope, pot):
    r"""Add (``accumulate``) or write one head's centre quantities from its convolved fields.

    upwind2: u, u' (fields G, [Q,] G'); upwind: u (fields G[, Q]); muscl, tpfa: the potential P
    (field Q).  SA: Φ~ = M + β Q, u = G/Φ~, u' = G'/Φ~ - ±β u², P = ±log1p(βQ/M)/β (±Q/M at β = 0);
    USA: the fields are already u, u' and P (their spectra carry the scale ±e^β).  Cells with
    Φ~ < floor get 0 (the caller recomputes them in log space); returns how many there are.

    .. math::

        \tilde\Phi = M + \beta Q, \qquad u = \frac{G}{\tilde\Phi}, \qquad
        u' = \frac{G'}{\tilde\Phi} \mp \beta u^2, \qquad P = \pm \frac{\log(1 + \beta Q / M)}{\beta}.

    Parameters
    ----------
    fields : ndarray, shape (F, N)
        The head's convolved fields, in the order the flux reads them.
    mass : float
        M, the total mass.
    beta, sign : float
        β and ±1.
    normalised : bool
        SA (else USA).
    flux : int
        A code of ``FLUX_CODES``.
    floor : float
        Φ~ below it counts as lost to round-off.
    accumulate : bool
        Add to u, slope, pot (else overwrite).
    u, slope, pot : ndarray, shape (N,)
        Receive u, u' and P (only those the flux uses).

    Returns
    -------
    int
        The number of cells with Φ~ < floor.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.kernels.circle import FLUX_CODES, centre_velocities
    >>> fields = np.array([[0.2, -0.2], [0.0, 1.0]])     # G and Q for the upwind flux, SA
    >>> u, slope, pot = np.zeros(2), np.zeros(2), np.zeros(2)
    >>> centre_velocities(fields, 1.0, 1.0, 1.0, True, FLUX_CODES["upwind"], 0.0, False, u, slope, pot)
    0
    >>> u
    array([ 0.2, -0.1])
    """
    n = fields.shape[1]
    tiny = 0
    target = pot if flux >= 2 else u
    for i in range(n):
        du = 0.0
        if not normalised:
            value = fields[0, i]
            if flux == 0:
                du = fields[1, i]
        else:
            q = fields[0 if flux >= 2 else 1, i]
            phi = mass + beta * q
            if phi < floor:
                tiny += 1
                value = 0.0
            elif flux >= 2:
                value = sign * q / mass if beta == 0.0 else sign * math.log1p(beta * q / mass) / beta
            else:
                value = fields[0, i] / phi
                if flux == 0:
                    du = fields[2, i] / phi - sign * beta * value * value
        if accumulate:
            target[i] += value
            slope[i] += du
        else:
            target[i] = value
            slope[i] = du
    return tiny


@njit(cache=True, inline="always")
def face_fluxes(flux, rho, u, east, west, coarse, pot, inv_gaps, fluxes, outflow):
    r"""fluxes[i] = F_{i+1/2}, the net flux from cell i to cell i + 1 (cyclic), with the part leaving
    each cell added to ``outflow`` (``flux_pass``'s formulas; muscl and tpfa take the face velocity
    (P_{i+1} - P_i) · inv_gaps[i]).

    .. math::

        F_{i+1/2} = F^{+}_{i} + F^{-}_{i+1}, \qquad
        \text{out}_i \mathrel{+}= F^{+}_i, \qquad \text{out}_{i+1} \mathrel{-}= F^{-}_{i+1},

    F^+ ≥ 0 the part leaving cell i eastward and F^- ≤ 0 the part leaving cell i + 1 westward: for
    upwind (and upwind2 at unresolved cells) F^+_i = ρ_i max(u_i, 0), F^-_{i+1} = ρ_{i+1} min(u_{i+1}, 0);
    for upwind2 the reconstructed ``east[i]``, ``west[i + 1]``; for muscl and tpfa, with
    u_f = (P_{i+1} - P_i) · inv_gaps[i], F^+_i = max(u_f, 0) ρ^E_i and F^-_{i+1} = min(u_f, 0) ρ^W_{i+1}
    (ρ^E = ``east``, ρ^W = ``west`` for muscl, ρ itself for tpfa).

    Parameters
    ----------
    flux : int
        ``FLUX_CODES``: 0 upwind2, 1 upwind, 2 muscl, 3 tpfa.
    rho, u : ndarray, shape (N,)
        Cell densities and centre velocities.
    east, west : ndarray, shape (N,)
        upwind2: the reconstructed outgoing fluxes through the east and west faces; muscl: the face
        states ρ_i ± σ_i/2; unused otherwise.
    coarse : ndarray, shape (N,)
        Non-zero at unresolved cells (upwind2 takes the first-order flux at their faces).
    pot : ndarray, shape (N,)
        The potential P at the centres (muscl, tpfa).
    inv_gaps : ndarray, shape (N,)
        1/g_i, the inverse distance between centres i and i + 1.
    fluxes : ndarray, shape (N,)
        Output: F_{i+1/2}.
    outflow : ndarray, shape (N,)
        Accumulator: the flux leaving each cell is added (zero it first).

    Returns
    -------
    None
        ``fluxes`` and ``outflow`` are written in place.

    Examples
    --------
    >>> rho, u, zero = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, -1.0, 1.0, -1.0]), np.zeros(4)
    >>> fluxes, outflow = np.empty(4), np.zeros(4)
    >>> face_fluxes(1, rho, u, zero, zero, zero, zero, np.ones(4), fluxes, outflow)     # upwind
    >>> fluxes.tolist(), outflow.tolist()          # every cell sends all of ρ_i |u_i| out
    ([-1.0, 0.0, -1.0, 0.0], [1.0, 2.0, 3.0, 4.0])
    """
    n = rho.shape[0]
    for i in range(n):
        j = i + 1 if i + 1 < n else 0
        if flux == 1 or (flux == 0 and (coarse[i] != 0.0 or coarse[j] != 0.0)):
            f_out, f_in = rho[i] * max(u[i], 0.0), rho[j] * min(u[j], 0.0)
        elif flux == 0:
            f_out, f_in = east[i], west[j]
        else:
            uf = (pot[j] - pot[i]) * inv_gaps[i]
            f_out, f_in = max(uf, 0.0) * (east[i] if flux == 2 else rho[i]), min(uf, 0.0) * (
                west[j] if flux == 2 else rho[j])
        fluxes[i] = f_out + f_in
        outflow[i] += f_out
        outflow[j] -= f_in


@njit(cache=True)
def flux_pass(rho, u, slope, pot, bound, h, flux, diffusion, work, out):
    r"""out_i = -(F_{i+1/2} - F_{i-1/2})/h (+ D (ρ_{i+1} - 2ρ_i + ρ_{i-1})/h²) on the periodic grid, and
    the positivity rate max_i out_i/(h ρ_i) (+ 2D/h²) (module docstring).  ``flux`` (``FLUX_CODES``):

    0 upwind2  F = ρ^E_i (u^E_i)^+ + ρ^W_{i+1} (u^W_{i+1})^-, minmod states ρ^{E,W}_i = ρ_i ± σ_i/2, face
               velocities u_i ± (h/2) u'_i clipped to [-bound, bound]; the first-order flux at the faces
               of cells of a cluster narrower than about two cells, |ρ_{i+1} - 2ρ_i + ρ_{i-1}| >
               ``UNRESOLVED`` · max of the three (a smooth profile w cells wide has ≈ 1/w² of it);
    1 upwind   F = ρ_i u_i^+ + ρ_{i+1} u_{i+1}^-;
    2 muscl    F = u^+ (ρ_i + σ_i/2) + u^- (ρ_{i+1} - σ_{i+1}/2), u = (P_{i+1} - P_i)/h;
    3 tpfa     the same with σ = 0.
    work: (5, N) scratch.

    .. math::

        \frac{d\rho_i}{dt} = -\frac{F_{i+1/2} - F_{i-1/2}}{h} + D\,\frac{\rho_{i+1} - 2\rho_i + \rho_{i-1}}{h^2}.

    Parameters
    ----------
    rho : ndarray, shape (N,)
        Cell densities.
    u, slope, pot : ndarray, shape (N,)
        Centre velocities u, their derivatives u' and the potential P (as the flux needs).
    bound : float
        The speed bound face velocities are clipped to (upwind2).
    h : float
        The cell width.
    flux : int
        A code of ``FLUX_CODES``.
    diffusion : float
        D >= 0.
    work : ndarray, shape (5, N)
        Scratch.
    out : ndarray, shape (N,)
        Receives dρ/dt.

    Returns
    -------
    float
        The forward-Euler positivity rate.

    Examples
    --------
    First-order upwind fluxes for a constant velocity 1: mass is conserved and the rate is 1/h.

    >>> import numpy as np
    >>> from meanfield.solvers.kernels.circle import FLUX_CODES, flux_pass
    >>> rho, u, out = np.array([1.0, 2.0, 3.0, 4.0]), np.ones(4), np.empty(4)
    >>> flux_pass(rho, u, np.zeros(4), np.zeros(4), 1.0, 0.5, FLUX_CODES["upwind"], 0.0, np.empty((5, 4)), out)
    2.0
    >>> out
    array([ 6., -2., -2., -2.])
    """
    n = rho.shape[0]
    inv_h = 1.0 / h
    east = work[0]       # reconstructed outgoing flux density through the east face (upwind2), or ρ^E
    west = work[1]       # ... through the west face, or ρ^W
    coarse = work[2]     # 1 where the cell is unresolved (upwind2)
    fluxes = work[3]
    outflow = work[4]
    for i in range(n):
        left = rho[i - 1] if i > 0 else rho[n - 1]
        right = rho[i + 1] if i + 1 < n else rho[0]
        outflow[i] = 0.0
        if flux == 1 or flux == 3:
            continue
        half = 0.0
        dl = rho[i] - left
        dr = right - rho[i]
        if dl * dr > 0.0:
            half = 0.5 * (dl if abs(dl) < abs(dr) else dr)
        if flux == 2:
            east[i] = rho[i] + half
            west[i] = rho[i] - half
            continue
        du = 0.5 * h * slope[i]
        east[i] = (rho[i] + half) * max(min(u[i] + du, bound), 0.0)
        west[i] = (rho[i] - half) * min(max(u[i] - du, -bound), 0.0)
        coarse[i] = abs(left - 2.0 * rho[i] + right) > UNRESOLVED * max(left, rho[i], right)
    face_fluxes(flux, rho, u, east, west, coarse, pot, np.full(n, inv_h), fluxes, outflow)
    rate = 0.0
    for i in range(n):
        out[i] = (fluxes[i - 1 if i > 0 else n - 1] - fluxes[i]) * inv_h
        if outflow[i] > 0.0:
            rate = max(rate, outflow[i] / rho[i]) if rho[i] > 0.0 else np.inf
    if diffusion > 0.0:
        scale = diffusion * inv_h * inv_h
        for i in range(n):
            right = rho[i + 1] if i + 1 < n else rho[0]
            out[i] += scale * (right - 2.0 * rho[i] + (rho[i - 1] if i > 0 else rho[n - 1]))
    return rate * inv_h + 2.0 * diffusion * inv_h * inv_h


@njit(cache=True)
def fused_stage(rho, heads, spectra, cos_t, sin_t, h, flux, diffusion, fields, centre, fold, small, work, out):
    r"""One right-hand side: the truncated Fourier fields of every head, their centre velocities summed,
    and ``flux_pass``.  heads[h] = (β, sign, normalised, floor factor, speed bound, number of fields);
    spectra (H, F, K+1, 2); fields (F, N); centre (3, N) = u, u', P; scratch fold (2, N), small
    (4, K+1), work (3, N).  Returns (rate, tiny): tiny > 0 when some SA cell has Φ~ below its floor
    (the caller then evaluates in log space; out and rate are not written).

    .. math::

        u = \sum_{\text{heads}} u_{\text{head}}, \qquad
        \frac{d\rho_i}{dt} = -\frac{F_{i+1/2}(\rho, u) - F_{i-1/2}(\rho, u)}{h}.

    Parameters
    ----------
    rho : ndarray, shape (N,)
        Cell densities.
    heads : ndarray, shape (H, 6)
        Per head: β, sign, normalised (0 or 1), floor factor, speed bound, number of fields.
    spectra : ndarray, shape (H, F, K + 1, 2)
        The heads' kernel spectra (see ``fourier_fields``).
    cos_t, sin_t : ndarray
        ``fourier_tables(N, K)``.
    h : float
        The cell width 2π/N.
    flux : int
        A code of ``FLUX_CODES``.
    diffusion : float
    fields, centre, fold, small, work : ndarray
        Scratch, shapes (F, N), (3, N), (2, N), (4, K + 1), (5, N).
    out : ndarray, shape (N,)
        Receives dρ/dt.

    Returns
    -------
    rate : float
    tiny : int

    Examples
    --------
    One USA head (β = 1, upwind): the G kernel -e^{β(cos δ - 1)} sin δ scaled by e^β h; mass is conserved.

    >>> import numpy as np
    >>> from meanfield.solvers.kernels.circle import FLUX_CODES, fourier_tables, fused_stage
    >>> N, beta = 8, 1.0
    >>> h = 2 * np.pi / N
    >>> delta = np.where(np.arange(N) <= N // 2, np.arange(N), np.arange(N) - N) * h
    >>> g_hat = np.exp(beta) * h * np.fft.rfft(-np.exp(beta * (np.cos(delta) - 1)) * np.sin(delta))
    >>> spectra = np.ascontiguousarray(np.stack([g_hat.real, g_hat.imag], axis=-1)[None, None])
    >>> heads = np.array([[beta, 1.0, 0.0, 0.0, np.e, 1.0]])
    >>> rho = (1 + 0.5 * np.cos(np.arange(N) * h)) / (2 * np.pi)
    >>> out = np.empty(N)
    >>> rate, tiny = fused_stage(rho, heads, spectra, *fourier_tables(N, N // 2), h, FLUX_CODES["upwind"], 0.0,
    ...                          np.empty((1, N)), np.empty((3, N)), np.empty((2, N)), np.empty((4, N // 2 + 1)),
    ...                          np.empty((5, N)), out)
    >>> tiny, rate > 0, bool(abs(out.sum() * h) < 1e-14)
    (0, True, True)
    """
    n = rho.shape[0]
    mass = 0.0
    for i in range(n):
        mass += rho[i]
    mass *= h
    bound = 0.0
    tiny = 0
    for head in range(heads.shape[0]):
        beta = heads[head, 0]
        normalised = heads[head, 2] > 0.0
        nf = int(heads[head, 5])
        fourier_fields(rho, spectra[head, :nf], cos_t, sin_t, fold, small, fields)
        tiny += centre_velocities(fields, mass, beta, heads[head, 1], normalised, flux, heads[head, 3] * mass,
                                  head > 0, centre[0], centre[1], centre[2])
        bound += heads[head, 4] * (1.0 if normalised else mass)
    if tiny:
        return 0.0, tiny
    return flux_pass(rho, centre[0], centre[1], centre[2], bound, h, flux, diffusion, work, out), 0
