"""`make site-check`, the site as its readers use it: a phone, a slow network, a screen reader, the keyboard.

For every chapter page, in Chromium at 390 px (a phone), over a 10 Mbit/s link (the site's server sends at that
rate, 20 ms a response, gzip-compressed as GitHub Pages serves the site), with an empty cache (a first visit):

* **phone**: the page is no wider than the screen (a chart or a table wider than the column scrolls in its own box);
* **figures**: every image in the page's text has alt text that is not a file path, sits in a figure with a number
  (図 10.3) and a caption, and links to its full-size file where the phone shows it smaller (its text, sized for
  the 688 px column, is about half as big there);
* **weight**: the bytes the page transferred (gzip) and its first contentful paint are printed; the budget fails a
  page over :data:`BUDGET_BYTES` or with a first paint later than :data:`BUDGET_PAINT_S`.

* **what it loads**: no search index (only the search page needs it) and no widget manager where no widget shows;
* **language**: no tooltip or label left in English (:data:`ENGLISH_LABELS`), and a table cell coloured by its
  value (a pandas heat map) has text of at least 4.5:1 contrast.

Then, at 1280 px with no throttling, **the keyboard**: the Tab presses from the top of chapter 10 to its first
chart control, using the skip link 「最初の動く図へ移動」 as a keyboard user would, must be under :data:`MAX_TABS`
(the count without the link is printed too: every link, copy button and folded cell's toggle before the chart); and **print**: every chapter, laid out for print at the width
of an A4 page, has no code, output, table or figure running past the right margin, and chapter 10 printed to PDF
without its solutions (the download menu's 「解答なし」) has fewer pages than with them.

Usage::

    python .ci/check_reader.py _build/html
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from site_browser import Link, Traffic, chromium, serve, site_argument, verdict  # noqa: E402

PHONE, DESKTOP = {"width": 390, "height": 844}, {"width": 1280, "height": 900}
#: 10 Mbit/s and 20 ms a response: a slow mobile or shared connection (the server is the slow link: site_browser.Link).
RATE, LATENCY = 10e6 / 8, 0.020
BUDGET_BYTES = 3_000_000
BUDGET_PAINT_S = 3.0
MAX_TABS = 30
KEYBOARD_PAGE = "notebooks/10_mixing.html"
CHART_CONTROL = ".vega-bindings input, .vega-bindings select"
#: The width of an A4 page less 1 cm margins, in CSS pixels (96 per inch).
PRINT_WIDTH = round((210 - 20) / 25.4 * 96)
#: Tooltips and labels the themes write in English (book/_static/mixbook_reader.js says them in Japanese).
ENGLISH_LABELS = ("Toggle hidden content", "Link to this heading", "Toggle primary sidebar",
                  "Toggle secondary sidebar", "Color mode", "System Settings", "Launch on Colab", "Copy",
                  "Copy to clipboard", "Back to top", "Skip to main content")
MIN_CONTRAST = 4.5

#: Per page: its width, and each image of the text as the reader meets it.
PAGE_JS = r"""() => {
  const imgs = [...document.querySelectorAll('article.bd-article img')].map(img => {
    const fig = img.closest('figure');
    const link = img.closest('a');
    return {
      src: img.getAttribute('src'), alt: img.getAttribute('alt') || '',
      number: fig ? (fig.querySelector('.caption-number')?.textContent || '').trim() : '',
      caption: fig ? (fig.querySelector('.caption-text')?.textContent || '').trim() : '',
      href: link ? link.getAttribute('href') : '',
      shown: img.getBoundingClientRect().width, natural: img.naturalWidth,
    };
  });
  const paint = performance.getEntriesByName('first-contentful-paint')[0];
  const english = [];
  for (const el of document.querySelectorAll('[title], [aria-label], [data-bs-title]'))
    for (const a of ['title', 'aria-label', 'data-bs-title'])
      if (el.getAttribute(a) !== null) english.push(el.getAttribute(a).trim());
  // WCAG's contrast of a heat-map cell's text on its own background
  const lum = c => { const v = c.match(/[\d.]+/g).slice(0, 3).map(x => { x = +x / 255;
      return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
    return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
  const lowContrast = [];
  let heat = 0;
  for (const td of document.querySelectorAll('article.bd-article div.cell_output td')) {
    const s = getComputedStyle(td);
    const alpha = (s.backgroundColor.match(/[\d.]+/g) || [])[3];
    if (s.backgroundColor === 'transparent' || alpha === '0') continue;  // a cell with no colour of its own
    heat++;
    const [a, b] = [lum(s.color), lum(s.backgroundColor)].sort((x, y) => y - x);
    const ratio = (a + 0.05) / (b + 0.05);
    if (ratio < %(MIN)s) lowContrast.push(`${td.textContent.trim()} (${ratio.toFixed(2)}:1)`);
  }
  return {width: document.documentElement.scrollWidth, screen: document.documentElement.clientWidth,
          images: imgs, paint: paint ? paint.startTime / 1000 : null, english, lowContrast, heat,
          scripts: [...document.scripts].map(x => x.getAttribute('src') || x.type || '').filter(Boolean),
          widgetViews: document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length,
          lang: document.querySelectorAll('article.bd-article [lang="en"]').length};
}""".replace("%(MIN)s", str(MIN_CONTRAST))

#: The widest elements that stick out of the screen, for a failure's message.
WIDE_JS = """() => {
  const W = document.documentElement.clientWidth, out = [];
  for (const el of document.querySelectorAll('article.bd-article *')) {
    const r = el.getBoundingClientRect();
    if (!(r.right > W + 1 && r.width > 0)) continue;
    let a = el.parentElement, inside = false;  // a box that scrolls within the screen holds it: not the cause
    for (; a && a !== document.body; a = a.parentElement)
      if (getComputedStyle(a).overflowX !== 'visible' && a.getBoundingClientRect().right <= W + 1) { inside = true; break; }
    if (!inside) out.push(el.tagName.toLowerCase() + '.' + [...el.classList].join('.'));
    if (out.length > 2) break;
  }
  return out;
}"""


def check_images(rel: str, images: list[dict]) -> list[str]:
    problems = []
    for im in images:
        name = Path(im["src"] or "?").name
        if not im["alt"].strip() or re.fullmatch(r"\S*\.(png|jpe?g|svg|gif)", im["alt"].strip()):
            problems.append(f"{rel}: image {name} has no alt text but {im['alt']!r}")
        if not im["number"] or not im["caption"]:
            problems.append(f"{rel}: image {name} is not in a numbered figure with a caption")
        if im["natural"] > im["shown"] + 1 and not (im["href"] or "").endswith(Path(im["src"]).name):
            problems.append(f"{rel}: image {name} is shown at {im['shown']:.0f} of its {im['natural']} px "
                            f"and does not open at full size")
    return problems


def check_page(browser, base: str, rel: str) -> tuple[list[str], dict]:
    context = browser.new_context(viewport=PHONE)  # a new context: an empty cache, as on a first visit
    page = context.new_page()
    traffic = Traffic(base).watch(page)
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    transferred, pending, took = [], {}, {}

    def sent(e):
        pending[e["requestId"]] = (e["request"]["url"], e["timestamp"])

    def finished(e):
        transferred.append(e["encodedDataLength"])
        url, start = pending.pop(e["requestId"], ("?", e["timestamp"]))
        took[url.rsplit("/", 1)[-1].split("?")[0]] = e["timestamp"] - start

    cdp.on("Network.requestWillBeSent", sent)
    cdp.on("Network.loadingFinished", finished)
    cdp.on("Network.loadingFailed", lambda e: pending.pop(e["requestId"], None))
    problems = []
    try:
        page.goto(f"{base}/{rel}", wait_until="load", timeout=90_000)
    except Exception:  # noqa: BLE001 - Playwright's timeout, said with what was still loading
        problems.append(f"{rel}: not loaded in 90 s; still loading: {sorted(u for u, _ in pending.values())[:3]}")
    quiet = 0
    for _ in range(600):  # until no request has been open for 0.5 s (at most 60 s)
        page.wait_for_timeout(100)
        quiet = quiet + 1 if not pending else 0
        if quiet >= 5:
            break
    else:
        problems.append(f"{rel}: requests still open after 60 s: {sorted(u for u, _ in pending.values())[:3]}")
    info = page.evaluate(PAGE_JS)
    if info["width"] > info["screen"]:
        problems.append(f"{rel} at 390 px is {info['width']} px wide: {page.evaluate(WIDE_JS)}")
    problems += check_images(rel, info["images"])
    english = sorted(set(info["english"]) & set(ENGLISH_LABELS))
    if english:
        problems.append(f"{rel}: tooltips or labels in English: {english}")
    if info["lowContrast"]:
        problems.append(f"{rel}: {len(info['lowContrast'])} of {info['heat']} heat-map cells under "
                        f"{MIN_CONTRAST}:1 contrast, e.g. {info['lowContrast'][:3]}")
    loads = [src for src in info["scripts"] if "searchindex.js" in src
             or ("html-manager" in src and not info["widgetViews"])]
    if loads:
        problems.append(f"{rel}: loads what it does not use: {loads}")
    stats = {"bytes": sum(transferred), "requests": len(transferred), "paint": info["paint"],
             "figures": len(info["images"]), "english": info["lang"], "heat": info["heat"]}
    if stats["bytes"] > BUDGET_BYTES:
        problems.append(f"{rel}: {stats['bytes'] / 1e6:.2f} MB transferred, over the budget of {BUDGET_BYTES / 1e6:.0f} MB")
    if stats["paint"] is None or stats["paint"] > BUDGET_PAINT_S:
        slowest = ", ".join(f"{name} {t:.1f} s" for name, t in sorted(took.items(), key=lambda x: -x[1])[:3])
        problems.append(f"{rel}: first paint at {stats['paint']} s at 10 Mbit/s, over the budget of {BUDGET_PAINT_S} s "
                        f"(slowest requests: {slowest})")
    problems += [f"{rel}: {p}" for p in traffic.problems()]
    context.close()
    return problems, stats


def tabs_to_chart(browser, base: str, rel: str, skip: bool) -> int | None:
    """Tab presses from the top of ``rel`` until a chart control has the focus (None: not within 400).

    With ``skip``, the reader presses Enter on the skip link 「最初の動く図へ移動」 when the Tab key reaches it.
    """
    page = browser.new_page(viewport=DESKTOP)
    page.goto(f"{base}/{rel}", wait_until="load")
    page.wait_for_selector(CHART_CONTROL, timeout=30_000)
    for n in range(1, 401):
        page.keyboard.press("Tab")
        if skip and page.evaluate("() => !!document.activeElement?.matches('.mixbook-skip-chart a')"):
            page.keyboard.press("Enter")
            skip = False
        if page.evaluate(f"() => !!document.activeElement?.matches('{CHART_CONTROL}')"):
            page.close()
            return n
    page.close()
    return None


#: Blocks that run past the article's right edge when the page is laid out for print.
PRINT_JS = """() => {
  const right = document.querySelector('article.bd-article').getBoundingClientRect().right + 2, out = [];
  const blocks = 'article.bd-article :is(pre, table, svg.marks, img, div.output, mjx-container[display="true"])';
  for (const el of document.querySelectorAll(blocks)) {
    const r = el.getBoundingClientRect();
    if (!r.width) continue;
    // cut off: a box that scrolls or hides what is wider than it (paper cannot scroll); runs past: content wider
    // than the page's text column
    const cut = getComputedStyle(el).overflowX !== 'visible' && el.scrollWidth > el.clientWidth + 2;
    if (cut || r.right > right || r.left + el.scrollWidth > right) out.push(el.tagName.toLowerCase());
  }
  return [out.length, document.querySelectorAll(blocks).length, out.slice(0, 3)];
}"""


def check_print(browser, base: str, pages: list[str]) -> list[str]:
    """Every chapter laid out for print at A4 width; chapter 10 as PDF with and without its solutions."""
    problems = []
    page = browser.new_page(viewport={"width": PRINT_WIDTH, "height": 1100})
    page.emulate_media(media="print")
    for rel in pages:
        page.goto(f"{base}/{rel}", wait_until="load")
        page.wait_for_timeout(300)
        clipped, blocks, kinds = page.evaluate(PRINT_JS)
        if clipped:
            problems.append(f"{rel} in print: {clipped} of {blocks} blocks run past the right margin ({kinds})")
    page.goto(f"{base}/{KEYBOARD_PAGE}", wait_until="load")
    page.wait_for_timeout(500)
    count = lambda pdf: len(re.findall(rb"/Type\s*/Page[^s]", pdf))  # noqa: E731
    full = count(page.pdf(format="A4"))
    if page.locator(".mixbook-handout-button").count() != 1:
        problems.append(f"{KEYBOARD_PAGE}: no 「解答なし」 print button in the download menu")
    page.evaluate("() => document.documentElement.classList.add('mixbook-handout')")
    handout = count(page.pdf(format="A4"))
    print(f"  print: {KEYBOARD_PAGE} is {full} A4 pages, {handout} without its solutions")
    if not handout < full:
        problems.append(f"{KEYBOARD_PAGE}: the handout ({handout} pages) is not shorter than the page ({full})")
    page.close()
    return problems


def main(argv: list[str] | None = None) -> int:
    site = site_argument(__doc__, argv)
    pages = sorted(p.relative_to(site).as_posix() for p in (site / "notebooks").glob("*.html"))
    if not pages or not (site / KEYBOARD_PAGE).is_file():
        print(f"no chapter pages in {site}: run `make book` first.", file=sys.stderr)
        return 2
    t0, problems = time.perf_counter(), []
    with serve(site, gzip=True, link=Link(RATE, LATENCY)) as base:
        print(f"  {'page':38s} {'gzip MB':>8s} {'requests':>8s} {'paint s':>8s} {'figures':>7s} {'en':>4s} {'heat':>5s}")
        for rel in pages:
            with chromium() as browser:  # a browser of its own: nothing cached, nothing left from another page
                found, s = check_page(browser, base, rel)
            paint = f"{s['paint']:.2f}" if s["paint"] is not None else "—"
            print(f"  {'FAIL' if found else 'ok  '} {rel:33s} {s['bytes'] / 1e6:8.2f} {s['requests']:8d} {paint:>8s} "
                  f"{s['figures']:7d} {s['english']:4d} {s['heat']:5d}")
            problems += found
    with serve(site) as base, chromium() as browser:
        plain, tabs = (tabs_to_chart(browser, base, KEYBOARD_PAGE, skip) for skip in (False, True))
        print(f"  keyboard: from the top of {KEYBOARD_PAGE} to its first chart control, {tabs} Tab presses with the "
              f"skip link 「最初の動く図へ移動」, {plain} without it")
        if tabs is None or tabs >= MAX_TABS:
            problems.append(f"{KEYBOARD_PAGE}: the first chart control takes {tabs or 'over 400'} Tab presses "
                            f"(at most {MAX_TABS - 1})")
        problems += check_print(browser, base, pages)
    return verdict("reader check", problems, t0)


if __name__ == "__main__":
    sys.exit(main())
