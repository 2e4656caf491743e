"""Writes that a crash cannot leave half done: one file, or a whole folder of files.

- ``write_file(path, write)``: ``write(fh)`` into a temporary file beside ``path``, fsync, then
  ``os.replace`` onto ``path`` — a reader sees the old file or the new one.
- ``replace_folder(folder, write)``: ``write(tmp)`` fills a temporary sibling folder, which gets a
  completion marker ``complete.json`` (every file's size and SHA-256) and is then swapped with
  ``folder`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``; elsewhere two renames, with the
  old folder restored on the next call if a crash falls between them).  A kill at any moment
  leaves ``folder`` as the complete old report or the complete new one, never a mix;
  leftovers of interrupted writes are removed by the next call.
- ``check_folder(folder)`` refuses, before any work, a target that is a file, is not writable,
  or is a non-empty folder that is not one of ours (no marker): replacing it would lose data.
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

__all__ = ["write_file", "replace_folder", "check_folder", "is_complete", "MARKER"]

MARKER = "complete.json"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def write_file(path, write):
    """Atomically replace ``path`` by what ``write(fh)`` writes.

    Parameters
    ----------
    path : str or os.PathLike
        The file to create or replace.
    write : callable
        ``write(fh)`` writes the content into the binary file object ``fh``.
    """
    path = os.fspath(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".tmp-",
                               suffix=os.path.splitext(path)[1])
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


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


def is_complete(folder):
    """Whether ``folder`` is a finished ``replace_folder`` write.

    Parameters
    ----------
    folder : str or os.PathLike

    Returns
    -------
    bool
        True if the folder holds the marker and exactly the files it lists, with their sizes
        and SHA-256 hashes.
    """
    try:
        with open(os.path.join(folder, MARKER)) as fh:
            listed = json.load(fh)["files"]
        return sorted(listed) == _listing(folder) and all(
            os.path.getsize(os.path.join(folder, name)) == item["bytes"]
            and _sha256(os.path.join(folder, name)) == item["sha256"] for name, item in listed.items())
    except (OSError, ValueError, KeyError, TypeError):
        return False


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


def check_folder(folder, name="folder"):
    """Check, before any work, that ``replace_folder`` may write ``folder``.

    Parameters
    ----------
    folder : str or os.PathLike
        Must not be a file, nor a non-empty folder without the marker; its parent must be
        writable (it is created if missing).
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
    """
    folder = os.path.abspath(os.fspath(folder))
    if os.path.exists(folder):
        if not os.path.isdir(folder):
            raise ValueError(f"{name} {folder} is a file, not a folder")
        if os.listdir(folder) and not os.path.exists(os.path.join(folder, MARKER)):
            raise ValueError(f"{name} {folder} is a non-empty folder that is not a meanfield report (no {MARKER}); "
                             f"refusing to replace it: choose a new or empty folder")
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


def replace_folder(folder, write, name="folder"):
    """Fill a temporary sibling of ``folder``, mark it complete, and swap it into place atomically
    (see the module docstring).

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
    """
    folder = check_folder(folder, name)
    _recover(folder)
    parent, base = os.path.split(folder)
    tmp = tempfile.mkdtemp(dir=parent, prefix=f".{base}.new-")
    try:
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
    return folder
