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
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mixing import (add_size_arguments, cpu_name, make_batch, make_encoder, peak_rss_mb,  # noqa: E402
                          print_breakdown, sizes_of, step_timers)

#: The steps of :mod:`mixlib.measures`, by the map (or check) they serve.
STAGES = {
    "the parts through the LayerNorms (f1, f2)": ("_layernorm_terms",),
    "norm, attn_res_ln, globenc (H x H Gram matrices)": ("_gram_norms",),
    "alti (the heads' products, L1 distances)": ("_alti",),
    "self-checks (attention, sums, one row by the definition)": ("_check_attention", "_check_sums", "_check_row"),
}
TARGET = 2.0


def stage_timers():
    """Wall seconds per step of :mod:`mixlib.measures` named in :data:`STAGES`, while inside."""
    from mixlib import measures

    return step_timers((measures, name) for names in STAGES.values() for name in names)


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
    rows = {stage: sum(spent.get(n, 0.0) for n in names) for stage, names in STAGES.items()}
    rows["forward, hooks and the rest (f^h(x_i), copies)"] = total - sum(rows.values())
    print_breakdown("context_maps", total, "decompose(vectors=False)", base, rows)
    return ratio


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_size_arguments(ap, repeats=5)
    args = ap.parse_args(argv)
    L, H, D, sizes, reps = sizes_of(args, repeats=5)
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
