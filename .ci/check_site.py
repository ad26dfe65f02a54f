"""Open every page of the built book in headless Chromium, as a reader would, and fail on what a reader would see.

Serves ``_build/html`` on 127.0.0.1 and loads each page with Playwright for Python
driving Debian's Chromium (``/usr/bin/chromium``; no browser is downloaded), then
checks, with DOM queries on the page as the reader's browser built it:

* the page loads and has a title;
* every resource the page requested answered (no HTTP >= 400, no failed request),
  and no request left the local site — the book works offline, with no CDN;
* no uncaught JavaScript error and no console error;
* every local ``<a href>`` points to an existing file, and a link into a page to
  an ``id`` that page has; every ``<img>`` loaded and decoded (natural width > 0);
* every math node (``.math``) was typeset by the book's own MathJax (holds an
  ``mjx-container``);
* every table cell has padding, and a cell holding a single number is right-aligned; no header row of pandas'
  index names that mixbook_tables.js could fold into the corner above it; no index written as code
  (``d_k``, ``ψ_qkv``) in a table: the script sets it as a subscript;
* no typeset equation shows a literal backslash (``\\text{keep\\_attn}`` in MathJax does);
* no table, display equation or printed output is wider than the text column (nothing scrolls sideways;
  code, in a code cell or shown as an output, keeps its lines and may scroll);
* every saved ipywidgets view was rendered by the local HTML manager (its
  ``widget-subarea`` has content);
* the Colab edition (``notebooks/colab/``): every link it makes into the site (glossary terms, references, essay
  pages) points to a built page and, with an anchor, to an ``id`` that page has; every chapter page's Colab launch
  button opens the chapter's Colab edition;
* every chapter page (``notebooks/*.html``) shows at least one figure (an image
  or a chart), unless its source is still a PLACEHOLDER (reported, not failed:
  tests/test_book.py fails on those).

A screenshot of the intro and of every chapter page (1280 px wide, full height) goes to ``--screenshots``.
``check_charts.py`` then moves the controls of the kernel-free charts.

Usage::

    python .ci/check_site.py _build/html --screenshots _build/screenshots
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

from site_browser import Traffic, chromium, serve

#: pages whose screenshots are saved (relative to the site root), besides every chapter page (notebooks/*.html)
SCREENSHOT_PAGES = {"intro": "book/intro.html"}
#: generated pages that are not part of the reading flow (still loaded, fewer checks)
GENERATED = {"genindex.html", "search.html", "py-modindex.html"}
#: milliseconds a page's scripts (MathJax, the widget manager) get to finish after the load event
SETTLE_MS = 30_000

MATH_DONE = "() => Array.from(document.querySelectorAll('.math')).every(e => e.querySelector('mjx-container'))"
WIDGETS_DONE = """() => Array.from(document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]'))
  .every(s => { const p = s.previousElementSibling;
                return p && p.classList.contains('widget-subarea') && p.childElementCount > 0; })"""
PAGE_FACTS = """() => {
  const q = s => Array.from(document.querySelectorAll(s));
  const article = document.querySelector('article.bd-article');
  const views = q('script[type="application/vnd.jupyter.widget-view+json"]');
  return {
    title: document.title.trim(),
    url: location.href,
    ids: q('[id]').map(e => e.id).concat(q('a[name]').map(e => e.getAttribute('name'))),
    links: q('a[href]').map(a => [a.getAttribute('href'), a.href]),  // as written, and as the browser resolved it
    images: q('img[src]').map(i => ({src: i.getAttribute('src').slice(0, 80), ok: i.complete && i.naturalWidth > 0,
                                     article: !!article && article.contains(i)})),
    math: q('.math').length,
    untypeset: q('.math').filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 60)),
    views: views.length,
    unrendered: views.filter(s => { const p = s.previousElementSibling;
                                    return !(p && p.classList.contains('widget-subarea') && p.childElementCount); }).length,
    charts: q('div.mixbook-vega').length,
    // tables: every cell has room, and a cell holding one number is right-aligned
    cells: q('article.bd-article table td, article.bd-article table th').length,
    cramped: q('article.bd-article table td, article.bd-article table th').filter(c => {
      const s = getComputedStyle(c); return parseFloat(s.paddingLeft) < 4 || parseFloat(s.paddingRight) < 4; }).length,
    leftNumbers: q('article.bd-article table td').filter(c =>
      /^[-+\u2212]?\d[\d,]*(\.\d+)?([eE][-+\u2212]?\d+)?%?$/.test(c.textContent.trim())
      && !['right', 'end'].includes(getComputedStyle(c).textAlign)).map(c => c.textContent.trim()),
    // pandas' row of index names under the headings ("層 | | |"), where mixbook_tables.js could have folded it into the corner
    indexRows: q('article.bd-article div.cell_output table thead').filter(h => {
      if (h.rows.length < 2) return false;
      const cells = Array.from(h.rows[h.rows.length - 1].cells), above = Array.from(h.rows[h.rows.length - 2].cells);
      const k = cells.findIndex(c => c.textContent.trim() === '');
      return k > 0 && cells.slice(k).every(c => c.textContent.trim() === '')
        && above.slice(0, k).length === k && above.slice(0, k).every(c => c.colSpan === 1 && c.rowSpan === 1)
        && (k === 1 || above.slice(0, k).every(c => c.textContent.trim() === ''));
    }).map(h => h.rows[h.rows.length - 1].textContent.trim().slice(0, 40)),
    // an index written as code writes it (d_k, ψ_qkv) left in a table or a printed sentence (mixbook_tables.js sets it as a subscript)
    underscores: q('article.bd-article div.cell_output table, article.bd-article div.cell_output div.output.stream pre, '
                   + 'article.bd-article span.pasted-text').map(t => t.textContent)
      .flatMap(s => s.match(/(^|[^A-Za-z0-9_\u0370-\u03ff])[A-Za-z\u0370-\u03ff]{1,2}_[A-Za-z0-9]{1,5}(?![A-Za-z0-9_])/g) || [])
      .map(s => s.replace(/^[^A-Za-z\u0370-\u03ff]/, '')).filter(s => !/^[A-Z]{2}_[A-Z]{2,}$/.test(s)),
    // nothing wider than the text column: a table, a display equation or a printed output that scrolls sideways
    // (at the 1280 px window the screenshots use; a table's room is its output area, which scrolls what is wider)
    wideTables: q('article.bd-article table').filter(t => t.getBoundingClientRect().width
                                                      > (t.closest('div.output, div.cell_output') || article || t).clientWidth + 1)
      .map(t => Math.round(t.getBoundingClientRect().width) + ' px: ' + ((t.querySelector('caption') || t).textContent.trim().slice(0, 50))),
    wideMath: q('mjx-container[display="true"]').filter(m => m.scrollWidth > m.clientWidth + 2)
      .map(m => m.scrollWidth + ' px: ' + (m.querySelector('mjx-assistive-mml') || m).textContent.slice(0, 50)),
    widePre: q('article.bd-article div.cell_output div.output.stream pre, article.bd-article div.cell_output div.output.text_plain pre').filter(p => p.scrollWidth > p.clientWidth + 2)
      .map(p => p.textContent.trim().slice(0, 50)),
    // a literal backslash in a typeset equation (a TeX escape MathJax did not understand, e.g. \text{a\_b})
    texLeft: q('mjx-container').filter(m => m.querySelector('mjx-c.mjx-c5C')
      || (m.querySelector('mjx-assistive-mml') || {textContent: ''}).textContent.includes(String.fromCharCode(92))).length,
  };
}"""


def _local_target(site: Path, base: str, url: str) -> tuple[Path | None, str]:
    """The file a URL the browser resolved points to (None off the local site) and its fragment."""
    if not url.startswith(base + "/"):
        return None, ""
    parts = urlsplit(url)
    target = site / unquote(parts.path).lstrip("/")
    if target.is_dir():
        target = target / "index.html"
    return target, unquote(parts.fragment)


def source_of(site: Path, page: Path) -> Path | None:
    """The notebook or markdown source of a built page."""
    rel = page.relative_to(site).with_suffix("")
    for suffix in (".ipynb", ".md"):
        src = site.parent.parent / f"{rel}{suffix}"
        if src.is_file():
            return src
    return None


def load(browser, base: str, rel: str, shot: Path | None, redirect: bool = False) -> tuple[dict, list[str]]:
    """Open one page, let MathJax and the widget manager finish, and return its facts and its problems so far."""
    page = browser.new_page(viewport={"width": 1280, "height": 1800})
    traffic = Traffic(base).watch(page)
    try:
        url = f"{base}/{rel}"
        page.goto(url, wait_until="load", timeout=60_000)
        if redirect:  # a redirect page (the site's index): read the page it lands on
            page.wait_for_url(lambda u: u != url, timeout=10_000)
            page.wait_for_load_state("load")
        for done in (MATH_DONE, WIDGETS_DONE):  # a timeout is not fatal: the facts below say what is missing
            try:
                page.wait_for_function(done, timeout=SETTLE_MS)
            except Exception:  # noqa: BLE001 - reported through the facts
                pass
        facts = page.evaluate(PAGE_FACTS)
        if shot is not None:
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)  # 1280 px wide, the whole page
    except Exception as err:  # noqa: BLE001 - a page that does not load is a finding, not a crash
        return {}, [f"did not load: {err}"]
    finally:
        page.close()
    return facts, traffic.problems()


def check(site: Path, base: str, page: Path, facts: dict, ids: dict[Path, set[str]]) -> tuple[list[str], list[str]]:
    """Problems (fail) and notes (print) for one loaded page, from its DOM facts."""
    rel = page.relative_to(site).as_posix()
    problems: list[str] = []
    notes: list[str] = []
    if not facts.get("title"):
        return ["loaded without a <title>"], notes
    landed, _ = _local_target(site, base, facts["url"])
    if landed != page:  # a redirect page: the page it lands on is checked on its own
        return [], [f"redirects to {facts['url'].removeprefix(base + '/')}"]
    for href, url in facts["links"]:
        target, frag = _local_target(site, base, url)
        if target is None:
            continue
        if not target.exists():
            problems.append(f"broken link {href!r}")
        elif frag and target in ids and frag not in ids[target]:
            problems.append(f"link {href!r}: no id {frag!r} in {target.relative_to(site)}")
    for img in facts["images"]:
        if not img["ok"]:
            problems.append(f"image {img['src']!r} did not load or decode")
    if rel in GENERATED:
        return problems, notes
    if facts["untypeset"]:
        problems.append(f"{len(facts['untypeset'])} of {facts['math']} math node(s) not typeset by MathJax, "
                        f"e.g. {facts['untypeset'][0]!r}")
    if facts["cramped"]:
        problems.append(f"{facts['cramped']} of {facts['cells']} table cell(s) with less than 4 px padding on a side (numbers run together)")
    if facts["leftNumbers"]:
        problems.append(f"{len(facts['leftNumbers'])} numeric table cell(s) not right-aligned, e.g. {facts['leftNumbers'][:3]}")
    if facts["indexRows"]:
        problems.append(f"{len(facts['indexRows'])} table(s) with a header row holding only the index's name "
                        f"(mixbook_tables.js folds it into the corner), e.g. {facts['indexRows'][:3]}")
    if facts["underscores"]:
        problems.append(f"{len(facts['underscores'])} index(es) written as code in a table or printed sentence (mixbook_tables.js sets them as "
                        f"subscripts), e.g. {facts['underscores'][:3]}")
    for key, what in (("wideTables", "table"), ("wideMath", "display equation"), ("widePre", "printed output")):
        if facts[key]:
            problems.append(f"{len(facts[key])} {what}(s) wider than the text column (they scroll sideways), e.g. {facts[key][:2]}")
    if facts["texLeft"]:
        problems.append(f"{facts['texLeft']} typeset equation(s) show a literal backslash (a TeX escape left over)")
    if facts["unrendered"]:
        problems.append(f"{facts['unrendered']} of {facts['views']} saved widget view(s) not rendered")
    if rel.startswith("notebooks/") and not facts["charts"] and not any(i["article"] for i in facts["images"]):
        src = source_of(site, page)
        if src is not None and "PLACEHOLDER" in src.read_text(encoding="utf-8"):
            notes.append("placeholder chapter without figures (not failed here; tests/test_book.py fails on it)")
        else:
            problems.append("chapter page shows no figure")
    return problems, notes


def check_edition_links(site: Path, ids: dict[Path, set[str]]) -> list[str]:
    """The Colab edition's links into the site resolve on the built site; the launch buttons open the edition."""
    import json
    import re

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    from mixlib._repo import COLAB_EDITION_DIR, SITE_URL, colab_url

    problems, links = [], 0
    for nb_path in sorted((root / COLAB_EDITION_DIR).glob("*.ipynb")):
        text = "".join("".join(c["source"]) for c in json.loads(nb_path.read_text(encoding="utf-8"))["cells"])
        for url in sorted(set(re.findall(re.escape(SITE_URL) + r"[^)\s\"]*", text))):
            links += 1
            rel, _, anchor = url[len(SITE_URL):].partition("#")
            page = site / rel
            if not page.is_file():
                problems.append(f"{nb_path.name} links {url}: no such page on the site")
            elif anchor and anchor not in ids.get(page, set()):
                problems.append(f"{nb_path.name} links {url}: the page has no id {anchor!r}")
        page = site / "notebooks" / f"{nb_path.stem}.html"
        if page.is_file() and colab_url(nb_path.name) not in page.read_text(encoding="utf-8"):
            problems.append(f"{page.relative_to(site)}: its Colab button does not open {colab_url(nb_path.name)}")
    print(f"  Colab edition: {links} links into the site checked, launch buttons of the chapter pages checked")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", type=Path, help="the built site, e.g. _build/html")
    ap.add_argument("--screenshots", type=Path, default=None, help="folder for screenshots (default: <site>/../screenshots)")
    args = ap.parse_args(argv)

    site = args.site.resolve()
    if not (site / "index.html").is_file():
        print(f"{site}/index.html does not exist: run `make book` first.", file=sys.stderr)
        return 2
    shots = (args.screenshots or site.parent / "screenshots").resolve()
    pages = sorted(p for p in site.rglob("*.html") if "_static" not in p.parts and "_sources" not in p.parts)
    wanted = {**SCREENSHOT_PAGES, **{p.stem: p.relative_to(site).as_posix() for p in pages if p.parent.name == "notebooks"}}
    missing = [rel for rel in wanted.values() if not (site / rel).is_file()]

    t_start = time.perf_counter()
    loaded: dict[Path, tuple[dict, list[str], float]] = {}
    with serve(site) as base, chromium() as browser:
        print(f"site check: {len(pages)} pages, Chromium {browser.version}, served at {base}")
        shot_of = {rel: shots / f"{name}.png" for name, rel in wanted.items()}
        for page in pages:
            rel = page.relative_to(site).as_posix()
            t0 = time.perf_counter()
            redirect = 'http-equiv="Refresh"' in page.read_text(encoding="utf-8", errors="replace")
            facts, problems = load(browser, base, rel, shot_of.get(rel), redirect)
            loaded[page] = (facts, problems, time.perf_counter() - t0)

    # the ids of each page the browser landed on (a redirect page's are those of its target)
    ids = {_local_target(site, base, f["url"])[0]: set(f["ids"]) for f, _, _ in loaded.values() if f}
    failed = 0
    for page, (facts, problems, seconds) in loaded.items():
        rel = page.relative_to(site).as_posix()
        more, notes = check(site, base, page, facts, ids) if facts else ([], [])
        problems = problems + more
        print(f"  {'FAIL' if problems else 'ok  '} {rel}  ({seconds:.1f} s)")
        for n in notes:
            print(f"         note: {n}")
        for p in problems:
            print(f"         {p}")
        failed += bool(problems)
    for rel in missing:
        print(f"  FAIL screenshot page {rel} does not exist")
        failed += 1
    edition_problems = check_edition_links(site, ids)
    for p in edition_problems:
        print(f"  FAIL Colab edition: {p}")
    failed += bool(edition_problems)
    print(f"  screenshots ({len(wanted) - len(missing)} pages, 1280 px wide, full height): {shots}/")
    total = time.perf_counter() - t_start
    print(f"site check: {len(pages) - failed} passed, {failed} failed in {total:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
