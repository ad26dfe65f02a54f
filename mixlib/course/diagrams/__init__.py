"""Concept figures drawn for the book with matplotlib (Japanese labels).

One module per chapter (``ch03``, ``ch04``, …), each with ``draw_*`` functions that
return a matplotlib Figure; chapters call them right before the formulas they
picture. Nothing here computes results: these are diagrams of architectures. :func:`canvas`
is the one axis-free drawing panel they share.
"""

from __future__ import annotations

import matplotlib.pyplot as plt


def canvas(width: float, height: float, *, xlim: tuple[float, float], ylim: tuple[float, float]) -> tuple[plt.Figure, plt.Axes]:
    """A figure with one axis-free panel in data coordinates ``xlim`` x ``ylim`` (equal aspect)."""
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax
