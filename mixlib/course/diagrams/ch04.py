"""Concept figures of chapter 4: an unrolled RNN, a GRU cell, the encoder-decoder bottleneck.

Every ``draw_*`` function returns a matplotlib Figure and computes nothing:
these are pictures of the architecture the chapter's formulas describe. The
small drawing helpers (:func:`box`, :func:`arrow`) are shared by the
chapter 5 and 6 diagrams.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

from . import canvas

__all__ = ["box", "arrow", "node", "canvas", "draw_unrolled_rnn", "draw_gru_cell", "draw_encoder_decoder"]

#: colours used in every concept figure of Part II-III
COLORS = {
    "input": "#dbe8f6",  # tokens, embeddings
    "state": "#fde9c9",  # recurrent states, hidden vectors
    "gate": "#e4f2dc",  # gates, sub-layers
    "output": "#f6dcdc",  # predictions
    "vector": "#f3d1f0",  # the fixed-length vector c, context vectors
    "norm": "#eeeeee",  # LayerNorm, Add
    "edge": "#333333",
}




def box(ax: plt.Axes, x: float, y: float, text: str, *, w: float = 1.0, h: float = 0.6, color: str = "state", fontsize: float = 10, lw: float = 1.2, ls: str = "-") -> tuple[float, float, float, float]:
    """Draw a rounded box centred at ``(x, y)`` with ``text``; returns ``(x, y, w, h)`` for :func:`arrow`."""
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                fc=COLORS.get(color, color), ec=COLORS["edge"], lw=lw, ls=ls))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)
    return (x, y, w, h)


def node(ax: plt.Axes, x: float, y: float, text: str, *, r: float = 0.17, fontsize: float = 10) -> tuple[float, float, float, float]:
    """A small circle (an element-wise operation such as $\\odot$ or +) centred at ``(x, y)``."""
    ax.add_patch(Circle((x, y), r, fc="white", ec=COLORS["edge"], lw=1.2))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)
    return (x, y, 2 * r, 2 * r)


def _edge_point(b: tuple[float, float, float, float], toward: tuple[float, float]) -> tuple[float, float]:
    """Where the segment from the centre of box ``b`` toward ``toward`` leaves the box."""
    x, y, w, h = b
    dx, dy = toward[0] - x, toward[1] - y
    if dx == 0 and dy == 0:
        return x, y
    sx = (w / 2) / abs(dx) if dx else float("inf")
    sy = (h / 2) / abs(dy) if dy else float("inf")
    s = min(sx, sy)
    return x + dx * s, y + dy * s


def arrow(ax: plt.Axes, a, b, *, text: str = "", color: str = "#333333", lw: float = 1.3, rad: float = 0.0, ls: str = "-", fontsize: float = 9.5, text_offset: tuple[float, float] = (0.0, 0.0)) -> None:
    """Arrow from ``a`` to ``b``; each is a box tuple ``(x, y, w, h)`` (from its edge) or a point ``(x, y)``."""
    pa = (a[0], a[1]) if len(a) == 2 else _edge_point(a, (b[0], b[1]))
    pb = (b[0], b[1]) if len(b) == 2 else _edge_point(b, (a[0], a[1]))
    ax.add_patch(FancyArrowPatch(pa, pb, arrowstyle="-|>", mutation_scale=11, color=color, lw=lw,
                                 connectionstyle=f"arc3,rad={rad}", linestyle=ls, shrinkA=1, shrinkB=1))
    if text:
        ax.text((pa[0] + pb[0]) / 2 + text_offset[0], (pa[1] + pb[1]) / 2 + text_offset[1], text, fontsize=fontsize,
                ha="center", va="center", color=color, bbox=dict(fc="white", ec="none", pad=0.5, alpha=0.85))


def draw_unrolled_rnn(n_steps: int = 4, words: tuple[str, ...] | None = None) -> plt.Figure:
    """An RNN language model folded (one cell with a loop) and unrolled over ``n_steps`` time steps.

    The same weights (the same cell) are used at every step; the state h_t carries
    what has been read so far, and each step predicts the next word.
    """
    if n_steps < 2:
        raise ValueError(f"n_steps must be at least 2 to show the recurrence, got {n_steps}.")
    words = tuple(words) if words is not None else ("<bos>", "the", "king", "eats", "an", "apple")[:n_steps]
    if len(words) != n_steps:
        raise ValueError(f"words must have n_steps={n_steps} entries, got {len(words)}.")
    fig, ax = canvas(1.6 + 1.4 * n_steps, 2.9, xlim=(-0.6, 2.6 + 1.9 * n_steps), ylim=(-0.45, 3.25))  # ~8.6 in for 5 steps: readable
    # folded
    x_in = box(ax, 0.5, 0.2, "$x_t$", color="input")
    cell = box(ax, 0.5, 1.4, "RNN\n$h_t$", h=0.8)
    out = box(ax, 0.5, 2.6, "$p(w_{t+1})$", w=1.1, color="output")
    arrow(ax, x_in, cell)
    arrow(ax, cell, out)
    ax.add_patch(FancyArrowPatch((1.0, 1.55), (1.0, 1.25), arrowstyle="-|>", mutation_scale=11, color="#c44e52", lw=1.3,
                                 connectionstyle="arc3,rad=-2.2"))
    ax.text(1.3, 1.95, "$h_{t-1}$", color="#c44e52", fontsize=9, va="center")
    ax.text(2.0, 1.4, "=", fontsize=18, va="center", ha="center")
    # unrolled
    prev = None
    for t in range(n_steps):
        x = 2.9 + 1.9 * t
        xi = box(ax, x, 0.2, f"{words[t]}\n$x_{{{t + 1}}}$", w=1.15, h=0.62, color="input", fontsize=9)
        c = box(ax, x, 1.4, f"RNN\n$h_{{{t + 1}}}$", h=0.8)
        o = box(ax, x, 2.6, f"$p(w_{{{t + 2}}})$", w=1.1, color="output", fontsize=9)
        arrow(ax, xi, c)
        arrow(ax, c, o)
        if prev is not None:
            arrow(ax, prev, c, color="#c44e52")
        prev = c
    ax.text(2.9 + 0.95 * (n_steps - 1), 3.12, "同じ重み（同じセル）を各時刻で使い回す。赤い矢印が状態 $h_{t-1}$ を次の時刻へ運ぶ",
            ha="center", fontsize=9)
    ax.set_title("RNN 言語モデル：たたんだ形（左）と時間方向に展開した形（右）", fontsize=11, pad=12)
    return fig


def draw_gru_cell() -> plt.Figure:
    """One GRU step with its update gate z, reset gate r, candidate state and the interpolation.

    The formulas under the drawing compare Cho et al. (2014), where r multiplies
    h_{t-1} before the product with U, with PyTorch's ``nn.GRU``, where r
    multiplies the product (U h_{t-1} + b).
    """
    fig, ax = canvas(9.2, 5.6, xlim=(-0.9, 8.6), ylim=(-1.75, 4.0))
    # the state line along the top
    h_in = box(ax, -0.3, 3.3, "$h_{t-1}$", w=0.9)
    h_out = box(ax, 7.9, 3.3, "$h_t$", w=0.8)
    x_in = box(ax, -0.3, 0.0, "$x_t$", w=0.9, color="input")
    z = box(ax, 1.8, 1.6, "更新ゲート\n$z_t=\\sigma(\\cdot)$", w=1.6, h=0.75, color="gate", fontsize=9)
    r = box(ax, 1.8, 0.0, "リセットゲート\n$r_t=\\sigma(\\cdot)$", w=1.6, h=0.75, color="gate", fontsize=9)
    rh = node(ax, 3.4, 0.0, "$\\odot$")
    cand = box(ax, 5.25, 0.0, "候補\n$\\tilde h_t=\\tanh(\\cdot)$", w=1.6, h=0.75, color="state", fontsize=9)
    one_minus = box(ax, 5.0, 1.6, "$1-z_t$", w=0.8, h=0.45, color="norm", fontsize=9)
    keep = node(ax, 3.6, 3.3, "$\\odot$")
    new = node(ax, 6.4, 1.6, "$\\odot$")
    plus = node(ax, 6.4, 3.3, "+")
    # state line
    arrow(ax, h_in, keep)
    arrow(ax, keep, plus, text="$z_t\\odot h_{t-1}$（残す）", text_offset=(0, 0.3))
    arrow(ax, plus, h_out)
    # gates read x_t and h_{t-1}
    for g in (z, r):
        arrow(ax, x_in, g, color="#4c72b0")
        arrow(ax, (0.1, 3.05), g, color="#c44e52", lw=1.0)
    arrow(ax, z, keep, text="$z_t$", text_offset=(0.25, 0))
    arrow(ax, z, one_minus)
    arrow(ax, r, rh, text="$r_t$", text_offset=(0, 0.22))
    arrow(ax, (0.25, 3.05), rh, color="#c44e52", lw=1.0, rad=-0.25)
    arrow(ax, rh, cand, text="$r_t\\odot h_{t-1}$", text_offset=(-0.05, 0.28))
    arrow(ax, (0.15, -0.3), cand, color="#4c72b0", rad=0.25)
    arrow(ax, cand, new)
    arrow(ax, one_minus, new)
    arrow(ax, new, plus, text="$(1-z_t)\\odot\\tilde h_t$（書き込む）", text_offset=(0.95, 0))
    ax.text(3.9, -1.0, "本書・Cho ら (2014)：$\\tilde h_t=\\tanh(Wx_t+U(r_t\\odot h_{t-1}))$　— r は積の前に掛かる",
            ha="center", fontsize=9.5)
    ax.text(3.9, -1.5, "PyTorch の nn.GRU：$n_t=\\tanh(W_{n}x_t+b_{in}+r_t\\odot(U_{n}h_{t-1}+b_{hn}))$　— r は積の後に掛かる",
            ha="center", fontsize=9.5)
    ax.set_title("GRU の 1 ステップ：z は「前の状態をどれだけ残すか」、r は「候補を作るとき前の状態をどれだけ使うか」", fontsize=10.5)
    return fig


def draw_encoder_decoder(source: str = "abcde", target: str | None = None, *, highlight: bool = True) -> plt.Figure:
    """The chapter's encoder-decoder: a bidirectional GRU reads ``source``; only the fixed-length vector c reaches the decoder.

    Parameters
    ----------
    source : str
        The input characters (one box each); its length is what chapter 4's widget varies.
    target : str, optional
        The output characters (default: ``source`` reversed, the chapter's task).
    highlight : bool
        Colour c and label it as the bottleneck.
    """
    if not source:
        raise ValueError("source must be a non-empty string.")
    target = source[::-1] if target is None else target
    S, T = len(source), len(target)
    step = 0.95
    width = max(S, T + 1) * step * 2 + 3.7
    fig, ax = canvas(min(16.0, 0.4 + 0.52 * width), 3.4, xlim=(-0.7, width), ylim=(-0.5, 3.55))  # ~9 in for 6 characters: readable
    enc_boxes = []
    for s, ch in enumerate(source):
        x = s * step
        xi = box(ax, x, 0.0, ch, w=0.7, h=0.5, color="input")
        hb = box(ax, x, 1.25, f"$h_{{{s + 1}}}$", w=0.75, h=0.6)
        arrow(ax, xi, hb)
        if enc_boxes:
            arrow(ax, (enc_boxes[-1][0] + 0.38, 1.38), (x - 0.38, 1.38), color="#4c72b0", lw=1.0)
            arrow(ax, (x - 0.38, 1.12), (enc_boxes[-1][0] + 0.38, 1.12), color="#dd8452", lw=1.0)
        enc_boxes.append(hb)
    cx = (S - 1) * step + 1.6
    c = box(ax, cx, 1.25, "$\\mathbf{c}$", w=0.8, h=0.8, color="vector" if highlight else "state", lw=2.2 if highlight else 1.2)
    arrow(ax, enc_boxes[-1], c, color="#4c72b0", text=f"$\\overrightarrow{{h}}_{{{S}}}$",  # the box's own index, not S
          text_offset=(0, 0.32))
    arrow(ax, (enc_boxes[0][0], 1.55), (cx - 0.2, 1.62), color="#dd8452", rad=-0.18, text="$\\overleftarrow{h}_1$",
          text_offset=(0, 0.55))
    d0 = cx + 1.9
    prev = c
    dec_in = ["<bos>"] + list(target)
    for t in range(T + 1):
        x = d0 + t * step
        yi = box(ax, x, 0.0, dec_in[t], w=0.78 if t else 0.9, h=0.5, color="input", fontsize=8 if t == 0 else 10)
        sb = box(ax, x, 1.25, f"$s_{{{t + 1}}}$", w=0.75, h=0.6)
        out = box(ax, x, 2.45, (list(target) + ["<eos>"])[t], w=0.78 if t < T else 0.9, h=0.5, color="output",
                  fontsize=10 if t < T else 8)
        arrow(ax, yi, sb)
        arrow(ax, sb, out)
        arrow(ax, prev, sb, color="#c44e52" if t == 0 else "#333333")
        prev = sb
    ax.text((S - 1) * step / 2, -0.45, f"エンコーダ（双方向 GRU）：入力 {S} 文字", ha="center", va="top", fontsize=9)
    ax.text(d0 + T * step / 2, -0.45, "デコーダ（GRU）：1 文字ずつ出力", ha="center", va="top", fontsize=9)
    if highlight:
        # one line above c, where neither the arc nor the boxes run (below c it ran into the boxes of long inputs)
        ax.text(cx, 3.45, f"$\\mathbf{{c}}$：固定長のベクトル（入力が {S} 文字でも同じ大きさ）", ha="center", va="top", fontsize=8.5,
                color="#8a2f86")
    ax.set_title("エンコーダ・デコーダ：デコーダに渡るのは $\\mathbf{c}$ だけ（固定長のボトルネック）", fontsize=11)
    return fig
