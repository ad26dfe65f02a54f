"""Concept figures for chapter 8 (BERT): its input and its pre-training / fine-tuning heads.

* :func:`draw_bert_input` -- ``[CLS] A [SEP] B [SEP]`` and the three embeddings
  (token + segment + position) summed and layer-normalised into the first layer's input.
* :func:`draw_bert_heads` -- the encoder's outputs ``C, T_1 .. T_N`` with the two
  pre-training heads (MLM on the chosen positions, NSP on ``C``) and, for
  comparison, where a fine-tuning head goes: on ``C`` for sentence(-pair)
  classification, on every ``T_i`` for token labelling (NER), and two vectors
  scoring every ``T_i`` as the start / end of an answer span (SQuAD).

These are diagrams, not results: nothing is computed from a model.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

__all__ = ["EXAMPLE_TOKENS", "EXAMPLE_SEGMENTS", "draw_bert_input", "draw_bert_heads"]

#: The running example: a sentence pair as WordPiece tokens (as in Devlin et al., Fig. 2).
EXAMPLE_TOKENS = ("[CLS]", "my", "dog", "is", "cute", "[SEP]", "he", "likes", "play", "##ing", "[SEP]")
EXAMPLE_SEGMENTS = (0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1)

_TOKEN = "#dce6f2"
_SEG = ("#fde3c8", "#d9ead3")
_POS = "#e8e0f0"
_ENC = "#f2f2f2"
_HEAD = "#fff2cc"
_SPECIAL = {"[CLS]": "#d62728", "[SEP]": "#1f77b4", "[MASK]": "#2ca02c"}


def _box(ax, x: float, y: float, w: float, h: float, text: str, *, color: str = "white", fontsize: float = 9,
         edge: str = "#555555", lw: float = 1.0, textcolor: str = "black", style: str = "round,pad=0.02") -> None:
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle=style, facecolor=color, edgecolor=edge, linewidth=lw))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, color=textcolor)


def _arrow(ax, start: tuple[float, float], end: tuple[float, float], *, color: str = "#444444", lw: float = 1.0,
           style: str = "-|>", ls: str = "-") -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=9, color=color, lw=lw, linestyle=ls,
                                 shrinkA=0, shrinkB=0))


def _emb_label(token: str) -> str:
    """``$E_{dog}$``-style mathtext label for a token's embedding (``[CLS]`` -> CLS, ``##ing`` -> \\#\\#ing)."""
    name = token.strip("[]")
    prefix = "\\#\\#" if name.startswith("##") else ""
    core = "".join(ch for ch in name.lstrip("#") if ch.isalnum()) or "?"
    return "$E_{" + prefix + "\\mathrm{" + core + "}}$"


def _check_example(tokens: Sequence[str], segments: Sequence[int]) -> None:
    if len(tokens) != len(segments):
        raise ValueError(f"tokens ({len(tokens)}) and segments ({len(segments)}) must have the same length.")
    if not tokens:
        raise ValueError("tokens is empty; give at least [CLS] and [SEP].")
    if any(s not in (0, 1) for s in segments):
        raise ValueError(f"segments must be 0 (segment A) or 1 (segment B), got {sorted(set(segments))}.")


def draw_bert_input(tokens: Sequence[str] = EXAMPLE_TOKENS, segments: Sequence[int] = EXAMPLE_SEGMENTS) -> plt.Figure:
    """BERT's input: token + segment + position embeddings, summed, then LayerNorm.

    Parameters
    ----------
    tokens : sequence of str
        WordPiece tokens including ``[CLS]`` and ``[SEP]``.
    segments : sequence of {0, 1}
        Segment (token type) of each token: 0 for segment A, 1 for segment B (a segment is any
        stretch of consecutive text, not necessarily one sentence).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        ``tokens`` and ``segments`` differ in length, are empty, or a segment is not 0/1.
    """
    _check_example(tokens, segments)
    n = len(tokens)
    fig, ax = plt.subplots(figsize=(max(7.0, 0.62 * n + 1.8), 4.6))  # ~9 in for 11 tokens: readable at the column width
    xs = [1.9 + i for i in range(n)]
    rows = {"入力": 5.0, "トークン": 3.9, "セグメント": 2.9, "位置": 1.9}
    w, h = 0.86, 0.56
    for label, y in rows.items():
        ax.text(0.95, y, label if label == "入力" else f"{label}の\n埋め込み", ha="right", va="center", fontsize=9)
    for i, (x, t, s) in enumerate(zip(xs, tokens, segments)):
        special = _SPECIAL.get(t)
        _box(ax, x, rows["入力"], w, h, t, color="white", edge=special or "#555555", lw=1.8 if special else 1.0,
             textcolor=special or "black", fontsize=9)
        _box(ax, x, rows["トークン"], w, h, _emb_label(t), color=_TOKEN, fontsize=9)
        _box(ax, x, rows["セグメント"], w, h, "$E_A$" if s == 0 else "$E_B$", color=_SEG[s], fontsize=9)
        _box(ax, x, rows["位置"], w, h, f"$E_{{{i}}}$", color=_POS, fontsize=9)
        for y1, y2 in ((rows["入力"], rows["トークン"]), (rows["トークン"], rows["セグメント"]), (rows["セグメント"], rows["位置"])):
            ax.text(x, (y1 + y2) / 2, "+" if y1 != rows["入力"] else "↓", ha="center", va="center", fontsize=10,
                    color="#333333")
        _arrow(ax, (x, rows["位置"] - h / 2 - 0.02), (x, 1.05))
    left, right = xs[0] - w / 2, xs[-1] + w / 2
    _box(ax, (left + right) / 2, 0.75, right - left, 0.5, "和をとって層正規化（とドロップアウト）→ 第 1 層への入力 $\\mathbf{e}_i$",
         color=_ENC, fontsize=9.5)
    # brackets for the two segments
    for seg, name in ((0, "セグメント A"), (1, "セグメント B")):
        idx = [i for i, s in enumerate(segments) if s == seg]
        if idx:
            a, b = xs[idx[0]] - w / 2, xs[idx[-1]] + w / 2
            ax.plot([a, a, b, b], [5.42, 5.5, 5.5, 5.42], color="#777777", lw=1)
            ax.text((a + b) / 2, 5.62, f"{name}（番号 {seg}）", ha="center", va="bottom", fontsize=9)
    ax.set(xlim=(-0.4, xs[-1] + 0.8), ylim=(0.3, 6.0))
    ax.axis("off")
    ax.set_title("BERT の入力：トークン・セグメント・位置の三つの埋め込みの和", fontsize=11)
    fig.tight_layout()
    return fig


def draw_bert_heads(tokens: Sequence[str] = ("[CLS]", "my", "[MASK]", "is", "cute", "[SEP]", "he", "likes", "[MASK]", "[SEP]")) -> plt.Figure:
    """The encoder's outputs with BERT's heads: pre-training (left) and fine-tuning (right).

    Left: the MLM head (dense + GELU + LayerNorm, then a softmax over the vocabulary
    whose weight matrix is the token embedding table) on every chosen position, and the
    NSP head (the pooler -- dense + tanh -- then a linear layer on ``C``, IsNext / NotNext). Right: where a task head goes
    in fine-tuning -- one linear layer on ``C`` for sentence(-pair) classification, the
    same linear layer on every ``T_i`` for token labelling, and start / end vectors that
    score every ``T_i`` for span extraction.

    Parameters
    ----------
    tokens : sequence of str
        The input tokens drawn under the encoder (``[MASK]`` marks the MLM positions).

    Returns
    -------
    matplotlib.figure.Figure
    """
    if len(tokens) < 2:
        raise ValueError("tokens needs at least [CLS] and one more token.")
    n = len(tokens)
    fig, axes = plt.subplots(2, 1, figsize=(8.4, 8.0), gridspec_kw={"height_ratios": [1.25, 0.62]})  # one panel per row: readable
    w, h = 0.8, 0.5

    # --- pre-training ---------------------------------------------------------
    ax = axes[0]
    xs = [1.0 + i for i in range(n)]
    for x, t in zip(xs, tokens):
        special = _SPECIAL.get(t)
        _box(ax, x, 0.6, w, h, t, edge=special or "#555555", lw=1.8 if special else 1.0, textcolor=special or "black", fontsize=9)
        _arrow(ax, (x, 0.87), (x, 1.35))
    left, right = xs[0] - w / 2, xs[-1] + w / 2
    _box(ax, (left + right) / 2, 2.0, right - left, 1.2, "Transformer のエンコーダ（BERT-base で 12 層、双方向の自己注意）", color=_ENC, fontsize=10)
    outs = ["$C$"] + [f"$T_{{{i}}}$" for i in range(1, n)]
    for x, o in zip(xs, outs):
        _arrow(ax, (x, 2.62), (x, 3.05))
        _box(ax, x, 3.3, w, h, o, color="#ffffff", fontsize=9)
    _box(ax, xs[0], 4.65, 1.75, 1.0, "NSP ヘッド\nプーラーと線形層\n→ 2 値", color=_HEAD, fontsize=9)
    _arrow(ax, (xs[0], 3.57), (xs[0], 4.13))
    ax.text(xs[0], 5.3, "IsNext / NotNext", ha="center", fontsize=9)
    masked = [x for x, t in zip(xs, tokens) if t == "[MASK]"]
    for x in masked:
        _box(ax, x, 4.65, 1.9, 1.0, "MLM ヘッド\n語彙全体の softmax", color=_HEAD, fontsize=9)
        _arrow(ax, (x, 3.57), (x, 4.13))
        ax.text(x, 5.3, "元の語を当てる", ha="center", fontsize=9)
    ax.text((left + right) / 2, 5.75, "MLM ヘッドの出力層の重みは、トークンの埋め込み表と共有（転置して使う）", ha="center", fontsize=9,
            color="#555555")
    ax.text((left + right) / 2, 6.15, "MLM ヘッドは選ばれた全ての位置（[MASK]・ランダムな語・そのまま）に付く。図は [MASK] の位置だけを描いた",
            ha="center", fontsize=9, color="#555555")
    ax.set(xlim=(0.0, xs[-1] + 0.8), ylim=(0.1, 6.6), title="事前学習：二つのヘッド")  # from 0: the NSP box is wider than a token
    ax.axis("off")

    # --- fine-tuning ----------------------------------------------------------
    ax = axes[1]
    tasks = [
        ("文（対）の分類\n(MNLI, SST-2 …)", "$C$ だけに\n線形層 $W \\in \\mathbb{R}^{K\\times H}$", [0]),
        ("トークンごとのラベル\n(固有表現抽出 NER)", "全ての $T_i$ に\n同じ線形層", list(range(1, 6))),
        ("答えの範囲の抽出\n(SQuAD)", "全ての $T_i$ に始点・終点の\nスコア $S\\cdot T_i$, $E\\cdot T_i$", list(range(1, 6))),
    ]
    m = 6
    for row, (task, head, used) in enumerate(tasks):
        y = 4.9 - 1.3 * row
        ax.text(0.0, y, task, ha="left", va="center", fontsize=10.5)
        for j in range(m):
            x = 2.9 + 0.62 * j
            label = "$C$" if j == 0 else f"$T_{{{j}}}$"
            on = j in used
            _box(ax, x, y, 0.5, 0.42, label, color=_HEAD if on else "white", edge="#555555" if on else "#bbbbbb",
                 textcolor="black" if on else "#999999", fontsize=10)
        ax.text(2.9 + 0.62 * m + 0.05, y, head, ha="left", va="center", fontsize=10.5)
    ax.set(xlim=(0, 9.8), ylim=(1.7, 5.5), title="ファインチューニング：ヘッドの置き場所は課題で決まる")
    ax.axis("off")
    fig.tight_layout()
    return fig
