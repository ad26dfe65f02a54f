"""The one on-disk cache of mixlib: numpy arrays in ``.npz`` files, keyed by JSON.

Layout
------
Everything lives in one directory, :func:`cache_dir`: ``$MIXLIB_CACHE`` when set,
else the user cache directory of ``platformdirs`` (e.g. ``~/.cache/mixlib`` on
Linux). A computation is described by a *key*, a JSON-serialisable dict
(model name, a hash of the weights it used, its parameters, library
versions ...). The file name is ``<kind>-<sha256 of the key>[:24].npz``; the key
itself is stored inside the file as a JSON string and compared on reading, so a
file that belongs to another computation is never used.

Safety
------
* Files are written atomically: to a temporary file in the same directory,
  flushed and fsync'ed, then moved into place with :func:`os.replace`. A crash
  leaves either the old file or the new one, never half a file.
* Only ``.npz`` with plain numeric/string arrays; reading uses
  ``np.load(allow_pickle=False)``. Nothing is unpickled, ever.
* A file that cannot be read (truncated, not a zip, missing arrays, wrong shape
  or dtype, a different key) is reported with a :class:`CacheWarning` and treated
  as absent, so the caller recomputes and overwrites it.

Concurrency
-----------
* :func:`entry_lock` holds a file lock (``filelock``) on one entry while a
  process reads, computes and writes it: a second process asking for the same
  result waits, then reads the first one's file instead of computing it again.
  :func:`write_arrays` takes the same lock (it is re-entrant).
* The operating system releases the lock of a process that dies, however it
  dies. A temporary file that a killed writer left behind is removed by the
  next process that holds the entry's lock: while the lock is held nobody else
  can be writing it.

The pair :func:`write_arrays` / :func:`read_arrays` (with :func:`entry_lock`
around a computation) is the only way mixlib touches the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from .paths import follow_umask

__all__ = [
    "CacheWarning",
    "cache_dir",
    "cache_path",
    "key_digest",
    "array_digest",
    "write_arrays",
    "read_arrays",
    "entry_lock",
    "clear_cache",
]

#: How long :func:`entry_lock` waits for another process before computing anyway (seconds).
LOCK_WAIT = 3600.0

_KEY_FIELD = "__key__"


class CacheWarning(UserWarning):
    """A cache file was unusable (corrupted, foreign or unwritable); the result is recomputed."""


def cache_dir() -> Path:
    """The cache directory: ``$MIXLIB_CACHE`` if set, else ``platformdirs.user_cache_dir("mixlib")``.

    The directory is not created here; :func:`write_arrays` creates it when needed.
    """
    env = os.environ.get("MIXLIB_CACHE", "").strip()
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("mixlib", appauthor=False))


def _canonical(key: Mapping[str, Any]) -> str:
    try:
        return json.dumps(dict(key), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    except TypeError as err:
        raise TypeError(f"cache key must be JSON-serialisable (str, int, float, bool, None, lists, dicts): {err}") from None


def key_digest(key: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of ``key``."""
    return hashlib.sha256(_canonical(key).encode()).hexdigest()


def array_digest(a: Any) -> str:
    """SHA-256 (hex) of an array's dtype, shape and bytes (torch tensors are converted to numpy)."""
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()
    a = np.ascontiguousarray(a)
    h = hashlib.sha256()
    h.update(f"{a.dtype.str}|{a.shape}|".encode())
    h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def _check_kind(kind: str) -> str:
    if not kind or not all(c.isalnum() or c in "-_" for c in kind):
        raise ValueError(f"cache kind {kind!r} must be non-empty and use only letters, digits, '-' and '_'.")
    return kind


def cache_path(kind: str, key: Mapping[str, Any]) -> Path:
    """Where the result of computation ``key`` of type ``kind`` (e.g. ``"clusters"``) is stored."""
    return cache_dir() / f"{_check_kind(kind)}-{key_digest(key)[:24]}.npz"


_LOCKS: dict[str, Any] = {}


def _lock_of(path: Path) -> Any:
    """The (re-entrant, per-thread) file lock of the cache entry ``path``; one object per lock file."""
    from filelock import FileLock

    lock_file = str(path.with_name(f".{path.stem}.lock"))
    if lock_file not in _LOCKS:
        _LOCKS[lock_file] = FileLock(lock_file)
    return _LOCKS[lock_file]


def _remove_orphans(path: Path) -> None:
    """Delete temporary files of ``path`` left by a killed writer (call only while holding its lock)."""
    for tmp in path.parent.glob(f".{path.stem}-*.tmp"):
        try:
            tmp.unlink()
        except OSError:
            pass


@contextmanager
def entry_lock(kind: str, key: Mapping[str, Any], *, enabled: bool = True, wait: float | None = None,
               verbose: bool = True) -> Iterator[Path]:
    """Hold the lock of one cache entry while reading, computing and writing it.

    ::

        with entry_lock("clusters", key):
            stored = read_arrays("clusters", key, expect)
            if stored is None:
                ...compute...
                write_arrays("clusters", key, arrays)

    A second process entering the block for the same entry waits until the
    first leaves it (printing one line that it waits), then finds the file.
    Temporary files that a killed writer left for this entry are removed once
    the lock is held.

    Parameters
    ----------
    kind, key
        As for :func:`write_arrays`.
    enabled : bool, default True
        False: do nothing (for callers whose cache is switched off).
    wait : float, optional
        Longest wait for another process, in seconds (default :data:`LOCK_WAIT`);
        after that a :class:`CacheWarning` says so and the block runs unlocked.
    verbose : bool, default True
        Print one line when another process holds the lock.

    Yields
    ------
    pathlib.Path
        The entry's file (:func:`cache_path`).

    When the cache directory cannot be created or locked, the block runs
    without the lock (the write will warn that it cannot cache).
    """
    from filelock import Timeout

    path = cache_path(kind, key)
    lock = None
    if enabled:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            candidate = _lock_of(path)
            try:
                candidate.acquire(timeout=0)
            except Timeout:
                limit = LOCK_WAIT if wait is None else float(wait)
                if verbose:
                    print(f"[mixlib] another process is computing {path.name}; waiting for it (at most {limit:.0f} s) ...", flush=True)
                candidate.acquire(timeout=limit)
            lock = candidate
        except Timeout:
            warnings.warn(f"mixlib waited {limit:.0f} s for another process to finish {path}; computing it here as well.",
                          CacheWarning, stacklevel=3)
        except OSError:
            lock = None  # unwritable cache directory: nothing to share, nothing to protect
    try:
        if lock is not None:
            _remove_orphans(path)
        yield path
    finally:
        if lock is not None:
            lock.release()


def write_arrays(kind: str, key: Mapping[str, Any], arrays: Mapping[str, Any]) -> Path | None:
    """Store ``arrays`` (name -> numpy array) for ``key``, atomically.

    Parameters
    ----------
    kind : str
        A short name for the kind of result (file-name prefix).
    key : mapping
        JSON-serialisable description of the computation (stored in the file).
    arrays : mapping of str to array-like
        Numeric or string arrays only (object arrays are refused: they would need pickle).

    Returns
    -------
    pathlib.Path or None
        The file written, or None when the directory is not writable (a
        :class:`CacheWarning` says so; the caller's result is still valid).
    """
    if _KEY_FIELD in arrays:
        raise ValueError(f"array name {_KEY_FIELD!r} is reserved for the cache key.")
    payload: dict[str, np.ndarray] = {}
    for name, a in arrays.items():
        arr = np.asarray(a.detach().cpu().numpy() if hasattr(a, "detach") else a)
        if arr.dtype.hasobject:
            raise TypeError(f"array {name!r} has dtype object; the cache stores numeric and string arrays only (no pickle).")
        payload[name] = arr
    payload[_KEY_FIELD] = np.array(_canonical(key))
    with entry_lock(kind, key, verbose=False):
        return _write(cache_path(kind, key), payload)


def _write(path: Path, payload: dict[str, np.ndarray]) -> Path | None:
    tmp_name = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **payload)
            f.flush()
            os.fsync(f.fileno())
        follow_umask(tmp_name)  # mkstemp makes 0600; a cache file is as readable as any other output
        os.replace(tmp_name, path)
        tmp_name = None
        return path
    except OSError as err:
        warnings.warn(f"mixlib could not write its cache file {path} ({err}); the result is not cached. "
                      "Set MIXLIB_CACHE to a writable directory.", CacheWarning, stacklevel=3)
        return None
    finally:
        if tmp_name is not None:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass


def read_arrays(
    kind: str,
    key: Mapping[str, Any],
    expect: Mapping[str, tuple[tuple[int | None, ...], str]],
    *,
    check: Callable[[dict[str, np.ndarray]], str | None] | None = None,
) -> dict[str, np.ndarray] | None:
    """Load the arrays stored for ``key``, or None when there is no usable file.

    Parameters
    ----------
    kind, key
        As for :func:`write_arrays`.
    expect : mapping
        ``name -> (shape, kinds)``: every array that must be present, its shape
        (``None`` entries match any length) and the allowed numpy dtype kinds
        (e.g. ``"i"`` integers, ``"f"`` floats, ``"iu"`` any integer, ``"U"`` strings).
    check : callable, optional
        Extra validation of the loaded arrays; returns an error message or None.

    Returns
    -------
    dict or None
        None when the file does not exist (silently) or is unusable (with a
        :class:`CacheWarning` naming the file and the problem).
    """
    path = cache_path(kind, key)
    if not path.is_file():
        return None

    def bad(why: str) -> None:
        warnings.warn(f"mixlib cache file {path} is unusable ({why}); recomputing and overwriting it.", CacheWarning, stacklevel=3)
        return None

    try:
        with np.load(path, allow_pickle=False) as npz:
            names = set(npz.files)
            if _KEY_FIELD not in names:
                return bad("it has no mixlib key: not a mixlib cache file")
            stored = npz[_KEY_FIELD]
            if stored.dtype.kind != "U" or stored.shape != ():
                return bad("its key field is malformed")
            try:
                stored_key = json.loads(str(stored))
            except json.JSONDecodeError:
                return bad("its key field is not valid JSON")
            if _canonical(stored_key) != _canonical(key):
                return bad("it was written for a different computation (key mismatch)")
            missing = [n for n in expect if n not in names]
            if missing:
                return bad(f"arrays {missing} are missing")
            out = {n: npz[n] for n in expect}
    except Exception as err:  # noqa: BLE001 - untrusted bytes can fail in many ways (BadZipFile, ValueError,
        # EOFError, tokenize.TokenError from a garbled .npy header ...); any of them means "unusable"
        return bad(f"{type(err).__name__}: {err}")
    for n, (shape, kinds) in expect.items():
        a = out[n]
        if a.dtype.kind not in kinds:
            return bad(f"array {n!r} has dtype {a.dtype}, expected kind {kinds!r}")
        if len(a.shape) != len(shape) or any(s is not None and s != t for s, t in zip(shape, a.shape)):
            return bad(f"array {n!r} has shape {a.shape}, expected {tuple('*' if s is None else s for s in shape)}")
    if check is not None:
        msg = check(out)
        if msg:
            return bad(msg)
    return out


def clear_cache(kind: str | None = None) -> int:
    """Delete cached ``.npz`` files (all, or those of one ``kind``); returns how many were removed."""
    d = cache_dir()
    if not d.is_dir():
        return 0
    pattern = f"{_check_kind(kind)}-*.npz" if kind else "*.npz"
    n = 0
    for p in d.glob(pattern):
        try:
            p.unlink()
            n += 1
        except OSError:
            pass
    return n
