"""Chapter 4 concept figures: each draws, carries its Japanese labels, and rejects bad input."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from mixlib.course.diagrams import ch04  # noqa: E402


pytestmark = pytest.mark.usefixtures("strict_japanese_font")


def _texts(fig):
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts) + " " + " ".join(ax.get_title() for ax in fig.axes)


@pytest.mark.parametrize("draw", [ch04.draw_unrolled_rnn, ch04.draw_gru_cell, ch04.draw_encoder_decoder])
def test_each_figure_draws(draw):
    fig = draw()
    fig.canvas.draw()  # renders every text (a missing glyph would warn here)
    assert fig.axes and _texts(fig).strip()
    plt.close(fig)


def test_unrolled_rnn_has_one_cell_per_step():
    fig = ch04.draw_unrolled_rnn(5)
    n_cells = sum("RNN" in t.get_text() for t in fig.axes[0].texts)
    assert n_cells == 5 + 1  # the folded cell and five unrolled ones
    plt.close(fig)
    with pytest.raises(ValueError, match="n_steps"):
        ch04.draw_unrolled_rnn(1)
    with pytest.raises(ValueError, match="words"):
        ch04.draw_unrolled_rnn(3, words=("a", "b"))


def test_gru_cell_names_both_gates_and_the_pytorch_form():
    fig = ch04.draw_gru_cell()
    text = _texts(fig)
    for label in ("更新ゲート", "リセットゲート", "nn.GRU", "Cho"):
        assert label in text
    plt.close(fig)


def test_encoder_decoder_draws_one_box_per_character_and_one_c():
    fig = ch04.draw_encoder_decoder("abcdefg")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert sum(t.startswith("$h_{") for t in texts) == 7
    assert sum(t.startswith("$s_{") for t in texts) == 8  # 7 characters + <eos>
    assert texts.count("$\\mathbf{c}$") == 1
    assert "7 文字" in " ".join(texts)
    plt.close(fig)
    with pytest.raises(ValueError, match="non-empty"):
        ch04.draw_encoder_decoder("")
