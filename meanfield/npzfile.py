"""Names and read errors of ``.npz`` files (saved results, meshes, checkpoints, sweep tasks).

``NPZ_ERRORS`` are the exceptions that reading a damaged ``.npz`` raises — an unreadable file
(``OSError``), a truncated or garbled archive (``zipfile.BadZipFile``, ``EOFError``), a flipped
byte in a compressed member (``zlib.error``), a flipped flag bit (``NotImplementedError``:
"compressed patched data"), a damaged array header (``ValueError``, or ``tokenize.TokenError`` and
``SyntaxError`` from its parser), a header declaring an array too large to allocate
(``MemoryError``, ``OverflowError``) or a missing member (``KeyError``) —, so that every reader
catches all of them and names the file.
"""
import os
import tokenize
import zipfile
import zlib

__all__ = ["NPZ_ERRORS", "npz_path"]

NPZ_ERRORS = (OSError, ValueError, KeyError, EOFError, NotImplementedError, zipfile.BadZipFile, zlib.error,
              tokenize.TokenError, SyntaxError, MemoryError, OverflowError)


def npz_path(path: str | os.PathLike) -> str:
    r"""``path`` as a string ending in ``.npz`` (``numpy.savez`` appends it; loads must look there too).

    .. math::

        \text{path} \mapsto \text{path} \,\|\, \texttt{.npz} \quad \text{unless it already ends so}.

    Parameters
    ----------
    path : str or os.PathLike
        A file name, with or without the extension.

    Returns
    -------
    str

    Examples
    --------
    >>> from meanfield.npzfile import npz_path
    >>> npz_path("run"), npz_path("run.npz")
    ('run.npz', 'run.npz')
    """
    path = os.fspath(path)
    return path if path.endswith(".npz") else path + ".npz"
