"""Command-line interface: the analyses' numbers and figures without notebooks.

::

    python -m mixlib mixing     --model NAME --texts FILE --out DIR
    python -m mixlib stretch    --model NAME --out DIR
    python -m mixlib clusters   --model NAME --out DIR [--k 1000]
    python -m mixlib positional --model NAME --out DIR

Each command writes CSV tables (UTF-8, one header row) and PNG figures with
Japanese labels into ``--out``, prints what it wrote, and exits 0; bad input
exits 2 with a one-line message that says what was wrong.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "build_parser", "read_texts"]

EPILOG = """\
examples:
  python -m mixlib mixing --model bert-base-uncased --texts data/sentence_pairs.tsv --out out/mixing
  python -m mixlib stretch --model roberta-base --out out/stretch
  python -m mixlib clusters --model all-MiniLM-L6-v2 --k 1000 --out out/clusters
  python -m mixlib positional --out out/positional

--model: a hub id, a local model directory, or all-MiniLM-L6-v2 (packaged, offline).
Default: $MIXLIB_MODEL, else bert-base-uncased; offline, the packaged model is used
instead (one line says so) unless --no-fallback is given.
Supported families: post-LayerNorm BERT-family encoders (bert, roberta, electra).
"""


# ---------------------------------------------------------------------------
# input
# ---------------------------------------------------------------------------


def read_texts(path: str | Path) -> list[str | tuple[str, str]]:
    """Read the texts of ``--texts``.

    Two layouts are accepted:

    * a TSV table whose header row names ``sentence_a`` and ``sentence_b``
      columns (sentence pairs, e.g. ``data/sentence_pairs.tsv``) or a ``text``
      column (single texts); other columns are ignored;
    * plain lines: one text per line, or ``A<TAB>B`` for a sentence pair.

    Blank lines and lines starting with ``#`` are skipped. A malformed line is
    an error that names the line and says what is allowed.
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"--texts {p}: no such file (give a UTF-8 text file, one text or 'A<TAB>B' pair per line).")
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise ValueError(f"--texts {p} is not UTF-8 text ({err.reason} at byte {err.start}).") from None
    rows = [(i, line) for i, line in enumerate(lines, 1) if line.strip() and not line.lstrip().startswith("#")]
    if not rows:
        raise ValueError(f"--texts {p} holds no texts (blank lines and '#' comments are skipped).")
    header = [h.strip().lower() for h in rows[0][1].split("\t")]
    columns: list[int] | None = None
    if "sentence_a" in header and "sentence_b" in header:
        columns = [header.index("sentence_a"), header.index("sentence_b")]
    elif "text" in header:
        columns = [header.index("text")]
    items: list[str | tuple[str, str]] = []
    for lineno, line in rows[1:] if columns else rows:
        parts = [s.strip() for s in line.split("\t")]
        if columns:
            if len(parts) != len(header) or not all(parts[c] for c in columns):
                raise ValueError(f"--texts {p}, line {lineno}: expected {len(header)} TAB-separated fields "
                                 f"({', '.join(header)}) with non-empty text.")
            picked = [parts[c] for c in columns]
            items.append(picked[0] if len(picked) == 1 else (picked[0], picked[1]))
        elif len(parts) == 1:
            items.append(parts[0])
        elif len(parts) == 2 and all(parts):
            items.append((parts[0], parts[1]))
        else:
            raise ValueError(f"--texts {p}, line {lineno}: expected one text, or two non-empty texts separated by one TAB "
                             "(or a TSV file with a header naming sentence_a/sentence_b or text columns).")
    if not items:
        raise ValueError(f"--texts {p} has a header but no rows.")
    return items


# ---------------------------------------------------------------------------
# output helpers
# ---------------------------------------------------------------------------


class _Out:
    def __init__(self, folder: str | Path) -> None:
        self.dir = Path(folder)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.written: list[Path] = []

    def csv(self, name: str, df: Any, **kw: Any) -> None:
        path = self.dir / name
        df.to_csv(path, encoding="utf-8", **kw)
        self.written.append(path)

    def json(self, name: str, obj: Any) -> None:
        path = self.dir / name
        path.write_text(json.dumps(obj, ensure_ascii=False, indent=2), encoding="utf-8")
        self.written.append(path)

    def fig(self, name: str, fig: Any) -> None:
        import matplotlib.pyplot as plt

        path = self.dir / name
        fig.savefig(path, bbox_inches="tight")
        plt.close(fig)
        self.written.append(path)

    def report(self, t0: float) -> None:
        print(f"wrote {len(self.written)} files to {self.dir} in {time.perf_counter() - t0:.1f}s:")
        for p in self.written:
            print(f"  {p}")


def _encoder(args: argparse.Namespace) -> Any:
    from .models import load_encoder

    enc = load_encoder(args.model, fallback=not args.no_fallback, device=args.device)
    print(f"model: {enc.describe()} (source: {enc.source})")
    return enc


def _card(enc: Any) -> dict[str, Any]:
    return {
        "model": enc.name,
        "requested": enc.requested,
        "source": enc.source,
        "caption": enc.describe(),
        "n_layers": enc.n_layers,
        "n_heads": enc.n_heads,
        "d_model": enc.d_model,
        "d_head": enc.d_head,
        "vocab_size": enc.vocab_size,
    }


# ---------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------


PAPER_MODEL = "bert-base-uncased"


def paper_comparison(ratio: Any, summary: Any, model: str) -> tuple[Any, Any]:
    """The paper's numbers next to ours: ``(per_layer, pooled)`` tables.

    For the paper's own model (bert-base-uncased) these are
    :func:`mixlib.reference.compare` tables with the difference ours - paper;
    for any other model the two sets of numbers stand side by side under the
    column level ``"ours (<model>)"`` / ``"paper (bert-base-uncased)"`` and no
    difference is taken (another model, possibly another number of layers).
    """
    import pandas as pd

    from . import reference

    paper_layers, paper_pooled = reference.paper_table(), reference.paper_summary()
    if model == PAPER_MODEL:
        return reference.compare(ratio, paper_layers), reference.compare(summary, paper_pooled)
    keys = [f"ours ({model})", f"paper ({PAPER_MODEL})"]
    return (pd.concat(dict(zip(keys, (ratio, paper_layers))), axis=1),
            pd.concat(dict(zip(keys, (summary, paper_pooled))), axis=1))


def cmd_mixing(args: argparse.Namespace) -> None:
    import pandas as pd

    from . import plots
    from .data import mask_tokens
    from .mixing import NORM_METRICS, decompose, mixing_summary, mixing_table

    texts = read_texts(args.texts)
    if args.limit:
        texts = texts[: args.limit]
    enc = _encoder(args)
    out = _Out(args.out)
    t0 = time.perf_counter()
    batch = mask_tokens(enc, texts, rate=args.rate, seed=args.seed, max_length=args.max_length)
    m = decompose(enc, batch, batch_size=args.batch_size, vectors=False, progress=True)

    ratio = mixing_table(m, metric="ratio")
    summary = mixing_summary(m)
    out.csv("mixing_ratio_by_layer.csv", ratio, index_label="layer")
    out.csv("mixing_ratio_noln_by_layer.csv", mixing_table(m, metric="attnres_n"), index_label="layer")
    norms = pd.DataFrame({metric: mixing_table(m, metric=metric)["全体"] for metric in NORM_METRICS})
    out.csv("norms_by_layer.csv", norms, index_label="layer")
    out.csv("summary.csv", summary, index_label="variant")
    by_layer, pooled = paper_comparison(ratio, summary, enc.name)
    out.csv("paper_vs_ours_by_layer.csv", by_layer, index_label="layer")
    out.csv("paper_vs_ours_summary.csv", pooled, index_label="variant")
    out.json("run.json", {**_card(enc), "texts": len(texts), "mask_rate": args.rate, "seed": args.seed,
                          "paper_model": PAPER_MODEL, "paper_diff": enc.name == PAPER_MODEL,
                          "max_reconstruction_error": [float(e) for e in m.max_error]})

    plots.setup()
    out.fig("mixing_ratio_by_layer.png", plots.plot_mixing_by_layer(ratio, enc))
    panels = {"注意機構が混ぜる": "norm_mix", "注意機構が残す": "norm_keep_attn", "残差結合が残す": "norm_res"}
    out.fig("norms_by_layer.png", plots.plot_norm_heatmaps({t: mixing_table(m, metric=k) for t, k in panels.items()}, enc))
    out.report(t0)


def cmd_stretch(args: argparse.Namespace) -> None:
    import numpy as np
    import pandas as pd

    from . import plots
    from .stretch import norm_stretch, stretch_bounds

    enc = _encoder(args)
    out = _Out(args.out)
    t0 = time.perf_counter()
    st = norm_stretch(enc)
    bounds = stretch_bounds(enc)
    rows = []
    for li, layer in enumerate(st.layers):
        for h in range(enc.n_heads):
            row = {"layer": layer, "head": h}
            for name, arr in (("q", st.psi_q), ("k", st.psi_k), ("v", st.psi_v), ("qkv", st.psi_qkv)):
                v = arr[li, h]
                row[f"psi_{name}_mean"] = float(np.nanmean(v))
                row[f"psi_{name}_max"] = float(np.nanmax(v))
                row[f"top_token_{name}"] = st.tokens[int(np.nanargmax(v))] if st.tokens else ""
            for pi, name in enumerate(("q", "k", "v")):
                row[f"bound_{name}_max"] = float(bounds.psi_max[pi, li, h])
            rows.append(row)
    out.csv("psi_by_head.csv", pd.DataFrame(rows), index=False)
    out.json("run.json", _card(enc))
    plots.setup()
    mean = pd.DataFrame(np.nanmean(st.psi_qkv, axis=2), index=pd.Index(st.layers, name="層"),
                        columns=[f"H{h}" for h in range(enc.n_heads)])
    out.fig("psi_qkv_mean_by_head.png", plots.plot_norm_heatmaps({"ψ_qkv の全トークン平均（層 × ヘッド）": mean}, enc, annot=False))
    out.report(t0)


def cmd_clusters(args: argparse.Namespace) -> None:
    import pandas as pd

    from . import plots
    from .clusters import cluster_stretch, cluster_summary, cluster_vocab, recluster_centroids, top_clusters, type_map
    from .stretch import norm_stretch

    enc = _encoder(args)
    if args.k > enc.vocab_size:
        raise ValueError(f"--k {args.k} is larger than the vocabulary ({enc.vocab_size} tokens); choose k <= {enc.vocab_size}.")
    out = _Out(args.out)
    t0 = time.perf_counter()
    vc = cluster_vocab(enc, k=args.k, seed=args.seed)
    out.csv("tokens.csv", pd.DataFrame({"token": vc.tokens, "cluster": vc.labels, "type": vc.token_types}), index_label="token_id")
    out.csv("cluster_summary.csv", cluster_summary(vc), index=False)
    upper = recluster_centroids(vc, k=args.upper_k, seed=args.seed)
    out.csv("upper_clusters.csv", pd.DataFrame({"cluster": range(vc.k), "upper": upper.labels, "type": vc.cluster_types}), index=False)
    cs = cluster_stretch(norm_stretch(enc), vc)
    tops = [top_clusters(cs, vc, layer, head, n=args.top).assign(layer=layer, head=head)
            for layer in range(enc.n_layers) for head in range(enc.n_heads)]
    out.csv("top_clusters_by_head.csv", pd.concat(tops, ignore_index=True), index=False)
    tm = type_map(cs, vc, top=3)
    out.csv("type_map.csv", pd.DataFrame(tm) if not isinstance(tm, pd.DataFrame) else tm, index_label="layer")
    out.json("run.json", {**_card(enc), "k": vc.k, "seed": vc.seed, "from_cache": bool(vc.from_cache)})
    plots.setup()
    out.fig("type_map.png", plots.plot_type_map(tm, enc))
    out.fig("psi_by_cluster.png", plots.plot_psi_curves(cs, enc))
    out.report(t0)


def cmd_positional(args: argparse.Namespace) -> None:
    import pandas as pd

    from . import plots
    from .positional import position_attention, positional_orthogonality

    enc = _encoder(args)
    enc.check_layer(args.layer)
    out = _Out(args.out)
    t0 = time.perf_counter()
    po = positional_orthogonality(enc)
    out.json("summary.json", {**_card(enc), "pairs": po.n_pairs, "mean_cos": po.mean_cos, "mean_abs_cos": po.mean_abs_cos,
                              "random_mean_abs_cos": po.random_mean_abs_cos, "cls_pos0_cos": po.cls_pos0_cos,
                              "principal_angles_deg": [float(a) for a in po.angles_deg],
                              "random_principal_angles_deg": [float(a) for a in po.random_angles_deg]})
    out.csv("cos_histogram.csv", pd.DataFrame({"lo": po.bin_edges[:-1], "hi": po.bin_edges[1:], "count": po.hist}), index=False)
    out.csv("top_pairs.csv", po.top_pairs, index=False)
    att = position_attention(enc, layer=args.layer, n=args.n)
    plots.setup()
    out.fig("pca.png", plots.plot_positional_pca(po, enc))
    out.fig("cos_histogram.png", plots.plot_cos_hist(po, enc))
    out.fig(f"position_attention_layer{args.layer}.png", plots.plot_position_attention(att, enc, layer=args.layer))
    out.report(t0)


COMMANDS = {
    "mixing": (cmd_mixing, "analysis A: mixing vs. preserving per layer and token category (Kobayashi et al.)"),
    "stretch": (cmd_stretch, "analysis B: norm stretch psi of every head for every word embedding (Maeda et al.)"),
    "clusters": (cmd_clusters, "analysis B: k-means of the vocabulary, psi per cluster, top clusters per head"),
    "positional": (cmd_positional, "word vs. position embeddings: PCA, cosine histogram, attention from positions alone"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mixlib",
        description="Analyses of BERT's inside: writes CSV tables and PNG figures (Japanese labels) to --out.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    for name, (func, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text, epilog=EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(func=func)
        p.add_argument("--model", default=None, help="hub id, local directory, or all-MiniLM-L6-v2 (default: $MIXLIB_MODEL, else bert-base-uncased)")
        p.add_argument("--out", required=True, help="output directory (created if missing)")
        p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda, cuda:1 ... (default: auto)")
        p.add_argument("--no-fallback", action="store_true", help="fail instead of using the packaged model when --model cannot be loaded")
        if name == "mixing":
            p.add_argument("--texts", required=True, help="UTF-8 file: one text per line, or 'A<TAB>B' for a sentence pair; '#' lines skipped")
            p.add_argument("--rate", type=float, default=0.12, help="fraction of non-special tokens replaced by [MASK] (default: 0.12, as the paper)")
            p.add_argument("--seed", type=int, default=0, help="masking seed (default: 0)")
            p.add_argument("--max-length", type=int, default=128, help="tokens per sequence; longer ones are truncated with a warning (default: 128)")
            p.add_argument("--batch-size", type=int, default=32, help="sequences per forward pass (default: 32)")
            p.add_argument("--limit", type=int, default=0, help="use only the first N texts (default: all)")
        if name == "clusters":
            p.add_argument("--k", type=int, default=1000, help="number of k-means clusters (default: 1000, as the paper)")
            p.add_argument("--upper-k", type=int, default=7, help="clusters of the centroids (default: 7)")
            p.add_argument("--seed", type=int, default=0, help="k-means random_state (default: 0)")
            p.add_argument("--top", type=int, default=5, help="top clusters listed per head (default: 5)")
        if name == "positional":
            p.add_argument("--layer", type=int, default=0, help="layer of the position-only attention figure, 0-based (default: 0)")
            p.add_argument("--n", type=int, default=64, help="positions in that figure (default: 64)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except (ValueError, OSError) as err:
        print(f"python -m mixlib {args.command}: error: {err}", file=sys.stderr)
        return 2
    return 0
