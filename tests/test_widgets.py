"""Tests for mixlib.widgets: the explorers show what the analyses compute, and bad input is a message.

The widgets run without a browser or kernel: every explorer keeps its last
redraw in ``Explorer.last``, and its controls are set programmatically. What
is drawn is checked against an independent call of the analysis function.
Also checks the book's sentence-pair data file that the widgets offer.
"""

from __future__ import annotations

import csv

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

import mixlib
from mixlib import widgets


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# -- the data -------------------------------------------------------------------------------------


def test_sentence_pairs_file_is_well_formed(packaged_enc):
    path = mixlib.data_path("sentence_pairs.tsv")
    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert rows[0] == ["topic", "sentence_a", "sentence_b"]
    body = rows[1:]
    assert len(body) >= 200
    assert all(len(r) == 3 for r in body), "every row has exactly 3 TAB-separated fields"
    sentences = [s for r in body for s in r[1:]]
    assert len(set(sentences)) == len(sentences), "no sentence appears twice"
    for s in sentences:
        assert 10 <= len(s.split()) <= 40, f"sentence outside 10..40 words: {s!r}"
        assert s.isascii() and '"' not in s
    assert len({r[0] for r in body}) >= 10, "the pairs cover many topics"
    lengths = [len(ids) for ids in packaged_enc.tokenizer([r[1] for r in body], [r[2] for r in body])["input_ids"]]
    assert max(lengths) < 128, "every pair fits the paper's 128-token limit without truncation"


def test_japanese_sentence_pairs_file_is_well_formed():
    """data/sentence_pairs_ja.tsv: the English file's format, Japanese punctuation, every pair within 128 tokens of
    any Japanese BERT (a MeCab-then-WordPiece or character token covers at least one character, so tokens <=
    characters + 3)."""
    import unicodedata

    path = mixlib.data_path("sentence_pairs_ja.tsv")
    raw = path.read_bytes()
    assert b"\r" not in raw and raw.endswith(b"\n")
    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert rows[0] == ["topic", "sentence_a", "sentence_b"]
    body = rows[1:]
    english = len(widgets.load_sentence_pairs())
    assert len(body) >= english, "at least as many pairs as the English file"
    assert all(len(r) == 3 for r in body), "every row has exactly 3 TAB-separated fields"
    sentences = [s for r in body for s in r[1:]]
    assert len(set(sentences)) == len(sentences), "no sentence appears twice"
    for s in sentences:
        assert 12 <= len(s) <= 60, f"sentence outside 12..60 characters: {s!r}"
        assert s[-1] in "。！？", s
        assert not set(s) & set('",.…\t'), f"ASCII quote, comma, period or an ellipsis in {s!r}"
        assert not any(0xFF61 <= ord(c) <= 0xFF9F for c in s), f"half-width katakana in {s!r}"
        assert unicodedata.normalize("NFC", s) == s
    assert sum("、" in s for s in sentences) > len(sentences) // 3
    assert len({r[0] for r in body}) >= 20, "the pairs cover many topics"
    # NFKC (which the tokenizers apply first) can lengthen a text (① -> 1, ㈱ -> (株)): count after it
    assert max(len(unicodedata.normalize("NFKC", r[1] + r[2])) for r in body) + 3 < 128


def test_load_sentence_pairs():
    pairs = widgets.load_sentence_pairs()
    assert len(pairs) >= 200 and all(isinstance(p, tuple) and len(p) == 2 for p in pairs)
    assert widgets.load_sentence_pairs(5) == pairs[:5]
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="positive int"):
            widgets.load_sentence_pairs(bad)
    ja = widgets.load_sentence_pairs(lang="ja")
    topics, topics_ja = widgets.load_sentence_topics(), widgets.load_sentence_topics(lang="ja")
    assert len(topics) == len(pairs) and len(topics_ja) == len(ja) and widgets.load_sentence_topics(4) == topics[:4]
    assert topics[0] == "science" and len(set(topics)) == 27
    assert {topics_ja.count(t) for t in set(topics_ja)} == {10} and len(set(topics_ja)) == 30
    assert len(ja) >= len(pairs) and widgets.load_sentence_pairs(3, lang="ja") == ja[:3]
    assert all("。" in a + b or "！" in a + b or "？" in a + b for a, b in ja)
    with pytest.raises(ValueError, match="'en' and 'ja'"):
        widgets.load_sentence_pairs(lang="fr")


# -- the Explorer base ----------------------------------------------------------------------------


def test_explorer_redraws_on_change_and_reports_bad_input():
    import ipywidgets as ipw

    calls = []

    def render(x):
        calls.append(x)
        if x < 0:
            raise ValueError("x must be >= 0")
        return widgets.View(data={"x": x})

    ex = widgets.Explorer({"x": ipw.IntSlider(value=1, min=-5, max=5)}, render, title="t")
    assert ex.last.data == {"x": 1} and ex.n_renders == 1
    ex.controls["x"].value = 3
    assert ex.last.data == {"x": 3} and ex.n_renders == 2
    ex.controls["x"].value = -2  # bad input: a message, the last good view is kept
    assert ex.error == "x must be >= 0" and "x must be" in ex.status.value
    assert ex.last.data == {"x": 3}
    ex.set(x=4)
    assert ex.error is None and ex.status.value == "" and ex.last.data == {"x": 4}
    with pytest.raises(ValueError, match="unknown control"):
        ex.set(y=1)
    with pytest.raises(ValueError, match="at least one control"):
        widgets.Explorer({}, render)


def test_explorer_set_redraws_once():
    import ipywidgets as ipw

    n = []
    ex = widgets.Explorer({"a": ipw.IntText(value=0), "b": ipw.IntText(value=0)},
                          lambda a, b: n.append((a, b)) or widgets.View())
    ex.set(a=1, b=2)
    assert n == [(0, 0), (1, 2)]


# -- chapter 10 ------------------------------------------------------------------------------------


def test_mixing_explorer_shows_the_decomposition(tiny_enc):
    texts = [("The cat sat on the mat.", "It was warm."), "A dog ran home quickly."]
    ex = widgets.mixing_explorer(tiny_enc, texts, layer=None, rate=0.12, seed=0)
    v = ex.last
    assert v.data["layer"] == tiny_enc.n_layers - 1 and v.data["text"] == texts[0]
    # what is drawn is decompose() of the masked pair
    ref = mixlib.decompose(tiny_enc, mixlib.mask_tokens(tiny_enc, [texts[0]], rate=0.12, seed=0), vectors=False)
    torch.testing.assert_close(v.data["mixing"].ratio, ref.ratio, equal_nan=True)
    assert (v.data["mixing"].input_ids == tiny_enc.tokenizer.mask_token_id).any()
    ax = v.figure.axes[0]
    n = len(ref.tokens(0))
    np.testing.assert_allclose([p.get_height() for p in ax.patches][-n:], ref.norm_mix_ln[-1, 0, :n].numpy(), rtol=1e-6)

    ex.set(layer=0)
    assert ex.last.data["layer"] == 0 and ex.last.data["mixing"] is v.data["mixing"], "layer changes reuse the cached result"
    ex.set(masked=False)
    assert not (ex.last.data["mixing"].input_ids == tiny_enc.tokenizer.mask_token_id).any()
    ex.set(example=1)
    assert ex.last.data["text"] == texts[1]
    ex.set(custom="  Birds sing.  ")
    assert ex.last.data["text"] == "Birds sing."
    assert ex.last.data["mixing"].tokens(0) == ["[CLS]", "birds", "sing", ".", "[SEP]"]
    ex.set(custom="")
    assert ex.last.data["text"] == texts[1]


def test_mixing_explorer_bad_arguments(tiny_enc):
    with pytest.raises(ValueError, match="empty"):
        widgets.mixing_explorer(tiny_enc, [])
    with pytest.raises(ValueError, match="out of range"):
        widgets.mixing_explorer(tiny_enc, ["a b c"], layer=7)
    with pytest.raises(ValueError, match="out of range"):
        widgets.mixing_explorer(tiny_enc, ["a b c"], example=3)


# -- chapter 11 ------------------------------------------------------------------------------------


def test_head_explorer_table_is_top_clusters(tiny_enc, stretch_and_clusters):
    st, cl, cs = stretch_and_clusters
    ex = widgets.head_explorer(cs, cl, tiny_enc, layer=1, head=2, n=4)
    expected = mixlib.top_clusters(cs, cl, 1, 2, n=4)
    assert ex.last.table.equals(expected)
    bars = ex.last.figure.axes[0].patches
    np.testing.assert_allclose([b.get_width() for b in bars], expected["psi"])
    ex.set(layer=0, head=3)
    assert ex.last.table.equals(mixlib.top_clusters(cs, cl, 0, 3, n=4))
    with pytest.raises(ValueError, match=r"\(L, H, K\)"):
        widgets.head_explorer(cs[0], cl, tiny_enc)


def test_token_explorer_psi_and_cluster(tiny_enc, stretch_and_clusters):
    st, cl, _ = stretch_and_clusters
    ex = widgets.token_explorer(st, cl, tiny_enc, token="january")
    tid = tiny_enc.tokenizer.convert_tokens_to_ids("january")
    assert ex.last.data["token_id"] == tid
    assert ex.last.data["cluster"] == int(cl.labels[tid])
    np.testing.assert_array_equal(ex.last.data["psi"], st.psi_qkv[:, :, tid])
    assert ex.last.table["cluster"].tolist() == [int(cl.labels[tid])]

    ex.set(token="March")  # case-folded for an uncased vocabulary
    assert ex.last.data["token_id"] == tiny_enc.tokenizer.convert_tokens_to_ids("march")
    before = ex.last
    ex.set(token="unbelievablenesses")  # not one vocabulary entry: a message naming the pieces
    assert ex.error is not None and "splits it into" in ex.error and ex.last is before
    ex.set(token="   ")
    assert ex.error is not None and "type a token" in ex.error


# -- chapter 12 ------------------------------------------------------------------------------------


def test_position_head_explorer_matches_position_attention(tiny_enc):
    ex = widgets.position_head_explorer(tiny_enc, layer=0, head=1, n=16, max_offset=3)
    A = mixlib.position_attention(tiny_enc, layer=0, n=16)
    np.testing.assert_allclose(ex.last.data["attention"], A[1], rtol=1e-6)
    np.testing.assert_allclose(ex.last.data["attention"].sum(1), 1.0, rtol=1e-5)
    ex.set(layernorm=True, head=2, layer=1)
    A_ln = mixlib.position_attention(tiny_enc, layer=1, n=16, layernorm=True)
    np.testing.assert_allclose(ex.last.data["attention"], A_ln[2], rtol=1e-6)
    prof = ex.last.data["profile"]["weight"]
    assert list(prof.index) == [-3, -2, -1, 0, 1, 2, 3]
    assert prof.loc[0] == pytest.approx(np.diagonal(A_ln[2]).mean())
    with pytest.raises(ValueError, match="out of range"):
        widgets.position_head_explorer(tiny_enc, head=9)


# -- chapter 8 -------------------------------------------------------------------------------------


def test_fill_mask_explorer_shows_every_model_and_rejects_text_without_mask():
    import pandas as pd

    seen = []

    def fake(name):
        def fill(text, k):
            seen.append((name, text, k))
            return [pd.DataFrame({"rank": range(1, k + 1), "token": [f"{name}{i}" for i in range(k)],
                                  "prob": [0.5 / (i + 1) for i in range(k)]}) for _ in range(text.count("[MASK]"))]
        return fill

    ex = widgets.fill_mask_explorer({"mini": fake("m"), "big": fake("b")}, text="a [MASK] b [MASK]", k=3)
    assert set(ex.last.data["results"]) == {"mini", "big"}
    assert ex.last.table.shape == (4, 3)  # 2 models x 2 blanks, 3 candidates
    assert ex.last.table.loc[("big", 2), "1位"] == "b0 (0.50)"
    assert [ax.get_title() for ax in ex.last.figure.axes] == ["mini", "big"]
    ex.set(text="no blank here")
    assert ex.error is not None and "[MASK]" in ex.error and ex.last.data["text"] == "a [MASK] b [MASK]"
    ex.set(text="one [MASK]", k=2)
    assert ex.error is None and ex.last.table.shape == (2, 2) and seen[-1] == ("b", "one [MASK]", 2)
    with pytest.raises(ValueError, match="fillers"):
        widgets.fill_mask_explorer({})
    with pytest.raises(ValueError, match="k="):
        widgets.fill_mask_explorer({"mini": fake("m")}, k=0)
