"""Chapter 9's concept figures draw, label what they promise, and refuse bad input."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from mixlib import plots
from mixlib.course.diagrams import ch09

plots.setup()  # the Japanese font, as in the chapters


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [ax.get_title() for ax in fig.axes]


def test_bi_vs_cross_shows_both_set_ups_with_the_sentences():
    fig = ch09.draw_bi_vs_cross("one two.", "three four.")
    texts = _texts(fig)
    assert "one two." in texts and "three four." in texts
    assert any(t.startswith("[CLS] one two. [SEP] three four.") for t in texts)
    assert any("バイエンコーダ" in t for t in texts) and any("クロスエンコーダ" in t for t in texts)
    assert sum("平均プーリング" in t for t in texts) == 2
    plt.close(fig)


def test_bi_vs_cross_rejects_empty_sentences():
    with pytest.raises(ValueError):
        ch09.draw_bi_vs_cross(" ", "x")


@pytest.mark.parametrize("b", [3, 6])
def test_training_objectives_matrix_has_positives_on_the_diagonal(b):
    fig = ch09.draw_training_objectives(b)
    img = fig.axes[1].images[0].get_array()
    assert img.shape == (b, b)
    assert np.array_equal(np.argmax(img, axis=1), np.arange(b))
    assert any("|u-v|" in t for t in _texts(fig))
    plt.close(fig)


@pytest.mark.parametrize("b", [1, 13])
def test_training_objectives_rejects_unreadable_sizes(b):
    with pytest.raises(ValueError):
        ch09.draw_training_objectives(b)
