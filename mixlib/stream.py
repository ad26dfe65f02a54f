"""Analysis A at corpus scale: stream a text file through :func:`mixlib.decompose` into Parquet.

``python -m mixlib mixing`` holds every sequence in memory; this module does
not. :func:`stream_mixing` reads a text file of any size lazily, in chunks of
``chunk_size`` texts, and writes one Parquet file per chunk (per-token rows:
sequence id, position, token, category, layer, the five ratios and the eight
norms of :class:`mixlib.Mixing`). Memory stays that of one chunk.

* **Resume**: a chunk whose file is already there (and readable) is skipped, so
  a run that was interrupted continues where it stopped. Files are written to
  a temporary name and renamed, so a chunk file is whole or absent.
* **Shards**: ``shard=(i, n)`` processes chunks ``k`` with ``k % n == i``, so n
  machines (a job array under any scheduler) split one corpus with no
  coordination; they may write into the same folder.
* **Reproducible masking**: sequence ``s`` (its 0-based number in the file) is
  masked with the random stream ``(seed, s)`` (:func:`mixlib.mask_tokens`
  with ``first_index``), so chunking, sharding and resuming never change which
  tokens are masked.
* **Merge**: :func:`merge_mixing` reads the chunk files one at a time and
  computes the paper's tables exactly as :func:`mixlib.mixing_table` and
  :func:`mixlib.mixing_summary` do on one in-memory run.

The options of a run are recorded in ``stream.json`` in the output folder; a
later run (resume or another shard) with different options is refused.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .texts import header_default, iter_texts

__all__ = ["stream_mixing", "merge_mixing", "StreamResult", "parse_shard"]

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


def _chunks(path: Any, chunk_size: int, header: bool | None) -> Iterator[tuple[int, int, list, list[int]]]:
    """(chunk index, first sequence id, texts, their line numbers) for every chunk of the file."""
    buf: list = []
    lines: list[int] = []
    k = 0
    for lineno, text in iter_texts(path, header=header):
        buf.append(text)
        lines.append(lineno)
        if len(buf) == chunk_size:
            yield k, k * chunk_size, buf, lines
            buf, lines, k = [], [], k + 1
    if buf:
        yield k, k * chunk_size, buf, lines


def _at_line(err: ValueError, path: Any, lines: list[int]) -> ValueError:
    """A library error that names ``texts[j]`` (its place in the chunk), renamed to the file's line."""
    match = re.match(r"texts\[(\d+)\]", str(err))
    if not match or int(match.group(1)) >= len(lines):
        return err
    return ValueError(f"{path}, line {lines[int(match.group(1))]}:" + str(err)[match.end():])


def _chunk_file(out: Path, k: int) -> Path:
    return out / f"chunk-{k:07d}.parquet"


def _readable(path: Path) -> bool:
    pq = _need_pyarrow()
    try:
        pq.read_metadata(path)
    except Exception:  # noqa: BLE001 - any unreadable file is rewritten
        return False
    return True


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


def _write_parquet(path: Path, cols: dict[str, np.ndarray]) -> None:
    import pyarrow as pa

    pq = _need_pyarrow()
    table = pa.table({k: pa.array(v.tolist() if v.dtype == object else v) for k, v in cols.items()})
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _check_meta(out: Path, meta: dict) -> None:
    p = out / META
    if p.exists():
        try:
            old = json.loads(p.read_text(encoding="utf-8"))
        except ValueError:
            raise ValueError(f"{p} is not valid JSON; remove it (and the chunk files) to start over.") from None
        diff = {k: (old.get(k), v) for k, v in meta.items() if old.get(k) != v}
        if diff:
            raise ValueError(f"{out} holds a run with other options {diff} (recorded, given); use another --out folder.")
        return
    fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{META}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(meta, fh, ensure_ascii=False, indent=1)
    os.replace(tmp, p)


@dataclass(frozen=True)
class StreamResult:
    """What one :func:`stream_mixing` call did."""

    out: Path
    written: tuple[int, ...]  # chunk indices computed now
    skipped: tuple[int, ...]  # chunk indices already there (resume)
    n_sequences: int  # sequences in the chunks written now


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
    progress: bool | None = None,
) -> StreamResult:
    """Decompose every text of a file, chunk by chunk, into Parquet files (see the module docstring).

    Parameters
    ----------
    enc : mixlib.Encoder
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
    progress : bool or None
        tqdm bar over chunks; None shows it when stderr is a terminal.

    Returns
    -------
    StreamResult
    """
    from .data import mask_tokens
    from .mixing import decompose

    _need_pyarrow()
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size!r}; give a positive int.")
    i, n = parse_shard(shard) if isinstance(shard, str) else parse_shard(f"{shard[0]}/{shard[1]}")
    if header is None:
        header = header_default(texts)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"model": enc.name, "texts": Path(texts).name, "chunk_size": int(chunk_size), "rate": float(rate), "seed": int(seed),
            "count": count, "max_length": int(max_length), "header": bool(header), "fields": list(FIELDS)}
    _check_meta(out, meta)
    for stale in out.glob(".chunk-*.tmp"):  # a killed writer's leftovers
        stale.unlink(missing_ok=True)
    from tqdm.auto import tqdm
    import sys

    bar = tqdm(desc=f"mixing ({enc.name}, shard {i}/{n})", unit="chunk",
               disable=not (progress if progress is not None else sys.stderr.isatty()))
    written, skipped, n_seq = [], [], 0
    try:
        for k, first, chunk, lines in _chunks(texts, int(chunk_size), header):
            if k % n != i:
                continue
            path = _chunk_file(out, k)
            if path.exists() and _readable(path):
                skipped.append(k)
                bar.update(1)
                continue
            try:
                batch = mask_tokens(enc, chunk, rate=rate, seed=seed, max_length=max_length, count=count, first_index=first)
            except ValueError as err:
                raise _at_line(err, texts, lines) from None
            batch.pop("masked", None)
            m = decompose(enc, batch, batch_size=batch_size, vectors=False, progress=False)
            _write_parquet(path, _rows(m, first))
            written.append(k)
            n_seq += len(chunk)
            bar.update(1)
    finally:
        bar.close()
    return StreamResult(out=out, written=tuple(written), skipped=tuple(skipped), n_sequences=n_seq)


def merge_mixing(out: str | os.PathLike, *, percent: bool = True) -> dict[str, Any]:
    """The paper's tables from the chunk files of :func:`stream_mixing`, one file in memory at a time.

    Returns
    -------
    dict
        ``table``: per layer and category, the per-sequence category means of
        AttnResLn-N averaged over sequences (as :func:`mixlib.mixing_table`);
        ``summary``: mean/max/min of the five ratios over all tokens and
        layers (as :func:`mixlib.mixing_summary`); ``model``; ``n_sequences``;
        ``chunks`` (the chunk indices found).

    Raises
    ------
    ValueError
        No chunk files, or ``stream.json`` missing.
    """
    import pandas as pd

    from .mixing import OVERALL, RATIO_METRICS, SUMMARY_ROWS
    from .plots import CATEGORY_ORDER

    pq = _need_pyarrow()
    out = Path(out)
    meta_path = out / META
    if not meta_path.exists():
        raise ValueError(f"{out} has no {META}: it is not the output folder of `python -m mixlib stream-mixing`.")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    files = sorted(out.glob("chunk-*.parquet"))
    if not files:
        raise ValueError(f"{out} holds no chunk-*.parquet files yet; run the streaming command first.")
    per_seq = []  # (layer, seq, category) sums and counts of the ratio
    sums = {name: 0.0 for name in SUMMARY_ROWS}
    maxs = {name: -np.inf for name in SUMMARY_ROWS}
    mins = {name: np.inf for name in SUMMARY_ROWS}
    n_rows = 0
    seqs: set[int] = set()
    chunks = []
    for f in files:
        df = pq.read_table(f, columns=["seq", "category", "layer", *SUMMARY_ROWS]).to_pandas()
        chunks.append(int(f.stem.split("-")[1]))
        seqs.update(df["seq"].unique().tolist())
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
    return {"table": table, "summary": summary, "model": meta["model"], "n_sequences": len(seqs), "chunks": chunks}
