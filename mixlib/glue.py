"""Numbers and sentences computed in a chapter, inserted into its prose with myst-nb's ``glue``.

A chapter writes ``g("rho_min", value)`` in a code cell and ``{glue:text}`rho_min:.2f``` in its
markdown, so no number in the prose is typed by hand. ``Text`` glues a sentence without quotes.
Where myst-nb is not installed (Colab), ``glue`` does nothing and the numbers are read from the
cells' printed output.
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:
    from myst_nb import glue
except ImportError:  # Colab and other places without myst-nb

    def glue(name: str, variable: Any, display: bool = True) -> None:  # noqa: ARG001
        """No-op stand-in for :func:`myst_nb.glue`."""
        return None


__all__ = ["Text", "g", "glue"]


class Text:
    """A string that glue inserts without quotes (its repr is the string itself)."""

    def __init__(self, s: Any) -> None:
        self.s = str(s)

    def __repr__(self) -> str:
        return self.s


def g(name: str, value: Any) -> Any:
    """Glue a number as a plain Python int or float (format it in the prose: ``{glue:text}`name:.3f```)."""
    if isinstance(value, (np.integer, int)) and not isinstance(value, bool):
        value = int(value)
    elif isinstance(value, (np.floating, float)):
        value = float(value)
    glue(name, value, display=False)
    return value
