"""Chapter 6 concept figures: the Transformer, Q/K/V sources, post-LN vs pre-LN."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from mixlib.course.diagrams import ch06  # noqa: E402


pytestmark = pytest.mark.usefixtures("strict_japanese_font")


def _texts(fig):
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts) + " " + " ".join(ax.get_title() for ax in fig.axes)


@pytest.mark.parametrize("draw", [ch06.draw_transformer, ch06.draw_qkv, ch06.draw_post_pre_ln])
def test_each_figure_draws(draw):
    fig = draw()
    fig.canvas.draw()
    assert _texts(fig).strip()
    plt.close(fig)


def test_transformer_shows_both_masks_residuals_and_layernorm():
    text = _texts(ch06.draw_transformer())
    for label in ("因果マスク", "パディング", "残差結合", "Add & LayerNorm", "交差注意", "K, V"):
        assert label in text
    assert text.count("Add & LayerNorm") == 5  # 2 in the encoder layer, 3 in the decoder layer
    plt.close("all")


def test_qkv_cross_attention_takes_k_and_v_from_the_encoder():
    fig = ch06.draw_qkv()
    self_ax, cross_ax = fig.axes
    assert "エンコーダ" not in " ".join(t.get_text() for t in self_ax.texts)
    assert "エンコーダの出力" in " ".join(t.get_text() for t in cross_ax.texts)
    plt.close(fig)
