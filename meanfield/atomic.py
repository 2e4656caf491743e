"""Writes that a crash cannot leave half done: one file, or a whole folder of files.

- ``write_file(path, write)``: ``write(fh)`` into a temporary file beside ``path``, fsync, then
  ``os.replace`` onto ``path`` — a reader sees the old file or the new one.
- ``replace_folder(folder, write)``: ``write(tmp)`` fills a temporary sibling folder, which gets a
  completion marker ``complete.json`` (every file's size and SHA-256) and is then swapped with
  ``folder`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``; elsewhere two renames, with the
  old folder restored on the next call if a crash falls between them).  A kill at any moment
  leaves ``folder`` as the complete old report or the complete new one, never a mix;
  leftovers of interrupted writes are removed by the next call.  Two writers of one folder take
  turns (a lock on the parent folder), and the folder and marker get the modes of the umask.
- ``check_folder(folder)`` refuses, before any work, a target that is a file, is not writable,
  or is a non-empty folder that is not one of ours (no marker) or holds anything its marker does
  not list (a user's notes, a folder of data): replacing it would delete them.
- ``verify_folder(folder)`` checks a finished folder against its marker before it is read: the
  same files, sizes and SHA-256 hashes, and names what differs.
"""
import contextlib
import ctypes
import glob
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import BinaryIO

__all__ = ["write_file", "umask", "replace_folder", "check_folder", "verify_folder", "read_json", "is_complete",
           "MARKER"]

MARKER = "complete.json"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def umask() -> int:
    r"""The process's file-creation mask, read without changing it where /proc tells it.

    .. math::

        \text{mode of a new file} = \texttt{0o666} \wedge \neg\, \text{umask}.

    Returns
    -------
    int

    Examples
    --------
    >>> import os
    >>> from meanfield.atomic import umask
    >>> mask = umask()
    >>> os.umask(mask) == mask                 # unchanged by reading it
    True
    """
    try:
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1], 8) for line in fh if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError):
        mask = os.umask(0o022)
        os.umask(mask)
        return mask


def write_file(path: str | os.PathLike, write: Callable[[BinaryIO], object], prefix: str = ".tmp-",
               suffix: str | None = None) -> None:
    """Atomically replace ``path`` by what ``write(fh)`` writes: a temporary file in the same folder,
    fsync, ``os.replace``.

    A reader (or a crash, or a full disk) leaves the old file or the new one, never a truncated one.
    The file gets the mode ``open`` would give it (0o666 less the umask), not ``mkstemp``'s 0o600.

    Parameters
    ----------
    path : str or os.PathLike
        The file to create or replace.
    write : callable
        ``write(fh)`` writes the content into the binary file object ``fh`` (or into the file
        named ``fh.name``, for writers that open a path themselves).
    prefix : str
        Start of the temporary file's name, so that the leftovers of a killed writer can be found.
    suffix : str, optional
        End of the temporary file's name (default ``path``'s extension).

    Returns
    -------
    None

    Raises
    ------
    OSError
        With the same errno, naming ``path`` and the reason (read-only or full disk, no permission).

    Examples
    --------
    >>> import os, tempfile
    >>> from meanfield.atomic import write_file
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "x.txt")
    ...     write_file(path, lambda fh: fh.write(b"hello"))
    ...     print(open(path).read(), os.listdir(folder))
    hello ['x.txt']
    """
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1] if suffix is None else suffix
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=prefix, suffix=suffix)
        os.close(fd)
        with open(tmp, "wb") as fh:         # fh.name: the temporary path, for writers that want a name
            os.fchmod(fh.fileno(), 0o666 & ~umask())
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.remove(tmp)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _listing(folder):
    """Relative paths of the files under folder (the marker excluded), sorted."""
    out = []
    for root, _, files in os.walk(folder):
        out += [os.path.relpath(os.path.join(root, f), folder) for f in files]
    return sorted(p for p in out if p != MARKER)


def _marker(folder):
    """The marker's file table {relative path: {"bytes", "sha256"}}; ValueError naming what is wrong."""
    path = os.path.join(folder, MARKER)
    if not os.path.isfile(path):
        raise ValueError(f"{folder} has no {MARKER}: it is not a finished meanfield folder")
    try:
        with open(path, "rb") as fh:
            listed = json.load(fh)["files"]
        if not isinstance(listed, dict) or not all(
                isinstance(k, str) and isinstance(v, dict) and isinstance(v.get("bytes"), int)
                and isinstance(v.get("sha256"), str) for k, v in listed.items()):
            raise TypeError("a file entry is not {bytes: int, sha256: str}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is damaged ({type(exc).__name__}: {exc})") from None
    return listed


def _unlisted(folder, listed):
    """Paths under folder that the marker does not list: files, and whole folders holding no listed file."""
    holders = {parent for name in listed for parent in _parents(name)}
    extra = []
    for root, dirs, files in os.walk(folder):
        here = os.path.relpath(root, folder)
        names = {n: n if here == "." else os.path.join(here, n) for n in dirs + files}
        for d in list(dirs):
            if names[d] not in holders:
                extra.append(names[d] + os.sep)
                dirs.remove(d)
        extra += [names[f] for f in files if names[f] not in listed and names[f] != MARKER]
    return sorted(extra)


def _parents(name):
    """The folders above a relative path: 'a/b/c.txt' -> 'a/b', 'a'."""
    name = os.path.dirname(name)
    while name:
        yield name
        name = os.path.dirname(name)


def verify_folder(folder: str | os.PathLike, name: str = "folder") -> str:
    """Check a finished folder against its marker ``complete.json``: exactly the files it lists, with
    their sizes and SHA-256 hashes.

    Parameters
    ----------
    folder : str or os.PathLike
        The folder.
    name : str
        What the folder is, for the error message.

    Returns
    -------
    str
        The absolute path of ``folder``.

    Raises
    ------
    ValueError
        Naming the folder and every file that is missing, added, resized or changed.

    Examples
    --------
    >>> import os, tempfile
    >>> from meanfield.atomic import replace_folder, verify_folder
    >>> with tempfile.TemporaryDirectory() as parent:
    ...     write = lambda tmp: open(os.path.join(tmp, "a.txt"), "w").write("1")
    ...     report = replace_folder(os.path.join(parent, "report"), write)
    ...     _ = verify_folder(report)
    ...     _ = open(os.path.join(report, "a.txt"), "w").write("2")      # changed after the write
    ...     verify_folder(report, "report")
    Traceback (most recent call last):
    ...
    ValueError: report ... does not match its complete.json: a.txt changed (SHA-256 differs)
    """
    folder = os.path.abspath(os.fspath(folder))
    if not os.path.isdir(folder):
        raise ValueError(f"{name} {folder} is not a folder")
    listed = _marker(folder)
    problems = [f"{p} is not listed" for p in _unlisted(folder, listed)]
    for rel, item in sorted(listed.items()):
        path = os.path.join(folder, rel)
        if not os.path.isfile(path):
            problems.append(f"{rel} is missing")
        elif os.path.getsize(path) != item["bytes"]:
            problems.append(f"{rel} has {os.path.getsize(path)} bytes, not {item['bytes']}")
        elif _sha256(path) != item["sha256"]:
            problems.append(f"{rel} changed (SHA-256 differs)")
    if problems:
        raise ValueError(f"{name} {folder} does not match its {MARKER}: {'; '.join(problems)}")
    return folder


def read_json(path: str | os.PathLike) -> object:
    """The JSON file ``path`` of a finished folder, read after checking the folder against its marker
    (``verify_folder``).

    Parameters
    ----------
    path : str or os.PathLike
        A JSON file inside a folder written by ``replace_folder`` (a report.json, a convergence.json).

    Returns
    -------
    object
        The decoded JSON.

    Raises
    ------
    ValueError
        Naming the folder and what differs from its marker, or naming the file if it is not JSON.

    Examples
    --------
    >>> import json, os, tempfile
    >>> from meanfield.atomic import read_json, replace_folder
    >>> with tempfile.TemporaryDirectory() as parent:
    ...     write = lambda tmp: open(os.path.join(tmp, "a.json"), "w").write(json.dumps([1, 2]))
    ...     report = replace_folder(os.path.join(parent, "report"), write)
    ...     print(read_json(os.path.join(report, "a.json")))
    [1, 2]
    """
    path = os.fspath(path)
    verify_folder(os.path.dirname(os.path.abspath(path)))
    try:
        with open(path, "rb") as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None


def is_complete(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` is a finished ``replace_folder`` write: it holds the marker ``complete.json``
    and exactly the files it lists, with their sizes and SHA-256 hashes (``verify_folder`` without
    the message).

    Parameters
    ----------
    folder : str or os.PathLike
        The folder.

    Returns
    -------
    bool

    Examples
    --------
    >>> import os, tempfile
    >>> from meanfield.atomic import is_complete, replace_folder
    >>> with tempfile.TemporaryDirectory() as parent:
    ...     write = lambda tmp: open(os.path.join(tmp, "a.txt"), "w").write("1")
    ...     report = replace_folder(os.path.join(parent, "report"), write)
    ...     before = is_complete(report)
    ...     _ = open(os.path.join(report, "a.txt"), "w").write("2")      # changed after the write
    ...     print(before, is_complete(report))
    True False
    """
    try:
        verify_folder(folder)
    except (OSError, ValueError):
        return False
    return True


def _siblings(folder, kind):
    parent, name = os.path.split(folder)
    return glob.glob(os.path.join(glob.escape(parent), f".{glob.escape(name)}.{kind}-*"))


def _recover(folder):
    """Undo what an interrupted ``replace_folder`` left: restore a set-aside old folder if the
    target is missing, delete unfinished and set-aside copies."""
    old = _siblings(folder, "old")
    if old and not os.path.exists(folder):
        os.rename(old.pop(), folder)
    for leftover in old + _siblings(folder, "new"):
        shutil.rmtree(leftover, ignore_errors=True)


def check_folder(folder: str | os.PathLike, name: str = "folder") -> str:
    """Check, before any work, that ``replace_folder`` may write ``folder``.

    Parameters
    ----------
    folder : str or os.PathLike
        Must not be a file, nor a non-empty folder without the marker or holding anything the
        marker does not list; its parent must be writable (it is created if missing).
    name : str
        The argument's name, for the error message.

    Returns
    -------
    str
        The absolute path of ``folder``.

    Raises
    ------
    ValueError
        Naming ``name`` and the reason.

    Examples
    --------
    >>> import os, tempfile
    >>> from meanfield.atomic import check_folder
    >>> with tempfile.TemporaryDirectory() as parent:
    ...     _ = open(os.path.join(parent, "notes.txt"), "w").write("mine")
    ...     check_folder(parent, "out")
    Traceback (most recent call last):
    ...
    ValueError: out ... is a non-empty folder that is not a meanfield report (no complete.json); ...
    """
    folder = os.path.abspath(os.fspath(folder))
    if os.path.exists(folder):
        if not os.path.isdir(folder):
            raise ValueError(f"{name} {folder} is a file, not a folder")
        if os.listdir(folder) and not os.path.exists(os.path.join(folder, MARKER)):
            raise ValueError(f"{name} {folder} is a non-empty folder that is not a meanfield report (no {MARKER}); "
                             f"refusing to replace it: choose a new or empty folder")
        if os.listdir(folder):
            try:
                extra = _unlisted(folder, _marker(folder))
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}; refusing to replace it: choose a new or empty folder") from None
            if extra:
                raise ValueError(f"{name} {folder} holds {', '.join(extra)}, which its {MARKER} does not list; "
                                 f"refusing to replace it (they would be deleted): move them or choose another "
                                 f"folder")
    parent = os.path.dirname(folder)
    try:
        os.makedirs(parent, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(dir=parent, prefix=".probe-"))
    except OSError as exc:
        raise ValueError(f"{name} {folder} cannot be written ({exc.strerror or exc}); "
                         f"choose a writable place") from None
    return folder


def _exchange(a, b):
    """Swap two paths in one system call (Linux renameat2); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0


def _fsync_dir(folder):
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def replace_folder(folder: str | os.PathLike, write: Callable[[str], object], name: str = "folder") -> str:
    """Fill a temporary sibling of ``folder``, mark it complete, and swap it into place atomically (see
    the module docstring).

    Parameters
    ----------
    folder : str or os.PathLike
        The target folder (checked by ``check_folder``).
    write : callable
        ``write(tmp_folder)`` writes the files into the temporary folder.
    name : str
        The argument's name, for error messages.

    Returns
    -------
    str
        The absolute path of ``folder``, now holding what ``write`` wrote and the marker.

    Raises
    ------
    ValueError
        If ``check_folder`` refuses the target.
    OSError
        If writing fails (naming the folder).

    Examples
    --------
    >>> import os, tempfile
    >>> from meanfield.atomic import replace_folder
    >>> with tempfile.TemporaryDirectory() as parent:
    ...     write = lambda tmp: open(os.path.join(tmp, "a.txt"), "w").write("1")
    ...     report = replace_folder(os.path.join(parent, "report"), write)
    ...     print(sorted(os.listdir(report)))
    ['a.txt', 'complete.json']
    """
    folder = check_folder(folder, name)
    with _parent_locked(os.path.dirname(folder)):
        try:
            _swap_in(folder, write)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot write {name} {folder}: {exc.strerror or exc}") from exc
    return folder


@contextlib.contextmanager
def _parent_locked(parent):
    """An exclusive lock (fcntl.flock on the parent folder itself: no lock file is left behind)
    while a folder is replaced, so that two writers of one target take turns instead of deleting
    each other's temporary folders; no lock where fcntl does not exist (Windows)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    fd = os.open(parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)            # releases the lock


def _swap_in(folder, write):
    """``replace_folder``'s work, under the lock."""
    _recover(folder)
    parent, base = os.path.split(folder)
    tmp = tempfile.mkdtemp(dir=parent, prefix=f".{base}.new-")
    try:
        os.chmod(tmp, 0o777 & ~umask())        # as os.mkdir would make it, not mkdtemp's 0o700
        write(tmp)
        files = {}
        for rel in _listing(tmp):
            path = os.path.join(tmp, rel)
            with open(path, "rb+") as fh:
                os.fsync(fh.fileno())
            files[rel] = dict(bytes=os.path.getsize(path), sha256=_sha256(path))
        marker = json.dumps(dict(files=files, written=time.strftime("%Y-%m-%dT%H:%M:%S%z")), indent=1)
        write_file(os.path.join(tmp, MARKER), lambda fh: fh.write(marker.encode()))
        _fsync_dir(tmp)
        if not os.path.exists(folder):
            os.rename(tmp, folder)
        elif _exchange(tmp, folder):
            shutil.rmtree(tmp, ignore_errors=True)       # now the old report
        else:
            old = tempfile.mkdtemp(dir=parent, prefix=f".{base}.old-")
            os.rmdir(old)
            os.rename(folder, old)
            os.rename(tmp, folder)
            shutil.rmtree(old, ignore_errors=True)
        _fsync_dir(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
