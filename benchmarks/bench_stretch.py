"""Benchmark: norm stretch psi for every head, projection and token vs. the bare matrix products.

On a random-init BERT with bert-base dimensions (12 layers, 12 heads, d=768,
30,522 tokens; trained weights do not change the cost) this times, in one run:

* ``bare``: the 36 products ``E @ W^T`` (E the (V, D) word embeddings, W each
  query/key/value weight) that any psi computation must do (~1.3 TFLOP), and
* ``psi``: ``mixlib.norm_stretch(enc)``: the same products plus the per-head
  norms, the scaling and copying the (L, H, V) results to numpy.

It also times ``norm_stretch(bias=True)`` and ``random_psi_rms`` +
``normalize_stretch`` (chapter 11's normalised psi) against the plain call.

It prints the ratio psi / bare (target <= 1.25), interleaving the two and
taking the best of ``--repeat`` runs of each to tame the noise of a shared CPU.

Memory: a sampler thread reads the process' resident set size (``/proc/self/statm``)
every millisecond during ``norm_stretch``; the peak growth over the baseline is
printed next to the sizes it is to be compared with: the result arrays, one
chunk's product, one layer's projected embeddings (3 x V x D floats) and all
layers' (what a non-streaming implementation would hold). On CUDA, the torch
allocator's peak is printed as well.

Usage::

    python benchmarks/bench_stretch.py            # full: 12 layers (a few minutes on 2 cores)
    python benchmarks/bench_stretch.py --quick    # 2 layers
"""

from __future__ import annotations

import argparse
import os
import threading
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch


def build_encoder(layers: int, device: str):
    from transformers import AutoTokenizer, BertConfig, BertModel

    from mixlib.models import Encoder, packaged_model_dir

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(packaged_model_dir()), local_files_only=True)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=768, num_hidden_layers=layers, num_attention_heads=12,
                     intermediate_size=3072, attn_implementation="eager")
    model = BertModel(cfg)
    return Encoder.from_model(model, tok, name=f"random-bert-base-dims-{layers}L", device=device)


def bare_products(enc, E: torch.Tensor) -> float:
    """Time of the 36 (or 3L) products E @ W^T alone, each materialised in full."""
    sync(enc.device)
    t0 = time.perf_counter()
    with torch.inference_mode():
        for layer in range(enc.n_layers):
            for role in ("query", "key", "value"):
                W, _ = enc.projection(layer, role)
                Y = E @ W.t()  # (V, D)
                del Y
    sync(enc.device)
    return time.perf_counter() - t0


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


class RssSampler:
    """Peak resident set size (bytes) of this process while active, sampled every ``interval`` s."""

    def __init__(self, interval: float = 0.001):
        self.interval = interval
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.peak = 0
        self._stop = threading.Event()

    def rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(self.interval)

    def __enter__(self):
        self.base = self.rss()
        self.peak = self.base
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self.rss())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 layers instead of 12")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each measurement; the best is kept (default 2)")
    ap.add_argument("--chunk", type=int, default=None, help="norm_stretch chunk (rows per product; default: all rows)")
    ap.add_argument("--device", default="cpu", help="cpu (default), cuda or auto")
    args = ap.parse_args()

    import mixlib
    from mixlib.models import resolve_device

    device = str(resolve_device(args.device))
    layers = 2 if args.quick else 12
    enc = build_encoder(layers, device)
    E = enc.word_embeddings().to(device)  # (V, D)
    V, D, L, H = E.shape[0], enc.d_model, enc.n_layers, enc.n_heads
    flops = 2.0 * V * D * D * 3 * L
    print(f"model: {enc.describe()}  device={device}  torch threads={torch.get_num_threads()}")
    print(f"work: {L * H} heads x 3 projections x {V} tokens; bare products = {flops / 1e12:.2f} TFLOP")

    # warm-up (allocator, BLAS threads)
    mixlib.norm_stretch(enc, layers=[0], chunk=args.chunk)
    bare_t, psi_t = [], []
    for _ in range(max(1, args.repeat)):
        bare_t.append(bare_products(enc, E))
        sync(device)
        t0 = time.perf_counter()
        s = mixlib.norm_stretch(enc, chunk=args.chunk)
        sync(device)
        psi_t.append(time.perf_counter() - t0)
        print(f"  run: bare {bare_t[-1]:.2f} s   psi {psi_t[-1]:.2f} s")
    b, p = min(bare_t), min(psi_t)
    print(f"bare products: {b:.2f} s ({flops / b / 1e9:.0f} GFLOP/s)")
    print(f"norm_stretch:  {p:.2f} s")
    print(f"ratio psi / bare = {p / b:.3f}   (target <= 1.25)")

    # -- chapter 11's additions: biases and normalisation -------------------------
    t0 = time.perf_counter()
    mixlib.norm_stretch(enc, chunk=args.chunk, bias=True)
    sync(device)
    t_bias = time.perf_counter() - t0
    t0 = time.perf_counter()
    rms = mixlib.random_psi_rms(enc)
    n = mixlib.normalize_stretch(s, rms)
    t_norm = time.perf_counter() - t0
    print(f"norm_stretch(bias=True): {t_bias:.2f} s  (ratio to psi {t_bias / p:.2f}; one bias add per product, expected close to 1)")
    print(f"random_psi_rms + normalize_stretch: {t_norm:.2f} s  (ratio to psi {t_norm / p:.2f}; {n.psi_qkv.nbytes / 2**20:.0f} MiB per array)")

    # -- memory ----------------------------------------------------------------
    MB = 2**20
    del s
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    trim()
    with RssSampler() as rs:
        s = mixlib.norm_stretch(enc, chunk=args.chunk)
    grow = rs.peak - rs.base
    if device.startswith("cuda"):
        cuda_peak = torch.cuda.max_memory_allocated() - before
    result = sum(a.nbytes for a in (s.psi_q, s.psi_k, s.psi_v, s.psi_qkv))
    del s
    # calibration: the same sampler while one layer's three products are held at once
    trim()
    with RssSampler() as rc, torch.inference_mode():
        held = [E @ enc.projection(0, r)[0].t() for r in ("query", "key", "value")]  # 3 x (V, D)
        held = [h.cpu() for h in held]
    calib = rc.peak - rc.base
    del held
    one_proj = V * D * 4
    print("memory (CPU resident set growth over the start of the call, sampled every 1 ms, after malloc_trim):")
    print(f"  norm_stretch, whole call:             {grow / MB:8.1f} MiB")
    print(f"    its returned arrays:                {result / MB:8.1f} MiB  (4 x L x H x V float32)")
    rows = V if args.chunk is None else min(args.chunk, V)
    print(f"    one product (chunk x D):            {rows * D * 4 / MB:8.1f} MiB  ({rows} x {D} float32)")
    print(f"  calibration, holding one layer's 3 products: {calib / MB:8.1f} MiB  (expected {3 * one_proj / MB:.1f})")
    print(f"  all layers' projections would be:     {3 * L * one_proj / MB:8.1f} MiB  (what streaming avoids)")
    if device.startswith("cuda"):
        print(f"  CUDA allocator peak during norm_stretch: {cuda_peak / MB:.1f} MiB")


def trim() -> None:
    """Give freed heap memory back to the OS (glibc) so that RSS growth measures new allocations."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the figures are then upper-bounded by reuse only
        pass


if __name__ == "__main__":
    main()
