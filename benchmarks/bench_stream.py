"""Benchmark of streaming analysis A (``mixlib.stream``): throughput, and memory that does not grow with the corpus.

1. Throughput: sequences per second of ``stream_mixing`` on a random-init BERT
   with bert-base dimensions (12 layers, 12 heads, d = 768), the book's sentence
   pairs (27-96 tokens), chunks of 64.
2. Memory: the peak resident set of a fresh process that streams 1,000 and then
   10,000 sequences (a small random-init BERT, so that 10,000 sequences take
   seconds; memory per chunk does not depend on how many chunks follow). The
   peak should be the same for both corpus sizes.

Ratios and figures are printed, never asserted. Run::

    .venv/bin/python benchmarks/bench_stream.py            # both parts
    .venv/bin/python benchmarks/bench_stream.py --quick    # smaller throughput run
"""

from __future__ import annotations

import argparse
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


def run_one(n: int, layers: int, heads: int, d: int, chunk: int) -> dict:
    from mixlib.stream import stream_mixing

    enc = make_encoder(layers, heads, d)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        write_corpus(corpus, n)
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t0 = time.perf_counter()
        res = stream_mixing(enc, corpus, Path(tmp) / "out", chunk_size=chunk, progress=False)
        secs = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in (Path(tmp) / "out").glob("*.parquet"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"n": res.n_sequences, "seconds": secs, "peak_mib": peak, "growth_mib": peak - base, "parquet_mib": size / 2**20}


def child(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--one", *args], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--one", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        n, layers, heads, d, chunk = map(int, args.one)
        print(json.dumps(run_one(n, layers, heads, d, chunk)))
        return 0
    n_tp = 64 if args.quick else 256
    tp = child(str(n_tp), "12", "12", "768", "64")
    print(f"throughput (bert-base dimensions, {tp['n']} sentence pairs, chunks of 64): {tp['n'] / tp['seconds']:.2f} sequences/s "
          f"({tp['seconds']:.1f} s; Parquet {tp['parquet_mib'] / tp['n'] * 1000:.1f} MiB per 1,000 sequences)")
    small = {n: child(str(n), "2", "4", "64", "256") for n in (1000, 10000)}
    for n, r in small.items():
        print(f"memory (random BERT 2 x 4 x 64, chunks of 256): {n:>6} sequences -> peak RSS {r['peak_mib']:.0f} MiB "
              f"(+{r['growth_mib']:.0f} MiB over the set-up), {r['n'] / r['seconds']:.0f} sequences/s")
    ratio = small[10000]["peak_mib"] / small[1000]["peak_mib"]
    print(f"peak RSS 10,000 / 1,000 sequences: {ratio:.3f}x (constant memory means about 1.0x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
