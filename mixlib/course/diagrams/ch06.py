"""Concept figures of chapter 6: the Transformer encoder-decoder, Q/K/V in self- vs cross-attention, post-LN vs pre-LN.

Drawings only (nothing is computed). Labels follow the chapter: post-LN layers
``LayerNorm(x + Sublayer(x))``, the padding mask on every attention over
source positions, the causal mask (with the padding mask) in the decoder's
self-attention.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from . import canvas
from .ch04 import arrow, box, node

__all__ = ["draw_transformer", "draw_qkv", "draw_post_pre_ln"]

_MASK = "#c44e52"
_RES = "#2a7f62"


def _residual(ax, x_from: float, y_from: float, y_to: float, x_side: float, half_width: float) -> None:
    """A residual path: from the stream at y_from, out to x_side, up, and back into the Add box (half width) at y_to."""
    ax.plot([x_from, x_side, x_side], [y_from, y_from, y_to], color=_RES, lw=1.4)
    arrow(ax, (x_side, y_to), (x_from + (half_width if x_side > x_from else -half_width), y_to), color=_RES, lw=1.4)


def _sublayer(ax, x: float, y: float, label: str, *, side: float, w: float = 2.9, color: str = "gate", mask: str = "") -> float:
    """Sub-layer box at y, then 'Add & LayerNorm' above it with the residual on ``side``; returns the top y."""
    sub = box(ax, x, y, label, w=w, h=0.5, color=color, fontsize=10)
    norm = box(ax, x, y + 0.8, "Add & LayerNorm", w=w, h=0.4, color="norm", fontsize=10)
    arrow(ax, sub, norm)
    _residual(ax, x, y - 0.45, y + 0.8, x + side, w / 2)
    if mask:
        ax.text(x - side * 0.9, y, mask, color=_MASK, fontsize=10, ha="left" if side < 0 else "right", va="center")
    return y + 0.8


def draw_transformer() -> plt.Figure:
    """The post-LN encoder-decoder of Vaswani et al. (2017) as built in chapter 6.

    Left the encoder (self-attention with the source padding mask, FFN), right
    the decoder (self-attention with causal + padding masks, cross-attention
    whose K and V come from the encoder output, FFN); residual paths in green,
    masks in red. No text is under 10 pt, and the drawing is about 1,000 px wide
    at 110 dpi, so that the site's 688 px column shows its text at 10 px or more.
    """
    fig, ax = canvas(11.5, 9.2, xlim=(-1.9, 9.4), ylim=(-1.45, 9.0))
    ex, dx = 1.5, 5.75
    # encoder
    e_in = box(ax, ex, -0.9, "上の句（原文）のトークン列", w=3.2, h=0.42, color="input", fontsize=10)
    e_emb = box(ax, ex, 0.0, "埋め込み×$\\sqrt{d_\\mathrm{model}}$ ＋ 位置符号化", w=3.7, h=0.45, color="input", fontsize=10)
    arrow(ax, e_in, e_emb)
    ax.add_patch(plt.Rectangle((ex - 2.0, 0.55), 4.0, 3.75, fc="none", ec="#888888", lw=1.0, ls="--"))
    ax.text(ex - 2.1, 4.15, "×N", ha="right", fontsize=11)
    top = _sublayer(ax, ex, 1.1, "多頭自己注意 (Q=K=V=x)", side=-1.65)
    ax.text(ex - 2.12, 1.1, "パディング\nマスク", color=_MASK, fontsize=10, ha="right", va="center")  # outside the ×N box, as in the decoder
    arrow(ax, e_emb, (ex, 0.85))
    top2 = _sublayer(ax, ex, top + 0.8, "FFN（位置ごと）", side=-1.75)
    arrow(ax, (ex, top + 0.2), (ex, top + 0.55))
    enc_out = box(ax, ex, 5.4, "エンコーダの出力（メモリ）", w=3.1, h=0.45, color="state", fontsize=10)
    arrow(ax, (ex, top2 + 0.2), enc_out)
    # decoder
    d_in = box(ax, dx, -0.9, "<bos> ＋ 下の句を右へ 1 つずらした列", w=3.75, h=0.42, color="input", fontsize=10)
    d_emb = box(ax, dx, 0.0, "埋め込み×$\\sqrt{d_\\mathrm{model}}$ ＋ 位置符号化", w=3.7, h=0.45, color="input", fontsize=10)
    arrow(ax, d_in, d_emb)
    ax.add_patch(plt.Rectangle((dx - 2.15, 0.55), 4.3, 5.95, fc="none", ec="#888888", lw=1.0, ls="--"))
    ax.text(dx + 2.25, 6.35, "×N", ha="left", fontsize=11)
    t1 = _sublayer(ax, dx, 1.1, "多頭自己注意 (Q=K=V=y)", side=2.0, mask="")
    ax.text(dx + 2.3, 1.1, "因果マスク\n＋パディング\nマスク", color=_MASK, fontsize=10, ha="left", va="center")
    arrow(ax, d_emb, (dx, 0.85))
    t2 = _sublayer(ax, dx, t1 + 0.8, "交差注意 (Q=デコーダ, K=V=メモリ)", side=2.0, w=3.75)
    ax.text(dx + 2.3, t1 + 0.8, "原文の\nパディング\nマスク", color=_MASK, fontsize=10, ha="left", va="center")
    arrow(ax, (dx, t1 + 0.2), (dx, t1 + 0.55))
    arrow(ax, enc_out, (dx - 3.75 / 2 - 0.03, t1 + 0.8), color="#4c72b0", lw=1.8, text="K, V", text_offset=(0.0, 0.25), fontsize=10)
    t3 = _sublayer(ax, dx, t2 + 0.8, "FFN（位置ごと）", side=2.0)
    arrow(ax, (dx, t2 + 0.2), (dx, t2 + 0.55))
    gen = box(ax, dx, 7.35, "線形層 → softmax：次のトークンの確率", w=4.1, h=0.45, color="output", fontsize=10)
    arrow(ax, (dx, t3 + 0.2), gen)
    out = box(ax, dx, 8.2, "下の句＋<eos>（1 つ先のトークン）", w=3.9, h=0.42, color="output", fontsize=10)
    arrow(ax, gen, out)
    ax.text(ex, 6.2, "エンコーダ", ha="center", fontsize=12)
    ax.text(dx, 8.75, "デコーダ", ha="center", fontsize=12)
    ax.plot([7.85, 8.25], [-0.9, -0.9], color=_RES, lw=1.4)
    ax.text(8.3, -0.9, "残差結合", color=_RES, fontsize=10, va="center")
    ax.text(7.85, -1.3, "赤：マスク", color=_MASK, fontsize=10, va="center")
    ax.set_title("Transformer のエンコーダ・デコーダ（post-LN：LayerNorm(x + Sublayer(x))）", fontsize=12)
    return fig


def draw_qkv() -> plt.Figure:
    """Where Q, K and V come from: self-attention (all from one sequence) vs cross-attention (Q from the decoder, K and V from the encoder)."""
    fig, axes = plt.subplots(2, 1, figsize=(7.2, 9.2))  # one panel per row: readable at the column width
    for ax in axes:
        ax.set_xlim(-0.5, 6.5)
        ax.set_ylim(-0.6, 4.2)
        ax.set_aspect("equal")
        ax.axis("off")
    for ax, cross in zip(axes, (False, True)):
        if cross:
            y = box(ax, 1.0, 0.0, "デコーダの列 $Y$", w=2.0, h=0.5, color="input", fontsize=9)
            m = box(ax, 4.6, 0.0, "エンコーダの出力 $M$", w=2.4, h=0.5, color="state", fontsize=9)
            srcs = (y, m, m)
        else:
            x = box(ax, 3.0, 0.0, "同じ列 $X$", w=2.0, h=0.5, color="input", fontsize=9)
            srcs = (x, x, x)
        qkv = []
        for i, (name, src) in enumerate(zip("QKV", srcs)):
            px = 1.0 + 2.0 * i
            p = box(ax, px, 1.3, f"$W^{name}$", w=0.9, h=0.45, color="gate", fontsize=10)
            arrow(ax, src, p)
            qkv.append(box(ax, px, 2.25, f"${name}$", w=0.7, h=0.42, color="vector", fontsize=10))
            arrow(ax, p, qkv[-1])
        att = box(ax, 3.0, 3.45, "softmax$(QK^\\top/\\sqrt{d_k})\\,V$", w=3.4, h=0.5, color="output", fontsize=10)
        for q in qkv:
            arrow(ax, q, att)
        ax.set_title("交差注意：Q はデコーダ、K と V はエンコーダから" if cross else "自己注意：Q, K, V はすべて同じ列から", fontsize=10.5)
        ax.text(3.0, -0.55, "出力はデコーダの位置の数だけ並ぶ（各位置が原文のどこを見るか）" if cross
                else "出力は列の位置の数だけ並ぶ（各位置が同じ列のどこを見るか）", ha="center", va="top", fontsize=8.5)
    return fig


def draw_post_pre_ln() -> plt.Figure:
    """One sub-layer in post-LN (Vaswani et al. 2017, BERT) and pre-LN (GPT-2 and most later models) form."""
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 4.6))
    for ax in axes:
        ax.set_xlim(-1.8, 2.2)
        ax.set_ylim(-0.5, 4.6)
        ax.set_aspect("equal")
        ax.axis("off")
    # post-LN: x -> sublayer -> (+ x) -> LN
    ax = axes[0]
    x = box(ax, 0, 0, "$x$", w=0.8, h=0.4, color="input")
    sub = box(ax, 0, 1.3, "Sublayer", w=1.5, h=0.45, color="gate", fontsize=9)
    add = node(ax, 0, 2.35, "+")
    ln = box(ax, 0, 3.2, "LayerNorm", w=1.5, h=0.45, color="norm", fontsize=9)
    out = box(ax, 0, 4.2, "次の層へ", w=1.3, h=0.4, color="output", fontsize=9)
    arrow(ax, x, sub)
    arrow(ax, sub, add)
    arrow(ax, add, ln)
    arrow(ax, ln, out)
    ax.plot([0, -1.2, -1.2], [0.3, 0.3, 2.35], color=_RES, lw=1.4)
    arrow(ax, (-1.2, 2.35), add, color=_RES)
    ax.set_title("post-LN：LayerNorm(x + Sublayer(x))\n（原論文・BERT・第 7 章のモデル）", fontsize=10)
    ax.text(0.3, -0.45, "残差の流れそのものが毎層で正規化される", fontsize=8.5, ha="center", va="top")
    # pre-LN: x -> LN -> sublayer -> (+ x)
    ax = axes[1]
    x = box(ax, 0, 0, "$x$", w=0.8, h=0.4, color="input")
    ln = box(ax, 0, 1.1, "LayerNorm", w=1.5, h=0.45, color="norm", fontsize=9)
    sub = box(ax, 0, 2.1, "Sublayer", w=1.5, h=0.45, color="gate", fontsize=9)
    add = node(ax, 0, 3.15, "+")
    out = box(ax, 0, 4.2, "次の層へ", w=1.3, h=0.4, color="output", fontsize=9)
    arrow(ax, x, ln)
    arrow(ax, ln, sub)
    arrow(ax, sub, add)
    arrow(ax, add, out)
    ax.plot([0, -1.2, -1.2], [0.3, 0.3, 3.15], color=_RES, lw=1.4)
    arrow(ax, (-1.2, 3.15), add, color=_RES)
    ax.set_title("pre-LN：x + Sublayer(LayerNorm(x))\n（GPT-2 以降の多くのモデル）", fontsize=10)
    ax.text(0.3, -0.45, "残差の流れは正規化されずに素通りする", fontsize=8.5, ha="center", va="top")
    return fig
