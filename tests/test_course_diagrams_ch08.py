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
