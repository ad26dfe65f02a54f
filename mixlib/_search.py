"""Japanese search on the book's site: the index and the query split Japanese text the same way, into bigrams.

Sphinx indexes a Japanese page with TinySegmenter (``sphinx.search.ja.DefaultSplitter``) but gives the browser no
splitter for Japanese: a query was split only at spaces and punctuation, so 位置ベクトル stayed one term that the
index (位置, ベクトル) did not hold, and most Japanese words found nothing. Splitting the query with a segmenter
too does not mend it: a segmenter cuts a word by its context, so a term typed alone is cut otherwise than in a
sentence (系列変換 alone: 系 | 列変 | 換), and a word the index holds only glued to its neighbour (ベクトルノルム)
is found by no exact term. Sphinx's Python port and npm's original TinySegmenter also disagree on the same text.

So both sides use character bigrams, the usual way to search Japanese without a dictionary:
:class:`JapaneseSearch` (registered by :func:`setup` for ``language: ja``) and ``splitQuery`` in the site's
``language_data.js`` (searchtools.js uses it when defined) make the same three steps:

1. cut the text at every character that is not a letter, a digit or ``_`` (brackets and punctuation go; what
   searchtools.js's own default splitter cuts at);
2. in each piece, a run of Japanese characters (kana, kanji, 々, ー) becomes its overlapping pairs of characters
   (位置ベクトル: 位置 置ベ ベク クト トル) and any other run (BERT, word2vec) stays one word;
3. keep words of two characters or more (Sphinx's Japanese ``word_filter``; a one-character query finds nothing).

A page that holds a term then holds every pair of it, so the search (all the query's words must be on a page)
finds every page with the term, and few others. The character class is one Python constant written into the
JavaScript, and ``.ci/check_search.py`` (``make site-check``) checks in Chromium that both sides split every
chapter alike and that each term it searches finds every page holding it. The search page's count of results
is given in Japanese too (:data:`COUNT_JA`; Sphinx's own catalogue leaves that line empty), and the index is
written as UTF-8 without spaces (Sphinx escapes every kana and kanji: 714 KB, now about half).
"""

from __future__ import annotations

import json
import re
from typing import Any

from sphinx.search.ja import SearchJapanese

#: Japanese characters (step 2): hiragana, katakana with ー, kanji (the unified block, extension A and the
#: compatibility block), 々 and 〆, half-width katakana. One class for both sides.
JAPANESE_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3005\u3006\uff66-\uff9f"
#: Step 1: a run of characters that are not letters, digits or ``_`` (Python's ``\W``; in the browser
#: ``[^\p{Letter}\p{Number}_]``).
CUT = re.compile(r"\W+")
RUNS = re.compile(f"[{JAPANESE_CLASS}]+|[^{JAPANESE_CLASS}]+")
JAPANESE = re.compile(f"[{JAPANESE_CLASS}]")

#: The search page's count of results: Sphinx's Japanese catalogue translates this message as "" (an empty line
#: under the results), so the page said nothing of how many it found.
COUNT_MESSAGE = "Search finished, found ${resultCount} page(s) matching the search query."
COUNT_JA = "検索が終わりました：${resultCount} ページが見つかりました。"

#: The browser's side (``language_data.js``): steps 1-3, and the count of results in Japanese.
JS_CODE = """
var splitQuery = (function () {
  var runs = new RegExp(%(runs)s, "gu"), japanese = new RegExp(%(japanese)s, "u");
  return function (query) {
    var words = [];
    query.split(/[^\\p{Letter}\\p{Number}_]+/u).forEach(function (piece) {
      (piece.match(runs) || []).forEach(function (run) {
        var chars = Array.from(run);
        if (chars.length < 2 || !japanese.test(chars[0])) { words.push(run); return; }
        for (var i = 0; i + 1 < chars.length; i++) words.push(chars[i] + chars[i + 1]);
      });
    });
    return words.filter(function (word) { return Array.from(word).length > 1; });
  };
})();
(function () {
  var key = %(key)s;
  if (typeof Documentation !== "undefined" && !Documentation.TRANSLATIONS[key]) Documentation.TRANSLATIONS[key] = %(ja)s;
})();
""" % {"runs": json.dumps(RUNS.pattern), "japanese": json.dumps(JAPANESE.pattern), "key": json.dumps(COUNT_MESSAGE),
       "ja": json.dumps(COUNT_JA, ensure_ascii=False)}


class JapaneseSearch(SearchJapanese):
    """Sphinx's Japanese search with character bigrams instead of TinySegmenter (see the module)."""

    js_splitter_code = JS_CODE

    def init(self, options: dict[str, str]) -> None:
        """No segmenter to load (``html_search_options`` has nothing to choose)."""

    def split(self, input: str) -> list[str]:  # noqa: A002 - Sphinx's signature
        words: list[str] = []
        for piece in CUT.split(input):
            for run in RUNS.findall(piece):
                if len(run) < 2 or not JAPANESE.match(run):
                    words.append(run)
                else:
                    words.extend(run[i:i + 2] for i in range(len(run) - 1))
        return words


def split_words(text: str) -> list[str]:
    """What the index keeps of ``text`` (steps 1-3), in order: for tests and checks."""
    lang = JapaneseSearch({})
    return [w for w in lang.split(text) if lang.word_filter(w)]


def _dumps(self: Any, data: Any) -> str:
    """The index as UTF-8 JSON without spaces: Sphinx writes each kana and kanji as a six-byte \\u escape."""
    return self.PREFIX + json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + self.SUFFIX


def setup(app: Any) -> dict[str, Any]:
    from sphinx import search

    app.add_search_language(JapaneseSearch)
    if hasattr(search, "_JavaScriptIndex"):  # Sphinx 7-8: the writer of searchindex.js (its reader is json.loads)
        search._JavaScriptIndex.dumps = _dumps
    return {"parallel_read_safe": True, "parallel_write_safe": True}
