"""Benchmark of the token-to-token maps (``mixlib.context_maps``) against ``mixlib.decompose``.

On a random-init BERT with bert-base dimensions (12 layers, 12 heads, d = 768)
and 32 sequences x 128 tokens: the cost of all five maps relative to
``decompose`` (both time one forward pass plus their own work), and the peak
memory each takes, measured as the growth of this process's peak resident set
in a fresh subprocess per method (so one method's peak cannot hide another's).

Ratios are printed, never asserted. Run::

    .venv/bin/python benchmarks/bench_measures.py           # full size
    .venv/bin/python benchmarks/bench_measures.py --quick   # small model, seconds
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mixing import make_batch, make_encoder  # noqa: E402

SIZES = {"full": (12, 12, 768, 32, 128), "quick": (4, 4, 256, 8, 64)}


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_one(method: str, size: str) -> dict:
    """Run one method once in this process: wall time and peak-RSS growth over the set-up."""
    import mixlib

    L, H, D, B, N = SIZES[size]
    enc = make_encoder(L, H, D)
    batch = make_batch(enc, B, N)
    fn = {"decompose": lambda: mixlib.decompose(enc, batch, progress=False, vectors=False),
          "context_maps": lambda: mixlib.context_maps(enc, batch)}[method]
    base = _peak_mib()
    t0 = time.perf_counter()
    fn()
    return {"seconds": time.perf_counter() - t0, "peak_growth_mib": _peak_mib() - base}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--one", choices=["decompose", "context_maps"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    size = "quick" if args.quick else "full"
    if args.one:
        print(json.dumps(measure_one(args.one, size)))
        return 0
    L, H, D, B, N = SIZES[size]
    print(f"random-init BERT {L} layers x {H} heads x d={D}; {B} sequences x {N} tokens; one fresh process per run")
    res: dict[str, list[dict]] = {"decompose": [], "context_maps": []}
    for r in range(args.repeats):
        for method in res:  # interleaved
            cmd = [sys.executable, __file__, "--one", method] + (["--quick"] if args.quick else [])
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            res[method].append(json.loads(out))
        print(f"  repeat {r + 1}: " + ", ".join(f"{m} {v[-1]['seconds']:.2f}s, +{v[-1]['peak_growth_mib']:.0f} MiB" for m, v in res.items()))
    med = {m: statistics.median(x["seconds"] for x in v) for m, v in res.items()}
    mem = {m: statistics.median(x["peak_growth_mib"] for x in v) for m, v in res.items()}
    maps_mib = 5 * L * B * N * N * 4 / 2**20
    nnd_mib = B * N * N * D * 4 / 2**20
    print(f"median seconds: decompose {med['decompose']:.2f}, context_maps {med['context_maps']:.2f} "
          f"-> context_maps / decompose = {med['context_maps'] / med['decompose']:.2f}x")
    print(f"median peak-memory growth: decompose {mem['decompose']:.0f} MiB, context_maps {mem['context_maps']:.0f} MiB "
          f"(of which the five (L, B, N, N) results are {maps_mib:.0f} MiB; one whole-batch n x n x d tensor would be {nnd_mib:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
