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
  retried, up to :data:`MAX_RETRIES` times (a chunk that kills every
  worker it is given fails the run instead of looping). A chunk's file is written
  to a temporary name and renamed, so a retried chunk replaces nothing half
  written and adds no second copy: every row is there exactly once.
* **Resume**: chunks whose files are already there (stamped by this run) are
  not sent to the cluster at all; a re-run after a failure does only what is
  missing.
* **The driver stays small**: it reads the text file lazily (checking each
  chunk against the digests of the first pass, as the stream does) and
  stages each chunk's texts as a small JSON file under
  ``.ray-input/<host>~<pid>/`` in the output folder, so the dataset holds
  only chunk numbers; it is removed when the run ends, and a killed driver's
  is removed by the next run of either engine on that machine. The output folder
  must be one all workers see (a shared file system on a real cluster), as
  for ``--shard`` runs.

An unreachable ``address`` (or ``$RAY_ADDRESS``) is a ``ConnectionError``
within :data:`CONNECT_TIMEOUT_S` seconds (the TCP port is tried before Ray is
asked), never a silent fallback to one process; a pool larger than the
cluster is a ValueError at once (Ray would wait for it for ever); an error in
a worker (a bad text, other model files, another mixlib) reaches the caller
as the ValueError or OSError it was, not as Ray's wrapper. Paths are made
absolute, and the model cache's and mixlib's environment variables
(:func:`forwarded_env`: ``MIXLIB_*`` and the model cache's) are passed to the workers.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import re
import socket
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .paths import follow_umask
from .stream import (STAGING, StreamResult, _check_meta, _remove_dead_writers_files, _tmp_owner, chunk_done, folder_lock,
                     mix_chunk, parse_shard, run_record, shard_chunks, weights_digest, writer_lock)

__all__ = ["stream_mixing_ray", "need_ray", "check_address", "RAY_EXTRA"]

RAY_EXTRA = 'pip install "mixlib[ray]"'
#: Seconds to wait for a cluster's port before giving up.
CONNECT_TIMEOUT_S = 20.0
#: Restarts of a worker, and retries of one chunk, before the run fails (a chunk that kills every worker
#: it is given, e.g. out of memory, must not loop for ever).
MAX_RETRIES = 3
#: Environment variables the workers get from the driver: the model cache and offline mode, and every
#: ``MIXLIB_*`` variable (:func:`forwarded_env`).
FORWARDED_ENV = ("HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def forwarded_env(environ: Any = None) -> dict[str, str]:
    """What the workers get of the driver's environment: :data:`FORWARDED_ENV` and every ``MIXLIB_*`` variable."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if k in FORWARDED_ENV or k.startswith("MIXLIB_")}


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

    def __init__(self, model: str, device: str, meta: dict[str, Any], texts: str, out: str, staging: str,
                 batch_size: int, threads: int, version: str) -> None:
        import torch

        from . import __version__
        from .models import load_encoder

        host = socket.gethostname()
        if __version__ != version:
            raise ValueError(f"the worker on {host} has mixlib {__version__}, the driver {version}: install the same "
                             "mixlib on every machine.")
        torch.set_num_threads(max(1, threads))
        self.enc = load_encoder(model, fallback=False, device=device)
        if weights_digest(self.enc.model) != meta["weights_sha256"]:
            raise ValueError(f"the worker on {host} loaded {model!r} with weights other than the driver's "
                             "(stream.json's weights_sha256): every machine must see the same model files.")
        self.meta, self.texts, self.out, self.staging, self.batch_size = meta, texts, Path(out), Path(staging), batch_size

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        done, n_seq = [], []
        for k in batch["chunk"].tolist():
            staged = json.loads((self.staging / f"chunk-{k:07d}.json").read_text(encoding="utf-8"))
            texts = [tuple(t) if isinstance(t, list) else t for t in staged["texts"]]
            if not chunk_done(self.out, self.meta, k):  # a retried chunk whose file a dead worker finished
                mix_chunk(self.enc, self.texts, self.out, self.meta, k, texts, staged["lines"], self.batch_size)
            done.append(k)
            n_seq.append(len(texts))
        return {"chunk": np.asarray(done, dtype=np.int64), "n_seq": np.asarray(n_seq, dtype=np.int64)}


def _stage(staging: Path, k: int, texts: list, lines: list[int]) -> None:
    """Chunk k's texts for the workers, written whole or not at all."""
    path = staging / f"chunk-{k:07d}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"texts": texts, "lines": lines}, ensure_ascii=False), encoding="utf-8")
    follow_umask(tmp)
    os.replace(tmp, path)


def _model_spec(enc: Any) -> str:
    """What a worker passes to :func:`mixlib.load_encoder` to load the driver's model (never a fallback)."""
    return str(Path(enc.requested).expanduser().resolve()) if enc.source == "local" else enc.name


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
    address = address or os.environ.get("RAY_ADDRESS") or None  # as `ray job submit` sets it
    check_address(address)
    i, n = parse_shard(shard) if isinstance(shard, str) else parse_shard(f"{shard[0]}/{shard[1]}")
    meta, marks = run_record(enc, texts, chunk_size=chunk_size, rate=rate, seed=seed, count=count,
                             max_length=max_length, header=header, keep_special_tokens=keep_special_tokens)
    out = Path(out).expanduser().resolve()  # the workers run elsewhere, in another directory
    with folder_lock(out), writer_lock(out, (i, n)):
        _check_meta(out, meta, (i, n))
        _remove_dead_writers_files(out)
        staging = out / STAGING / _tmp_owner()  # this driver's: a killed driver's is removed by the next run
        staging.mkdir(parents=True, exist_ok=True)
        todo, skipped, n_seq = [], [], 0
        try:
            for k, chunk, lines in shard_chunks(texts, meta, marks, (i, n)):
                if chunk_done(out, meta, k):
                    skipped.append(k)
                    continue
                _stage(staging, k, chunk, lines)
                todo.append(k)
                n_seq += len(chunk)
            if todo:
                _run_pool(ray, enc, meta, Path(texts).expanduser().resolve(), out, staging, todo, address=address,
                          workers=int(workers), cpus=int(cpus_per_worker), gpus=float(gpus_per_worker),
                          batch_size=batch_size)
        finally:  # staged texts are a copy, made again by a re-run: never left behind
            shutil.rmtree(staging, ignore_errors=True)
            with contextlib.suppress(OSError):
                (out / STAGING).rmdir()  # unless another driver's staging is in it
        _remove_dead_writers_files(out)  # a killed worker's temporary file (its chunk was retried), on this machine
        missing = [k for k in todo if not chunk_done(out, meta, k)]
        if missing:  # pragma: no cover - Ray returned without error, yet a chunk file is not there
            raise RuntimeError(f"the Ray run ended without chunk files {missing[:5]}; run it again to compute them.")
    return StreamResult(out=out, written=tuple(todo), skipped=tuple(skipped), n_sequences=n_seq)


def _run_pool(ray: Any, enc: Any, meta: dict[str, Any], texts: Path, out: Path, staging: Path, todo: list[int], *,
              address: str | None,
              workers: int, cpus: int, gpus: float, batch_size: int) -> None:
    """Send the chunks ``todo`` through the actor pool; return when every one is written, or raise the first
    worker's error itself (a bad text is a ValueError, as in the stream; not Ray's wrapper around it)."""
    import signal
    import threading

    from . import __version__

    started = not ray.is_initialized()
    if started:
        term = signal.getsignal(signal.SIGTERM)
        if address is None:
            ray.init(num_cpus=max(len(os.sched_getaffinity(0)), workers * cpus), include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
        else:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
        if term is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, term)  # ray.init installs its own: keep the CLI's (exit 143, one line)
    try:
        _check_resources(ray, workers, cpus, gpus)
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        env = forwarded_env()
        ds = ray.data.from_items([{"chunk": k} for k in todo], override_num_blocks=len(todo))
        with warnings.catch_warnings():  # ray_remote_args_fn: deprecated in 2.60, kept until 2.64 (pyproject's bound)
            warnings.simplefilter("ignore", DeprecationWarning)
            ds = ds.map_batches(
                _ChunkWorker, batch_size=1, batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=workers),
                num_cpus=cpus, num_gpus=gpus or None, runtime_env={"env_vars": env} if env else None,
                ray_remote_args_fn=lambda: {"max_restarts": MAX_RETRIES, "max_task_retries": MAX_RETRIES},
                fn_constructor_kwargs={"model": _model_spec(enc), "device": "cuda" if gpus > 0 else "cpu", "meta": meta,
                                       "texts": str(texts), "out": str(out), "staging": str(staging),
                                       "batch_size": int(batch_size),
                                       "threads": cpus, "version": __version__})
        try:
            for _ in ds.iter_batches(batch_size=None):
                pass
        except ray.exceptions.RayError as err:
            raise _original(err) from None
    finally:
        if started:
            ray.shutdown()


def _check_resources(ray: Any, workers: int, cpus: int, gpus: float) -> None:
    """The pool fits the cluster now: Ray would otherwise wait for its actors for ever, silently."""
    have = ray.cluster_resources()
    for what, need in (("CPU", workers * cpus), ("GPU", workers * gpus)):
        if need > have.get(what, 0):
            raise ValueError(f"the pool needs {need:g} {what}s ({workers} workers x {need / workers:g}) but the cluster "
                             f"has {have.get(what, 0):g}; give fewer --workers or fewer per worker.")


def _chain(err: BaseException) -> list[BaseException]:
    """An error and everything chained under it (``cause``, ``__cause__``, ``__context__``), each once."""
    out, todo = [], [err]
    while todo:
        e = todo.pop(0)
        if all(e is not x for x in out):
            out.append(e)
            todo += [x for x in (getattr(e, "cause", None), e.__cause__, e.__context__) if isinstance(x, BaseException)]
    return out


def _original(err: BaseException) -> BaseException:
    """The error a worker raised, from under Ray's wrappers (RayTaskError, ActorDiedError, Ray Data's own).

    An actor that died in its constructor carries only the text of the error, so a ValueError or OSError is
    recognised by its type where Ray kept it, else by its ``ValueError: ...`` line.
    """
    chain = _chain(err)
    for e in chain:
        if isinstance(e, (ValueError, OSError)) and not type(e).__module__.startswith("ray"):
            return type(e)(*e.args)
    found = re.findall(r"^(ValueError|OSError|FileNotFoundError|PermissionError): (.+)$", "\n".join(map(str, chain)),
                       flags=re.M)
    if found:
        kind, message = found[-1]
        return (ValueError if kind == "ValueError" else OSError)(message)
    return RuntimeError(f"a Ray worker failed: {err}")
