"""mixlib.stream_ray: analysis A on a local Ray cluster equals the single-process stream and one in-memory run,
and survives a killed worker with every row exactly once (issue 27)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import mixlib
from mixlib import cli
from mixlib.stream import merge_mixing, stream_mixing
from mixlib.widgets import load_sentence_pairs

from conftest import make_random_encoder

ray = pytest.importorskip("ray", reason="the Ray extra (requirements.txt pins it for make test)")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    pairs = load_sentence_pairs(24)
    path = tmp_path_factory.mktemp("ray-corpus") / "texts.txt"
    path.write_text("".join(f"{a}\t{b}\n" for a, b in pairs), encoding="utf-8")
    return path, pairs


def _tables(out: Path) -> dict[str, pd.DataFrame]:
    import pyarrow.parquet as pq

    return {p.name: pq.read_table(p).to_pandas() for p in sorted(out.glob("chunk-*.parquet"))}


def _cmd(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _map_worker_pids() -> list[int]:
    """Processes of Ray Data's actor pool (their titles name the callable class)."""
    return [int(p.name) for p in Path("/proc").iterdir()
            if p.name.isdigit() and "MapWorker" in (cmd := _cmd(p)) and "_ChunkWorker" in cmd]


def test_ray_engine_equals_the_stream_and_survives_a_killed_worker(packaged_enc, corpus, tmp_path, capsys):
    path, pairs = corpus
    enc = packaged_enc
    one = tmp_path / "one"
    stream_mixing(enc, path, one, chunk_size=3, seed=2, progress=False)
    expected = _tables(one)
    assert len(expected) == 8

    # 1. the CLI starts a local cluster, runs 2 workers, stops the cluster; the chunk files equal the stream's
    out = tmp_path / "cli"
    argv = ["stream-mixing", "--model", "all-MiniLM-L6-v2", "--device", "cpu", "--texts", str(path), "--out", str(out),
            "--chunk-size", "3", "--seed", "2", "--engine", "ray", "--workers", "2"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert not ray.is_initialized()
    got = _tables(out)
    assert got.keys() == expected.keys()
    for name in expected:
        pd.testing.assert_frame_equal(got[name], expected[name], check_exact=False, atol=1e-5)
    merged = merge_mixing(out)
    m = mixlib.decompose(enc, mixlib.mask_tokens(enc, pairs, seed=2), vectors=False)
    pd.testing.assert_frame_equal(merged["table"], mixlib.mixing_table(m), check_exact=False, atol=1e-5, check_names=False)
    assert not (out / ".ray-input").exists() or not any((out / ".ray-input").iterdir())
    # a re-run finds every chunk there: nothing is sent to the cluster
    assert cli.main(argv) == 0
    assert "wrote 0 chunks" in capsys.readouterr().out

    # 2. a worker killed mid-run: its chunk is retried, every chunk file is there once, equal to the stream's
    from mixlib.stream_ray import stream_mixing_ray

    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        out = tmp_path / "killed"
        result: dict = {}
        run = threading.Thread(target=lambda: result.update(r=stream_mixing_ray(
            enc, path, out, chunk_size=3, seed=2, workers=2)), daemon=True)
        run.start()
        killed, deadline = [], time.monotonic() + 120
        while not killed and run.is_alive() and time.monotonic() < deadline:
            pids = _map_worker_pids()
            if len(pids) == 2 and any(out.glob("chunk-*.parquet")):  # both workers busy: each holds a chunk
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
                killed.append((pids, len(list(out.glob("chunk-*.parquet")))))
            time.sleep(0.02)
        run.join(timeout=240)
        assert not run.is_alive(), "the Ray run did not finish after its workers were killed"
        # a pool larger than the cluster is one line, not a wait for ever
        with pytest.raises(ValueError, match=r"the pool needs 5 CPUs .* the cluster has 3"):
            stream_mixing_ray(enc, path, tmp_path / "big", chunk_size=3, seed=2, workers=5)
        # a worker that loads other weights than the driver's (another machine's model files) fails, in one line
        model_dir = tmp_path / "model"
        tiny = make_random_encoder(seed=1)
        tiny.model.save_pretrained(model_dir)
        tiny.tokenizer.save_pretrained(model_dir)
        driver = mixlib.load_encoder(model_dir, device="cpu")
        make_random_encoder(seed=2).model.save_pretrained(model_dir)
        with pytest.raises(ValueError, match="weights other than the driver's"):
            stream_mixing_ray(driver, path, tmp_path / "other", chunk_size=12, workers=1)
    finally:
        ray.shutdown()
    for _ in range(50):  # nothing of the cluster is left running (its processes exit within seconds)
        left = [p.name for p in Path("/proc").iterdir() if p.name.isdigit()
                and _cmd(p).split(" ")[0].endswith(("raylet", "gcs_server"))]
        if not left:
            break
        time.sleep(0.2)
    assert not left, f"Ray processes still running after ray.shutdown(): {left}"
    assert killed and killed[0][1] < len(expected), f"no worker was killed mid-run: {killed}"
    assert result["r"].written == tuple(range(8))
    got = _tables(out)
    assert got.keys() == expected.keys()
    for name in expected:
        pd.testing.assert_frame_equal(got[name], expected[name], check_exact=False, atol=1e-5)
    assert not list(out.glob(".chunk-*.tmp"))
    assert merge_mixing(out)["n_sequences"] == len(pairs)


def test_ray_engine_errors_are_one_line(corpus, tmp_path, capsys, monkeypatch):
    """An unreachable cluster: exit 2 within 30 s, no fallback to one process; Ray not installed: names the extra."""
    path, _ = corpus
    base = ["stream-mixing", "--model", "all-MiniLM-L6-v2", "--device", "cpu", "--texts", str(path), "--engine", "ray"]
    t0 = time.monotonic()
    assert cli.main([*base, "--out", str(tmp_path / "a"), "--address", "127.0.0.1:9"]) == 2
    assert time.monotonic() - t0 < 30
    err = capsys.readouterr().err
    assert "no Ray cluster answers at 127.0.0.1:9" in err and "Traceback" not in err
    assert not list((tmp_path / "a").glob("chunk-*")) if (tmp_path / "a").exists() else True
    assert cli.main([*base, "--out", str(tmp_path / "b"), "--address", "not an address"]) == 2
    assert "is not host:port" in capsys.readouterr().err
    # RAY_ADDRESS (as `ray job submit` sets it) counts as --address: checked the same way, before any work
    from mixlib.stream_ray import stream_mixing_ray

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")
    with pytest.raises(ConnectionError, match="no Ray cluster answers at 127.0.0.1:9"):
        stream_mixing_ray(None, path, tmp_path / "d")
    monkeypatch.delenv("RAY_ADDRESS")
    monkeypatch.setitem(__import__("sys").modules, "ray", None)
    assert cli.main([*base, "--out", str(tmp_path / "c")]) == 2
    assert 'pip install "mixlib[ray]"' in capsys.readouterr().err


def test_slurm_array_script_runs_two_shards_through_bash(corpus, tmp_path):
    """mixlib/scripts/slurm_stream_mixing.sh as two array tasks (no Slurm: its variables set by hand); the merge
    equals one single-process stream, and a task run again resumes with nothing to do."""
    import subprocess
    import sys

    path, pairs = corpus
    script = Path(mixlib.__file__).parent / "scripts" / "slurm_stream_mixing.sh"
    out = tmp_path / "slurm"
    env = {**os.environ, "MIXLIB_PYTHON": sys.executable, "MIXLIB_SHARDS": "2", "SLURM_CPUS_PER_TASK": "1"}
    args = ["bash", str(script), str(path), str(out), "all-MiniLM-L6-v2", "--chunk-size", "5", "--device", "cpu"]
    for i, count in (("0", "2"), ("1", "2"), ("1", "1")):  # the last: task 1 submitted again on its own (--array=1)
        done = subprocess.run(args, env={**env, "SLURM_ARRAY_TASK_ID": i, "SLURM_ARRAY_TASK_COUNT": count},
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert f"shard {i}/2" in done.stdout
    assert "wrote 0 chunks" in done.stdout  # the re-run of task 1
    one = tmp_path / "one"
    stream_mixing(mixlib.load_encoder("all-MiniLM-L6-v2", device="cpu"), path, one, chunk_size=5, progress=False)
    pd.testing.assert_frame_equal(merge_mixing(out)["table"], merge_mixing(one)["table"])
    bad = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "not an array task" in bad.stderr
    no_n = {k: v for k, v in env.items() if k != "MIXLIB_SHARDS"}
    bad = subprocess.run(args, env={**no_n, "SLURM_ARRAY_TASK_ID": "0"}, capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "set MIXLIB_SHARDS" in bad.stderr
