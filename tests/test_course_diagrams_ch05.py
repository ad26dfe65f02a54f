"""Chapter 5 concept figure: attention over encoder states and the alignment matrix it is given."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import FancyArrowPatch  # noqa: E402

from mixlib.course.diagrams import ch05  # noqa: E402


pytestmark = pytest.mark.usefixtures("strict_japanese_font")


def _weights(S, T, seed=0):
    w = np.random.default_rng(seed).random((T, S)) ** 4
    return w / w.sum(1, keepdims=True)


def test_draws_and_shows_the_given_matrix():
    W = _weights(6, 7)
    fig = ch05.draw_attention("abcdef", list("fedcba") + ["<eos>"], W, caption="テスト")
    fig.canvas.draw()
    img = fig.axes[1].images[0]
    np.testing.assert_allclose(np.asarray(img.get_array()), W)
    plt.close(fig)


def test_arrow_widths_follow_the_weights_of_the_shown_step():
    W = _weights(5, 5, seed=3)
    fig = ch05.draw_attention("abcde", list("edcba"), W, step=2)
    arrows = [p for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch) and p.get_linewidth() >= 0.4]
    # the weighted-sum arrows are the first S purple ones drawn after the boxes
    widths = np.array([p.get_linewidth() for p in arrows if p.get_edgecolor()[:3] == pytest.approx((0x8a / 255, 0x2f / 255, 0x86 / 255), abs=1e-3)])
    assert len(widths) == 5
    np.testing.assert_allclose(widths, 0.4 + 6 * W[2])
    plt.close(fig)


def test_rejects_a_matrix_of_the_wrong_shape_or_step():
    with pytest.raises(ValueError, match="shape"):
        ch05.draw_attention("abc", ["x", "y"], np.ones((3, 3)) / 3)
    with pytest.raises(ValueError, match="step"):
        ch05.draw_attention("abc", ["x"], np.ones((1, 3)) / 3, step=4)
