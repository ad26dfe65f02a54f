"""Figures with Japanese labels, one colour per token category, the model's name in every caption.

Every chapter calls :func:`setup` once (the parameters/model cell does it), then
draws with seaborn. Analysis figures end with :func:`caption`, so that a figure
copied out of the book still says which model produced it.
"""

from __future__ import annotations

from typing import Any

import matplotlib
import matplotlib.pyplot as plt

__all__ = ["CATEGORY_ORDER", "CATEGORY_COLORS", "TYPE_ORDER", "TYPE_COLORS", "setup", "caption", "model_label"]

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
TYPE_COLORS = {
    "Words": "#4c72b0",
    "Subwords": "#55a868",
    "Symbols": "#c44e52",
    "Numbers": "#8172b2",
    "Special": "#937860",
    "Tags": "#da8bc3",
}


def setup(context: str = "notebook", *, dpi: int = 110) -> None:
    """Seaborn theme + a Japanese font (IPAexGothic from matplotlib-fontja).

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


def model_label(enc_or_name: Any) -> str:
    """``enc.describe()`` for an Encoder, the string itself otherwise."""
    describe = getattr(enc_or_name, "describe", None)
    return describe() if callable(describe) else str(enc_or_name)


def caption(fig: plt.Figure | None, enc_or_name: Any, note: str = "") -> plt.Figure:
    """Write ``モデル: <describe()>`` (and an optional note) under the figure.

    Returns the figure so it can be the last expression of a cell.
    """
    fig = fig if fig is not None else plt.gcf()
    text = f"モデル: {model_label(enc_or_name)}"
    if note:
        text += f"　{note}"
    fig.text(0.5, -0.01, text, ha="center", va="top", fontsize=9, color="#444444")
    return fig
