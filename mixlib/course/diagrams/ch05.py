"""Concept figure of chapter 5: additive attention over the encoder states and the alignment it produces.

:func:`draw_attention` draws one decoder step: the state s_{t-1} scores every
encoder state h_s, the softmax turns the scores into weights a_{t,s}, and the
context vector c_t is their weighted mean; beside it, the whole matrix a_{t,s}
(the alignment). The weights are passed in (chapter 5 passes those of its
trained model); the function only draws them.
"""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyArrowPatch

from .ch04 import arrow, box

__all__ = ["draw_attention"]


def draw_attention(source: str, output: Sequence[str], weights: np.ndarray, *, step: int | None = None, caption: str = "") -> plt.Figure:
    """One attention step (left) and the alignment matrix a_{t,s} (right).

    Parameters
    ----------
    source : str
        The S input characters.
    output : sequence of str
        The T output symbols (rows of ``weights``), e.g. the generated characters and ``<eos>``.
    weights : array (T, S)
        Attention weights; each row should sum to 1.
    step : int, optional
        0-based row shown on the left (default: the middle row).
    caption : str
        A line under the figure (e.g. which model produced the weights).
    """
    W = np.asarray(weights, dtype=float)
    S, T = len(source), len(output)
    if W.shape != (T, S):
        raise ValueError(f"weights must have shape (len(output), len(source)) = ({T}, {S}); got {W.shape}.")
    if S == 0 or T == 0:
        raise ValueError("source and output must be non-empty.")
    t = T // 2 if step is None else step
    if not 0 <= t < T:
        raise ValueError(f"step must be in 0..{T - 1}, got {step}.")
    # one panel per row, so that the text stays readable at the book's column width
    fig = plt.figure(figsize=(8.2, 8.0))
    ax = fig.add_axes([0.0, 0.47, 1.0, 0.5])
    ax2 = fig.add_axes([0.27, 0.05, 0.4, 0.34])
    dx = min(0.9, 9.0 / S)
    xs = np.arange(S) * dx
    span = xs[-1] if S > 1 else 1.0
    ax.set_xlim(-0.8, span + 3.0)
    ax.set_ylim(-0.7, 4.1)
    ax.axis("off")
    hb = []
    for s, ch in enumerate(source):
        xi = box(ax, xs[s], -0.25, ch, w=0.6 * dx / 0.9, h=0.45, color="input", fontsize=9)
        hb.append(box(ax, xs[s], 0.7, f"$h_{{{s + 1}}}$" if S <= 12 else "", w=0.7 * dx / 0.9, h=0.55, fontsize=9))
        arrow(ax, xi, hb[-1], lw=0.8)
    # the weighted sum: line width and opacity follow a_{t,s}
    cx, cy = span / 2, 2.35
    c = box(ax, cx, cy, "$\\mathbf{c}_t=\\sum_s a_{t,s}\\mathbf{h}_s$", w=2.3, h=0.6, color="vector", fontsize=10)
    for s in range(S):
        a = W[t, s]
        ax.add_patch(FancyArrowPatch((xs[s], 1.0), (cx, cy - 0.3), arrowstyle="-|>", mutation_scale=8,
                                     color="#8a2f86", lw=0.4 + 6 * a, alpha=0.15 + 0.85 * a, shrinkA=1, shrinkB=2))
        if S <= 16:
            ax.text(xs[s], 1.12, f"{a:.2f}", ha="center", va="bottom", fontsize=9.5, color="#8a2f86", zorder=5,
                    bbox=dict(fc="white", ec="none", pad=0.6, alpha=0.9))  # readable over its own (thick) arrow
    sp = box(ax, span + 1.6, 0.7, "$\\mathbf{s}_{t-1}$", w=1.0, h=0.55, color="state")
    ax.text(cx, 3.3, "スコア $e_{t,s}=\\mathbf{v}^\\top\\tanh(W\\mathbf{s}_{t-1}+U\\mathbf{h}_s)$ → softmax で重み $a_{t,s}$",
            ha="center", va="bottom", fontsize=9.5)
    arrow(ax, sp, c, ls="--", lw=1.0, color="#777777")
    st = box(ax, span + 1.6, 2.35, "$\\mathbf{s}_t$ → 出力 " + f"「{output[t]}」", w=2.2, h=0.55, color="output", fontsize=9)
    arrow(ax, c, st)
    arrow(ax, sp, st)
    ax.text(span / 2, -0.62, f"エンコーダの状態（入力 {S} 文字）：線の太さ＝重み $a_{{{t + 1},s}}$", ha="center", va="top", fontsize=9)
    ax.set_title(f"出力の {t + 1} 文字目を作る注意の 1 ステップ", fontsize=11)
    im = ax2.imshow(W, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax2.set_xticks(range(S), list(source), fontsize=9 if S > 15 else 10)
    ax2.set_yticks(range(T), list(output), fontsize=9 if T > 15 else 10)
    ax2.axhline(t, color="#ff7f0e", lw=1.0, alpha=0.8)
    ax2.set(xlabel="入力の位置 s", ylabel="出力の位置 t", title="アライメント（alignment）$a_{t,s}$")
    ax2.grid(False)
    fig.colorbar(im, ax=ax2, fraction=0.05, pad=0.03)
    if caption:
        from ...plots import note_below

        note_below(fig, caption)
    return fig

