"""Settings that must be in place before Numba is imported: threads and the on-disk cache.

``cache=True`` kernels write next to their source file by default.  Unless the user sets
``NUMBA_CACHE_DIR``, that is kept only for a source checkout (an editable install, where the
cache sits beside the code it belongs to); an installed package (its files under
``site-packages`` or ``dist-packages``) or a read-only one caches in the user's cache folder,
``$XDG_CACHE_HOME/meanfield/numba`` (``~/.cache/meanfield/numba``), so nothing is written into
the Python installation and a read-only one does not fail at import.
"""
import os
import tempfile


def configure_threads():
    """OpenMP worker threads spin-wait between parallel regions by default, which on a
    small shared machine steals the cores the other processes need (measured: 10× slower
    test files under load).  Passive waiting costs microseconds per region.

    Sets ``OMP_WAIT_POLICY=passive`` unless the user has set it (run at import, before Numba).

    Returns
    -------
    None

    Examples
    --------
    >>> import os
    >>> from meanfield.solvers._numba_env import configure_threads
    >>> configure_threads()
    >>> "OMP_WAIT_POLICY" in os.environ
    True
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")


def is_installed(folder):
    """Whether ``folder`` lies in a Python installation's package folder (a wheel install).

    Parameters
    ----------
    folder : str
        A path.

    Returns
    -------
    bool
        True when a component of the path is ``site-packages`` or ``dist-packages``.

    Examples
    --------
    >>> from meanfield.solvers._numba_env import is_installed
    >>> is_installed("/usr/lib/python3/dist-packages/meanfield"), is_installed("/home/me/meanfield/solvers")
    (True, False)
    """
    parts = os.path.normcase(os.path.abspath(folder)).split(os.sep)
    return "site-packages" in parts or "dist-packages" in parts


def configure_cache():
    """Set ``NUMBA_CACHE_DIR`` to the user cache folder for an installed or read-only package (see
    the module docstring); leave it alone when set, and for a writable source checkout.

    Run at import, before Numba is imported; falls back to a folder under the system's temporary
    folder when the user cache folder cannot be made.

    Returns
    -------
    None

    Examples
    --------
    >>> import os
    >>> from meanfield.solvers._numba_env import configure_cache
    >>> before = os.environ.get("NUMBA_CACHE_DIR")
    >>> configure_cache()
    >>> before is None or os.environ["NUMBA_CACHE_DIR"] == before
    True
    """
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    here = os.path.dirname(os.path.abspath(__file__))
    if os.access(here, os.W_OK) and not is_installed(here):
        return
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    target = os.path.join(base, "meanfield", "numba")
    try:
        os.makedirs(target, exist_ok=True)
    except OSError:
        target = os.path.join(tempfile.gettempdir(), "meanfield-numba-cache")
        os.makedirs(target, exist_ok=True)
    os.environ["NUMBA_CACHE_DIR"] = target


configure_threads()
configure_cache()
