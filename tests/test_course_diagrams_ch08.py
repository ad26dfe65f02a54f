"""Chapter 8's concept figures draw, label what they promise, and refuse bad input."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from mixlib import plots
from mixlib.course.diagrams import ch08

plots.setup()  # the Japanese font, as in the chapters


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [ax.get_title() for ax in fig.axes]


def test_bert_input_draws_one_column_per_token():
    tokens = ("[CLS]", "a", "b", "[SEP]", "c", "##d", "[SEP]")
    fig = ch08.draw_bert_input(tokens, (0, 0, 0, 0, 1, 1, 1))
    texts = _texts(fig)
    for t in tokens:
        assert t in texts
    # one position embedding per token, E_0 .. E_{n-1}
    assert [f"$E_{{{i}}}$" in texts for i in range(len(tokens))] == [True] * len(tokens)
    assert f"$E_{{{len(tokens)}}}$" not in texts
    assert texts.count("$E_A$") == 4 and texts.count("$E_B$") == 3
    assert "$E_{\\#\\#\\mathrm{d}}$" in texts
    plt.close(fig)


@pytest.mark.parametrize("tokens, segments", [(("[CLS]", "a"), (0,)), ((), ()), (("[CLS]", "a"), (0, 2))])
def test_bert_input_rejects_bad_examples(tokens, segments):
    with pytest.raises(ValueError):
        ch08.draw_bert_input(tokens, segments)


def test_bert_heads_put_mlm_heads_on_masks_and_show_token_level_fine_tuning():
    tokens = ("[CLS]", "x", "[MASK]", "[SEP]", "[MASK]", "[SEP]")
    fig = ch08.draw_bert_heads(tokens)
    texts = _texts(fig)
    assert sum(t.startswith("MLM ヘッド\n") for t in texts) == 2
    assert sum("NSP ヘッド" in t for t in texts) == 1
    assert any("NER" in t for t in texts) and any("SQuAD" in t for t in texts)
    assert len(fig.axes) == 2
    plt.close(fig)


def _overflowing_labels(fig):
    """Texts drawn at a box's centre whose rendered extent leaves that box (in display pixels)."""
    from matplotlib.patches import FancyBboxPatch

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    bad = []
    for ax in fig.axes:
        boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
        for t in ax.texts:
            for p in boxes:
                x0, y0, w, h = p.get_x(), p.get_y(), p.get_width(), p.get_height()
                if abs(t.get_position()[0] - (x0 + w / 2)) < 1e-9 and abs(t.get_position()[1] - (y0 + h / 2)) < 1e-9:
                    inner, outer = t.get_window_extent(renderer), p.get_window_extent(renderer)
                    if inner.x0 < outer.x0 or inner.x1 > outer.x1 or inner.y0 < outer.y0 or inner.y1 > outer.y1:
                        bad.append(t.get_text())
                        break
    return bad


@pytest.mark.parametrize("draw", [ch08.draw_bert_input, ch08.draw_bert_heads])
def test_every_box_label_stays_inside_its_box(draw):
    fig = draw()
    labelled = sum(1 for ax in fig.axes for t in ax.texts)
    assert labelled > 10  # the check below looks at real labels
    assert _overflowing_labels(fig) == []
    plt.close(fig)


def test_the_overflow_check_sees_a_label_that_runs_out_of_its_box():
    fig, ax = plt.subplots(figsize=(4, 3))
    ch08._box(ax, 0.5, 0.5, 0.1, 0.1, "a label far too long for its box")
    ax.set(xlim=(0, 1), ylim=(0, 1))
    assert _overflowing_labels(fig) == ["a label far too long for its box"]
    plt.close(fig)
