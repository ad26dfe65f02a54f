"""`make site-check`, search: Japanese terms find every page that holds them, in Chromium.

The terms: every Japanese headword of the glossary (book/glossary.md) and a few a reader types
(:data:`EXTRA`). For each, the pages that hold it are read from the built HTML (the article's text, scripts and
styles left out: what Sphinx indexes); the site's own search (searchtools.js with the splitter of
``mixlib._search``), run in the page, must list every one of them. The named terms are also typed into
``search.html?q=…`` and the results the page shows are counted.

Then the two splitters are compared: ``splitQuery`` in the browser and :func:`mixlib._search.split_words` in
Python must split the glossary and the start of every chapter into the same words, or a query and the index
would disagree again.

Usage::

    python .ci/check_search.py _build/html
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from site_browser import Traffic, chromium, serve, site_argument, verdict  # noqa: E402

#: Terms a reader types (the issue's list): each must find every page that holds it.
EXTRA = ("混ぜる割合", "百人一首", "位置ベクトル", "ちはやふる", "注意機構")
#: How much of each page's text the splitters are compared on (characters).
COMPARE_CHARS = 20_000
JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")


def glossary_terms(root: Path = ROOT) -> list[str]:
    """The glossary's Japanese headwords: the first line of each entry (a line at the margin, the next one English)."""
    text = (root / "book" / "glossary.md").read_text(encoding="utf-8")
    body = text[text.index("```{glossary}"):].split("\n```", 1)[0].splitlines()[1:]
    terms = []
    for line, following in zip(body, body[1:]):
        if line and not line[0].isspace() and following and not following[0].isspace() and JAPANESE.search(line):
            terms.append(line.strip())
    return terms


def page_texts(site: Path) -> dict[str, str]:
    """docname -> the text of the page's article, without scripts and styles (what the search index holds)."""
    from bs4 import BeautifulSoup

    out = {}
    for page in sorted(site.rglob("*.html")):
        rel = page.relative_to(site)
        if rel.parts[0] in ("_static", "_sources", "_images") or rel.name in ("search.html", "genindex.html"):
            continue
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        article = soup.find("article")
        if article is None:  # a redirect page
            continue
        for tag in article.find_all(["script", "style"]):
            tag.decompose()
        out[rel.with_suffix("").as_posix()] = article.get_text(" ")
    return out


FIND = """(term) => {
  const [query, searchTerms, excluded, highlight, objectTerms] = Search._parseQuery(term);
  return {words: [...searchTerms], pages: Search._performSearch(query, searchTerms, excluded, highlight, objectTerms).map(r => r[0])};
}"""


def main(argv: list[str] | None = None) -> int:
    site = site_argument(__doc__, argv)
    if not (site / "search.html").is_file():
        print(f"{site}/search.html does not exist: run `make book` first.", file=sys.stderr)
        return 2
    from mixlib._search import split_words

    t0 = time.perf_counter()
    texts = page_texts(site)
    terms = list(dict.fromkeys([*glossary_terms(), *EXTRA]))
    problems: list[str] = []
    with serve(site) as base, chromium() as browser:
        page = browser.new_page()
        traffic = Traffic(base).watch(page)
        page.goto(f"{base}/search.html")
        page.wait_for_function("() => typeof Search !== 'undefined' && Search._index !== null", timeout=30_000)
        found_all = 0
        for term in terms:
            holders = sorted(doc for doc, text in texts.items() if term in text)
            got = page.evaluate(FIND, term)
            missed = [doc for doc in holders if doc not in got["pages"]]
            if missed:
                problems.append(f"{term}: split {got['words']}, found {len(got['pages'])} pages but not {missed} "
                                f"({len(holders)} hold it)")
            else:
                found_all += 1
        print(f"search: {found_all} of {len(terms)} terms find every page that holds them "
              f"({len(glossary_terms())} glossary headwords and {', '.join(EXTRA)})")
        # the search page as a reader uses it: the results it lists
        for term in EXTRA:
            page.goto(f"{base}/search.html?q={quote(term)}")
            # done: the summary under the results says how many were found, or that none were
            page.wait_for_function("() => { const s = document.querySelector('#search-results .search-summary');"
                                   " return s && /ページ|見つかりません/.test(s.innerText); }", timeout=30_000)
            shown = page.locator("#search-results ul.search > li").count()
            status = page.locator("#search-results .search-summary").inner_text().strip()
            holders = sum(term in text for text in texts.values())
            print(f"  search.html?q={term}: {shown} results listed, the page says 「{status}」 ({holders} pages hold it)")
            if holders and not shown:
                problems.append(f"search.html?q={term} lists nothing")
            if shown and f"{shown} ページ" not in status:
                problems.append(f"search.html?q={term}: the page does not say how many it found ({status!r})")
        # both splitters alike
        samples = {doc: text[:COMPARE_CHARS] for doc, text in texts.items() if doc.startswith("notebooks/") or doc.endswith("glossary")}
        differ = []
        for doc, text in samples.items():
            js = page.evaluate("(t) => splitQuery(t)", text)
            py = split_words(text)
            if js != py:
                k = next((i for i, (a, b) in enumerate(zip(js, py)) if a != b), min(len(js), len(py)))
                differ.append(f"{doc}: word {k}: browser {js[k:k + 5]} / Python {py[k:k + 5]}")
        print(f"  splitters: the browser's and Python's split {len(samples) - len(differ)} of {len(samples)} pages alike "
              f"(first {COMPARE_CHARS} characters each)")
        problems += [f"splitters differ on {d}" for d in differ]
        problems += [f"search page: {p}" for p in traffic.problems()]
    return verdict("search check", problems, t0)


if __name__ == "__main__":
    sys.exit(main())
