"""Chapter 3's concept figures draw, with Japanese text the font can show, and reject bad arguments."""

from __future__ import annotations

import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from mixlib import plots  # noqa: E402
from mixlib.course.diagrams import ch03  # noqa: E402


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def _render(fig):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    glyphs = [str(w.message) for w in caught if "missing from font" in str(w.message)]
    assert not glyphs, glyphs


def test_skipgram_window_marks_the_window_and_one_arrow_per_context_word():
    plots.setup()
    tokens = ["a", "b", "c", "d", "e", "f", "g"]
    fig = ch03.draw_skipgram_window(tokens, center=1, window=2)
    _render(fig)
    texts = _texts(fig)
    assert all(t in texts for t in tokens)
    assert any("窓" in t and "m = 2" in t for t in texts)
    # window clipped at the sentence start: contexts are positions 0, 2, 3
    arrows = [p for p in fig.axes[0].patches if isinstance(p, matplotlib.patches.FancyArrowPatch)]
    assert len(arrows) == 3
    assert any("3 語" in t for t in texts)
    plt.close(fig)


def test_negative_sampling_draws_k_negatives_and_the_loss():
    plots.setup()
    fig = ch03.draw_negative_sampling("his", "crown", ["x1", "x2", "x3"])
    _render(fig)
    texts = _texts(fig)
    assert any("K = 3" in t for t in texts)
    assert sum(("x1" in t) or ("x2" in t) or ("x3" in t) for t in texts) == 3
    assert any("損失" in t for t in texts)
    arrows = [p for p in fig.axes[0].patches if isinstance(p, matplotlib.patches.FancyArrowPatch)]
    assert len(arrows) == 1 + 3
    plt.close(fig)


@pytest.mark.parametrize(
    "kwargs, match",
    [(dict(tokens=[]), "at least one"), (dict(center=99), "center"), (dict(window=0), "window")],
)
def test_skipgram_window_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ch03.draw_skipgram_window(**kwargs)
    with pytest.raises(ValueError, match="K >= 1"):
        ch03.draw_negative_sampling(negatives=[])
