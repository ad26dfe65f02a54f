"""Benchmark of analysis A: ``mixlib.decompose`` against a plain forward pass and an n x n x d implementation.

Targets (issue 2), on a random-init BERT with bert-base dimensions (12 layers,
12 heads, d = 768, vocabulary 30,522) and 32 sequences x 128 tokens:

* ``decompose`` takes at most 1.3x a plain eager forward pass with
  ``output_hidden_states=True`` -- all three self-checks included (the
  reconstruction, the attention weights and, since issue 9, the split of
  f_j(x_j) from the rest);
* ``decompose`` is at least 5x faster than the straightforward implementation
  that builds every f_j(x_i) (an n x n x d tensor per sequence and layer).

Trained weights do not matter for speed, so no download is needed. The
methods are timed interleaved in the same run (the CPU may be shared), in wall
time and in this process's CPU time (which other jobs on a shared machine do
not inflate); medians, medians of per-repeat ratios and ratios of the minima
are printed. The n x n x d implementation is also compared with
``decompose`` numerically, so the benchmark cannot pass by computing something
else.

Run::

    .venv/bin/python benchmarks/bench_mixing.py           # full size
    .venv/bin/python benchmarks/bench_mixing.py --quick   # a small model, seconds
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small model and batch (4 layers, d=256, 8 x 64 tokens)")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats of forward/decompose (default 5; 3 with --quick)")
    ap.add_argument("--naive-repeats", type=int, default=1,
                    help="of these repeats, how many also time the slow n x n x d implementation (default 1)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    import mixlib

    if args.quick:
        L, H, D, B, N, reps = 4, 4, 256, 8, 64, 3
    else:
        L, H, D, B, N, reps = 12, 12, 768, 32, 128, 5
    reps = args.repeats or reps
    enc = make_encoder(L, H, D)
    batch = make_batch(enc, B, N)
    print(f"model: {enc!r}; batch: {B} sequences x {N} tokens; torch {torch.__version__}, {torch.get_num_threads()} threads")

    def plain():
        with torch.no_grad():
            enc.model(**batch, output_hidden_states=True)

    def dec():
        return mixlib.decompose(enc, batch, progress=False)

    def dec_novec():
        return mixlib.decompose(enc, batch, progress=False, vectors=False)

    def naive():
        return naive_ratios(enc, batch)

    # warm-up + correctness: the fast and the n x n x d results must agree
    plain()
    m = dec()
    ref = naive()
    diff = float((m.ratio - ref).abs().max())
    print(f"max |ratio(decompose) - ratio(n x n x d)| = {diff:.2e}; decompose self-checks: reconstruction "
          f"{m.max_error.max():.2e}, attention {m.max_attention_error.max():.2e}, split {m.max_split_error.max():.2e}")
    if not diff < 1e-4:
        print("ERROR: decompose and the n x n x d implementation disagree", file=sys.stderr)
        return 1
    del m, ref

    methods = {"plain forward": plain, "decompose": dec, "decompose(vectors=False)": dec_novec, "n x n x d": naive}
    wall: dict[str, list[float]] = {k: [] for k in methods}
    cpu: dict[str, list[float]] = {k: [] for k in methods}
    for r in range(reps):
        for name, fn in methods.items():  # interleaved, so load on the shared CPU hits all alike
            if name == "n x n x d" and r >= args.naive_repeats:
                continue
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
        print(f"  repeat {r + 1}/{reps}: " + ", ".join(
            f"{k} {v[-1]:.2f}s (cpu {cpu[k][-1]:.2f}s)" for k, v in wall.items() if len(v) == r + 1))

    def ratio(table: dict[str, list[float]], a: str, b: str) -> tuple[float, float, float]:
        """(ratio of medians, median of per-repeat ratios, ratio of minima)."""
        med = statistics.median(table[a]) / statistics.median(table[b])
        per = statistics.median(x / y for x, y in zip(table[a], table[b]))
        return med, per, min(table[a]) / min(table[b])

    print("\nmedian wall seconds: " + ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in wall.items()))
    print("median CPU seconds:  " + ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in cpu.items()))
    print("(CPU time = this process's time on the cores; it is not inflated when other jobs take the CPU away)")
    for label, table in (("wall", wall), ("CPU ", cpu)):
        for a, b, target in (("decompose", "plain forward", "<= 1.3x"), ("decompose(vectors=False)", "plain forward", ""),
                             ("n x n x d", "decompose", ">= 5x")):
            med, per, mn = ratio(table, a, b)
            print(f"{label}  {a} / {b}: {med:.2f}x (median of per-repeat ratios {per:.2f}x, ratio of minima {mn:.2f}x)"
                  + (f"  target {target}" if target else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
