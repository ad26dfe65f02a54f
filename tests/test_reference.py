"""mixlib.reference: the papers' numbers as data, and the paper-vs-ours comparison."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mixlib import reference as R
from mixlib.plots import CATEGORY_ORDER


def test_available_and_sources():
    assert "kobayashi2021" in R.available()
    src = R.source()
    assert "EMNLP 2021" in src["summary"] and "Table 1" in src["summary"]
    assert "言語処理学会" in src["per_layer"] and "図2" in src["per_layer"]
    ref = R.load_reference()
    assert ref["model"] == "bert-base-uncased" and "992" in ref["data"] and ref["unit"] == "percent"
    ref["model"] = "changed"
    assert R.load_reference()["model"] == "bert-base-uncased"  # callers get a copy
    with pytest.raises(ValueError, match="available"):
        R.load_reference("nope")


def test_paper_table_shape_and_prose():
    t = R.paper_table()
    assert list(t.columns) == ["全体", *CATEGORY_ORDER]
    assert list(t.index) == list(range(12)) and t.index.name == "layer"
    assert t[["句読点", "その他"]].isna().all().all()
    # what the paper's prose says about its Fig. 2 (seed text, section 4.2)
    assert t["全体"].min() == 11 and t["全体"].max() == 24  # 「"全体"で 11~24%」
    assert t.loc[11, "[CLS]"] == 39 and t["[CLS]"].idxmax() == 11  # 「[CLS] では…最終層でのみ 39%」
    assert t.loc[5:8, "[MASK]"].between(25, 30).all()  # 「[MASK] では、中盤層で 25~30%」
    assert t.loc[0:3, "全体"].mean() > t.loc[8:11, "全体"].mean()  # 前半層の方が混ぜる作用が強い
    with pytest.raises(ValueError, match="metric"):
        R.paper_table(metric="attn_n")


def test_paper_summary():
    s = R.paper_summary()
    assert list(s.index) == ["Attn-W", "Attn-N", "AttnRes-W", "AttnRes-N", "AttnResLn-N"]
    assert list(s.columns) == ["mean", "max", "min"]
    row = s.loc["AttnResLn-N"]
    assert row["min"] < row["mean"] < row["max"]
    # issue 21: the whole table, as the authors' code prints it, with its source
    assert s.notna().all().all() and (s["min"] < s["mean"]).all() and (s["mean"] < s["max"]).all()
    assert s.loc["Attn-N", "min"] == 4.89 and "emnlp2021/run.ipynb" in R.source()["summary"]
    # AttnRes-W is Attn-W / 2 by definition: means, maxima and minima agree
    for stat in ("mean", "max", "min"):
        assert s.loc["AttnRes-W", stat] == pytest.approx(s.loc["Attn-W", stat] / 2, abs=0.01), stat
    r = R.paper_summary(model="roberta-base")
    assert r.notna().all().all() and r.loc["AttnResLn-N", "mean"] == 16.24
    for stat in ("mean", "max", "min"):
        assert r.loc["AttnRes-W", stat] == pytest.approx(r.loc["Attn-W", stat] / 2, abs=0.01), stat
    with pytest.raises(ValueError, match="has Table 1 for bert-base-uncased, roberta-base"):
        R.paper_summary(model="gpt2")


def test_compare():
    paper = R.paper_table()
    ours = paper.copy()
    ours.loc[:, :] = np.arange(ours.size, dtype=float).reshape(ours.shape)
    c = R.compare(ours, paper)
    assert list(c.columns.get_level_values(0).unique()) == ["全体", "[CLS]", "[SEP]", "[MASK]"]
    assert list(c.columns.get_level_values(1)[:3]) == ["paper", "ours", "diff"]
    np.testing.assert_allclose(c[("[MASK]", "diff")], ours["[MASK]"] - paper["[MASK]"])
    np.testing.assert_allclose(c[("全体", "paper")], paper["全体"])

    with pytest.warns(UserWarning, match="only the 6 rows"):
        six = R.compare(ours.iloc[:6], paper)
    assert len(six) == 6
    with pytest.warns(UserWarning, match="fractions"):
        R.compare(ours / ours.to_numpy().max(), paper)
    with pytest.raises(ValueError, match="share no row"):
        R.compare(ours.set_index(ours.index + 100), paper)
    with pytest.raises(ValueError, match="no column"):
        R.compare(pd.DataFrame({"x": [1.0]}, index=[0]), paper)


def test_compare_summary_with_real_result(tiny_enc):
    import mixlib

    m = mixlib.decompose(tiny_enc, ["The cat sat on the mat.", "A dog ran."], vectors=False, progress=False)
    c = R.compare(mixlib.mixing_summary(m), R.paper_summary())
    assert c.loc["AttnResLn-N", ("mean", "paper")] == 18.75
    assert c.loc["AttnResLn-N", ("mean", "diff")] == pytest.approx(c.loc["AttnResLn-N", ("mean", "ours")] - 18.75)


def test_maeda_sources_and_values():
    assert "maeda2024" in R.available()
    src = R.source("maeda2024")
    assert "Table 2" in src["table2"] and "Table 3" in src["table3"] and "appendix B" in src["positional"]
    assert set(R.source()) == {"summary", "per_layer", "note"}  # kobayashi2021 unchanged
    ref = R.load_reference("maeda2024")
    assert ref["model"] == "bert-base-uncased" and ref["bib"] == "maeda2024nlp"
    assert R.paper_value("positional.cls_pos0_cos") == 0.99  # appendix B: [CLS] x position 0
    v, s = R.paper_value("setup.k", with_source=True)
    assert v == 1000 and "section" in s
    assert R.paper_value("upper.upper_mostly_words") + R.paper_value("upper.upper_non_words") == R.paper_value("upper.k_upper")
    with pytest.raises(ValueError, match="known values: .*positional.cls_pos0_cos"):
        R.paper_value("positional.nope")
    with pytest.raises(ValueError, match="no value"):
        R.paper_value("cls_pos0_cos")
    assert set(R.paper_claims("figure3")) == {"low", "middle", "high"}
    for section in ("figure3", "positional"):  # the Japanese claims say the same things as the English ones
        ja, en = R.paper_claims(section), R.paper_claims(section, lang="en")
        assert set(ja) == set(en) and all(ja.values()) and ja != en
    assert "推察" in R.paper_claims("figure3")["low"] and "0.99" in R.paper_claims("positional")["figure5"]
    with pytest.raises(ValueError, match="lang"):
        R.paper_claims("figure3", lang="fr")
    with pytest.raises(ValueError, match="sections with claims"):
        R.paper_claims("table2")


def test_maeda_table3_is_consistent():
    t = R.maeda_table3()
    assert list(t.index) == ["Words", "Subwords", "Symbols", "Numbers", "Special", "Tags", "Total"]
    assert list(t.columns) == ["n_clusters", "n_tokens", "tokens_per_cluster", "mean_norm", "mean_dist"]
    body, total = t.drop(index="Total"), t.loc["Total"]
    # the transcription adds up: types sum to the totals, and tokens per cluster is the quotient
    assert body["n_clusters"].sum() == total["n_clusters"] == R.paper_value("setup.k")
    assert body["n_tokens"].sum() == total["n_tokens"] == R.paper_value("setup.vocab_size")
    np.testing.assert_allclose(t["tokens_per_cluster"], t["n_tokens"] / t["n_clusters"], atol=0.051)
    # the Total mean norm is the token-weighted mean of the rows (to the printed precision)
    assert np.average(body["mean_norm"], weights=body["n_tokens"]) == pytest.approx(total["mean_norm"], abs=0.01)


def test_maeda_table2_and_table1():
    t2 = R.maeda_table2()
    assert list(t2["head"].unique()) == ["L3-H2", "L3-H11", "L4-H6"] and (t2.groupby("head").size() == 5).all()
    for label, layer, head in t2[["head", "layer", "head_index"]].itertuples(index=False):
        assert label == f"L{layer}-H{head}"
    for _, g in t2.groupby("head"):  # each head's rows are printed largest psi first
        assert g["psi_qkv"].is_monotonic_decreasing
    assert t2["psi_qkv"].max() == 3.53 and t2["psi_qkv"].min() == 2.11
    assert "january" in t2.loc[t2["cluster"] == 332, "tokens"].item()
    t1 = R.maeda_table1()
    assert list(t1.columns) == ["type", "cluster", "tokens"] and len(t1) == 12
    assert set(t1["type"]) == set(R.maeda_table3().index) - {"Total"}
    assert t1.loc[t1["cluster"] == 268, "tokens"].item() == "[CLS], [MASK]"
