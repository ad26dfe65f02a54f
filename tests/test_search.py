"""mixlib._search: the site's Japanese search splits text into bigrams, the index and the query alike.

The browser's side (the same steps in JavaScript) is compared with this one on every chapter in Chromium by
.ci/check_search.py (make site-check); here the Python side, and the JavaScript run by Node where it is installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from mixlib import _search


def test_japanese_runs_become_bigrams_and_other_runs_stay_words():
    assert _search.split_words("位置ベクトル") == ["位置", "置ベ", "ベク", "クト", "トル"]
    assert _search.split_words("BERTの埋め込み") == ["BERT", "の埋", "埋め", "め込", "込み"]
    assert _search.split_words("word2vec と seq2seq") == ["word2vec", "seq2seq"]
    # 々 and ー belong to the word they are in
    assert _search.split_words("人々のノルム") == ["人々", "々の", "のノ", "ノル", "ルム"]


def test_brackets_and_punctuation_never_stick_to_a_word():
    # Sphinx's own splitter kept 「 and （ on the word after them: 「民主主義 and （左 were index terms
    from sphinx.search.ja import SearchJapanese

    assert any(w.startswith(("「", "（")) for w in SearchJapanese({}).split("「民主主義」と（左の図）"))
    words = _search.split_words("「民主主義」と（左の図）、")
    assert words == ["民主", "主主", "主義", "左の", "の図"]


def test_one_character_words_are_dropped_and_a_term_is_found_in_any_context():
    assert _search.split_words("図 と 表") == []
    # the pairs of a term are among the pairs of any text that holds it: whatever the words around it
    for term, text in (("系列変換", "系列変換モデルでは"), ("ノルム", "ベクトルノルムは"), ("注意機構", "自己注意機構の重み")):
        assert set(_search.split_words(term)) <= set(_search.split_words(text))


def test_the_count_of_results_is_said_in_japanese():
    assert f"var key = {json.dumps(_search.COUNT_MESSAGE)}" in _search.JS_CODE
    assert "${resultCount} ページ" in _search.JS_CODE


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed (make site-check compares in Chromium)")
def test_the_browser_code_splits_as_python_does():
    texts = ["位置ベクトル", "「民主主義」と（左の図）、BERT の埋め込み word2vec", "𠮟る人々のノルム ｱｲｳ", "図", ""]
    script = _search.JS_CODE.split("(function () {\n  var key")[0] + (
        f"\nconsole.log(JSON.stringify({json.dumps(texts, ensure_ascii=False)}.map(splitQuery)));")
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60, check=True).stdout
    assert json.loads(out) == [_search.split_words(t) for t in texts]


def test_the_index_is_written_as_utf8_json_that_sphinx_reads_back():
    from sphinx.search import _JavaScriptIndex

    data = {"terms": {"位置": [1, 2], "bert": 3}}
    text = _search._dumps(_JavaScriptIndex(), data)
    assert text == 'Search.setIndex({"terms":{"bert":3,"位置":[1,2]}})'
    assert _JavaScriptIndex().loads(text) == data  # an incremental build reads the old index back
