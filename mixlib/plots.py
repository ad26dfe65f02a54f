"""Figures with Japanese labels, one colour per token category, the model's name in every caption.

Every chapter calls :func:`setup` once (the parameters/model cell does it), then
draws with seaborn. Analysis figures end with :func:`caption`, so that a figure
copied out of the book still says which model produced it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import matplotlib
import matplotlib.pyplot as plt

__all__ = ["CATEGORY_ORDER", "CATEGORY_COLORS", "TYPE_ORDER", "JA_TYPE_ORDER", "ALL_TYPE_ORDER", "TYPE_COLORS", "setup", "caption", "model_label"]

#: Token categories of Kobayashi et al., Fig. 2 (the order used in every table and legend).
CATEGORY_ORDER = ("[CLS]", "[SEP]", "[MASK]", "句読点", "その他")
#: One colour per category, used in every chapter.
CATEGORY_COLORS = {
    "全体": "#333333",
    "[CLS]": "#d62728",
    "[SEP]": "#1f77b4",
    "[MASK]": "#2ca02c",
    "句読点": "#ff7f0e",
    "その他": "#7f7f7f",
}
#: Token types of Maeda et al., Table 3.
TYPE_ORDER = ("Words", "Subwords", "Symbols", "Numbers", "Special", "Tags")
#: The token types of a Japanese vocabulary (:data:`mixlib.japanese.TYPES`).
JA_TYPE_ORDER = ("漢字", "ひらがな", "カタカナ", "混在", "ラテン文字", "その他の文字", "サブワード", "数字", "記号", "特殊", "タグ")
#: Both lists: a figure shows the types present in it, in this order.
ALL_TYPE_ORDER = TYPE_ORDER + JA_TYPE_ORDER
TYPE_COLORS = {
    "Words": "#4c72b0",
    "Subwords": "#55a868",
    "Symbols": "#c44e52",
    "Numbers": "#8172b2",
    "Special": "#937860",
    "Tags": "#da8bc3",
    # Japanese: the shared kinds keep the English colours (subwords, symbols, numbers, special, tags)
    "漢字": "#4c72b0",
    "ひらがな": "#dd8452",
    "カタカナ": "#64b5cd",
    "混在": "#8c8c8c",
    "ラテン文字": "#ccb974",
    "その他の文字": "#2f4b7c",
    "サブワード": "#55a868",
    "数字": "#8172b2",
    "記号": "#c44e52",
    "特殊": "#937860",
    "タグ": "#da8bc3",
}


def setup(context: str = "notebook", *, dpi: int = 110) -> None:
    """Seaborn theme + a Japanese font (IPAexGothic from matplotlib-fontja), and pandas
    tables that show every column (up to 40) and the whole text of every cell.

    ``seaborn.set_theme`` resets the font family, so the Japanese font is
    applied after it; calling :func:`setup` again is harmless.
    """
    import matplotlib_fontja
    import seaborn as sns

    sns.set_theme(context=context, style="whitegrid")
    matplotlib_fontja.japanize()
    matplotlib.rcParams["axes.unicode_minus"] = False  # IPAexGothic has no U+2212
    matplotlib.rcParams["figure.dpi"] = dpi
    matplotlib.rcParams["savefig.dpi"] = dpi
    matplotlib.rcParams["figure.autolayout"] = False
    # tables: show every column and the whole text of a cell (pandas' defaults cut both
    # with "...", which on the site reads as data); a table too wide to read is the
    # notebook's to shorten
    import pandas as pd

    pd.set_option("display.max_columns", 40)
    pd.set_option("display.max_colwidth", None)
    if os.environ.get(TEXT_CHECK_ENV):
        watch_text_sizes(float(os.environ[TEXT_CHECK_ENV]))


# ---------------------------------------------------------------------------
#: :func:`heat_cells`: a cell's text is white on a background whose relative luminance is below this, black above.
#: At 0.179 black and white have the same contrast with the background, so the text has at least 4.58:1 on any
#: colour (WCAG asks 4.5:1 for body text).
HEAT_TEXT_THRESHOLD = 0.179


def _luminance(rgb: Sequence[float]) -> float:
    """WCAG's relative luminance of an RGB colour with channels in [0, 1]."""
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb[:3]]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def heat_cells(styler: Any, cmap: str, vmin: float, vmax: float) -> Any:
    """Colour each number of a pandas ``Styler`` by its value, with text a reader can read on the colour.

    The colours are ``Styler.background_gradient(cmap=cmap, vmin=vmin, vmax=vmax)``'s; the text is black or white,
    whichever contrasts more (:data:`HEAT_TEXT_THRESHOLD`). pandas' own choice (a threshold of 0.408 and #f1f1f1 for
    white) gave 94 cells of chapters 10–12 between 2.05:1 and 4.5:1. A cell that is not a number is left as it is.
    """
    import numbers

    from matplotlib import colors

    norm, colormap = colors.Normalize(vmin, vmax, clip=True), matplotlib.colormaps[cmap]

    def css(value: Any) -> str:
        if not isinstance(value, numbers.Real) or value != value:  # not a number, or NaN
            return ""
        rgba = colormap(norm(float(value)))
        text = "#000000" if _luminance(rgba) > HEAT_TEXT_THRESHOLD else "#ffffff"
        return f"background-color: {colors.to_hex(rgba)}; color: {text};"

    return (styler.map if hasattr(styler, "map") else styler.applymap)(css)

# Text a reader can read on the site: the book's column is 688 px wide, and a wider image is
# shrunk to it, its text with it. The notebook tests and `make book` set MIXLIB_MIN_TEXT_PX, so that
# every figure the book draws is measured as it is rendered (a warning in the cell's output fails both).

#: Width of the site's output column in CSS px (a wider image is scaled down to it).
COLUMN_PX = 688
#: Smallest text (CSS px, as shown on the site) the notebook tests and the book build accept: the
#: body text is 16 px, the kernel-free charts' axis labels 11 px.
MIN_TEXT_PX = 10.0
#: The environment variable that turns the check on in :func:`setup` (its value: the minimum in px).
TEXT_CHECK_ENV = "MIXLIB_MIN_TEXT_PX"
#: The start of the warning :func:`watch_text_sizes` emits (the notebook tests look for it).
SMALL_TEXT_WARNING = "figure text too small on the site"
# what the installed check compares with (watch_text_sizes sets it; the wrapper reads it at each render)
_TEXT_CHECK = {"min_px": MIN_TEXT_PX, "column_px": float(COLUMN_PX)}


def _visible_texts(artist: Any):
    """Every visible, non-empty Text under ``artist`` (a hidden parent hides its children)."""
    from matplotlib.text import Text

    if not artist.get_visible():
        return
    if isinstance(artist, Text) and artist.get_text().strip():
        yield artist
    for child in artist.get_children():
        yield from _visible_texts(child)


def shown_text_sizes(fig: plt.Figure, image_width_px: float, *, dpi: float | None = None,
                     column_px: float = COLUMN_PX) -> list[tuple[float, str]]:
    """``(size in CSS px as the site shows it, text)`` for every visible text of ``fig``, smallest first.

    ``image_width_px``: the width of the saved image (after ``bbox_inches="tight"``); an image wider
    than ``column_px`` is shown shrunk to it. A text of ``s`` pt is ``s · dpi / 72`` px in the image.
    """
    dpi = float(dpi if dpi is not None else fig.dpi)
    scale = min(1.0, column_px / float(image_width_px))
    sizes = [(t.get_fontsize() * dpi / 72.0 * scale, t.get_text()) for t in _visible_texts(fig)]
    return sorted(sizes, key=lambda st: st[0])


def _png_width(data: bytes) -> int | None:
    if data[:8] != b"\x89PNG\r\n\x1a\n" or len(data) < 24:
        return None
    return int.from_bytes(data[16:20], "big")


def watch_text_sizes(min_px: float = MIN_TEXT_PX, *, column_px: float = COLUMN_PX) -> None:
    """Warn (``UserWarning``) whenever a figure is rendered to PNG in memory (as Jupyter's inline
    backend does) with text smaller than ``min_px`` CSS px on the site. Idempotent: calling it again
    only changes the minimum.
    """
    import io
    import warnings

    from matplotlib.backend_bases import FigureCanvasBase

    _TEXT_CHECK["min_px"] = float(min_px)
    _TEXT_CHECK["column_px"] = float(column_px)
    if getattr(FigureCanvasBase.print_figure, "_mixlib_text_check", False):
        return
    original = FigureCanvasBase.print_figure

    def print_figure(self, filename, *args, **kwargs):
        result = original(self, filename, *args, **kwargs)
        if isinstance(filename, io.BytesIO):
            width = _png_width(filename.getvalue())
            dpi = kwargs.get("dpi")
            dpi = self.figure.dpi if dpi in (None, "figure") else dpi
            if width:
                small = [(px, text) for px, text in shown_text_sizes(self.figure, width, dpi=dpi,
                                                                     column_px=_TEXT_CHECK["column_px"])
                         if px < _TEXT_CHECK["min_px"] - 1e-9]
                if small:
                    listed = "; ".join(f"{text[:40]!r} {px:.1f} px" for px, text in small[:6])
                    more = f" (and {len(small) - 6} more)" if len(small) > 6 else ""
                    warnings.warn(
                        f"{SMALL_TEXT_WARNING}: {len(small)} text(s) under {_TEXT_CHECK['min_px']:g} px in a "
                        f"{width} px wide image shown at most {_TEXT_CHECK['column_px']:g} px wide: {listed}{more}. "
                        "Make the figure narrower (its text grows with it) or its fonts larger.",
                        UserWarning, stacklevel=2)
        return result

    print_figure._mixlib_text_check = True  # type: ignore[attr-defined]
    FigureCanvasBase.print_figure = print_figure  # type: ignore[method-assign]



def model_label(enc_or_name: Any) -> str:
    """``enc.describe()`` for an Encoder, the string itself otherwise."""
    describe = getattr(enc_or_name, "describe", None)
    return describe() if callable(describe) else str(enc_or_name)


def caption(fig: plt.Figure | None, enc_or_name: Any, note: str = "", *, label: str = "モデル") -> plt.Figure:
    """Write ``モデル: <describe()>`` (and an optional note) under the figure.

    ``label="出典"`` for a figure drawn from a paper's numbers rather than from a model.
    Returns the figure so it can be the last expression of a cell.
    """
    fig = fig if fig is not None else plt.gcf()
    text = f"{label}: {model_label(enc_or_name)}"
    if note:
        text += f"　{note}"
    # below everything the axes draw (tick labels and x labels may reach under the figure's
    # bottom edge when no tight_layout was called); bbox_inches="tight" keeps it in the image
    renderer = fig.canvas.get_renderer()
    bottoms = [ax.get_tightbbox(renderer).y0 / fig.bbox.height for ax in fig.axes if ax.get_visible()]
    y = min([0.0, *bottoms]) - 0.01
    # the saved image spans the figure or what sticks out of it (a legend outside the axes), whichever is wider
    image_px = max(fig.bbox.width, fig.get_tightbbox(renderer).width * fig.dpi)
    note_below(fig, text, y=y, fontsize=_caption_pt(fig, image_px))
    return fig


def note_below(fig: plt.Figure, text: str, *, y: float = -0.02, fontsize: float = 9.5) -> Any:
    """Grey text centred under the figure at height ``y`` (figure fraction), wrapped to the figure's width
    (:func:`wrap_to_width`), so that a long note does not widen the saved image and shrink its labels."""
    wrapped = wrap_to_width(text, fig.bbox.width * 0.98, fontsize=fontsize, renderer=fig.canvas.get_renderer())
    return fig.text(0.5, y, wrapped, ha="center", va="top", fontsize=fontsize, color="#444444")


#: Where :func:`label_points` tries a label, in order: offsets in points from its dot, and the alignment that keeps
#: the text on that side (right, left, above, below, then the four diagonals).
_LABEL_SPOTS = [((5, 0), "left", "center"), ((-5, 0), "right", "center"), ((0, 5), "center", "bottom"),
                ((0, -5), "center", "top"), ((4, 4), "left", "bottom"), ((-4, 4), "right", "bottom"),
                ((4, -4), "left", "top"), ((-4, -4), "right", "top")]


def label_points(ax: Any, xy: Any, texts: Sequence[str], *, fontsize: float = 10, first: Sequence[int] | None = None,
                 dot_px: float = 4.0, **text_kw: Any) -> list[Any]:
    """Write ``texts[i]`` next to the point ``xy[i]`` where it overlaps no other label and no dot, if such a spot exists.

    Labels are placed one by one; each takes the first of :data:`_LABEL_SPOTS` (starting at ``first[i]``, e.g. 1 to
    prefer the left) that overlaps nothing placed so far, no dot other than its own (a ``dot_px`` square around each
    point) and stays inside the axes; where every spot overlaps, the one with the least overlap. Call it after the
    axes' limits are final (the spots are measured in pixels). ``text_kw`` goes to each label (e.g. a ``bbox`` that
    keeps it readable over lines drawn under it). Returns the Text artists.
    """
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    pts = ax.transData.transform(_np.asarray(xy, dtype=float))
    dots = [(x - dot_px, y - dot_px, x + dot_px, y + dot_px) for x, y in pts]
    frame = ax.get_window_extent(renderer)
    placed: list[tuple[float, float, float, float]] = []

    def overlap(a, b):
        return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))

    out = []
    for i, (point, text) in enumerate(zip(_np.asarray(xy, dtype=float), texts)):
        start = first[i] if first is not None else 0
        order = _LABEL_SPOTS[start:] + _LABEL_SPOTS[:start]
        best = None
        for offset, ha, va in order:
            t = ax.annotate(text, point, xytext=offset, textcoords="offset points", ha=ha, va=va, fontsize=fontsize, **text_kw)
            e = t.get_window_extent(renderer)
            box = (e.x0, e.y0, e.x1, e.y1)
            cost = sum(overlap(box, b) for b in placed) + sum(overlap(box, d) for k, d in enumerate(dots) if k != i)
            cost += e.width * e.height * (e.x0 < frame.x0 or e.x1 > frame.x1 or e.y0 < frame.y0 or e.y1 > frame.y1)
            if best is None or cost < best[0]:
                if best is not None:
                    best[1].remove()
                best = (cost, t, box)
            else:
                t.remove()
            if cost == 0:
                break
        placed.append(best[2])
        out.append(best[1])
    return out


def _break_after(text: str, i: int) -> bool:
    """May a line end after ``text[i]``? After a space or any wide (Japanese) character, and after
    punctuation; never inside a run of Latin letters or digits, nor before 、。）」 (kinsoku)."""
    import unicodedata

    if i + 1 >= len(text):
        return True
    this, nxt = text[i], text[i + 1]
    if nxt in "、。，．）」』］｝・：；！？)]}.,:;!?":
        return False
    if this in "（「『［｛(":
        return False
    return this.isspace() or unicodedata.east_asian_width(this) in "WF" or unicodedata.east_asian_width(nxt) in "WF" \
        or this in "-/,;:)]"


def wrap_to_width(text: str, width_px: float, *, fontsize: float, renderer: Any = None) -> str:
    """Break ``text`` into lines no wider than ``width_px`` (display px of the figure at ``fontsize`` pt),
    measured with matplotlib's own text layout.

    Japanese may break between any two characters (a line ends at a space or punctuation when one is in
    its last 30 %); Latin words stay whole. Existing line breaks are kept; a single word wider than the
    width stays on its line.
    """
    from matplotlib.font_manager import FontProperties

    if renderer is None:
        from matplotlib.backends.backend_agg import RendererAgg

        renderer = RendererAgg(1000, 100, matplotlib.rcParams["figure.dpi"])
    prop = FontProperties(size=fontsize)

    def width(s: str) -> float:
        return renderer.get_text_width_height_descent(s, prop, ismath=False)[0]

    lines = []
    for para in text.split("\n"):
        while para and width(para) > width_px:
            cut = good = 0
            for i in range(len(para)):
                if _break_after(para, i):
                    if width(para[: i + 1].rstrip()) > width_px:
                        break
                    cut = i + 1
                    if para[i].isspace() or para[i] in "、。，）」』］】" or (i + 1 < len(para) and para[i + 1] in "（「『［【"):
                        good = i + 1
            if good and width(para[:good]) >= 0.7 * width_px:  # a line ends at a space or punctuation where it can
                cut = good
            if cut == 0:  # one unbreakable piece wider than the line: keep it whole
                cut = next((i + 1 for i in range(len(para)) if _break_after(para, i)), len(para))
            lines.append(para[:cut].rstrip())
            para = para[cut:].lstrip()
        lines.append(para)
    return "\n".join(lines)


def _caption_pt(fig: plt.Figure, image_px: float, shown_px: float = 10.5) -> float:
    """9 pt, or more on an image wider than the site's column, so that the caption is shown at
    ``shown_px`` px or more after the column shrinks the image to its width."""
    return max(9.0, shown_px * 72.0 / fig.dpi * max(1.0, image_px / COLUMN_PX))


#: Japanese headers for the column / index names that mixlib's tables and the course's
#: data frames use in code (English, so that ``df["layer"]`` reads as the code around it).
JA_LABELS = {
    # chapters 3-5, 7, 9: analogy and accuracy tables, the poems, the sentences
    "questions": "問いの数", "pairs": "組の数", "accuracy": "正解率", "baseline": "基準",
    "difference": "差", "length": "長さ", "char_accuracy": "文字ごとの正解率", "relation": "関係",
    "number": "番号", "poet": "歌人", "kami_no_ku": "上の句", "shimo_no_ku": "下の句",
    "group": "場面", "sentence": "文", "epoch": "エポック",
    # chapter 6: what a module returns
    "module": "モジュール", "output": "出力の形", "weights": "注意の重みの形",
    # Part V
    "layer": "層", "head": "ヘッド", "category": "カテゴリ", "variant": "変種", "statistic": "統計量",
    "estimate": "推定値", "low": "区間の下端", "high": "区間の上端",
    "mean": "平均", "median": "中央値", "min": "最小", "max": "最大",
    "n_clusters": "クラスタ数", "n_tokens": "トークン数", "tokens_per_cluster": "1 クラスタのトークン数",
    "mean_norm": "平均ノルム", "mean_dist": "セントロイドまでの平均距離", "main_type": "多いタイプ",
    "upper": "上位クラスタ", "anchor": "手がかりの語", "cluster": "クラスタ", "type": "タイプ",
    "size": "大きさ", "tokens": "含まれるトークン", "psi": "ψ", "psi_qkv": "ψ_qkv", "feature": "特徴",
    "token_id": "トークン ID", "token": "トークン", "position": "位置", "cos": "コサイン",
    "r": "相関 r", "null_max": "置換での r の最大", "survives": "置換の最大を超える",
    "best_match": "最も相関する相手のヘッド", "tv": "全変動距離", "Total": "合計",
}


def _mark(value: Any) -> Any:
    """○ / × for a boolean (Python's or numpy's); any other value, 1 and 0 included, as it is."""
    if isinstance(value, (bool, _np.bool_)):
        return "○" if value else "×"
    return value


def ja_labels(df: Any) -> Any:
    """The same table for display in the book: :data:`JA_LABELS`' Japanese headers, ○/× for True/False.

    Column labels (every level), index labels and the names of both axes are
    renamed; labels not in :data:`JA_LABELS` stay as they are. Booleans (a boolean
    column, or a True/False among the text of a mixed column) show ○ (True)
    and × (False); every other value is untouched, and the frame
    the code works with keeps its English names and its booleans.
    """
    out = df.apply(lambda s: s.map(_mark) if s.dtype in (bool, object) else s)
    out = out.rename(columns=lambda c: JA_LABELS.get(c, c) if isinstance(c, str) else c)
    out = out.rename(index=lambda c: JA_LABELS.get(c, c) if isinstance(c, str) else c)
    for axis in ("index", "columns"):
        ax = getattr(out, axis)
        names = [JA_LABELS.get(n, n) if isinstance(n, str) else n for n in ax.names]
        out = out.rename_axis(names if ax.nlevels > 1 else names[0], axis=axis)
    return out


def interval(low: float, high: float, digits: int = 2, *, sign: bool = False) -> str:
    """An interval for prose and tables, ``low〜high`` with ``digits`` decimals, rounded outward (``low`` down, ``high``
    up): the printed interval holds the computed one, and a narrow interval never prints as one number twice
    (``0.95〜0.95`` would read as no uncertainty at all).

    >>> interval(0.2, 0.45), interval(0.9512, 0.9538), interval(0.95, 0.95), interval(-0.52, 0.25, 1, sign=True)
    ('0.20〜0.45', '0.95〜0.96', '0.95〜0.95', '-0.6〜+0.3')
    """
    low, high = float(low), float(high)
    if not (_np.isfinite(low) and _np.isfinite(high)) or low > high:
        raise ValueError(f"interval needs finite low <= high, got {low}〜{high}.")
    scale, tol = 10.0 ** digits, 1e-9  # tol: 0.29 * 100 is 28.999999999999996 in floating point, not below 29
    lo, hi = _np.floor(low * scale + tol) / scale, _np.ceil(high * scale - tol) / scale
    plus = "+" if sign else ""
    return f"{lo + 0.0:{plus}.{digits}f}〜{hi + 0.0:{plus}.{digits}f}"


def with_intervals(df: Any, digits: int = 1) -> Any:
    """One column per quantity, each cell ``estimate (low〜high)``, from a frame whose columns end in estimate/low/high.

    The tables of :func:`mixlib.layer_means` (and the like) hold three columns per
    quantity; shown side by side they triple the table's width. This gives the same
    numbers in one cell each, rounded to ``digits`` (as the chapters' prose rounds them), for display only.
    """
    import pandas as pd

    missing = {"estimate", "low", "high"} - set(df.columns.get_level_values(-1))
    if df.columns.nlevels < 2 or missing:
        raise ValueError("with_intervals needs two-level columns (quantity, estimate/low/high); "
                         f"got {df.columns.nlevels} level(s), missing {sorted(missing)}.")
    out = {key: [f"{e:.{digits}f} ({lo:.{digits}f}〜{hi:.{digits}f})"
                 for e, lo, hi in zip(df[key]["estimate"], df[key]["low"], df[key]["high"])]
           for key in df.columns.droplevel(-1).unique()}
    return pd.DataFrame(out, index=df.index)


_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def sci(x: float, digits: int = 1) -> str:
    """A number for prose: ``2.9 × 10⁻⁷`` instead of Python's ``2.9e-07``; plain between 0.001 and 10,000.

    ``digits`` decimals of the mantissa, i.e. ``digits + 1`` significant digits either way.

    >>> sci(2.9e-07), sci(-3.14e12), sci(0.25), sci(1234.5), sci(0.0)
    ('2.9 × 10⁻⁷', '-3.1 × 10¹²', '0.25', '1200', '0')
    """
    x = float(x)
    if not _np.isfinite(x):
        raise ValueError(f"sci needs a finite number, got {x}.")
    if x == 0 or 1e-3 <= abs(x) < 1e4:  # digits + 1 significant digits, never an exponent
        return _np.format_float_positional(x, precision=digits + 1, fractional=False, trim="-")
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"


def plain_ticks(axis: Any, *, minor: bool = False) -> None:
    """Label a (log-scaled) axis' ticks as plain numbers: 1, 10, 100 and 0.6, not 10⁰ and 6×10⁻¹.

    Call it after setting the scale (``set_xscale`` / ``ax.set(xscale=...)`` resets the formatters).
    ``minor``: the minor ticks too (a log axis spanning less than a decade labels only those).
    """
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    if minor:
        axis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


__all__ += ["JA_LABELS", "ja_labels", "interval", "with_intervals", "sci", "plain_ticks", "label_points"]
__all__ += ["HEAT_TEXT_THRESHOLD", "heat_cells"]
__all__ += ["COLUMN_PX", "MIN_TEXT_PX", "shown_text_sizes", "watch_text_sizes", "wrap_to_width", "note_below"]


# ---------------------------------------------------------------------------
# Part V figures (chapters 10-12): the analyses of Kobayashi et al. and Maeda et al.
# Every function returns its Figure, already captioned with the model (caption()).
# Layers and heads are labelled 0-based, as everywhere in code.
# ---------------------------------------------------------------------------

import numpy as _np

__all__ += [
    "font_safe",
    "COMPONENT_COLORS",
    "COMPONENT_LABELS",
    "draw_layer_diagram",
    "plot_mixing_by_layer",
    "plot_norm_heatmaps",
    "plot_token_mixing",
]

#: The three parts of a LayerNorm output that chapter 10 compares (Kobayashi et al., eq. 4-6).
COMPONENT_COLORS = {"mix": "#e4572e", "keep_attn": "#4c9be8", "keep_res": "#2e8b57"}
COMPONENT_LABELS = {
    "mix": "注意機構が混ぜる",
    "keep_attn": "注意機構が残す",
    "keep_res": "残差結合が残す",
}


def _font_codepoints() -> frozenset[int]:
    """Code points the current font family can draw (the union over ``rcParams["font.family"]``)."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    families = tuple(matplotlib.rcParams["font.family"])
    hit = _FONT_CACHE.get(families)
    if hit is None:
        points: set[int] = set()
        for fam in families:
            try:
                path = font_manager.findfont(font_manager.FontProperties(family=fam), fallback_to_default=True)
                points |= set(FT2Font(path).get_charmap())
            except (OSError, RuntimeError, ValueError):  # an unreadable font: draw nothing special
                continue
        hit = _FONT_CACHE[families] = frozenset(points)
    return hit


_FONT_CACHE: dict[tuple[str, ...], frozenset[int]] = {}


def font_safe(text: Any) -> str:
    """``text`` with every run of characters the current font cannot draw named by its script.

    Vocabulary tokens come in many scripts (Armenian, Devanagari, Thai ...)
    that the Japanese font lacks; drawing them would print a warning and an
    empty box that tells the reader nothing. A run of such characters of one
    script becomes ``<Thai>`` (the first word of the characters' Unicode
    names, so ``"##ก"`` reads ``"##<Thai>"``); a character without a name
    becomes ``□``. Use it for token strings in figures, never for mathtext.
    """
    import unicodedata

    text = str(text)
    points = _font_codepoints()
    if not points:
        return text
    box = "\u25a1" if 0x25A1 in points else "?"
    out: list[str] = []
    last = None  # the script of the previous missing character, if the previous character was missing
    for c in text:
        if c.isspace() or ord(c) in points:
            out.append(c)
            last = None
            continue
        name = unicodedata.name(c, "")
        script = name.split()[0].title() if name else None
        if script is None:
            out.append(box)
        elif script != last:
            out.append(f"<{script}>")
        last = script
    return "".join(out)


def _new_axes(ax: Any = None, figsize: tuple[float, float] = (6.0, 4.0)) -> tuple[plt.Figure, Any]:
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize)
        return fig, ax
    return ax.figure, ax


def draw_layer_diagram(ax: Any = None) -> plt.Figure:
    """One post-LN Transformer layer as a block diagram (after Kobayashi et al., Fig. 1).

    Token vectors x_1 ... x_n enter at the bottom; attention mixes them into
    token j (orange arrows from the others, a blue one from x_j itself), the
    residual connection (green) carries x_j around the attention, LayerNorm
    follows the sum, and the feed-forward block (grey: not decomposed in
    chapter 10) comes last. The dashed frame marks what the chapter splits exactly.
    Not model specific, so no model caption.
    """
    from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

    fig, ax = _new_axes(ax, figsize=(7.2, 7.6))
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.3, 12.6)
    ax.set_axis_off()

    def box(x, y, w, h, text, fc, ec="#333333", fontsize=10, alpha=1.0, color="#111111"):
        ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.08", fc=fc, ec=ec, lw=1.2, alpha=alpha))
        ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, color=color)

    def arrow(x0, y0, x1, y1, color="#333333", lw=1.4, style="-|>", ls="-", rad=0.0):
        ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle=style, mutation_scale=12, color=color, lw=lw,
                                     linestyle=ls, connectionstyle=f"arc3,rad={rad}"))

    mix_c, keep_c, res_c = COMPONENT_COLORS["mix"], COMPONENT_COLORS["keep_attn"], COMPONENT_COLORS["keep_res"]
    # the tokens
    xs = [1.4, 2.7, 4.6, 6.2, 7.6]
    labels = [r"$x_1$", r"$x_2$", r"$x_j$", r"$\cdots$", r"$x_n$"]
    for x, lab in zip(xs, labels):
        if lab == r"$\cdots$":
            ax.text(x, 0.6, lab, ha="center", va="center", fontsize=13)
            continue
        fc = "#dbe9f7" if lab == r"$x_j$" else "#f2f2f2"
        box(x, 0.6, 0.9, 0.7, lab, fc, fontsize=13)
    ax.text(0.05, 0.6, "入力", ha="left", va="center", fontsize=8.5, color="#444444")
    # attention
    box(4.4, 3.2, 6.2, 1.2, "注意機構 (attention)\n" + r"$y^{\mathrm{attn}}_j=\sum_i f_j(x_i)+b_O$", "#fde9e1", fontsize=10)
    for x, lab in zip(xs, labels):
        if lab == r"$\cdots$":
            continue
        c = keep_c if lab == r"$x_j$" else mix_c
        arrow(x, 0.98, 4.4 + (x - 4.4) * 0.55, 2.55, color=c, lw=2.0 if lab == r"$x_j$" else 1.4)
    ax.text(1.0, 2.0, "ほかのトークンから\n混ぜる", color=mix_c, fontsize=8.5, ha="center")
    ax.text(5.75, 1.75, "自分から\n残す", color=keep_c, fontsize=8.5, ha="center")
    # residual: x_j around the attention to the sum
    arrow(4.6, 0.22, 4.6, -0.1, color=res_c, lw=2.0, style="-")
    arrow(4.6, -0.1, 8.9, -0.1, color=res_c, lw=2.0, style="-")
    arrow(8.9, -0.1, 8.9, 5.2, color=res_c, lw=2.0, style="-")
    arrow(8.9, 5.2, 4.75, 5.2, color=res_c, lw=2.0)
    ax.text(9.1, 2.9, "残差結合 (residual)", color=res_c, fontsize=9, ha="left", va="center", rotation=90)
    # the sum
    arrow(4.4, 3.85, 4.4, 4.85)
    ax.add_patch(Circle((4.4, 5.2), 0.33, fc="white", ec="#333333", lw=1.3))
    ax.text(4.4, 5.2, "+", ha="center", va="center", fontsize=14)
    # LayerNorm
    arrow(4.4, 5.55, 4.4, 6.25)
    box(4.4, 6.75, 4.6, 0.9, "層正規化 (LayerNorm)\n" + r"$\mathrm{LN}(y)=\frac{y-m(y)}{s(y)}\,\gamma+\beta$", "#e7f4e4", fontsize=9.5)
    # the part chapter 10 decomposes
    ax.add_patch(Rectangle((0.45, 1.6), 9.15, 5.85, fill=False, ec="#555555", lw=1.1, ls=(0, (5, 3))))
    ax.text(9.6, 7.55, "破線の内側: この章で厳密に分解する範囲（本書の分解 (5)、論文の式 4〜7）", fontsize=8.5, color="#555555", ha="right", va="bottom")
    # feed-forward block (not decomposed)
    grey = "#9e9e9e"
    arrow(4.4, 7.2, 4.4, 8.25, color=grey)
    box(4.4, 8.75, 4.6, 0.9, "順伝播層 (FFN)\n＋残差結合＋層正規化", "#f5f5f5", ec=grey, color="#666666", fontsize=9.5)
    ax.text(7.0, 8.75, "この章では\n分解しない", fontsize=8.5, color="#777777", ha="left", va="center")
    arrow(4.4, 9.2, 4.4, 10.35, color=grey)
    box(4.4, 10.8, 3.4, 0.75, r"次の層への $x_j$", "#dbe9f7", fontsize=11)
    ax.text(4.4, 12.0, "Transformer の 1 層（post-LN, BERT 型）", ha="center", fontsize=11.5)
    return fig


def plot_mixing_by_layer(
    table: Any,
    enc: Any,
    *,
    reference: Any = None,
    reference_label: str = "論文の値（bert-base-uncased）",
    ylabel: str = "混ぜる割合 (%)",
    title: str | None = None,
    note: str = "",
) -> plt.Figure:
    """Lines per token category over the layers (Kobayashi et al., Fig. 2 / Fig. 6).

    Parameters
    ----------
    table : pandas.DataFrame
        ``mixlib.mixing_table(...)``: index ``layer`` (0-based), columns 全体
        and the categories of :data:`CATEGORY_ORDER`. A table with a
        confidence interval (``mixing_table(..., ci=0.95)``) is drawn with
        its interval as a shaded band around each line.
    enc : Encoder or str
        Named in the caption.
    reference : pandas.DataFrame, optional
        A second table of the same shape, drawn in a second panel titled
        ``reference_label``: usually the paper's (``mixlib.reference.paper_table()``),
        or the same measure under another setting. All-NaN columns are skipped.
    ylabel, title, note : str

    Returns
    -------
    matplotlib.figure.Figure
    """
    def split_ci(tab: Any) -> tuple[Any, Any]:
        """A table with ``(category, stat)`` columns (``mixing_table(..., ci=...)``) -> estimate, (low, high)."""
        if getattr(tab.columns, "nlevels", 1) == 2 and "estimate" in tab.columns.get_level_values(1):
            return tab.xs("estimate", axis=1, level=1), (tab.xs("low", axis=1, level=1), tab.xs("high", axis=1, level=1))
        return tab, None

    panels = [(*split_ci(table), title or f"本書の値（{getattr(enc, 'name', model_label(enc))}）")]
    if reference is not None:
        panels.append((*split_ci(reference), reference_label))
    # one panel per row, readable at the book's column width; one y scale, but each panel its own layers
    # (the packaged model has 6, the paper's model 12)
    fig, axes = plt.subplots(len(panels), 1, figsize=(6.0, 3.3 * len(panels) + 0.2), squeeze=False, sharey=True)
    for ax, (tab, band, ttl) in zip(axes[:, 0], panels):
        for col in tab.columns:
            y = tab[col].to_numpy(dtype=float)
            if _np.all(_np.isnan(y)):
                continue
            overall = col == "全体"
            color = CATEGORY_COLORS.get(col, "#555555")
            ax.plot(tab.index, y, marker="o", ms=4 if overall else 3.5, lw=2.6 if overall else 1.5,
                    color=color, label=col, zorder=3 if overall else 2)
            if band is not None:  # bootstrap interval as a shaded band
                ax.fill_between(tab.index, band[0][col].to_numpy(dtype=float), band[1][col].to_numpy(dtype=float),
                                color=color, alpha=0.18, lw=0, zorder=1)
        ax.set_xticks(list(tab.index))
        ax.set_title(ttl, fontsize=11)
        ax.set_ylabel(ylabel)
        ax.set_xlabel("層（0 始まり）")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.tight_layout()
    fig.legend(handles, labels, fontsize=10.5, loc="center left", bbox_to_anchor=(1.0, 0.55), frameon=False)
    return caption(fig, enc, note)


def plot_norm_heatmaps(tables: Any, enc: Any, *, fmt: str = ".1f", cmap: str = "rocket_r", shared: bool = True, annot: bool = True,
                       note: str = "") -> plt.Figure:
    """Heatmaps (layer x category) of several norm tables side by side, one colour scale.

    Parameters
    ----------
    tables : dict of str to pandas.DataFrame
        Panel title -> ``mixlib.mixing_table(m, metric=...)``.
    enc : Encoder or str
    fmt : str
        Annotation format.
    shared : bool, default True
        One colour scale for all panels, so that sizes can be compared across panels.
    annot : bool, default True
        Write each cell's value; turn off for wide tables (e.g. 12 heads) where numbers would overlap.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import seaborn as sns

    items = list(tables.items())
    if not items:
        raise ValueError("tables is empty; give at least one title -> table.")
    vmax = max(float(_np.nanmax(t.to_numpy(dtype=float))) for _, t in items) if shared else None
    vmin = 0.0 if shared else None
    n = len(items)
    rows = items[0][1].shape[0]
    # one panel per row: the numbers in the cells stay readable at the book's column width
    fig, axes = plt.subplots(n, 1, figsize=(6.6, n * (0.34 * rows + 1.3)), squeeze=False)
    for ax, (ttl, t) in zip(axes[:, 0], items):
        sns.heatmap(t.astype(float), ax=ax, annot=annot, fmt=fmt, cmap=cmap, vmin=vmin, vmax=vmax,
                    cbar=True, annot_kws={"fontsize": 8}, linewidths=0.5, linecolor="white")
        ax.set_title(ttl, fontsize=10)
        ax.set_xlabel("")
        ax.set_ylabel("層")
        ax.tick_params(axis="x", labelrotation=0, labelsize=9)
        ax.tick_params(axis="y", labelrotation=0)
        for lab in ax.get_xticklabels():
            lab.set_color(CATEGORY_COLORS.get(lab.get_text(), "#333333"))
    fig.tight_layout()
    return caption(fig, enc, note)


def plot_token_mixing(mixing: Any, enc: Any, *, layer: int, seq: int = 0, ax: Any = None, note: str = "") -> plt.Figure:
    """Per token of one sequence: stacked norms of the three parts and the mixing ratio.

    Bars stack ``||keep_res||``, ``||keep_attn||`` and ``||mix||`` (the LayerNorm-side
    vectors of :class:`mixlib.Mixing`); dots on the right axis give the ratio
    ``||mix|| / (||mix|| + ||keep_attn + keep_res||)`` in percent. Token labels are
    coloured by category (:data:`CATEGORY_COLORS`). Norms do not add up like the
    vectors do; the stack shows their sizes side by side, the ratio is the paper's number.

    Parameters
    ----------
    mixing : mixlib.Mixing
    enc : Encoder or str
    layer : int
        Model layer (0-based; must be among ``mixing.layers``).
    seq : int, default 0
        Sequence of the batch.

    Returns
    -------
    matplotlib.figure.Figure
    """
    row = mixing.row(layer)
    toks = mixing.tokens(seq)
    n = len(toks)
    real = mixing.real[seq].numpy()
    idx = _np.nonzero(real)[0][:n]
    parts = {
        "keep_res": mixing.norm_res_ln[row, seq].numpy()[idx],
        "keep_attn": mixing.norm_keep_attn_ln[row, seq].numpy()[idx],
        "mix": mixing.norm_mix_ln[row, seq].numpy()[idx],
    }
    ratio = 100.0 * mixing.ratio[row, seq].numpy()[idx]
    cats = mixing.categories[seq][idx]
    fig, ax = _new_axes(ax, figsize=(min(8.5, max(6.0, 0.2 * n + 2.0)), 4.4))
    x = _np.arange(n)
    bottom = _np.zeros(n)
    for key in ("keep_res", "keep_attn", "mix"):
        ax.bar(x, parts[key], bottom=bottom, color=COMPONENT_COLORS[key], width=0.8, label=COMPONENT_LABELS[key])
        bottom += parts[key]
    ax.set_xticks(x)
    ax.set_xticklabels([font_safe(t) for t in toks], rotation=90, fontsize=10)
    for lab, c in zip(ax.get_xticklabels(), cats):
        lab.set_color(CATEGORY_COLORS.get(str(c), "#333333"))
    ax.set_ylabel("ノルム（層正規化の後）")
    ax.set_xlim(-0.6, n - 0.4)
    ax2 = ax.twinx()
    ax2.plot(x, ratio, "o", color="#222222", ms=4, label="混ぜる割合 (%)")
    ax2.set_ylim(0, max(60.0, float(_np.nanmax(ratio)) * 1.1))
    ax2.set_ylabel("混ぜる割合 (%)")
    ax2.grid(False)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=10, loc="upper left", ncol=4)
    ax.set_ylim(0, float(bottom.max()) * 1.25)
    ax.set_title(f"層 {layer}: トークンごとの混ぜる量と残す量", fontsize=11)
    fig.tight_layout()
    return caption(fig, enc, note)


__all__ += [
    "draw_subspace_projection",
    "plot_psi_curves",
    "plot_top_clusters",
    "plot_token_psi",
    "plot_type_map",
    "plot_type_shares",
    "plot_upper_clusters",
    "plot_positional_pca",
    "plot_cos_hist",
    "attention_by_offset",
    "plot_position_attention",
    "plot_position_head",
]


def draw_subspace_projection(vectors: Any, P: Any, *, ax: Any = None) -> plt.Figure:
    """Maeda et al.'s Fig. 1 in three dimensions: vectors projected onto the row space of a 2 x 3 matrix.

    Parameters
    ----------
    vectors : dict of str to array-like of shape (3,)
        Name -> vector; each is drawn with its orthogonal projection onto the
        plane spanned by the rows of ``P`` and labelled with its norm stretch
        ``psi = (||P x|| / sqrt(2)) / (||x|| / sqrt(3))``.
    P : array-like, shape (2, 3)
    ax : a 3-D Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
        Not model specific (no model caption).
    """
    P = _np.asarray(P, dtype=float)
    if P.shape != (2, 3):
        raise ValueError(f"P must have shape (2, 3); got {P.shape}.")
    if ax is None:
        fig = plt.figure(figsize=(6.4, 5.6))
        ax = fig.add_subplot(projection="3d")
    else:
        fig = ax.figure
    # the plane: row space of P, orthonormal basis from QR
    Q, _ = _np.linalg.qr(P.T)  # (3, 2)
    s = _np.linspace(-2.6, 2.6, 2)
    S, T = _np.meshgrid(s, s)
    plane = Q[:, 0, None, None] * S + Q[:, 1, None, None] * T  # (3, 2, 2)
    ax.plot_surface(plane[0], plane[1], plane[2], color="#4c72b0", alpha=0.12, edgecolor="none")
    palette = ["#c44e52", "#55a868", "#8172b2", "#dd8452"]
    for (name, v), col in zip(vectors.items(), palette):
        v = _np.asarray(v, dtype=float)
        proj = Q @ (Q.T @ v)  # orthogonal projection onto the plane (3,)
        psi = (_np.linalg.norm(P @ v) / _np.sqrt(2)) / (_np.linalg.norm(v) / _np.sqrt(3))
        ax.quiver(0, 0, 0, *v, color=col, lw=2.2, arrow_length_ratio=0.08)
        ax.quiver(0, 0, 0, *proj, color=col, lw=1.6, ls="--", arrow_length_ratio=0.08, alpha=0.8)
        ax.plot(*zip(v, proj), color="#777777", lw=0.8, ls=":")
        ax.text(*(v * 1.08), rf"${name}$  ($\psi$={psi:.2f})", color=col, fontsize=10)
    ax.set_xlabel(r"$x_1$")
    ax.set_ylabel(r"$x_2$")
    ax.set_zlabel(r"$x_3$")
    ax.set_title("3 次元から 2 次元の部分空間への射影（実線: 元のベクトル、破線: 射影）", fontsize=10)
    ax.view_init(elev=18, azim=-58)
    return fig


def plot_psi_curves(cs: Any, enc: Any, *, layers: Any = None, ncols: int | None = None, note: str = "",
                    normalized: bool = False, null: Any = None, ylabel: str | None = None) -> plt.Figure:
    """Mean psi_qkv per cluster sorted in descending order: one panel per layer, one curve per head (Maeda Fig. 2).

    Parameters
    ----------
    cs : numpy.ndarray, (L, H, K)
        :func:`mixlib.cluster_stretch`.
    enc : Encoder or str
    layers : sequence of int, optional
        Labels of the first axis (default ``0..L-1``).
    ncols : int, optional
        Panels per row (default 3 for up to 6 layers, else 4).
    normalized : bool, default False
        ``cs`` holds normalised psi (:func:`mixlib.normalize_stretch`): a
        reference line is drawn at 1, the value of a random direction. Raw psi
        has no common reference (a random direction gets ``||P_h||_F /
        sqrt(d')``, different in every head), so no line is drawn for it.
    null : ClusterNull or (low, high), optional
        :func:`mixlib.cluster_permutation_null` (or two ``(L, H, K)`` arrays):
        the band from the lowest 2.5 % to the highest 97.5 % quantile over the
        heads of each layer is shaded (clusters of the same sizes, members
        shuffled).
    ylabel : str, optional
        Label of the y axes (e.g. when ``cs`` holds each curve divided by its
        median); the default names psi_qkv.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import seaborn as sns

    cs = _np.asarray(cs, dtype=float)
    if cs.ndim != 3:
        raise ValueError(f"cs must have shape (L, H, K); got {cs.shape}.")
    L, H, K = cs.shape
    layers = list(range(L)) if layers is None else list(layers)
    ncols = ncols or (2 if L <= 6 else 3)
    panel_w = 3.4 if ncols <= 2 else 2.4  # at most ~7.5 in of panels: shrunk to the column, the text stays >= 10 px
    band = None
    if null is not None:
        low, high = (null.null_low, null.null_high) if hasattr(null, "null_low") else null
        low, high = _np.asarray(low, dtype=float), _np.asarray(high, dtype=float)
        if low.shape != cs.shape or high.shape != cs.shape:
            raise ValueError(f"null must match cs in shape {cs.shape}; got {low.shape} and {high.shape}.")
        band = (low.min(axis=1), high.max(axis=1))  # (L, K) each
    nrows = -(-L // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_w * ncols, 2.6 * nrows), sharex=True, sharey=True, squeeze=False)
    colors = sns.color_palette("husl", H)
    rank = _np.arange(1, K + 1)
    for li in range(nrows * ncols):
        ax = axes[li // ncols][li % ncols]
        if li >= L:
            ax.set_visible(False)
            continue
        for h in range(H):
            v = cs[li, h]
            v = _np.sort(v[_np.isfinite(v)])[::-1]
            ax.plot(rank[: v.size], v, color=colors[h], lw=1.0, label=f"H{h}")
        if band is not None:
            ax.fill_between(rank, band[0][li], band[1][li], color="#888888", alpha=0.3, lw=0, label="シャッフル 95%")
        ax.set_title(f"層 {layers[li]}", fontsize=10)
        if normalized:
            ax.axhline(1.0, color="#555555", lw=0.8, ls=":", label="ランダムな方向 (1)")
    for ax in axes[-1]:
        ax.set_xlabel("クラスタの順位（大きい順）")
    for row in axes:
        row[0].set_ylabel(ylabel or (r"正規化したクラスタ平均 $\psi_{qkv}$" if normalized else r"クラスタ平均 $\psi_{qkv}$"))
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.tight_layout()
    fig.legend(handles, labels, title="ヘッド" if band is None and not normalized else None, fontsize=9.5, title_fontsize=10, loc="center left",
               bbox_to_anchor=(1.0, 0.5), frameon=False)
    return caption(fig, enc, note)


def plot_top_clusters(table: Any, enc: Any, *, layer: int, head: int, width: int = 60, ax: Any = None,
                      normalized: bool = False) -> plt.Figure:
    """Horizontal bars of psi for the top clusters of one head, coloured by cluster type (Maeda Table 2).

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`mixlib.top_clusters` (columns ``cluster``, ``type``, ``tokens``, ``psi``).
    enc : Encoder or str
    layer, head : int
        For the title (0-based).
    width : int
        Characters of the token list shown per bar.
    """
    fig, ax = _new_axes(ax, figsize=(8.0, 0.42 * len(table) + 1.4))
    y = _np.arange(len(table))[::-1]
    colors = [TYPE_COLORS.get(t, "#777777") for t in table["type"]]
    ax.barh(y, table["psi"], color=colors)
    labels = []
    for c, toks in zip(table["cluster"], table["tokens"]):
        toks = str(toks)
        labels.append(font_safe(f"#{int(c)}: " + (toks if len(toks) <= width else toks[: width - 1] + "…")))
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8.5)
    ax.set_xlabel(r"正規化したクラスタ平均 $\psi_{qkv}$" if normalized else r"クラスタ平均 $\psi_{qkv}$")
    ax.set_title(f"層 {layer}・ヘッド {head}: ノルム伸縮率が大きいクラスタ", fontsize=10)
    from matplotlib.patches import Patch

    present = [t for t in ALL_TYPE_ORDER if t in set(table["type"])]
    ax.legend(handles=[Patch(color=TYPE_COLORS[t], label=t) for t in present], fontsize=9.5, loc="lower right")
    fig.tight_layout()
    return caption(fig, enc)


def plot_token_psi(psi: Any, enc: Any, *, token: str, cluster: int | None = None, cluster_type: str | None = None,
                   layers: Any = None, ax: Any = None, normalized: bool = False) -> plt.Figure:
    """Heatmap (layer x head) of one token's psi_qkv (``normalized=True``: of its normalised psi_qkv).

    Parameters
    ----------
    psi : array-like, (L, H)
    enc : Encoder or str
    token : str
    cluster, cluster_type : optional
        Shown in the title.
    layers : sequence of int, optional
        Row labels (default ``0..L-1``).
    """
    import seaborn as sns

    psi = _np.asarray(psi, dtype=float)
    if psi.ndim != 2:
        raise ValueError(f"psi must have shape (L, H); got {psi.shape}.")
    L, H = psi.shape
    fig, ax = _new_axes(ax, figsize=(0.55 * H + 2.2, 0.42 * L + 1.6))
    sns.heatmap(psi, ax=ax, annot=True, fmt=".2f", cmap="viridis", annot_kws={"fontsize": 9},
                yticklabels=list(range(L)) if layers is None else list(layers),
                cbar_kws={"label": ("正規化した " if normalized else "") + r"$\psi_{qkv}$"})
    ax.set_xlabel("ヘッド")
    ax.set_ylabel("層")
    extra = ""
    if cluster is not None:
        extra = f"（クラスタ #{cluster}" + (f"・{cluster_type}" if cluster_type else "") + "）"
    ax.set_title(f"トークン「{font_safe(token)}」の " + ("正規化した " if normalized else "") + r"$\psi_{qkv}$" + extra, fontsize=10)
    fig.tight_layout()
    return caption(fig, enc)


def plot_type_map(tm: Any, enc: Any, *, note: str = "") -> plt.Figure:
    """The layer x head grid of the types of each head's top clusters (Maeda Fig. 3).

    Each cell is split into ``top`` vertical stripes, largest psi on the left,
    coloured by :data:`TYPE_COLORS`.

    Parameters
    ----------
    tm : pandas.DataFrame
        :func:`mixlib.type_map`: index ``layer``, columns ``head``, cells tuples of type names.
    enc : Encoder or str
    """
    from matplotlib.patches import Patch, Rectangle

    L, H = tm.shape
    top = max(len(c) for c in tm.to_numpy().ravel())
    fig, ax = plt.subplots(figsize=(0.55 * H + 2.2, 0.5 * L + 1.3))
    for i, layer in enumerate(tm.index):
        for j, head in enumerate(tm.columns):
            types = tm.loc[layer, head]
            for k, t in enumerate(types):
                ax.add_patch(Rectangle((j + k / top, i), 1 / top, 1, fc=TYPE_COLORS.get(t, "#cccccc"), ec="white", lw=0.4))
            ax.add_patch(Rectangle((j, i), 1, 1, fill=False, ec="white", lw=1.6))
    ax.set_xlim(0, H)
    ax.set_ylim(L, 0)
    ax.set_xticks(_np.arange(H) + 0.5)
    ax.set_xticklabels([str(h) for h in tm.columns])
    ax.set_yticks(_np.arange(L) + 0.5)
    ax.set_yticklabels([str(l) for l in tm.index])
    ax.set_xlabel("ヘッド")
    ax.set_ylabel("層")
    ax.grid(False)
    ax.set_title(f"各ヘッドで " + r"$\psi_{qkv}$" + f" が大きい上位 {top} クラスタのタイプ（左ほど上位）", fontsize=11)
    present = [t for t in ALL_TYPE_ORDER if any(t in c for c in tm.to_numpy().ravel())]
    ax.legend(handles=[Patch(color=TYPE_COLORS[t], label=t) for t in present], loc="center left",
              bbox_to_anchor=(1.01, 0.5), fontsize=10.5, frameon=False)
    fig.tight_layout()
    return caption(fig, enc, note)


def plot_type_shares(tm: Any, enc: Any, *, note: str = "") -> plt.Figure:
    """Per layer, the share of each type among all heads' top clusters (stacked bars): Fig. 3 summarised by layer."""
    import pandas as pd

    rows = []
    for layer in tm.index:
        cells = [t for c in tm.loc[layer] for t in c]
        counts = pd.Series(cells).value_counts(normalize=True)
        rows.append(counts.reindex(list(ALL_TYPE_ORDER)).fillna(0.0).rename(layer))
    shares = pd.DataFrame(rows)
    fig, ax = plt.subplots(figsize=(6.8, 0.36 * len(shares) + 1.6))
    left = _np.zeros(len(shares))
    y = _np.arange(len(shares))
    for t in ALL_TYPE_ORDER:
        if shares[t].sum() == 0:
            continue
        ax.barh(y, shares[t], left=left, color=TYPE_COLORS[t], label=t, height=0.75)
        left += shares[t].to_numpy()
    ax.set_yticks(y)
    ax.set_yticklabels([str(l) for l in shares.index])
    ax.set_ylim(len(shares) - 0.5, -0.5)
    ax.set_xlim(0, 1)
    ax.set_ylabel("層")
    ax.set_xlabel("上位クラスタに占める割合")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=10.5, frameon=False)
    ax.set_title("層ごとの上位クラスタのタイプの割合", fontsize=10)
    fig.tight_layout()
    return caption(fig, enc, note)


def plot_upper_clusters(table: Any, enc: Any, *, note: str = "") -> plt.Figure:
    """Composition of each upper cluster: the share of its lower clusters of each type (100% stacked bars).

    Parameters
    ----------
    table : pandas.DataFrame
        ``mixlib.recluster_centroids(...).table`` (one row per upper cluster, a
        column per type, plus ``n_clusters`` and ``n_tokens``). The row labels
        give both counts.
    """
    counts = table[[t for t in ALL_TYPE_ORDER if t in table]].to_numpy(dtype=float)  # (k, types)
    totals = counts.sum(axis=1, keepdims=True)
    shares = _np.divide(counts, totals, out=_np.zeros_like(counts), where=totals > 0)
    fig, ax = plt.subplots(figsize=(7.4, 0.45 * len(table) + 1.5))
    y = _np.arange(len(table))
    left = _np.zeros(len(table))
    for j, t in enumerate([t for t in ALL_TYPE_ORDER if t in table]):
        if counts[:, j].sum() == 0:
            continue
        ax.barh(y, shares[:, j], left=left, color=TYPE_COLORS[t], label=t, height=0.7)
        left += shares[:, j]
    ax.set_yticks(y)
    ax.set_yticklabels([f"上位 {i}（{int(c)} クラスタ・{int(n):,} 語）" for i, c, n in
                        zip(table.index, table["n_clusters"], table["n_tokens"])], fontsize=10)
    ax.set_ylim(len(table) - 0.5, -0.5)
    ax.set_xlim(0, 1)
    ax.set_xlabel("下位クラスタのタイプの割合")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=10.5, frameon=False)
    ax.set_title("セントロイドを再クラスタリングした上位クラスタの中身", fontsize=10)
    fig.tight_layout()
    return caption(fig, enc, note)


def plot_positional_pca(pos: Any, enc: Any, *, max_words: int = 6000, seed: int = 0, note: str = "") -> plt.Figure:
    """Word and position embeddings in the joint PCA coordinates (Maeda Fig. 4): PC1-PC2 and PC1-PC3.

    Words are grey dots (a random subset of ``max_words``), positions are
    coloured by their index.
    """
    W, Pc = _np.asarray(pos.word_coords), _np.asarray(pos.pos_coords)
    rng = _np.random.default_rng(seed)
    idx = rng.choice(len(W), size=min(max_words, len(W)), replace=False)
    evr = _np.asarray(pos.explained_variance_ratio)
    pairs = [(0, 1), (0, 2)] if W.shape[1] >= 3 else [(0, 1)]
    fig, axes = plt.subplots(1, len(pairs), figsize=(min(9.2, 4.6 * len(pairs)), 4.4), squeeze=False)
    for ax, (a, b) in zip(axes[0], pairs):
        ax.scatter(W[idx, a], W[idx, b], s=3, color="#9a9a9a", alpha=0.35, label="単語埋め込み", rasterized=True)
        sc = ax.scatter(Pc[:, a], Pc[:, b], s=7, c=_np.arange(len(Pc)), cmap="plasma", label="位置ベクトル")
        ax.set_xlabel(f"第 {a + 1} 主成分（{evr[a]:.1%}）")
        ax.set_ylabel(f"第 {b + 1} 主成分（{evr[b]:.1%}）")
    axes[0][0].legend(loc="best", fontsize=10, markerscale=3)
    fig.colorbar(sc, ax=axes[0][-1], label="位置")
    fig.suptitle("単語埋め込みと位置ベクトルをまとめて主成分分析した座標", fontsize=11)
    fig.tight_layout()
    return caption(fig, enc, note)


def random_cos_counts(edges: Any, d: int, n: int) -> Any:
    """How many of ``n`` pairs of independent random directions in ``R^d`` have a cosine in each bin of ``edges``.

    The cosine ``c`` of two such directions has ``c**2 ~ Beta(1/2, (d - 1)/2)``, symmetric about 0, so
    ``P(c <= x) = 1/2 + sign(x) I_{x**2}(1/2, (d - 1)/2) / 2`` (``scipy.special.betainc``).
    """
    from scipy.special import betainc

    x = _np.asarray(edges, dtype=_np.float64)
    cdf = 0.5 + 0.5 * _np.sign(x) * betainc(0.5, (d - 1) / 2, _np.clip(x * x, 0.0, 1.0))
    return n * _np.diff(cdf)


def plot_cos_hist(pos: Any, enc: Any, *, note: str = "") -> plt.Figure:
    """Histogram of the cosine of every word x position pair (Maeda Fig. 5), log count axis.

    The ``[CLS]`` x position-0 value is marked, and the counts that random directions in the same dimension would
    give (:func:`random_cos_counts`) are drawn as a line over the bars; the x axis spans the bins that hold pairs.
    """
    edges = _np.asarray(pos.bin_edges)
    hist = _np.asarray(pos.hist)
    fig, ax = plt.subplots(figsize=(7.2, 4.3))
    ax.bar(edges[:-1], hist, width=_np.diff(edges), align="edge", color="#4c72b0", lw=0, label="単語 × 位置の組")
    ax.set_yscale("log")
    d = int(getattr(pos, "d_model", 0) or 0)
    if d >= 2:
        expected = random_cos_counts(edges, d, pos.n_pairs)
        shown = expected >= 0.5  # under half a pair: nothing to draw on a log axis
        ax.plot((edges[:-1] + edges[1:])[shown] / 2, expected[shown], color="#55a868", lw=1.6,
                label=f"ランダムな方向どうしなら（{d} 次元、同じ組の数）")
    c = pos.cls_pos0_cos
    if _np.isfinite(c):
        ax.axvline(c, color=CATEGORY_COLORS["[CLS]"], lw=1.4, ls="--", label=f"[CLS] と位置 0: {c:.2f}")
    filled = _np.flatnonzero(hist > 0)
    lo, hi = (edges[filled[0]], edges[filled[-1] + 1]) if filled.size else (-1.0, 1.0)
    if _np.isfinite(c):
        lo, hi = min(lo, c), max(hi, c)
    pad = 0.05 * (hi - lo)
    ax.set_xlim(max(-1.0, lo - pad), min(1.0, hi + pad))
    ax.set_xlabel("コサイン類似度")
    ax.set_ylabel("組の数（対数目盛）")
    ax.set_title(f"単語埋め込み × 位置ベクトルの全 {pos.n_pairs:,} 組のコサイン類似度（平均 |cos| = {pos.mean_abs_cos:.3f}）",
                 fontsize=10)
    # under the axes: inside, it covered the peak of the histogram
    ax.legend(fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    fig.tight_layout()
    return caption(fig, enc, note)


def attention_by_offset(A: Any, max_offset: int = 8) -> Any:
    """Mean attention weight at each relative offset ``key - query`` in ``-max_offset..max_offset``.

    Parameters
    ----------
    A : array-like, (n, n) or (H, n, n)
        Attention weights, rows = query positions, columns = key positions.
    max_offset : int

    Returns
    -------
    pandas.DataFrame
        Index ``offset``; one column (``weight``) for an (n, n) input, one per
        head for (H, n, n). Each value averages the diagonal at that offset.
    """
    import pandas as pd

    A = _np.asarray(A, dtype=float)
    single = A.ndim == 2
    if single:
        A = A[None]
    if A.ndim != 3 or A.shape[1] != A.shape[2]:
        raise ValueError(f"A must have shape (n, n) or (H, n, n); got {A.shape}.")
    n = A.shape[1]
    if not isinstance(max_offset, (int, _np.integer)) or isinstance(max_offset, bool) or not 0 <= max_offset < n:
        raise ValueError(f"max_offset={max_offset!r} must be an integer in 0..{n - 1}.")
    offsets = list(range(-int(max_offset), int(max_offset) + 1))
    data = _np.array([[_np.diagonal(a, offset=o).mean() for o in offsets] for a in A])  # (H, 2m+1)
    cols = ["weight"] if single else list(range(A.shape[0]))
    df = pd.DataFrame(data.T, index=pd.Index(offsets, name="offset"), columns=cols)
    df.columns.name = None if single else "head"
    return df


def plot_position_attention(A: Any, enc: Any, *, layer: int = 0, heads: Any = None, ncols: int = 4, note: str = "") -> plt.Figure:
    """Grid of attention maps computed from position vectors alone, one panel per head (Maeda Fig. 6).

    Parameters
    ----------
    A : array-like, (H, n, n)
        :func:`mixlib.position_attention`.
    heads : sequence of int, optional
        Which heads to draw (default all).
    """
    A = _np.asarray(A, dtype=float)
    if A.ndim != 3:
        raise ValueError(f"A must have shape (H, n, n); got {A.shape}.")
    heads = list(range(A.shape[0])) if heads is None else list(heads)
    ncols = min(ncols, len(heads))
    nrows = -(-len(heads) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.1 * ncols, 2.45 * nrows + 0.4), squeeze=False)
    for i in range(nrows * ncols):
        ax = axes[i // ncols][i % ncols]
        if i >= len(heads):
            ax.set_visible(False)
            continue
        h = heads[i]
        ax.imshow(A[h], cmap="magma", vmin=0, vmax=float(A[h].max()), interpolation="nearest")
        # each panel is scaled to its own maximum, so its title says how far that maximum is from uniform (1/n)
        ax.set_title(f"ヘッド {h}（一様の {A[h].max() * A.shape[-1]:.1f} 倍）", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
    fig.suptitle(f"位置ベクトルだけから計算した注意の重み（層 {layer}、縦：クエリの位置、横：キーの位置）", fontsize=10)
    fig.tight_layout()
    # one colour bar for every panel: each is scaled to its own maximum, so the bar reads in fractions of it
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    bar = fig.colorbar(ScalarMappable(Normalize(0, 1), cmap="magma"), cax=fig.add_axes([0.3, -0.03, 0.4, 0.022]), orientation="horizontal")
    bar.set_ticks([0, 0.5, 1], labels=["0", "最大の半分", "そのヘッドの最大"])
    bar.ax.tick_params(labelsize=9.5)
    scale = ("色の濃さはパネルごとに 0〜そのヘッドの最大の重み。括弧内は、その最大が一様な注意（1/n）の何倍か："
             "1 倍に近いパネルは、模様が見えてもほぼ一様である")
    return caption(fig, enc, f"{note}。{scale}" if note else scale)


def plot_position_head(A: Any, enc: Any, *, layer: int, head: int, max_offset: int = 8) -> plt.Figure:
    """One head's position-only attention map and its mean weight by relative offset."""
    A = _np.asarray(A, dtype=float)
    prof = attention_by_offset(A, max_offset)["weight"]
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.9), gridspec_kw={"width_ratios": [1, 1.25]})
    ax = axes[0]
    im = ax.imshow(A, cmap="magma", vmin=0, interpolation="nearest")
    ax.set_xlabel("キーの位置")
    ax.set_ylabel("クエリの位置")
    ax.grid(False)
    fig.colorbar(im, ax=ax, fraction=0.046)
    ax.set_title(f"層 {layer}・ヘッド {head}", fontsize=10)
    ax = axes[1]
    colors = ["#c44e52" if o == prof.idxmax() else "#4c72b0" for o in prof.index]
    ax.bar(prof.index, prof.to_numpy(), color=colors)
    ax.axhline(1.0 / A.shape[0], color="#999999", lw=0.8, ls=":", label=f"一様 (1/{A.shape[0]})")
    ax.set_xlabel("相対位置（キー − クエリ）")
    ax.set_ylabel("平均の重み")
    ax.set_xticks(list(prof.index))
    ax.legend(fontsize=10)
    ax.set_title(f"相対位置ごとの平均（最大: {int(prof.idxmax()):+d}）", fontsize=10)
    fig.tight_layout()
    return caption(fig, enc)


# ---------------------------------------------------------------------------
# beyond the papers: where a token takes its information from (mixlib.measures)
# ---------------------------------------------------------------------------

__all__ += ["MEASURE_LABELS", "plot_context_row"]

#: Japanese labels of the token-to-token measures of :mod:`mixlib.measures`.
MEASURE_LABELS = {
    "attention": "注意の重み（ヘッド平均）",
    "norm": "重みつきノルム ‖αf(x)‖",
    "attn_res_ln": "AttnResLn ‖g(αf(x) [+x])‖",
    "alti": "ALTI",
    "globenc": "GlobEnc（第 2 層正規化まで）",
}


def plot_context_row(cm: Any, enc: Any, *, layer: int, seq: int = 0, token: int = 0,
                     measures: Any = ("attention", "norm", "attn_res_ln", "alti"), note: str = "") -> plt.Figure:
    """Where one token takes its information from, by several measures side by side.

    One panel per measure: row ``token`` of the layer's map (:class:`mixlib.measures.ContextMaps`),
    divided by its sum so that panels compare as shares; the receiving token's own
    column is drawn darker.

    Parameters
    ----------
    cm : mixlib.measures.ContextMaps
    enc : Encoder or str
    layer : int
        Model layer (0-based).
    seq : int
        Sequence of the batch.
    token : int
        Position of the receiving token among the sequence's real tokens.
    measures : sequence of str
        Keys of ``cm.maps``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    toks = cm.token_strings[seq]
    n = len(toks)
    if isinstance(token, bool) or not isinstance(token, (int, _np.integer)) or not 0 <= token < n:
        raise ValueError(f"token={token!r} is out of range: sequence {seq} has {n} tokens (0..{n - 1}).")
    measures = list(measures)
    fig, axes = plt.subplots(len(measures), 1, figsize=(min(8.5, max(6.0, 0.2 * n + 2.0)), 1.8 * len(measures) + 0.6),
                             sharex=True, squeeze=False)
    x = _np.arange(n)
    for ax, name in zip(axes[:, 0], measures):
        row = cm.map(name, layer, seq)[token]
        share = row / row.sum()
        colors = ["#4c9be8"] * n
        colors[token] = "#1f3b70"
        ax.bar(x, share, color=colors, width=0.8)
        ax.set_ylabel("割合", fontsize=10)
        ax.set_title(MEASURE_LABELS.get(name, name), fontsize=10.5, loc="left")
        ax.set_ylim(0, max(0.05, float(share.max()) * 1.15))
    ax = axes[-1, 0]
    ax.set_xticks(x)
    ax.set_xticklabels([font_safe(t) for t in toks], rotation=90, fontsize=10)
    ax.get_xticklabels()[token].set_color("#1f3b70")
    fig.suptitle(f"層 {layer}: トークン {font_safe(toks[token])}（位置 {token}）はどこから情報を受け取るか", fontsize=11)
    fig.tight_layout()
    return caption(fig, enc, note)
