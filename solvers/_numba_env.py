"""Settings that must be in place before Numba is imported: threads and the on-disk cache.

Threads: passive OpenMP waiting, and no more threads than a container's CPU quota allows.

``cache=True`` kernels write next to their source file by default.  Unless the user sets
``NUMBA_CACHE_DIR``, that is kept only for a source checkout (an editable install, where the
cache sits beside the code it belongs to); an installed package (its files under
``site-packages`` or ``dist-packages``) or a read-only one caches in the user's cache folder,
``$XDG_CACHE_HOME/meanfield/numba`` (``~/.cache/meanfield/numba``), so nothing is written into
the Python installation and a read-only one does not fail at import.
"""
import os
import tempfile


THREAD_VARIABLES = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def cpu_quota(root="/sys/fs/cgroup"):
    r"""The CPUs a cgroup's CPU quota allows this process, or None when no quota is set.

    .. math::

        \lceil \text{quota} / \text{period} \rceil

    read from cgroup v2 (``cpu.max``: "quota period" or "max period") or v1
    (``cpu/cpu.cfs_quota_us`` and ``cpu/cpu.cfs_period_us``, quota -1 for none).  A container may
    see every CPU of its host while its quota lets it use only a few of them.

    Parameters
    ----------
    root : str
        The cgroup file system.

    Returns
    -------
    int or None
        At least 1.

    Examples
    --------
    >>> import os, tempfile
    >>> from meanfield.solvers._numba_env import cpu_quota
    >>> root = tempfile.mkdtemp()
    >>> cpu_quota(root) is None
    True
    >>> with open(os.path.join(root, "cpu.max"), "w") as f:
    ...     _ = f.write("150000 100000")
    >>> cpu_quota(root)
    2
    """
    for quota_file, period_file in (("cpu.max", None), ("cpu/cpu.cfs_quota_us", "cpu/cpu.cfs_period_us")):
        try:
            with open(os.path.join(root, quota_file)) as f:
                fields = f.read().split()
            if period_file is not None:
                with open(os.path.join(root, period_file)) as f:
                    fields += f.read().split()
            quota, period = float(fields[0]), float(fields[1])
        except (OSError, ValueError, IndexError):       # absent, "max" (no quota) or unreadable
            continue
        if quota > 0 and period > 0:
            return max(1, -(-int(quota) // int(period)))
    return None


def configure_threads(root="/sys/fs/cgroup"):
    """OpenMP worker threads spin-wait between parallel regions by default, which on a
    small shared machine steals the cores the other processes need (measured: 10× slower
    test files under load).  Passive waiting costs microseconds per region.  And a container
    whose CPU quota (``cpu_quota``) is below the CPUs it sees would start a thread per CPU it
    sees, each throttled in turn.

    Sets ``OMP_WAIT_POLICY=passive``, and, where the quota allows fewer CPUs than the process
    may run on, the thread counts of Numba, OpenMP, OpenBLAS and MKL (``THREAD_VARIABLES``) to the
    quota; never a variable the user has set (run at import, before Numba).

    Parameters
    ----------
    root : str
        Passed to ``cpu_quota``.

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
    quota = cpu_quota(root)
    visible = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if quota is not None and quota < visible:
        for name in THREAD_VARIABLES:
            os.environ.setdefault(name, str(quota))


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
