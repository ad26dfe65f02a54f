"""Benchmark of the token-to-token maps (``mixlib.context_maps``) against ``mixlib.decompose(vectors=False)``.

Target (issue 26), on a random-init BERT with bert-base dimensions (12 layers,
12 heads, d = 768) at 16 x 128 and 32 x 128 tokens, 1 and 2 torch threads:
all five maps in at most 2x the time of ``decompose(vectors=False)`` (both run
one forward pass plus their own work), as the ratio of medians in one run
(interleaved repeats). A breakdown per map shows where the time goes (each
step of :mod:`mixlib.measures` timed in one extra call; "forward, hooks and the
rest" is what is left), and the peak memory of each method is measured in its
own process (:func:`bench_mixing.peak_rss_mb`).

Ratios are printed, never asserted. Run::

    .venv/bin/python benchmarks/bench_measures.py            # both sizes, 1 and 2 threads
    .venv/bin/python benchmarks/bench_measures.py --sizes 16x128 --threads 2 --repeats 3
    .venv/bin/python benchmarks/bench_measures.py --quick    # small model, seconds
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mixing import cpu_name, make_batch, make_encoder, peak_rss_mb  # noqa: E402

#: The steps of :mod:`mixlib.measures`, by the map (or check) they serve.
STAGES = {
    "T_{j,i}: the heads' products, one per sender": ("_contributions",),
    "attn_res_ln (residual, first LayerNorm)": ("_to_attn_res_ln",),
    "alti (L1 distances)": ("_alti",),
    "globenc (second LayerNorm)": ("_globenc",),
    "attention self-check": ("_check_attention",),
}
TARGET = 2.0


@contextlib.contextmanager
def stage_timers():
    """Accumulate wall seconds per step of :mod:`mixlib.measures` while inside."""
    from mixlib import measures

    spent: dict[str, float] = {}
    patched = []
    for names in STAGES.values():
        for name in names:
            fn = getattr(measures, name)

            def wrapper(*args, _fn=fn, _name=name, **kwargs):
                t0 = time.perf_counter()
                try:
                    return _fn(*args, **kwargs)
                finally:
                    spent[_name] = spent.get(_name, 0.0) + time.perf_counter() - t0

            setattr(measures, name, wrapper)
            patched.append((name, fn))
    try:
        yield spent
    finally:
        for name, fn in patched:
            setattr(measures, name, fn)


def run_size(enc, B: int, N: int, reps: int) -> float:
    """Interleaved repeats at one size; prints the ratio and the per-map breakdown; returns the ratio of medians."""
    import mixlib

    batch = make_batch(enc, B, N)
    print(f"\n== {B} sequences x {N} tokens, {torch.get_num_threads()} thread(s) ==")
    methods = {"decompose(vectors=False)": lambda: mixlib.decompose(enc, batch, progress=False, vectors=False),
               "context_maps": lambda: mixlib.context_maps(enc, batch)}
    for fn in methods.values():
        fn()  # warm-up
    wall: dict[str, list[float]] = {k: [] for k in methods}
    for _ in range(reps):
        for name, fn in methods.items():
            t0 = time.perf_counter()
            fn()
            wall[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in wall.items()}
    ratio = med["context_maps"] / med["decompose(vectors=False)"]
    ratio_min = min(wall["context_maps"]) / min(wall["decompose(vectors=False)"])
    print("median wall s: " + ", ".join(f"{k} {v:.3f}" for k, v in med.items()))
    print(f"  context_maps / decompose(vectors=False): {ratio:.3f}x median, {ratio_min:.3f}x minimum "
          f"(target <= {TARGET}x: {'met' if ratio <= TARGET else 'NOT MET'})")
    with stage_timers() as spent:
        t0 = time.perf_counter()
        mixlib.context_maps(enc, batch)
        total = time.perf_counter() - t0
    base = med["decompose(vectors=False)"]
    print(f"  breakdown of one context_maps ({total:.3f} s; decompose(vectors=False) median {base:.3f} s = 100%):")
    rows = {stage: sum(spent.get(n, 0.0) for n in names) for stage, names in STAGES.items()}
    rows["forward, hooks and the rest (f^h(x_i), copies, checks of the sums)"] = total - sum(rows.values())
    for stage, sec in rows.items():
        print(f"    {stage:<70} {sec:7.3f} s {100 * sec / base:6.1f}%")
    return ratio


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small model and batch (4 layers, d=256, 8 x 64 tokens)")
    ap.add_argument("--sizes", default="16x128,32x128", help="comma-separated SEQUENCESxTOKENS (default 16x128,32x128)")
    ap.add_argument("--threads", default="1,2", help="comma-separated torch thread counts (default 1,2)")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats (default 5; 3 with --quick)")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory measurement")
    args = ap.parse_args(argv)
    if args.quick:
        L, H, D, sizes, reps = 4, 4, 256, [(8, 64)], 3
    else:
        L, H, D, reps = 12, 12, 768, 5
        sizes = [tuple(int(x) for x in size.split("x")) for size in args.sizes.split(",")]
    reps = args.repeats or reps
    enc = make_encoder(L, H, D)
    print(f"model: {enc!r}; torch {torch.__version__}; CPU: {cpu_name()}")
    failed = []
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for B, N in sizes:
            ratio = run_size(enc, B, N, reps)
            if ratio > TARGET:
                failed.append(f"{B}x{N}, {threads} thread(s): {ratio:.3f}x")
    if not args.no_memory:
        print("\npeak memory above the loaded model (own process each, MiB):")
        for B, N in sizes:
            dec = peak_rss_mb("decompose", L, H, D, B, N, torch.get_num_threads())
            cm = peak_rss_mb("context_maps", L, H, D, B, N, torch.get_num_threads())
            maps = 5 * L * B * N * N * 4 / 2**20
            print(f"  {B}x{N}: decompose(vectors=False) {dec:.1f}, context_maps {cm:.1f} "
                  f"(of which the five (L, B, N, N) results are {maps:.1f})")
    print("\n" + ("target met everywhere" if not failed else "target NOT met: " + "; ".join(failed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
