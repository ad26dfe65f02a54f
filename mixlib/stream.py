"""Analysis A at corpus scale: stream a text file through :func:`mixlib.decompose` into Parquet.

``python -m mixlib mixing`` holds every sequence in memory; this module does
not. :func:`stream_mixing` reads a text file of any size lazily, in chunks of
``chunk_size`` texts, and writes one Parquet file per chunk (per-token rows:
sequence id, position, token, category, layer, the five ratios and the eight
norms of :class:`mixlib.Mixing`). Memory stays that of one chunk.

* **Resume**: a chunk whose file is already there (readable, and stamped by
  this run) is skipped, so a run that was interrupted continues where it
  stopped. Files are written to a temporary name and renamed, so a chunk file
  is whole or absent; only a dead writer's temporary files are removed.
* **Shards**: ``shard=(i, n)`` processes chunks ``k`` with ``k % n == i``, so n
  machines (a job array under any scheduler) split one corpus with no
  coordination; they may write into the same folder. One writer per shard: a
  second run of the same shard into the same folder is refused (a lock).
* **Reproducible masking**: sequence ``s`` (its 0-based number in the file) is
  masked with the random stream ``(seed, s)`` (:func:`mixlib.mask_tokens`
  with ``first_index``), so chunking, sharding and resuming never change which
  tokens are masked.
* **A run's identity**: ``stream.json`` records the model, a SHA-256 of its
  weights, the options and a SHA-256 of the text file; a later run (resume or
  another shard) that differs in any of them is refused. Every chunk file
  carries the fingerprint of that record and its sequence-id range.
* **Merge**: :func:`merge_mixing` first proves the chunk files are one whole
  run (:func:`check_chunks`: every chunk there, none from another run, none
  renamed or copied), then reads them one at a time and computes the paper's
  tables exactly as :func:`mixlib.mixing_table` and :func:`mixlib.mixing_summary`
  do on one in-memory run. Missing chunks are an error unless
  ``allow_partial=True``, and then the result says how much it covers.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .paths import follow_umask, pid_alive
from .texts import at_line, header_default, iter_texts, warnings_at_lines

__all__ = ["stream_mixing", "merge_mixing", "check_chunks", "StreamResult", "parse_shard"]

STAMP_KEY = "mixlib"  # key of a chunk file's Parquet metadata: {"run", "chunk", "first_seq", "n_seq"}
#: Per-token fields written for each layer (ratios first, then norms).
FIELDS = ("ratio", "attnres_n", "attn_n", "attnres_w", "attn_w", "norm_mix", "norm_keep_attn", "norm_res", "norm_keep",
          "norm_mix_ln", "norm_keep_attn_ln", "norm_res_ln", "norm_keep_ln")
META = "stream.json"


def _need_pyarrow() -> Any:
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet as pq
    except ImportError as err:  # pragma: no cover - pyarrow is in requirements.txt
        raise ImportError("streaming needs pyarrow: pip install pyarrow") from err
    return pq


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` -> ``(i, n)`` with ``0 <= i < n``; anything else is a ValueError that says so."""
    try:
        i_s, n_s = str(text).split("/")
        i, n = int(i_s), int(n_s)
    except ValueError:
        raise ValueError(f"shard {text!r} is not of the form i/n (e.g. 0/4 for the first of four machines).") from None
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"shard {text!r}: need n >= 1 and 0 <= i < n (e.g. 0/4 ... 3/4).")
    return i, n


def _chunks(path: Any, chunk_size: int, header: bool | None, digest: Any) -> Iterator[tuple[int, int, list, list[int], str]]:
    """(chunk index, first sequence id, texts, their line numbers, SHA-256 of the file's bytes read so far) for
    every chunk of the file; ``digest`` is the hashlib object that sees every byte."""
    buf: list = []
    lines: list[int] = []
    k = 0
    for lineno, text in iter_texts(path, header=header, digest=digest):
        buf.append(text)
        lines.append(lineno)
        if len(buf) == chunk_size:
            yield k, k * chunk_size, buf, lines, digest.hexdigest()
            buf, lines, k = [], [], k + 1
    if buf:
        yield k, k * chunk_size, buf, lines, digest.hexdigest()


def _survey(path: Any, chunk_size: int, header: bool | None) -> tuple[int, list[str], str]:
    """Check every line of the file once: (number of texts, the digest at the end of each chunk, the file's SHA-256)."""
    h = hashlib.sha256()
    n, marks = 0, []
    for _, _, chunk, _, mark in _chunks(path, chunk_size, header, h):
        n += len(chunk)
        marks.append(mark)
    return n, marks, h.hexdigest()


def _chunk_file(out: Path, k: int) -> Path:
    return out / f"chunk-{k:07d}.parquet"


def _tmp_owner(host: str | None = None, pid: int | None = None) -> str:
    """``<host>~<pid>``: temporary chunk files carry their writer, so that only a dead writer's are removed."""
    host = (host or socket.gethostname()).replace(".", "_").replace("~", "_")
    return f"{host}~{os.getpid() if pid is None else pid}"


def _dead(owner: str) -> bool:
    """Whether ``<host>~<pid>`` is a process of this machine that is gone (another machine's is never judged)."""
    host, _, pid = owner.partition("~")
    here = _tmp_owner().split("~")[0]
    return host == here and pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid))


#: Hidden entries of a stream folder that only mixlib writes: shard locks, temporary chunk and record files,
#: and the Ray engine's staged texts (:mod:`mixlib.stream_ray`, one folder per driver).
STAGING = ".ray-input"


def is_leftover(name: str) -> bool:
    """Whether ``name``, in a stream folder, is one of mixlib's own working files (not a user's)."""
    return (name.startswith(".writer-shard-") or name == STAGING
            or (name.startswith((".chunk-", f".{META}.")) and name.endswith(".tmp")))


def _remove_dead_writers_files(out: Path) -> None:
    """Remove what writers on this machine whose process is gone left in ``out``: temporary chunk and record
    files, and a Ray driver's staged texts (never a live writer's, nor another machine's)."""
    for tmp in [*out.glob(".chunk-*.tmp"), *out.glob(f".{META}.*.tmp")]:
        owner = tmp.name.split(".")[3] if tmp.name.count(".") >= 5 else ""
        if _dead(owner):
            tmp.unlink(missing_ok=True)
    staging = out / STAGING
    if staging.is_dir():
        for folder in staging.iterdir():
            if _dead(folder.name):
                shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(OSError):
            staging.rmdir()  # only when nothing else is in it


def _stamp_of(path: Path) -> dict[str, Any] | None:
    """The ``mixlib`` stamp of a chunk file; None when the file is unreadable or carries none."""
    pq = _need_pyarrow()
    try:
        raw = (pq.read_schema(path).metadata or {}).get(STAMP_KEY.encode())
        stamp = json.loads(raw) if raw is not None else None
    except Exception:  # noqa: BLE001 - any unreadable file counts as absent
        return None
    return stamp if isinstance(stamp, dict) else None


def _expected_stamp(meta: dict[str, Any], k: int) -> dict[str, Any]:
    """What chunk ``k`` of the run described by ``meta`` carries: the run's fingerprint and its sequence ids."""
    first = k * meta["chunk_size"]
    return {"run": run_fingerprint(meta), "chunk": k, "first_seq": first,
            "n_seq": min(meta["chunk_size"], meta["n_texts"] - first)}


def run_fingerprint(meta: dict[str, Any]) -> str:
    """SHA-256 of a run's ``stream.json`` (model, weights, options, text file): every chunk of the run carries it."""
    from .cache import key_digest

    return key_digest(meta)


def weights_digest(model: Any) -> str:
    """SHA-256 of a model's parameters and buffers (names, dtypes, shapes, values)."""
    import torch

    h = hashlib.sha256()
    for name, t in sorted([*model.named_parameters(), *model.named_buffers()], key=lambda x: x[0]):
        a = t.detach().cpu().contiguous().reshape(-1)
        h.update(f"{name}|{a.dtype}|{tuple(t.shape)}|".encode())
        h.update(a.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _rows(m: Any, first: int) -> dict[str, np.ndarray]:
    """Per-token rows (real tokens only) of one chunk's Mixing."""
    real = m.real.numpy()  # (B, N)
    b_idx, pos = np.nonzero(real)
    L = len(m.layers)
    toks = np.array([t for b in range(real.shape[0]) for t in m.tokens(b)], dtype=object)
    cats = np.asarray(m.categories)[b_idx, pos].astype(str)
    cols: dict[str, np.ndarray] = {
        "seq": np.tile(b_idx + first, L).astype(np.int64),
        "position": np.tile(pos, L).astype(np.int32),
        "token": np.tile(toks, L),
        "category": np.tile(cats, L),
        "layer": np.repeat(np.asarray(m.layers, dtype=np.int16), len(b_idx)),
    }
    for name in FIELDS:
        cols[name] = m.metric(name).numpy()[:, b_idx, pos].reshape(-1).astype(np.float32)
    return cols


def _write_parquet(path: Path, cols: dict[str, np.ndarray], stamp: dict[str, Any]) -> None:
    """Write one chunk file (whole or not at all) with ``stamp`` in its metadata (key ``mixlib``)."""
    import pyarrow as pa

    pq = _need_pyarrow()
    table = pa.table({k: pa.array(v.tolist() if v.dtype == object else v) for k, v in cols.items()})
    table = table.replace_schema_metadata({STAMP_KEY: json.dumps(stamp, sort_keys=True)})
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{_tmp_owner()}.", suffix=".tmp")
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        follow_umask(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


_SHA = re.compile(r"[0-9a-f]{64}")
#: What stream.json holds, and a test of each value (a record edited by hand is refused in one line).
_META_CHECKS: dict[str, Any] = {
    "model": lambda v: isinstance(v, str) and bool(v),
    "weights_sha256": lambda v: isinstance(v, str) and bool(_SHA.fullmatch(v)),
    "texts": lambda v: isinstance(v, str),
    "texts_sha256": lambda v: isinstance(v, str) and bool(_SHA.fullmatch(v)),
    "n_texts": lambda v: type(v) is int and v >= 1,
    "chunk_size": lambda v: type(v) is int and v >= 1,
    "rate": lambda v: type(v) is float and 0 < v < 1,
    "seed": lambda v: type(v) is int and v >= 0,
    "count": lambda v: v in ("floor", "round"),
    "max_length": lambda v: type(v) is int and v >= 1,
    "header": lambda v: type(v) is bool,
    "keep_special_tokens": lambda v: type(v) is bool,
    "fields": lambda v: v == list(FIELDS),
}


def read_meta(out: str | os.PathLike) -> dict[str, Any]:
    """``stream.json`` of a stream-mixing folder, checked: one ValueError saying what is wrong with it."""
    p = Path(out) / META
    try:
        meta = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{Path(out)} has no {META}: it is not the output folder of `python -m mixlib stream-mixing`.") from None
    except (OSError, ValueError, RecursionError) as err:
        raise ValueError(f"{p} cannot be read as JSON ({type(err).__name__}); remove the folder's {META} and chunk files to start over, "
                         "or use another folder.") from None
    if isinstance(meta, dict) and meta and not {"weights_sha256", "texts_sha256", "n_texts"} & meta.keys():
        raise ValueError(f"{p} has no fingerprint (written by an older mixlib), so the chunks cannot be checked; "
                         "run stream-mixing again into a new folder.")
    bad = [k for k, ok in _META_CHECKS.items() if not isinstance(meta, dict) or k not in meta or not ok(meta[k])]
    if bad:
        shown = "; ".join(f"{k}: {_short(meta.get(k)) if isinstance(meta, dict) else '?'}" for k in bad[:4])
        raise ValueError(f"{p} is damaged or was edited ({shown}); it no longer describes the chunks: run stream-mixing "
                         "again into a new folder.")
    return meta


def _other_writers(out: Path, shard: tuple[int, int]) -> bool:
    """Whether a writer of another shard holds its lock in ``out`` now."""
    from filelock import FileLock, Timeout

    for path in out.glob(".writer-shard-*.lock"):
        if path == _lock_path(out, shard):
            continue
        try:
            with FileLock(path, timeout=0):
                pass
        except Timeout:
            return True
    return False


def check_record(out: Path, given: dict[str, Any], shard: tuple[int, int]) -> bool:
    """Whether ``out``'s ``stream.json`` must be (re)written for a run with the values ``given`` (all of the record,
    or the part known before the model loads); raises ValueError, one line, when the folder holds another run.

    A folder with no record, or whose run wrote no chunk (it failed on its first one) while no other shard is
    being written, takes the new record; otherwise every given value must equal the recorded one.
    """
    if not (out / META).exists():
        return True
    if not any(out.glob("chunk-*.parquet")) and not _other_writers(out, shard):
        return True
    old = read_meta(out)
    diff = [k for k, v in given.items() if old.get(k) != v]
    if diff:
        what = "; ".join(f"{k}: {_short(old.get(k))} recorded, {_short(given[k])} given" for k in diff)
        raise ValueError(f"{out} holds chunks of a run with other options, model or texts ({what}); give the same ones "
                         "to resume, or another --out folder.")
    return False


def _check_meta(out: Path, meta: dict, shard: tuple[int, int]) -> None:
    """Record ``meta`` in ``out``, or check it against the record there (:func:`check_record`)."""
    if not check_record(out, meta, shard):
        return
    fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{META}.{_tmp_owner()}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(meta, fh, ensure_ascii=False, indent=1)
    follow_umask(tmp)
    os.replace(tmp, out / META)


def _short(value: Any) -> str:
    """A recorded value for a message: hashes cut to 12 characters."""
    if isinstance(value, str) and _SHA.fullmatch(value):
        return value[:12] + "…"
    return repr(value)


@dataclass(frozen=True)
class StreamResult:
    """What one :func:`stream_mixing` call did."""

    out: Path
    written: tuple[int, ...]  # chunk indices computed now
    skipped: tuple[int, ...]  # chunk indices already there (resume)
    n_sequences: int  # sequences in the chunks written now


def run_record(enc: Any, texts: str | os.PathLike, *, chunk_size: int, rate: float, seed: int, count: str,
               max_length: int, header: bool | None, keep_special_tokens: bool) -> tuple[dict[str, Any], list[str]]:
    """A run's ``stream.json`` record and the file's digest at the end of each chunk (every line checked first).

    The digests prove, chunk by chunk, that what is analysed is the file that was checked and recorded (not
    one edited meanwhile): :func:`changed_error` when they differ.
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size!r}; give a positive int.")
    if header is None:
        header = header_default(texts)
    n_texts, marks, texts_sha = _survey(texts, int(chunk_size), header)
    meta = {"model": enc.name, "weights_sha256": weights_digest(enc.model), "texts": Path(texts).name,
            "texts_sha256": texts_sha, "n_texts": n_texts, "chunk_size": int(chunk_size), "rate": float(rate),
            "seed": int(seed), "count": count, "max_length": int(max_length), "header": bool(header),
            "keep_special_tokens": bool(keep_special_tokens), "fields": list(FIELDS)}
    return meta, marks


def shard_chunks(texts: Any, meta: dict[str, Any], marks: list[str],
                 shard: tuple[int, int]) -> Iterator[tuple[int, list, list[int]]]:
    """``(k, texts, line numbers)`` of this shard's chunks, read lazily, each checked against the survey's digest
    (:func:`run_record`); a file edited meanwhile (or shortened) is :func:`changed_error`."""
    i, n = shard
    seen = 0
    for k, _, chunk, lines, mark in _chunks(texts, meta["chunk_size"], meta["header"], hashlib.sha256()):
        seen = k + 1
        if k >= len(marks) or mark != marks[k]:
            raise changed_error(texts, k)
        if k % n == i:
            yield k, chunk, lines
    if seen != len(marks):  # the file got shorter
        raise changed_error(texts, seen)


def changed_error(texts: Any, k: int) -> ValueError:
    """The error for a text file that differs, from chunk ``k`` on, from the one that was checked."""
    return ValueError(f"{texts} changed while stream-mixing read it (chunk {k} on differs from the file that "
                      "was checked); the chunks before it are kept, nothing of the changed file was written. "
                      "Run again with the file as it is now into a new --out, or restore it.")


def stream_mixing(
    enc: Any,
    texts: str | os.PathLike,
    out: str | os.PathLike,
    *,
    chunk_size: int = 256,
    shard: tuple[int, int] | str = (0, 1),
    rate: float = 0.12,
    seed: int = 0,
    count: str = "floor",
    max_length: int = 128,
    batch_size: int = 32,
    header: bool | None = None,
    keep_special_tokens: bool = False,
    progress: bool | None = None,
) -> StreamResult:
    """Decompose every text of a file, chunk by chunk, into Parquet files (see the module docstring).

    Parameters
    ----------
    enc : mixlib.Encoder
        A post-LN BERT-family encoder (:func:`mixlib.load_encoder`).
    texts : path
        UTF-8 text file: one text per line, or ``A<TAB>B`` for a pair, read
        by :func:`mixlib.texts.iter_texts` (the same rules as every command).
    out : path
        Folder for ``chunk-NNNNNNN.parquet`` and ``stream.json`` (created).
    chunk_size : int, default 256
        Texts per chunk (and per Parquet file).
    shard : (i, n) or "i/n", default (0, 1)
        Process only chunks ``k`` with ``k % n == i``.
    rate, seed, count, max_length
        Masking, as :func:`mixlib.mask_tokens` (sequence ``s`` uses the stream ``(seed, s)``).
    batch_size : int, default 32
        Sequences per forward pass inside a chunk.
    header : bool, optional
        The file's first (non-comment) line names its columns (default: True
        for ``*.tsv`` files); the rules are :mod:`mixlib.texts`'.
    keep_special_tokens : bool, default False
        Read ``[MASK]``, ``[SEP]``, ``[CLS]`` written in a text as the special
        tokens; by default they are text (:func:`mixlib.data.special_tokens_as_text`),
        as in ``python -m mixlib mixing``. Recorded in ``stream.json``.
    progress : bool or None
        tqdm bar over chunks; None shows it when stderr is a terminal.

    Returns
    -------
    StreamResult
        ``out`` (the folder), ``written`` and ``skipped`` (the chunk indices computed now and those already
        there), ``n_sequences`` (in the chunks written now). :func:`merge_mixing` reads the folder.

    Raises
    ------
    ValueError
        A bad ``chunk_size``, ``shard`` or masking option, a folder that holds another run (other model,
        options or text file) or is being written by another run of the same shard, or a text file that
        changed while it was read.
    ImportError
        pyarrow is not installed.

    Examples
    --------
    >>> import tempfile, pathlib, shutil
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "texts.txt").write_text("The cat sat on the mat.\\nA dog ran away.\\nBirds sing.\\n", encoding="utf-8")
    >>> r = mixlib.stream_mixing(enc, d / "texts.txt", d / "out", chunk_size=2)
    >>> r.written, r.skipped, r.n_sequences  # two chunks: texts 0-1 and 2
    ((0, 1), (), 3)
    >>> mixlib.stream_mixing(enc, d / "texts.txt", d / "out", chunk_size=2).skipped  # run again: resumes
    (0, 1)
    >>> shutil.rmtree(d)
    """
    _need_pyarrow()
    i, n = parse_shard(shard) if isinstance(shard, str) else parse_shard(f"{shard[0]}/{shard[1]}")
    meta, marks = run_record(enc, texts, chunk_size=chunk_size, rate=rate, seed=seed, count=count,
                             max_length=max_length, header=header, keep_special_tokens=keep_special_tokens)
    out = Path(out).expanduser().resolve()
    from tqdm.auto import tqdm
    import sys

    with folder_lock(out), writer_lock(out, (i, n)):
        _check_meta(out, meta, (i, n))
        _remove_dead_writers_files(out)
        bar = tqdm(desc=f"mixing ({enc.name}, shard {i}/{n})", unit="chunk",
                   disable=not (progress if progress is not None else sys.stderr.isatty()))
        written, skipped, n_seq = [], [], 0
        try:
            for k, chunk, lines in shard_chunks(texts, meta, marks, (i, n)):
                if chunk_done(out, meta, k):
                    skipped.append(k)
                else:
                    mix_chunk(enc, texts, out, meta, k, chunk, lines, batch_size)
                    written.append(k)
                    n_seq += len(chunk)
                bar.update(1)
        finally:
            bar.close()
    return StreamResult(out=out, written=tuple(written), skipped=tuple(skipped), n_sequences=n_seq)


def chunk_done(out: Path, meta: dict[str, Any], k: int) -> bool:
    """Whether chunk ``k``'s file is already in ``out``, readable and stamped by the run ``meta`` describes."""
    path = _chunk_file(out, k)
    return path.exists() and _stamp_of(path) == _expected_stamp(meta, k)


def mix_chunk(enc: Any, texts: str | os.PathLike, out: Path, meta: dict[str, Any], k: int, chunk: list,
              lines: list[int], batch_size: int) -> None:
    """Chunk ``k`` (its texts and their line numbers): mask, decompose and write its Parquet file, whole or not at all.

    The one computation of a chunk, for :func:`stream_mixing` and for each worker of :mod:`mixlib.stream_ray`;
    masking, truncation and special tokens follow ``meta`` (the run's ``stream.json``).
    """
    from .data import mask_tokens
    from .mixing import decompose

    first = k * meta["chunk_size"]
    try:
        with warnings_at_lines(texts, lines):
            batch = mask_tokens(enc, chunk, rate=meta["rate"], seed=meta["seed"], max_length=meta["max_length"],
                                count=meta["count"], first_index=first, keep_special_tokens=meta["keep_special_tokens"])
    except ValueError as err:
        raise at_line(err, texts, lines) from None
    batch.pop("masked", None)
    m = decompose(enc, batch, batch_size=batch_size, vectors=False, progress=False)
    _write_parquet(_chunk_file(out, k), _rows(m, first), _expected_stamp(meta, k))


@contextmanager
def folder_lock(out: Path) -> Iterator[None]:
    """Make ``out`` and hold its folder lock shared (:mod:`mixlib.outlock`): shards write side by side, and a
    command that would replace the folder (``mixing``, ``merge``) is refused meanwhile."""
    from .outlock import Busy, OutLock

    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        lock = OutLock(out, shared=True)
    except Busy:
        raise ValueError(f"another python -m mixlib run is replacing {out} now; wait for it to finish, "
                         "or give another --out.") from None
    try:
        out.mkdir(exist_ok=True)
        yield
    finally:
        lock.release()


def _lock_path(out: Path, shard: tuple[int, int]) -> Path:
    return out / f".writer-shard-{shard[0]}-of-{shard[1]}.lock"


@contextmanager
def writer_lock(out: Path, shard: tuple[int, int]) -> Iterator[None]:
    """Hold the lock of one shard of ``out`` (a second writer of that shard is refused; other shards run side by side)."""
    from filelock import FileLock, Timeout

    lock = FileLock(_lock_path(out, shard), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise ValueError(f"another stream-mixing is writing shard {shard[0]}/{shard[1]} into {out} now; wait for it to "
                         "finish (or stop it), or give another --out.") from None
    try:
        yield
    finally:
        lock.release()


def _ranges(ids: list[int]) -> str:
    """[3, 4, 5, 9] -> '3-5, 9'."""
    parts, start = [], None
    for a, b in zip(ids, ids[1:] + [None]):
        start = a if start is None else start
        if b != a + 1:
            parts.append(f"{start}" if start == a else f"{start}-{a}")
            start = None
    return ", ".join(parts)


def check_chunks(out: str | os.PathLike, *, allow_partial: bool = False) -> dict[str, Any]:
    """Prove that the chunk files of ``out`` are one whole run: every chunk there, none foreign, none twice.

    Each chunk file carries its run's fingerprint (:func:`run_fingerprint` of
    ``stream.json``: model, weights, options, text file) and its sequence-id
    range; they are compared with ``stream.json``.

    Returns
    -------
    dict
        ``meta`` (``stream.json``), ``files`` (chunk index -> path, sorted),
        ``missing`` (chunk indices), ``n_sequences`` (in the files found),
        ``partial`` (bool).

    Raises
    ------
    ValueError
        A file from another run, a renamed or unreadable file, or (unless
        ``allow_partial``) missing chunks: one line naming them.
    """
    out = Path(out)
    meta = read_meta(out)
    n_chunks = -(-meta["n_texts"] // meta["chunk_size"])
    files = {}
    stamps = {}
    for f in sorted(out.glob("chunk-*.parquet")):
        name_k = f.stem.split("-", 1)[1]
        if not re.fullmatch(r"[0-9]+", name_k) or f.name != _chunk_file(out, int(name_k)).name:
            raise ValueError(f"{f.name} is not named as stream-mixing names its files (chunk-NNNNNNN.parquet): a copy? "
                             "Remove it, or move it out of the folder.")
        stamp = _stamp_of(f)
        if stamp is None:
            raise ValueError(f"{f.name} is unreadable (cut short?) or carries no mixlib stamp; run the same stream-mixing "
                             "command again to rewrite it, or remove it.")
        stamps[f] = stamp
    runs = {stamp.get("run") for stamp in stamps.values()}
    fingerprint = run_fingerprint(meta)
    if len(stamps) > 1 and len(runs) == 1 and fingerprint not in runs:
        raise ValueError(f"{META} does not describe its chunk files: all {len(stamps)} of them come from one run, and "
                         f"{META} from another; it was edited or replaced. Restore it, or run stream-mixing again into a "
                         "new folder.")
    for f, stamp in stamps.items():
        k = int(f.stem.split("-", 1)[1])
        if stamp.get("run") != fingerprint:
            raise ValueError(f"{f.name} comes from another run (another model, weights, options or text file than "
                             f"{META} records); remove it, or run stream-mixing again to rewrite it.")
        if k >= n_chunks or stamp != _expected_stamp(meta, k):
            raise ValueError(f"{f.name} holds chunk {stamp.get('chunk')} (sequences {stamp.get('first_seq')}.."
                             f"{stamp.get('first_seq', 0) + stamp.get('n_seq', 0) - 1}): a renamed or copied file, whose "
                             "sequences would be counted twice or in the wrong place; remove it.")
        files[k] = f
    missing = [k for k in range(n_chunks) if k not in files]
    n_seq = sum(_expected_stamp(meta, k)["n_seq"] for k in files)
    if missing and not allow_partial:
        gone = sum(_expected_stamp(meta, k)["n_seq"] for k in missing)
        raise ValueError(f"{len(missing)} of {n_chunks} chunk files are missing (chunks {_ranges(missing)}: {gone} of "
                         f"{meta['n_texts']} texts); run the same stream-mixing command again to write them (it resumes), "
                         "or merge what is there with --allow-partial.")
    if not files:
        raise ValueError(f"{out} holds no chunk-*.parquet files yet; run the streaming command first.")
    return {"meta": meta, "files": dict(sorted(files.items())), "missing": missing, "n_sequences": n_seq,
            "partial": bool(missing)}


def merge_mixing(out: str | os.PathLike, *, percent: bool = True, allow_partial: bool = False) -> dict[str, Any]:
    """The paper's tables from the chunk files of :func:`stream_mixing`, one file in memory at a time.

    The files are first proved to be one whole run (:func:`check_chunks`).

    Parameters
    ----------
    out : path
        The folder of :func:`stream_mixing`.
    percent : bool, default True
        Tables in percent.
    allow_partial : bool, default False
        Merge even when chunk files are missing; the result then says so
        (``partial``, ``coverage``).

    Returns
    -------
    dict
        ``table``: per layer and category, the per-sequence category means of
        AttnResLn-N averaged over sequences (as :func:`mixlib.mixing_table`);
        ``summary``: mean/max/min of the five ratios over all tokens and
        layers (as :func:`mixlib.mixing_summary`); ``model``; ``n_sequences``;
        ``chunks`` (the chunk indices found); ``partial`` and ``coverage``
        (texts merged, texts in the file, chunks missing).

    Raises
    ------
    ValueError
        ``stream.json`` missing, no chunk files, a foreign, renamed or
        unreadable chunk file, or missing chunks without ``allow_partial``.

    Examples
    --------
    >>> import tempfile, pathlib, shutil
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "texts.txt").write_text("The cat sat on the mat.\\nA dog ran away.\\nBirds sing.\\n", encoding="utf-8")
    >>> _ = mixlib.stream_mixing(enc, d / "texts.txt", d / "out", chunk_size=2)
    >>> res = mixlib.merge_mixing(d / "out")
    >>> res["n_sequences"], res["chunks"], res["partial"]
    (3, [0, 1], False)
    >>> res["table"].shape, res["summary"].index[-1]  # as mixing_table and mixing_summary
    ((6, 6), 'AttnResLn-N')
    >>> shutil.rmtree(d)
    """
    import pandas as pd

    from .mixing import OVERALL, RATIO_METRICS, SUMMARY_ROWS
    from .plots import CATEGORY_ORDER

    pq = _need_pyarrow()
    found = check_chunks(out, allow_partial=allow_partial)
    meta = found["meta"]
    per_seq = []  # (layer, seq, category) sums and counts of the ratio
    sums = {name: 0.0 for name in SUMMARY_ROWS}
    maxs = {name: -np.inf for name in SUMMARY_ROWS}
    mins = {name: np.inf for name in SUMMARY_ROWS}
    n_rows = 0
    seqs: set[int] = set()
    chunks = []
    for k, f in found["files"].items():
        df = pq.read_table(f, columns=["seq", "category", "layer", *SUMMARY_ROWS]).to_pandas()
        chunks.append(k)
        first, n_seq = k * meta["chunk_size"], _expected_stamp(meta, k)["n_seq"]
        ids = df["seq"].unique()
        if len(ids) != n_seq or ids.min() != first or ids.max() != first + n_seq - 1:
            raise ValueError(f"{f.name} holds sequences other than its stamp says ({first}..{first + n_seq - 1}); "
                             "the file was changed after it was written; remove it and run stream-mixing again.")
        seqs.update(ids.tolist())
        n_rows += len(df)
        for name in SUMMARY_ROWS:
            v = df[name].to_numpy(dtype=np.float64)
            sums[name] += float(v.sum())
            maxs[name] = max(maxs[name], float(v.max()))
            mins[name] = min(mins[name], float(v.min()))
        by_cat = df.groupby(["layer", "seq", "category"])["ratio"].mean().rename("mean").reset_index()
        overall = df.groupby(["layer", "seq"])["ratio"].mean().rename("mean").reset_index().assign(category=OVERALL)
        per_seq.append(pd.concat([by_cat, overall], ignore_index=True))
    scale = 100.0 if percent else 1.0
    ps = pd.concat(per_seq, ignore_index=True)
    table = ps.groupby(["layer", "category"])["mean"].mean().unstack("category") * scale
    table = table.reindex(columns=[OVERALL, *CATEGORY_ORDER])
    table.index = table.index.astype(int)
    table.index.name = "layer"
    table.columns.name = "category"
    summary = pd.DataFrame({RATIO_METRICS[k]: {"mean": sums[k] / n_rows, "max": maxs[k], "min": mins[k]} for k in SUMMARY_ROWS}).T
    summary = summary[["mean", "max", "min"]] * scale
    summary.index.name = "variant"
    coverage = {"texts_merged": len(seqs), "texts_in_file": meta["n_texts"], "chunks_missing": found["missing"]}
    return {"table": table, "summary": summary, "model": meta["model"], "n_sequences": len(seqs), "chunks": chunks,
            "partial": found["partial"], "coverage": coverage}
