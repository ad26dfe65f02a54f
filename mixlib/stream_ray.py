"""Analysis A on a Ray cluster: the chunks of :func:`mixlib.stream.stream_mixing` as a Ray Data pipeline.

``python -m mixlib stream-mixing --engine ray`` (``pip install "mixlib[ray]"``)
computes exactly what the single-process stream computes, chunk by chunk, into
the same folder layout and Parquet schema, so ``merge`` (and pyarrow, DuckDB,
polars datasets) read either. What Ray adds is the scheduling:

* **An actor pool** (``Dataset.map_batches`` with a callable class): each
  worker loads the model once, checks that its weights are the driver's
  (the SHA-256 in ``stream.json``), and then mixes whole chunks, one per
  call. ``num_gpus`` per worker places workers on GPUs; ``workers`` sets the
  pool's size.
* **Failed workers**: a worker that dies is restarted and its chunk is
  retried (Ray Data's actor pools do so by default). A chunk's file is written
  to a temporary name and renamed, so a retried chunk replaces nothing half
  written and adds no second copy: every row is there exactly once.
* **Resume**: chunks whose files are already there (stamped by this run) are
  not sent to the cluster at all; a re-run after a failure does only what is
  missing.
* **The driver stays small**: it reads the text file lazily (checking each
  chunk against the digests of the first pass, as the stream does) and
  stages each chunk's texts as a small JSON file under ``.ray-input/`` in the
  output folder, so the dataset holds only chunk numbers. The output folder
  must be one all workers see (a shared file system on a real cluster), as
  for ``--shard`` runs.

An unreachable ``address`` is a ``ConnectionError`` within
:data:`CONNECT_TIMEOUT_S` seconds (the TCP port is tried before Ray is asked),
never a silent fallback to one process.
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from typing import Any

import numpy as np

from .paths import follow_umask
from .stream import (StreamResult, _check_meta, _remove_dead_writers_files, chunk_done, mix_chunk, parse_shard,
                     run_record, shard_chunks, weights_digest, writer_lock)

__all__ = ["stream_mixing_ray", "need_ray", "check_address", "RAY_EXTRA"]

RAY_EXTRA = 'pip install "mixlib[ray]"'
#: Seconds to wait for a cluster's port before giving up.
CONNECT_TIMEOUT_S = 20.0
STAGING = ".ray-input"


def need_ray() -> Any:
    """The ``ray`` module with Ray Data; an ImportError naming the extra when it is not installed."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise ImportError(f"--engine ray needs Ray Data, which is not installed here: {RAY_EXTRA}") from None
    return ray


def check_address(address: str | None, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Fail fast, in one line, when ``address`` (``host:port`` or ``ray://host:port``) does not answer.

    ``None`` (a local cluster started for this run) and ``"auto"`` (Ray's own lookup of a running cluster,
    which fails at once when there is none) are not tried here.
    """
    if address is None or address == "auto":
        return
    m = re.fullmatch(r"(?:ray://)?(\[[^\]]+\]|[^:/\s]+):(\d{1,5})", address)
    if not m:
        raise ValueError(f"--address {address!r} is not host:port, ray://host:port or auto.")
    host, port = m.group(1).strip("[]"), int(m.group(2))
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as err:
        raise ConnectionError(f"no Ray cluster answers at {address} ({err.strerror or type(err).__name__}); start one "
                              "with `ray start --head` there, or give the address it prints.") from None


class _ChunkWorker:
    """One actor of the pool: loads the model once, then mixes whole chunks (Ray Data's callable class)."""

    def __init__(self, model: str, device: str, meta: dict[str, Any], texts: str, out: str, batch_size: int,
                 threads: int) -> None:
        import torch

        from .models import load_encoder

        torch.set_num_threads(max(1, threads))
        self.enc = load_encoder(model, fallback=False, device=device)
        if weights_digest(self.enc.model) != meta["weights_sha256"]:
            raise RuntimeError(f"the worker on {socket.gethostname()} loaded {model!r} with weights other than the "
                               "driver's (stream.json's weights_sha256): every machine must see the same model files.")
        self.meta, self.texts, self.out, self.batch_size = meta, texts, Path(out), batch_size

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        done, n_seq = [], []
        for k in batch["chunk"].tolist():
            staged = json.loads((self.out / STAGING / f"chunk-{k:07d}.json").read_text(encoding="utf-8"))
            texts = [tuple(t) if isinstance(t, list) else t for t in staged["texts"]]
            if not chunk_done(self.out, self.meta, k):  # a retried chunk whose file a dead worker finished
                mix_chunk(self.enc, self.texts, self.out, self.meta, k, texts, staged["lines"], self.batch_size)
            done.append(k)
            n_seq.append(len(texts))
        return {"chunk": np.asarray(done, dtype=np.int64), "n_seq": np.asarray(n_seq, dtype=np.int64)}


def _stage(out: Path, k: int, texts: list, lines: list[int]) -> None:
    """Chunk k's texts for the workers, written whole or not at all."""
    path = out / STAGING / f"chunk-{k:07d}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"texts": texts, "lines": lines}, ensure_ascii=False), encoding="utf-8")
    follow_umask(tmp)
    os.replace(tmp, path)


def _model_spec(enc: Any) -> str:
    """What a worker passes to :func:`mixlib.load_encoder` to load the driver's model (never a fallback)."""
    return str(enc.requested) if enc.source == "local" else enc.name


def stream_mixing_ray(
    enc: Any,
    texts: str | os.PathLike,
    out: str | os.PathLike,
    *,
    address: str | None = None,
    workers: int = 2,
    cpus_per_worker: int = 1,
    gpus_per_worker: float = 0.0,
    chunk_size: int = 256,
    shard: tuple[int, int] | str = (0, 1),
    rate: float = 0.12,
    seed: int = 0,
    count: str = "floor",
    max_length: int = 128,
    batch_size: int = 32,
    header: bool | None = None,
    keep_special_tokens: bool = False,
) -> StreamResult:
    """:func:`mixlib.stream.stream_mixing` on Ray Data: the same chunk files, computed by a pool of workers.

    Parameters
    ----------
    enc : mixlib.Encoder
        The driver's model: recorded in ``stream.json``; each worker loads the same one (a hub id, the
        packaged model, or a local folder every machine sees) and checks its weights against it.
    address : str, optional
        A running cluster (``host:port``, ``ray://host:port`` or ``"auto"``); default: a local cluster started
        for this call and stopped after it. Unreachable: ``ConnectionError`` within :data:`CONNECT_TIMEOUT_S`.
    workers, cpus_per_worker, gpus_per_worker
        The actor pool: its size and each actor's resources (a worker with a GPU runs the model on CUDA).
    chunk_size, shard, rate, seed, count, max_length, batch_size, header, keep_special_tokens
        As for :func:`mixlib.stream.stream_mixing` (the same record, so a Ray run and a stream run of the same
        options resume each other's folders).

    Returns
    -------
    StreamResult
    """
    ray = need_ray()
    for name, value, low in (("workers", workers, 1), ("cpus_per_worker", cpus_per_worker, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name}={value!r}; give an int >= {low}.")
    if not 0 <= float(gpus_per_worker):
        raise ValueError(f"gpus_per_worker={gpus_per_worker!r}; give a number >= 0.")
    check_address(address)
    i, n = parse_shard(shard) if isinstance(shard, str) else parse_shard(f"{shard[0]}/{shard[1]}")
    meta, marks = run_record(enc, texts, chunk_size=chunk_size, rate=rate, seed=seed, count=count,
                             max_length=max_length, header=header, keep_special_tokens=keep_special_tokens)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with writer_lock(out, (i, n)):
        _check_meta(out, meta, (i, n))
        _remove_dead_writers_files(out)
        (out / STAGING).mkdir(exist_ok=True)
        todo, skipped, sizes = [], [], {}
        for k, chunk, lines in shard_chunks(texts, meta, marks, (i, n)):
            if chunk_done(out, meta, k):
                skipped.append(k)
                continue
            _stage(out, k, chunk, lines)
            todo.append(k)
            sizes[k] = len(chunk)
        if todo:
            _run_pool(ray, enc, meta, texts, out, todo, address=address, workers=int(workers),
                      cpus=int(cpus_per_worker), gpus=float(gpus_per_worker), batch_size=batch_size)
        _remove_dead_writers_files(out)  # a killed worker's temporary file (its chunk was retried)
        missing = [k for k in todo if not chunk_done(out, meta, k)]
        if missing:  # pragma: no cover - Ray returned without error, yet a chunk file is not there
            raise RuntimeError(f"the Ray run ended without chunk files {missing[:5]}; run it again to compute them.")
        for k in todo:
            (out / STAGING / f"chunk-{k:07d}.json").unlink(missing_ok=True)
    return StreamResult(out=out, written=tuple(todo), skipped=tuple(skipped), n_sequences=sum(sizes.values()))


def _run_pool(ray: Any, enc: Any, meta: dict[str, Any], texts: Any, out: Path, todo: list[int], *, address: str | None,
              workers: int, cpus: int, gpus: float, batch_size: int) -> None:
    """Send the chunks ``todo`` through the actor pool; return when every one is written (or raise)."""
    started = not ray.is_initialized()
    if started:
        if address is None:
            ray.init(num_cpus=max(os.cpu_count() or 1, workers * cpus), include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
        else:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        device = "cuda" if gpus > 0 else "cpu"
        ds = ray.data.from_items([{"chunk": k} for k in todo], override_num_blocks=len(todo))
        # Ray Data's actor pools restart a dead actor and retry its call (max_restarts = max_task_retries = -1)
        ds = ds.map_batches(
            _ChunkWorker, batch_size=1, batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=workers),
            num_cpus=cpus, num_gpus=gpus or None,
            fn_constructor_kwargs={"model": _model_spec(enc), "device": device, "meta": meta, "texts": str(texts),
                                   "out": str(out), "batch_size": int(batch_size), "threads": cpus})
        for _ in ds.iter_batches(batch_size=None):
            pass
    finally:
        if started:
            ray.shutdown()
