"""Settings that must be in place before Numba is imported: threads and the on-disk cache.

``cache=True`` kernels write next to their source file.  When that folder is not
writable (a read-only install) and ``NUMBA_CACHE_DIR`` is unset, Numba fails at import;
we then point the cache at a per-user folder instead.
"""
import os
import tempfile


def configure_threads():
    """OpenMP worker threads spin-wait between parallel regions by default, which on a
    small shared machine steals the cores the other processes need (measured: 10× slower
    test files under load).  Passive waiting costs microseconds per region."""
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")


def configure_cache():
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    here = os.path.dirname(os.path.abspath(__file__))
    if os.access(here, os.W_OK):
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
