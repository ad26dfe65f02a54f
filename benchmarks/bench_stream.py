"""Benchmark of streaming analysis A (``mixlib.stream``): throughput, and memory that does not grow with the corpus.

1. Throughput: sequences per second of ``stream_mixing`` on a random-init BERT
   with bert-base dimensions (12 layers, 12 heads, d = 768), the book's sentence
   pairs (27-96 tokens), chunks of 64.
2. Memory: the peak resident set of a fresh process that streams 1,000 and then
   10,000 sequences (a small random-init BERT, so that 10,000 sequences take
   seconds; memory per chunk does not depend on how many chunks follow). The
   peak should be the same for both corpus sizes.
3. The Ray engine (``--engine ray``, issue 27; skipped without Ray): the same
   texts through a local cluster with 2 workers of 1 CPU each, against the
   single-process stream with 2 threads, on the same cores (goal: at most 25%
   slower). The cluster is started before the clock starts, as a running
   cluster would be; its start-up time is printed apart. Then the driver's
   peak resident set for 1,000 and 10,000 sequences (goal: within 1.2x).
4. A long line (issue 53): the peak resident set of ``stream-mixing`` (the packaged model) on 200 sentence pairs,
   and on the same file with one 6.4 MB line of words in the middle (goal: within 1.2x: memory follows the chunk
   and ``--max-length``, not the longest line; before issue 53 such a line cost about 830 MiB more).

Ratios and figures are printed, never asserted. Run::

    .venv/bin/python benchmarks/bench_stream.py            # both parts
    .venv/bin/python benchmarks/bench_stream.py --quick    # smaller throughput run
    .venv/bin/python benchmarks/bench_stream.py --ray-only # part 3 only
    .venv/bin/python benchmarks/bench_stream.py --long-line-only # part 4 only
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mixing import make_encoder  # noqa: E402


def write_corpus(path: Path, n: int) -> None:
    from mixlib.widgets import load_sentence_pairs

    pairs = load_sentence_pairs()
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            a, b = pairs[i % len(pairs)]
            fh.write(f"{a}\t{b}\n")


def run_one(n: int, layers: int, heads: int, d: int, chunk: int, engine: str = "stream") -> dict:
    """One streaming run in this process: ``engine`` "stream" (2 threads) or "ray" (a local cluster, 2 workers)."""
    from mixlib.models import load_encoder
    from mixlib.stream import stream_mixing

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "model"  # a folder every worker can load the same random model from
        enc = make_encoder(layers, heads, d)
        enc.model.save_pretrained(model_dir)
        enc.tokenizer.save_pretrained(model_dir)
        enc = load_encoder(model_dir, device="cpu")
        corpus = Path(tmp) / "corpus.txt"
        write_corpus(corpus, n)
        startup = 0.0
        if engine == "ray":
            import ray

            t0 = time.perf_counter()
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
            startup = time.perf_counter() - t0
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t0 = time.perf_counter()
        if engine == "ray":
            from mixlib.stream_ray import stream_mixing_ray

            res = stream_mixing_ray(enc, corpus, Path(tmp) / "out", chunk_size=chunk, workers=2)
        else:
            import torch

            torch.set_num_threads(2)
            res = stream_mixing(enc, corpus, Path(tmp) / "out", chunk_size=chunk, progress=False)
        secs = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in (Path(tmp) / "out").glob("*.parquet"))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        if engine == "ray":
            ray.shutdown()
    return {"n": res.n_sequences, "seconds": secs, "peak_mib": peak, "growth_mib": peak - base, "parquet_mib": size / 2**20,
            "startup": startup}


def run_long(chars: int) -> dict:
    """``python -m mixlib stream-mixing`` in this process on 200 pairs, with one line of ``chars`` characters (0: none)."""
    import random

    from mixlib.cli import main as cli

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        write_corpus(corpus, 200)
        if chars:
            rng = random.Random(0)
            words = ["the", "cat", "sat", "on", "mat", "paris", "capital", "running", "unbelievable", "x"]
            lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)
            big = " ".join(rng.choice(words) for _ in range(chars // 5 + 1))[:chars]
            corpus.write_text("".join(lines[:100]) + big + "\tA short partner.\n" + "".join(lines[100:]), encoding="utf-8")
        t0 = time.perf_counter()
        rc = cli(["stream-mixing", "--model", "all-MiniLM-L6-v2", "--device", "cpu", "--texts", str(corpus),
                  "--out", str(Path(tmp) / "out")])
        secs = time.perf_counter() - t0
    return {"rc": rc, "seconds": secs, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def child(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--one", *args], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ray-only", action="store_true", help="only part 3 (the Ray engine)")
    ap.add_argument("--long-line-only", action="store_true", help="only part 4 (a 6.4 MB line)")
    ap.add_argument("--one", nargs=6, help=argparse.SUPPRESS)
    ap.add_argument("--one-long", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one_long is not None:
        print(json.dumps(run_long(args.one_long)))
        return 0
    if args.long_line_only or not args.ray_only:
        runs = {chars: json.loads(subprocess.run([sys.executable, __file__, "--one-long", str(chars)], capture_output=True,
                                                 text=True, check=True).stdout.strip().splitlines()[-1])
                for chars in (0, 6_400_000)}
        assert all(r["rc"] == 0 for r in runs.values()), runs
        print(f"a long line (stream-mixing, packaged model, 200 pairs): peak RSS {runs[0]['peak_mib']:.0f} MiB without, "
              f"{runs[6_400_000]['peak_mib']:.0f} MiB with one 6.4 MB line ({runs[0]['seconds']:.1f} s, "
              f"{runs[6_400_000]['seconds']:.1f} s): {runs[6_400_000]['peak_mib'] / runs[0]['peak_mib']:.3f}x (goal <= 1.2x)")
        if args.long_line_only:
            return 0
    if args.one:
        n, layers, heads, d, chunk = map(int, args.one[:5])
        print(json.dumps(run_one(n, layers, heads, d, chunk, args.one[5])))
        return 0
    n_tp = 64 if args.quick else 256
    if not args.ray_only:
        tp = child(str(n_tp), "12", "12", "768", "64", "stream")
        print(f"throughput (bert-base dimensions, {tp['n']} sentence pairs, chunks of 64): {tp['n'] / tp['seconds']:.2f} sequences/s "
              f"({tp['seconds']:.1f} s; Parquet {tp['parquet_mib'] / tp['n'] * 1000:.1f} MiB per 1,000 sequences)")
        small = {n: child(str(n), "2", "4", "64", "256", "stream") for n in (1000, 10000)}
        for n, r in small.items():
            print(f"memory (random BERT 2 x 4 x 64, chunks of 256): {n:>6} sequences -> peak RSS {r['peak_mib']:.0f} MiB "
                  f"(+{r['growth_mib']:.0f} MiB over the set-up), {r['n'] / r['seconds']:.0f} sequences/s")
        ratio = small[10000]["peak_mib"] / small[1000]["peak_mib"]
        print(f"peak RSS 10,000 / 1,000 sequences: {ratio:.3f}x (constant memory means about 1.0x)")
    if importlib.util.find_spec("ray") is None:
        print('the Ray engine: not measured (pip install "mixlib[ray]")')
        return 0
    n_ray = 4 * n_tp  # a corpus, not a handful: the workers' start-up (about 8 s here) is paid once per run
    one = child(str(n_ray), "12", "12", "768", "64", "stream")
    two = child(str(n_ray), "12", "12", "768", "64", "ray")
    print(f"\nRay engine (bert-base dimensions, {n_ray} sentence pairs, chunks of 64, the same 2 cores): "
          f"stream (1 process, 2 threads) {one['n'] / one['seconds']:.2f} sequences/s ({one['seconds']:.1f} s); "
          f"Ray (2 workers x 1 CPU) {two['n'] / two['seconds']:.2f} sequences/s ({two['seconds']:.1f} s, workers' model "
          f"loading included; the local cluster's start-up {two['startup']:.1f} s apart)")
    print(f"  Ray / stream wall time: {two['seconds'] / one['seconds']:.3f}x (goal <= 1.25x)")
    drv = {n: child(str(n), "2", "4", "64", "256", "ray") for n in (1000, 10000)}
    for n, r in drv.items():
        print(f"  driver memory (random BERT 2 x 4 x 64, chunks of 256): {n:>6} sequences -> peak RSS {r['peak_mib']:.0f} MiB "
              f"(+{r['growth_mib']:.0f} MiB during the run)")
    print(f"  driver peak RSS 10,000 / 1,000 sequences: {drv[10000]['peak_mib'] / drv[1000]['peak_mib']:.3f}x (goal <= 1.2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
