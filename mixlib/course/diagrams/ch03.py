"""Concept figures of chapter 3: the skip-gram window and negative sampling.

:func:`draw_skipgram_window` shows one sentence, a centre word and the
context words inside a window of ``m`` words on each side, each of which the
centre word must predict. :func:`draw_negative_sampling` shows what one
training example of SGNS compares: the dot product of the centre vector
:math:`v_i` with the true context's :math:`u_o` (pushed up through
:math:`\\log\\sigma`) and with ``K`` noise words drawn from
:math:`P_n(w) \\propto \\#(w)^{3/4}` (pushed down). Nothing here computes a
result; the functions return matplotlib Figures with Japanese labels.
"""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from . import canvas

__all__ = ["draw_skipgram_window", "draw_negative_sampling"]

_FILL = {"center": "#fde9c9", "context": "#dbe8f6", "outside": "#f4f4f4", "negative": "#f6dcdc", "vector": "#e4f2dc"}
_EDGE = "#333333"


def _box(ax: plt.Axes, x: float, y: float, text: str, *, w: float, h: float, kind: str, fontsize: float = 11, ls: str = "-") -> None:
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                fc=_FILL[kind], ec=_EDGE, lw=1.2, ls=ls))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax: plt.Axes, start: tuple[float, float], end: tuple[float, float], *, color: str = _EDGE, rad: float = 0.0, lw: float = 1.3) -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color=color, lw=lw,
                                 connectionstyle=f"arc3,rad={rad}", shrinkA=2, shrinkB=2))


def draw_skipgram_window(
    tokens: Sequence[str] = ("the", "king", "loves", "his", "crown", "and", "his", "palace"),
    center: int = 3,
    window: int = 2,
) -> plt.Figure:
    """One sentence with the centre word, its window and the (centre, context) pairs it yields.

    Parameters
    ----------
    tokens : sequence of str
        The sentence, one word per box.
    center : int, default 3
        Position (0-based) of the centre word :math:`w_t`.
    window : int, default 2
        The window size ``m``: words at distance 1..m on each side are contexts.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        An empty sentence, a centre outside it, or a window below 1.
    """
    tokens = list(tokens)
    if not tokens:
        raise ValueError("tokens must hold at least one word.")
    if not 0 <= center < len(tokens):
        raise ValueError(f"center must be a position in the sentence (0..{len(tokens) - 1}); got {center}.")
    if window < 1:
        raise ValueError(f"window must be >= 1; got {window}.")
    n = len(tokens)
    step, w, h = 1.35, 1.15, 0.62
    fig, ax = canvas(max(7.5, 1.05 * n + 0.8), 3.4, xlim=(-0.9, step * (n - 1) + 0.9), ylim=(-1.9, 1.9))
    y = 0.0
    lo, hi = max(0, center - window), min(n - 1, center + window)
    # the window
    ax.add_patch(FancyBboxPatch((lo * step - w / 2 - 0.12, y - h / 2 - 0.14), (hi - lo) * step + w + 0.24, h + 0.28,
                                boxstyle="round,pad=0.02,rounding_size=0.12", fc="none", ec="#c44e52", lw=1.6, ls="--"))
    ax.text(lo * step - w / 2 - 0.1, y + h / 2 + 0.22, f"窓（左右 m = {window} 語）", color="#c44e52", fontsize=10, ha="left", va="bottom")
    for i, tok in enumerate(tokens):
        kind = "center" if i == center else ("context" if lo <= i <= hi else "outside")
        _box(ax, i * step, y, tok, w=w, h=h, kind=kind)
        ax.text(i * step, y - h / 2 - 0.18, f"$w_{{t{i - center:+d}}}$" if i != center else "$w_t$", ha="center", va="top",
                fontsize=10.5, color="#555555")
    # arrows from the centre to every context word
    for i in range(lo, hi + 1):
        if i == center:
            continue
        rad = -0.35 if i < center else 0.35
        _arrow(ax, (center * step, y - h / 2 - 0.45), (i * step, y - h / 2 - 0.45), color="#4c72b0", rad=rad)
    ax.text(center * step, -1.75, f"中心語 {tokens[center]} から、窓の中の {hi - lo} 語をそれぞれ予測する（{hi - lo} 個の学習例）",
            ha="center", va="bottom", fontsize=10)
    ax.text(-0.8, 1.55, "skip-gram：中心語 → 文脈語", fontsize=12, ha="left", va="center")
    legend = [("center", "中心語（入力ベクトル $v$）"), ("context", "文脈語（予測する語、出力ベクトル $u$）"), ("outside", "窓の外（この例では使わない）")]
    for k, (kind, label) in enumerate(legend):
        x0 = step * (n - 1) + 0.9 - 4.9
        _box(ax, x0, 1.62 - 0.34 * k, "", w=0.32, h=0.22, kind=kind)
        ax.text(x0 + 0.25, 1.62 - 0.34 * k, label, fontsize=10, ha="left", va="center")
    fig.tight_layout()
    return fig


def draw_negative_sampling(
    center: str = "his",
    positive: str = "crown",
    negatives: Sequence[str] = ("mayor", "the", "sour", "went", "river"),
) -> plt.Figure:
    """One SGNS example: the true pair is pulled together, ``K`` noise words are pushed away.

    Parameters
    ----------
    center : str
        The centre word ``i`` (its input vector :math:`v_i`).
    positive : str
        A context word ``o`` that really occurred in the window.
    negatives : sequence of str
        ``K`` noise words :math:`n_k` (in training they are drawn from
        :math:`P_n(w) \\propto \\#(w)^{3/4}`; here they are labels only).

    Returns
    -------
    matplotlib.figure.Figure
    """
    negatives = list(negatives)
    if not negatives:
        raise ValueError("negatives must name at least one noise word (K >= 1).")
    K = len(negatives)
    # 9.8 data units across, as wide as the drawing (an image wider than the column shrinks its text)
    fig, ax = canvas(8.2, 0.62 * K + 3.5, xlim=(-0.4, 9.4), ylim=(-1.25 - 0.62 * K, 2.4))
    _box(ax, 1.2, 0.6, f"{center}\n$v_i$", w=1.6, h=0.95, kind="center")
    ax.text(1.2, 1.45, "中心語", ha="center", fontsize=10)
    # positive
    yp = 1.6
    _box(ax, 5.2, yp, f"{positive}\n$u_o$", w=1.6, h=0.8, kind="context")
    _arrow(ax, (2.05, 0.8), (4.35, yp), color="#4c72b0", lw=1.8)
    ax.text(6.2, yp, r"$\sigma(u_o^\top v_i)$ を 1 に近づける" + "\n（本当に窓の中にあった語）", fontsize=10, ha="left", va="center", color="#4c72b0")
    # negatives
    ax.text(5.2, 0.55, f"負例 K = {K} 語（$P_n(w) \\propto \\#(w)^{{3/4}}$ から無作為に選ぶ）", fontsize=10, ha="center", va="center")
    for k, word in enumerate(negatives):
        yk = -0.1 - 0.62 * k
        _box(ax, 5.2, yk, f"{word}  $u_{{n_{k + 1}}}$", w=2.0, h=0.52, kind="negative", fontsize=11, ls="--")
        _arrow(ax, (2.05, 0.35), (4.2, yk), color="#c44e52", lw=1.0)
    ymid = -0.1 - 0.62 * (K - 1) / 2
    ax.text(6.35, ymid, r"$\sigma(u_{n_k}^\top v_i)$ を 0 に近づける" + "\n" + r"$= \sigma(-u_{n_k}^\top v_i)$ を 1 に近づける",
            fontsize=10, ha="left", va="center", color="#c44e52")
    ax.text(-0.3, 2.25, "負例サンプリング：語彙全体の softmax の代わりに、1 + K 個の二値分類", fontsize=12, ha="left", va="center")
    ax.text(-0.3, -0.6 - 0.62 * K,
            r"損失 $\ell = -\log\sigma(u_o^\top v_i) - \sum_{k=1}^{K}\log\sigma(-u_{n_k}^\top v_i)$", fontsize=11, ha="left", va="center")
    ax.text(-0.3, -1.15 - 0.62 * K, "1 例あたりの計算は、語彙の大きさ V ではなく K に比例する", fontsize=11, ha="left", va="center")
    fig.tight_layout()
    return fig
