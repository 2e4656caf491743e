"""Hardmax attention (β = ∞, paper §9.3): an integrator for its discontinuous field.

    dx_i/dt = P_{x_i} (1/|C_i|) Σ_{j∈C_i} V x_j,   C_i = {j : <Q x_i, K x_j> >= max_k <Q x_i, K x_k> - tie}

(j <= i for causal models; ``models.Hardmax`` states the tie rule).  The field is smooth while
the sets C_i stay the same and jumps where one changes.  ``solve`` integrates piece by piece:

- a step of RK4 (or Euler) with the sets frozen at the step's start, then x <- x/|x|;
- if the sets at the end differ, the step was cut by a switch: its time is located by bisection
  (the largest frozen-set step after which the sets are unchanged, to ``EVENT_TOL`` relative), the
  step is taken to just past it, and the next step starts with the new sets.

So each smooth piece keeps the scheme's order and the switching times are located to EVENT_TOL
(a switch and switch-back within one step is not seen: dt bounds what can be missed).  A
trajectory that slides along a switching surface (Filippov sliding: the fields on both sides push
into it, as happens when two tokens compete for a third's attention) would need ever smaller
steps: after ``MAX_CUTS`` located switches within one step of size dt the rest of the step, and
the following steps until one ends without a switch, are taken with the sets frozen at each
step's start, so the trajectory chatters about the surface with amplitude O(dt) — the classical
approximation of the Filippov solution, first order in dt there.  info["chattering"] counts such
steps (0: every switch located).  Dense n × n sets: for systems of
up to a few thousand tokens.
"""
from __future__ import annotations

import time

import numpy as np
from numpy.typing import ArrayLike

from meanfield.budget import BUDGET, as_budget, over_budget
from meanfield.checks import as_choice, as_points, as_positive, as_time_grid
from meanfield.budget import check_advance
from meanfield.geometry import normalise
from meanfield.models import Hardmax

from .contract import PARTICLE_SCHEME, scheme_keyword
from .results import ParticleSolution

EVENT_TOL = 1e-13
MAX_CUTS = 4
ENERGY_NOTE = "NaN: hardmax attention has no interaction energy (β = ∞; E_β diverges)"
DEFAULT_DT = 0.01    # the fixed step when dt=None

def _as_hardmax(model):
    if not isinstance(model, Hardmax):
        raise TypeError(f"model must be meanfield.Hardmax(Q, K, V); got {type(model).__name__} "
                        f"(finite β: meanfield.solvers.particles.solve)")
    return model


def attention_weights(model, x):
    r"""The hardmax attention matrix and the score gaps of tokens x.

    .. math::

        W_{ij} = \frac{1}{|C_i|} \mathbf{1}_{j \in C_i}, \qquad
        \mathrm{gap}_i = \max_k s_{ik} - \max_{k \notin C_i} s_{ik}, \qquad s_{ik} = \langle Q x_i, K x_k\rangle,

    C_i the argmax set of row i with the tie rule of ``models.Hardmax`` (j <= i for causal
    models); gap_i = inf where every token is in C_i.

    Parameters
    ----------
    model : Hardmax
    x : ndarray, shape (n, d)

    Returns
    -------
    W : ndarray, shape (n, n)
    gap : ndarray, shape (n,)

    Raises
    ------
    TypeError
        When ``model`` is not a Hardmax.

    Examples
    --------
    >>> import meanfield as mf
    >>> W, gap = attention_weights(mf.Hardmax(Q=-1.0), mf.uniform_sphere(5, 3, seed=0))
    >>> bool(np.allclose(W.sum(axis=1), 1.0))
    True
    """
    model = _as_hardmax(model)
    A, _ = model.interaction(x.shape[-1])
    scores = x @ A @ x.T
    if model.causal:
        scores = np.where(np.tril(np.ones(scores.shape, dtype=bool)), scores, -np.inf)
    best = scores.max(axis=1, keepdims=True)
    chosen = scores >= best - model.tie
    W = chosen / chosen.sum(axis=1, keepdims=True)
    outside = np.where(chosen, -np.inf, scores).max(axis=1)
    return W, (best[:, 0] - outside)


def _frozen_field(W, V, x):
    y = normalise(x)
    v = (W @ y) @ V.T
    return v - np.sum(v * y, axis=1, keepdims=True) * y


def velocity(model, x):
    r"""The hardmax field at tokens x.

    .. math::

        X(x_i) = P_{x_i} V \frac{1}{|C_i|} \sum_{j \in C_i} x_j.

    Parameters
    ----------
    model : Hardmax
    x : array_like, shape (n, d)
        Unit vectors.

    Returns
    -------
    ndarray, shape (n, d)

    Raises
    ------
    TypeError
        When ``model`` is not a Hardmax.
    ValueError
        For points that are not unit vectors.

    Examples
    --------
    >>> import meanfield as mf
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> velocity(mf.Hardmax(), x)          # each token attends to itself: at rest
    array([[0., 0.],
           [0., 0.]])
    """
    model = _as_hardmax(model)
    x = as_points(x, "x")
    return _frozen_field(attention_weights(model, x)[0], model.interaction(x.shape[-1])[1], x)


def _step(W, V, x, h, scheme):
    f = lambda y: _frozen_field(W, V, y)   # noqa: E731
    if scheme == "euler":
        return normalise(x + h * f(x))
    k1 = f(x)
    k2 = f(x + 0.5 * h * k1)
    k3 = f(x + 0.5 * h * k2)
    k4 = f(x + h * k3)
    return normalise(x + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4))


def solve(model: Hardmax, x0: ArrayLike, t_eval: ArrayLike, *, scheme: str = PARTICLE_SCHEME, dt: float | None = None,
          budget: float | None = BUDGET, method: str | None = None) -> ParticleSolution:
    """Integrate hardmax attention from tokens x0 (n, d) with event-aware steps (module docstring).

    Parameters
    ----------
    model : meanfield.Hardmax
    x0 : array (n, d), points on S^{d-1}
    t_eval : increasing output times
    scheme : {"rk4", "euler"}
        The time scheme between switches (its own event-aware steps: registered scheme classes do
        not apply here).
    dt : float, optional
        The step between switches (default 0.01).
    budget : float or None
        Seconds (default one hour; None: no limit): the run stops with a RuntimeError once it has
        run that long (``meanfield.budget``).
    method : str, optional
        The same as ``scheme`` (as ``particles.solve``); pass one of the two.

    Returns
    -------
    ParticleSolution
        x (m, n, d); energy NaN (info["energy"] says why); info: method, dt, nsteps (steps taken,
        event searches included), events (switches located),
        switch_times, chattering (steps finished with frozen sets), min_gap (smallest score gap
        best - runner-up seen at a step start).

    Examples
    --------
    >>> import meanfield as mf
    >>> sol = solve(mf.Hardmax(Q=np.diag([1.0, -1.0, 0.5])), mf.uniform_sphere(6, 3, seed=1), [0, 0.2])
    >>> bool(np.allclose(np.linalg.norm(sol.x, axis=-1), 1.0))
    True
    """
    model = _as_hardmax(model)
    x = as_points(x0, "x0").copy()
    t_eval = as_time_grid(t_eval)
    dt = DEFAULT_DT if dt is None else as_positive(dt, "dt")
    method = scheme = as_choice(scheme_keyword(scheme, method, PARTICLE_SCHEME), "scheme", ("rk4", "euler"))
    check_advance(t_eval, dt, "dt", "this hardmax solve")
    budget, start = as_budget(budget), time.perf_counter()
    V = model.interaction(x.shape[-1])[1]
    out = [x.copy()]
    t, switches, min_gap, steps, chattering, sliding = t_eval[0], [], np.inf, 0, 0, False
    for target in t_eval[1:]:
        while t < target:
            stop = over_budget(start, budget, "the hardmax solve", float(t))
            if stop is not None:
                raise stop
            end = min(t + dt, target)
            cuts = 0
            while t < end:
                h = end - t
                W, gap = attention_weights(model, x)
                min_gap = min(min_gap, gap.min())
                y = _step(W, V, x, h, scheme)
                steps += 1
                unchanged = np.array_equal(attention_weights(model, y)[0] > 0, W > 0)
                if unchanged or sliding or cuts >= MAX_CUTS:
                    # a step that still switches after MAX_CUTS located switches, or while sliding, chatters
                    sliding = not unchanged and (sliding or cuts >= MAX_CUTS)
                    chattering += sliding
                    x, t = y, end
                    break
                lo, hi = 0.0, h
                while hi - lo > EVENT_TOL * max(h, abs(t)):
                    mid = 0.5 * (lo + hi)
                    same = np.array_equal(attention_weights(model, _step(W, V, x, mid, scheme))[0] > 0, W > 0)
                    lo, hi = (mid, hi) if same else (lo, mid)
                x, t = _step(W, V, x, hi, scheme), t + hi
                switches.append(t)
                cuts += 1
        out.append(x.copy())
    # a switch passes through a tie (both tokens in C_i for |gap| <= tie): two located events, one switch
    distinct = [u for k, u in enumerate(switches) if k == 0 or u - switches[k - 1] > 1e-9 * max(1.0, abs(u))]
    info = dict(method=method, dt=dt, nsteps=steps, events=len(distinct), switch_times=distinct,
                chattering=chattering, min_gap=float(min_gap), energy=ENERGY_NOTE, tie=model.tie)
    return ParticleSolution(t=t_eval, x=np.array(out), energy=np.full(t_eval.size, np.nan), model=model, info=info)
