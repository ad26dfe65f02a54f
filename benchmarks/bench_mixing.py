"""Benchmark of analysis A: ``mixlib.decompose`` against a plain forward pass and an n x n x d implementation.

Targets (issue 25), on a random-init BERT with bert-base dimensions (12 layers,
12 heads, d = 768, vocabulary 30,522), at 16 x 128 and 32 x 128 tokens and at
1 and 2 torch threads, as the ratio of medians in one run:

* ``decompose(vectors=False)`` at most 1.15x a plain eager forward pass, and
  ``decompose`` with the four vector fields at most 1.3x -- all three
  self-checks included (attention, split, reconstruction);
* peak memory of ``decompose(vectors=False)`` (above what the loaded model
  takes) within 1.2x the plain forward's;
* ``decompose`` at least 5x faster than the straightforward implementation
  that builds every f_j(x_i) (an n x n x d tensor per sequence and layer),
  which it must also agree with (so the benchmark cannot pass by computing
  something else).

Trained weights do not matter for speed, so no download is needed. The
methods are timed interleaved in the same run (the CPU may be shared), in wall
time and in this process's CPU time (which other jobs on a shared machine do
not inflate); medians and ratios of the minima are printed. A breakdown per
stage shows where the time goes: each step of :mod:`mixlib.mixing.kernel` is
timed in one extra call, and "hooks and the rest" is what is left of the
difference to the plain forward (the hooks, allocation, the forward running
slower beside the decomposition's work), less what decompose saves by stopping
after the last layer's attention LayerNorm (its FFN and the pooler are never
computed), so it can be negative.

Run::

    .venv/bin/python benchmarks/bench_mixing.py                 # 16x128 and 32x128, 1 and 2 threads
    .venv/bin/python benchmarks/bench_mixing.py --sizes 16x128 --threads 2
    .venv/bin/python benchmarks/bench_mixing.py --quick         # a small model, seconds
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from collections.abc import Iterable
from typing import Any

import torch


def make_encoder(layers: int, heads: int, d: int, seed: int = 0):
    """Random-init BERT with the packaged tokenizer (30,522 WordPiece tokens)."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from mixlib.models import Encoder, packaged_model_dir

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(str(packaged_model_dir()), local_files_only=True)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
                     intermediate_size=4 * d, attn_implementation="eager")
    return Encoder.from_model(BertModel(cfg), tok, name=f"random-bert-{layers}x{heads}x{d}", device="cpu")


def make_batch(enc, n_seqs: int, n_tokens: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """``n_seqs`` sequences of exactly ``n_tokens`` tokens: [CLS] random word pieces [SEP]."""
    g = torch.Generator().manual_seed(seed)
    tok = enc.tokenizer
    ids = torch.randint(1000, tok.vocab_size, (n_seqs, n_tokens), generator=g)
    ids[:, 0] = tok.cls_token_id
    ids[:, -1] = tok.sep_token_id
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}


@torch.no_grad()
def naive_ratios(enc, batch) -> torch.Tensor:
    """AttnResLn-N the straightforward way: every f_j(x_i) as an (n, n, d) tensor, then eq. 4-7 term by term.

    Hidden states come from an ordinary forward pass; Q, K, V, alpha and the
    per-pair vectors are recomputed from the parameters, one sequence at a time.
    Returns ``(L, B, N)``.
    """
    out = enc.model(**batch, output_hidden_states=True)
    H, D = enc.n_heads, enc.d_model
    dh = D // H
    ratios = []
    for layer in range(enc.n_layers):
        wq, bq = enc.projection(layer, "query")
        wk, bk = enc.projection(layer, "key")
        wv, bv = enc.projection(layer, "value")
        wo, bo = enc.projection(layer, "attn_out")
        ln = enc.module(layer, "attn_norm")
        wo_h = wo.view(D, H, dh)  # (D, H, dh)
        per_seq = []
        for x in out.hidden_states[layer]:  # (N, D)
            n = x.shape[0]
            q = (x @ wq.T + bq).view(n, H, dh).transpose(0, 1)  # (H, N, dh)
            k = (x @ wk.T + bk).view(n, H, dh).transpose(0, 1)
            v = (x @ wv.T + bv).view(n, H, dh)  # (N, H, dh)
            alpha = torch.softmax(q @ k.transpose(1, 2) / dh**0.5, dim=-1)  # (H, N, N)
            fv = torch.einsum("ihk,dhk->hid", v, wo_h)  # (H, N, D): f^h(x_i)
            f = torch.einsum("hji,hid->jid", alpha, fv)  # (N, N, D): f_j(x_i)
            y = f.sum(1) + bo + x  # (N, D)
            s = torch.sqrt(y.var(-1, unbiased=False, keepdim=True) + ln.eps)  # (N, 1)
            gf = (f - f.mean(-1, keepdim=True)) / s[:, None] * ln.weight  # (N, N, D)
            eye = torch.eye(n, dtype=torch.bool)
            mix = gf.masked_fill(eye[..., None], 0.0).sum(1)  # (N, D)
            keep = gf[eye] + (x - x.mean(-1, keepdim=True)) / s * ln.weight  # (N, D)
            mn, kn = mix.norm(dim=-1), keep.norm(dim=-1)
            per_seq.append(mn / (mn + kn))
        ratios.append(torch.stack(per_seq))
    return torch.stack(ratios)


#: The steps of one layer's decomposition, by the stage of the breakdown they belong to.
STAGES = {
    "attention weights (only when the model does not return its own)": ("_attention_weights",),
    "f_j(x_j): the one (B*N, D) x (D, D) product": ("_self_part",),
    "the rest of the arithmetic (split, LayerNorm pieces, norms; vectors)": ("_split", "_inverse_std", "_layernorm_pieces"),
    "self-checks (attention, split, reconstruction)": ("_check_attention", "_check_split", "_check_reconstruction"),
    "results: copies into the (L, B, N[, D]) fields": ("store",),
}


@contextlib.contextmanager
def step_timers(steps: Iterable[tuple[Any, str]]):
    """Accumulate wall seconds per step while inside: each ``(owner, name)`` is patched with a timed wrapper."""
    spent: dict[str, float] = {}
    patched = []
    for owner, name in steps:
        fn = getattr(owner, name)

        def wrapper(*args, _fn=fn, _name=name, **kwargs):
            t0 = time.perf_counter()
            try:
                return _fn(*args, **kwargs)
            finally:
                spent[_name] = spent.get(_name, 0.0) + time.perf_counter() - t0

        setattr(owner, name, wrapper)
        patched.append((owner, name, fn))
    try:
        yield spent
    finally:
        for owner, name, fn in reversed(patched):
            setattr(owner, name, fn)


def stage_timers():
    """:func:`step_timers` over the steps of :data:`STAGES` (the kernel's functions and ``_Results.store``)."""
    from mixlib.mixing import forward, kernel

    return step_timers((forward._Results if name == "store" else kernel, name) for names in STAGES.values() for name in names)


def print_breakdown(label: str, total: float, base_label: str, base: float, rows: dict[str, float]) -> None:
    """One timed call's seconds per stage, as a share of the baseline's median."""
    print(f"  breakdown of one {label} ({total:.3f} s; {base_label} median {base:.3f} s = 100%):")
    for stage, sec in rows.items():
        print(f"    {stage:<70} {sec:7.3f} s {100 * sec / base:6.1f}%")


def add_size_arguments(ap: argparse.ArgumentParser, repeats: int) -> None:
    """The options both benchmarks share: --quick, --sizes, --threads, --repeats, --no-memory."""
    ap.add_argument("--quick", action="store_true", help="small model and batch (4 layers, d=256, 8 x 64 tokens)")
    ap.add_argument("--sizes", default="16x128,32x128", help="comma-separated SEQUENCESxTOKENS (default 16x128,32x128)")
    ap.add_argument("--threads", default="1,2", help="comma-separated torch thread counts (default 1,2)")
    ap.add_argument("--repeats", type=int, default=None, help=f"timed repeats (default {repeats}; 3 with --quick)")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory measurement (subprocesses)")


def sizes_of(args: argparse.Namespace, repeats: int) -> tuple[int, int, int, list[tuple[int, int]], int]:
    """``(L, H, D, sizes, repeats)`` from the options of :func:`add_size_arguments`."""
    if args.quick:
        return 4, 4, 256, [(8, 64)], args.repeats or 3
    sizes = [tuple(int(x) for x in size.split("x")) for size in args.sizes.split(",")]
    return 12, 12, 768, sizes, args.repeats or repeats


def peak_rss_mb(method: str, L: int, H: int, D: int, B: int, N: int, threads: int) -> float:
    """Peak resident memory (MiB) that one call of ``method`` (``plain``, ``decompose`` with ``vectors=False``, or
    ``context_maps``) adds above the loaded model and batch (own process).

    Linux (glibc): large allocations are mapped one by one (so resident memory is memory in use); after one
    warm-up call, the peak (VmHWM) is reset through /proc/self/clear_refs before each of three calls; the
    median is returned.
    """
    code = (
        "import ctypes, gc, statistics, sys, torch; sys.path.insert(0, sys.argv[1]); import bench_mixing as bm, mixlib\n"
        f"torch.set_num_threads({threads}); enc = bm.make_encoder({L}, {H}, {D}); batch = bm.make_batch(enc, {B}, {N})\n"
        "def status(key):\n"
        "    return next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith(key))\n"
        "calls = {'plain': lambda: enc.model(**batch), 'context_maps': lambda: mixlib.context_maps(enc, batch),\n"
        "         'decompose': lambda: mixlib.decompose(enc, batch, progress=False, vectors=False)}\n"
        "def call():\n"
        "    with torch.no_grad():\n"
        f"        calls[{method!r}]()\n"
        "call(); deltas = []\n"
        "for _ in range(3):\n"
        "    gc.collect(); ctypes.CDLL(None).malloc_trim(0)  # free heap pages back to the system: a clean start\n"
        "    open('/proc/self/clear_refs', 'w').write('5')  # resets the peak (VmHWM) to now\n"
        "    base = status('VmRSS:'); call(); deltas.append(status('VmHWM:') - base)\n"
        "print(statistics.median(deltas) / 1024)\n"
    )
    # every allocation of 64 KiB or more gets its own mapping, returned at once when freed: resident memory then
    # follows the bytes actually in use, not what glibc's heap happens to keep
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)], capture_output=True, text=True,
                         check=True, env=env)
    return float(out.stdout.strip().splitlines()[-1])


def run_size(enc, B: int, N: int, reps: int, naive_reps: int) -> dict[str, float]:
    """Time the methods interleaved at one size; print the ratios and the breakdown; return the target ratios."""
    import mixlib

    batch = make_batch(enc, B, N)
    print(f"\n== {B} sequences x {N} tokens, {torch.get_num_threads()} thread(s) ==")

    def plain():
        with torch.no_grad():
            enc.model(**batch)

    methods = {
        "plain forward": plain,
        "decompose": lambda: mixlib.decompose(enc, batch, progress=False, vectors=True),
        "decompose(vectors=False)": lambda: mixlib.decompose(enc, batch, progress=False, vectors=False),
    }
    if naive_reps:
        methods["n x n x d"] = lambda: naive_ratios(enc, batch)
        # warm-up + correctness: the fast and the n x n x d results must agree
        m = mixlib.decompose(enc, batch, progress=False)
        diff = float((m.ratio - naive_ratios(enc, batch)).abs().max())
        print(f"max |ratio(decompose) - ratio(n x n x d)| = {diff:.2e}; self-checks: reconstruction "
              f"{m.max_error.max():.2e}, attention {m.max_attention_error.max():.2e}, split {m.max_split_error.max():.2e}")
        if not diff < 1e-4:
            raise SystemExit("ERROR: decompose and the n x n x d implementation disagree")
        del m
    for name, fn in methods.items():
        if name != "n x n x d":
            fn()  # warm-up
    wall: dict[str, list[float]] = {k: [] for k in methods}
    cpu: dict[str, list[float]] = {k: [] for k in methods}
    for r in range(reps):
        for name, fn in methods.items():  # interleaved, so load on the shared CPU hits all alike
            if name == "n x n x d" and r >= naive_reps:
                continue
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)

    med = {k: statistics.median(v) for k, v in wall.items()}
    print("median wall s: " + ", ".join(f"{k} {v:.3f}" for k, v in med.items())
          + "\nmedian CPU s:  " + ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in cpu.items()))
    targets = {("decompose", "plain forward"): 1.3, ("decompose(vectors=False)", "plain forward"): 1.15,
               ("n x n x d", "decompose"): 5.0}
    got = {}
    for (a, b), target in targets.items():
        if a not in wall:
            continue
        ratio, ratio_min = med[a] / med[b], min(wall[a]) / min(wall[b])
        cpu_ratio = statistics.median(cpu[a]) / statistics.median(cpu[b])
        ok = ratio >= target if a == "n x n x d" else ratio <= target
        got[a] = ratio
        print(f"  {a} / {b}: {ratio:.3f}x median, {ratio_min:.3f}x minimum, {cpu_ratio:.3f}x CPU  "
              f"(target {'>=' if a == 'n x n x d' else '<='} {target}x: {'met' if ok else 'NOT MET'})")

    for label, vec in (("decompose(vectors=False)", False), ("decompose", True)):
        with stage_timers() as spent:
            t0 = time.perf_counter()
            mixlib.decompose(enc, batch, progress=False, vectors=vec)
            total = time.perf_counter() - t0
        fwd = med["plain forward"]
        rows = {stage: sum(spent.get(n, 0.0) for n in names) for stage, names in STAGES.items()}
        rows[list(STAGES)[2]] -= spent.get("_self_part", 0.0)  # _split calls _self_part: count it once
        # decompose stops after the last layer's attention LayerNorm (no last FFN, no pooler): this row can be negative
        rows["hooks and the rest (left above the forward; < 0: the skipped last FFN)"] = total - fwd - sum(rows.values())
        print_breakdown(label, total, "plain forward", fwd, rows)
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_size_arguments(ap, repeats=7)
    ap.add_argument("--naive-repeats", type=int, default=1,
                    help="repeats that also time the slow n x n x d implementation, at the first size and thread count")
    args = ap.parse_args(argv)
    L, H, D, sizes, reps = sizes_of(args, repeats=7)
    enc = make_encoder(L, H, D)
    print(f"model: {enc!r}; torch {torch.__version__}; CPU: {cpu_name()}")
    failed = []
    first = True
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for B, N in sizes:
            got = run_size(enc, B, N, reps, args.naive_repeats if first else 0)
            first = False
            failed += [f"{k} at {B}x{N}, {threads} thread(s): {v:.3f}x" for k, v in got.items()
                       if (k == "decompose" and v > 1.3) or (k == "decompose(vectors=False)" and v > 1.15)
                       or (k == "n x n x d" and v < 5)]
    if not args.no_memory:
        print("\npeak memory above the loaded model (own process each, MiB):")
        for B, N in sizes:
            plain_mb = peak_rss_mb("plain", L, H, D, B, N, torch.get_num_threads())
            dec_mb = peak_rss_mb("decompose", L, H, D, B, N, torch.get_num_threads())
            ratio = dec_mb / max(plain_mb, 1e-9)
            print(f"  {B}x{N}: plain forward {plain_mb:.1f}, decompose(vectors=False) {dec_mb:.1f} -> {ratio:.2f}x "
                  f"(target <= 1.2x: {'met' if ratio <= 1.2 else 'NOT MET'})")
            if ratio > 1.2:
                failed.append(f"peak memory at {B}x{N}: {ratio:.2f}x")
    print("\n" + ("all targets met" if not failed else "targets NOT met: " + "; ".join(failed)))
    return 0


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() + f" ({os.cpu_count()} cores)"
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    sys.exit(main())
