"""The 百人一首 data and the chapter-7 helpers (mixlib.course.hyakunin)."""

from __future__ import annotations

import csv

import pandas as pd
import pytest
import torch

from mixlib import data_path
from mixlib.course import hyakunin as hy

# ---------------------------------------------------------------------------
# the data file, read with the csv module (independently of load_poems)
# ---------------------------------------------------------------------------


def _raw_rows():
    with open(data_path("hyakunin_isshu.tsv"), encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_file_structure():
    rows = _raw_rows()
    assert list(rows[0].keys()) == ["number", "poet", "kami_no_ku", "shimo_no_ku"]
    assert len(rows) == 100
    assert [int(r["number"]) for r in rows] == list(range(1, 101))
    poems = {(r["kami_no_ku"], r["shimo_no_ku"]) for r in rows}
    assert len(poems) == 100
    assert len({r["kami_no_ku"] for r in rows}) == 100
    assert len({r["shimo_no_ku"] for r in rows}) == 100
    hiragana = {chr(c) for c in range(ord("あ"), ord("ゖ") + 1)} - set("ぁぃぅぇぉっゃゅょゎゕゖ")
    for r in rows:
        assert r["poet"].strip(), r
        kami, shimo = r["kami_no_ku"].split(" "), r["shimo_no_ku"].split(" ")
        assert [len(p) for p in kami][0] in (5, 6) and len(kami) == 3, r
        assert 5 <= len(kami[2]) <= 6 and 6 <= len(kami[1]) <= 8, r
        assert len(shimo) == 2 and all(6 <= len(p) <= 8 for p in shimo), r
        assert set("".join(kami + shimo)) <= hiragana, r
        assert 16 <= len("".join(kami)) <= 20 and 14 <= len("".join(shimo)) <= 16, r


def test_known_poems_and_historical_kana():
    rows = {int(r["number"]): r for r in _raw_rows()}
    assert rows[1]["poet"] == "天智天皇"
    assert rows[1]["kami_no_ku"] == "あきのたの かりほのいほの とまをあらみ"
    assert rows[1]["shimo_no_ku"] == "わがころもでは つゆにぬれつつ"
    assert rows[17]["poet"] == "在原業平朝臣"
    assert rows[17]["kami_no_ku"].replace(" ", "") == "ちはやぶるかみよもきかずたつたがは"
    assert rows[17]["shimo_no_ku"].replace(" ", "") == "からくれなゐにみづくくるとは"
    assert rows[100]["poet"] == "順徳院"
    text = "".join(r["kami_no_ku"] + r["shimo_no_ku"] for r in rows.values())
    # historical kana are kept (ゐ in くれなゐ, ゐなの, くもゐ; ゑ in こゑ, ゆゑ, すゑ, ゑじ ...)
    assert text.count("ゐ") == 3 and text.count("ゑ") >= 8
    # and modern spellings are not used where the historical one differs
    assert "くれない" not in text and "こえきく" not in text


def test_load_poems_and_validation():
    poems = hy.load_poems()
    assert len(poems) == 100 and poems["kami"].str.contains(" ").sum() == 0
    assert (poems["kami"].str.len() == poems["kami_no_ku"].str.len() - 2).all()
    bad = poems.copy()
    bad.loc[3, "kami_no_ku"] = "たごのうらに うちいでてみれば しろたえの ＡＢ"
    bad = pd.concat([bad, bad.iloc[[0]]], ignore_index=True)
    with pytest.raises(ValueError) as err:
        hy.validate_poems(bad)
    msg = str(err.value)
    assert "101 rows" in msg and "poem 4" in msg and "duplicated" in msg
