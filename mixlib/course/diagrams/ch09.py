"""Concept figures for chapter 9 (sentence vectors): bi-encoder vs cross-encoder, and how a bi-encoder is trained.

* :func:`draw_bi_vs_cross` -- left, the bi-encoder (Siamese): each sentence goes
  alone through the same encoder (shared weights), is mean-pooled into ``u`` /
  ``v``, and the two are compared by cosine; right, the cross-encoder: both
  sentences in one input ``[CLS] A [SEP] B [SEP]``, one score from ``C``.
* :func:`draw_training_objectives` -- the two ways a bi-encoder is trained:
  Sentence-BERT's NLI classifier on ``(u, v, |u - v|)`` and the in-batch
  contrastive loss (a B x B similarity matrix whose diagonal holds the positives).

Diagrams only: nothing is computed from a model.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .ch08 import _arrow, _box

__all__ = ["draw_bi_vs_cross", "draw_training_objectives"]

_ENC = "#f2f2f2"
_POOL = "#dce6f2"
_VEC = ("#fde3c8", "#d9ead3")
_HEAD = "#fff2cc"


def draw_bi_vs_cross(sentence_a: str = "A cat sleeps on a laptop.", sentence_b: str = "A kitten naps on a computer.") -> plt.Figure:
    """Bi-encoder (Siamese, left) next to cross-encoder (right).

    Parameters
    ----------
    sentence_a, sentence_b : str
        The two sentences written into the diagram.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        An empty sentence.
    """
    if not sentence_a.strip() or not sentence_b.strip():
        raise ValueError("both sentences must be non-empty text.")
    fig, axes = plt.subplots(2, 1, figsize=(7.6, 10.4))  # one panel per row: readable at the column width

    ax = axes[0]
    for x, s, name, col in ((1.6, sentence_a, "u", _VEC[0]), (4.4, sentence_b, "v", _VEC[1])):
        _box(ax, x, 0.6, 2.4, 0.55, s, fontsize=8.5)
        _arrow(ax, (x, 0.9), (x, 1.35))
        _box(ax, x, 2.0, 1.9, 1.2, "エンコーダ\n（BERT と同じ構造）", color=_ENC, fontsize=9)
        _arrow(ax, (x, 2.62), (x, 3.05))
        _box(ax, x, 3.3, 2.0, 0.5, "平均プーリング", color=_POOL, fontsize=9)
        _arrow(ax, (x, 3.57), (x, 4.0))
        _box(ax, x, 4.25, 0.9, 0.5, f"${name}$", color=col, fontsize=11)
    ax.annotate("", xy=(3.42, 2.0), xytext=(2.58, 2.0), arrowprops=dict(arrowstyle="<->", color="#aa3333", ls="--"))
    ax.text(3.0, 2.15, "重みを\n共有", ha="center", va="bottom", fontsize=8, color="#aa3333")
    _arrow(ax, (2.05, 4.5), (2.7, 5.05))
    _arrow(ax, (3.95, 4.5), (3.3, 5.05))
    _box(ax, 3.0, 5.3, 2.3, 0.5, "$\\cos(u, v)$", color=_HEAD, fontsize=10)
    ax.text(3.0, -0.05, "文ごとに 1 回ずつ通す：$M$ 文の全組の比較はエンコーダ $M$ 回 + 内積", ha="center", fontsize=8.5, color="#444444")
    ax.set(xlim=(0, 6), ylim=(-0.35, 5.9), title="バイエンコーダ（シャム構成）")
    ax.axis("off")

    ax = axes[1]
    _box(ax, 3.0, 0.6, 5.4, 0.55, f"[CLS] {sentence_a} [SEP] {sentence_b} [SEP]", fontsize=8.5)
    _arrow(ax, (3.0, 0.9), (3.0, 1.35))
    _box(ax, 3.0, 2.3, 4.6, 1.8, "エンコーダ\n（両方の文の語どうしに自己注意が張られる）", color=_ENC, fontsize=9)
    _arrow(ax, (1.2, 3.22), (1.2, 3.75))
    _box(ax, 1.2, 4.0, 0.8, 0.5, "$C$", fontsize=10)
    _arrow(ax, (1.2, 4.27), (1.2, 4.8))
    _box(ax, 2.4, 5.05, 3.2, 0.5, "線形層 → 類似度や含意のスコア", color=_HEAD, fontsize=9)
    ax.text(3.0, -0.05, "組ごとに 1 回通す：$M$ 文の全組の比較はエンコーダ $M(M-1)/2$ 回", ha="center", fontsize=8.5, color="#444444")
    ax.set(xlim=(0, 6), ylim=(-0.35, 5.9), title="クロスエンコーダ")
    ax.axis("off")
    fig.tight_layout()
    return fig


def draw_training_objectives(batch_size: int = 5) -> plt.Figure:
    """How a bi-encoder is trained: SBERT's NLI classifier (left) and the in-batch contrastive loss (right).

    Parameters
    ----------
    batch_size : int, default 5
        Rows/columns of the drawn similarity matrix (2 to 12).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        ``batch_size`` outside 2..12.
    """
    if not 2 <= int(batch_size) <= 12:
        raise ValueError(f"batch_size={batch_size} should be between 2 and 12 for a readable drawing.")
    b = int(batch_size)
    fig, axes = plt.subplots(2, 1, figsize=(7.6, 8.6), gridspec_kw={"height_ratios": [1, 0.8]})  # one panel per row: readable

    ax = axes[0]
    for x, name, col, s in ((1.4, "u", _VEC[0], "前提文"), (3.6, "v", _VEC[1], "仮説文")):
        _box(ax, x, 0.55, 1.6, 0.5, s, fontsize=9)
        _arrow(ax, (x, 0.82), (x, 1.25))
        _box(ax, x, 1.6, 1.9, 0.6, "エンコーダ + 平均", color=_ENC, fontsize=8.5)
        _arrow(ax, (x, 1.92), (x, 2.35))
        _box(ax, x, 2.6, 0.7, 0.45, f"${name}$", color=col, fontsize=10)
    xs = [1.4, 2.5, 3.6]
    for x, lab, col in zip(xs, ("$u$", "$v$", "$|u-v|$"), (_VEC[0], _VEC[1], "#eeeeee")):
        _box(ax, x, 3.55, 1.0, 0.45, lab, color=col, fontsize=9.5)
    _arrow(ax, (1.4, 2.84), (1.4, 3.3))
    _arrow(ax, (3.45, 2.84), (2.6, 3.3))
    _arrow(ax, (1.75, 2.84), (3.45, 3.3), ls="--")
    _arrow(ax, (3.65, 2.84), (3.65, 3.3), ls="--")
    ax.text(4.3, 3.55, "連結（$3d$ 次元）", va="center", fontsize=8.5)
    _arrow(ax, (2.5, 3.8), (2.5, 4.25))
    _box(ax, 2.5, 4.55, 3.4, 0.55, "線形層 + softmax：含意 / 中立 / 矛盾", color=_HEAD, fontsize=9)
    ax.text(2.5, 5.2, "学習が終わったら分類器は捨て、$\\cos(u, v)$ だけを使う", ha="center", fontsize=8.5, color="#444444")
    ax.set(xlim=(0, 5.6), ylim=(0.1, 5.6), title="Sentence-BERT：NLI の分類で学習する")
    ax.axis("off")

    ax = axes[1]
    M = np.full((b, b), 0.15)
    np.fill_diagonal(M, 1.0)
    ax.imshow(M, cmap="Greens", vmin=0, vmax=1.2)
    for i in range(b):
        for j in range(b):
            ax.text(j, i, f"$s_{{{i + 1}{j + 1}}}$", ha="center", va="center", fontsize=8.5,
                    color="white" if i == j else "#555555")
    ax.set_xticks(range(b), [f"$v_{{{j + 1}}}$" for j in range(b)])
    ax.set_yticks(range(b), [f"$u_{{{i + 1}}}$" for i in range(b)])
    ax.set_xlabel("バッチの中の組の 2 文目（正例は同じ番号、残りは負例）")
    ax.set_ylabel("組の 1 文目")
    ax.set_title("バッチ内負例の対照学習：各行で対角を当てる\n$s_{ij} = \\lambda\\cos(u_i, v_j)$、損失 $-\\log\\,\\mathrm{softmax}_j(s_{ij})|_{j=i}$",
                 fontsize=10)
    ax.grid(False)
    fig.tight_layout()
    return fig
