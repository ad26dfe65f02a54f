"""`make site-check`, the table of contents: its buttons work on a phone and on a desktop, in Chromium.

With pydata-sphinx-theme 0.17 and sphinx-book-theme 1.3 both themes bind their scripts to the first ☰ in the page,
a hidden one, and the ☰ a reader sees did nothing (book/_static/mixbook_toc.js passes its clicks on). For a
chapter page and the glossary, this taps the visible buttons as a reader would:

* at 390 px (a phone): ☰ opens the book's contents in a dialog, with its chapter links visible; Escape closes it;
  ☷ opens the page's own contents the same way;
* at 1280 px: ☰ hides the sidebar, and a second click shows it again.

Usage::

    python .ci/check_toc.py _build/html
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from site_browser import Traffic, chromium, serve, site_argument, verdict  # noqa: E402

PAGES = ("notebooks/10_mixing.html", "book/glossary.html")
PHONE, DESKTOP = {"width": 390, "height": 844}, {"width": 1280, "height": 900}


def _visible(page, selector: str):
    """The visible element of ``selector`` (there may be a hidden twin), or None."""
    loc = page.locator(f"{selector} >> visible=true")
    return loc.first if loc.count() else None


def check_phone(page, rel: str) -> list[str]:
    problems = []
    for name, toggle, dialog, needs in (("☰", ".primary-toggle", "#pst-primary-sidebar-modal", "a.reference.internal"),
                                        ("☷", ".secondary-toggle", "#pst-secondary-sidebar-modal", "a.nav-link")):
        button = _visible(page, toggle)
        if button is None:
            if toggle == ".primary-toggle":
                problems.append(f"{rel} at 390 px: no visible {name} button")
            continue
        button.click()
        try:
            page.wait_for_function(f"() => document.querySelector('{dialog}')?.open === true", timeout=3000)
        except Exception:  # noqa: BLE001 - Playwright's timeout: said as the reader sees it
            problems.append(f"{rel} at 390 px: tapping {name} opened nothing")
            continue
        links = page.locator(f"{dialog} {needs} >> visible=true").count()
        if not links:
            problems.append(f"{rel} at 390 px: {name} opened an empty dialog")
        page.keyboard.press("Escape")
        page.wait_for_function(f"() => document.querySelector('{dialog}')?.open === false", timeout=3000)
    return problems


def check_desktop(page, rel: str) -> list[str]:
    sidebar = page.locator("#pst-primary-sidebar")
    button = _visible(page, ".primary-toggle")
    if button is None:
        return [f"{rel} at 1280 px: no visible ☰ button"]
    if not sidebar.is_visible():
        return [f"{rel} at 1280 px: the sidebar is not shown at first"]
    button.click()
    page.wait_for_timeout(400)  # the theme's transition
    problems = []
    if sidebar.is_visible() and (sidebar.bounding_box() or {}).get("width", 0) > 10:
        problems.append(f"{rel} at 1280 px: ☰ did not hide the sidebar")
    button.click()
    page.wait_for_timeout(400)
    if not sidebar.is_visible():
        problems.append(f"{rel} at 1280 px: a second ☰ did not bring the sidebar back")
    return problems


def main(argv: list[str] | None = None) -> int:
    site = site_argument(__doc__, argv)
    missing = [rel for rel in PAGES if not (site / rel).is_file()]
    if missing:
        print(f"{missing} not in {site}: run `make book` first.", file=sys.stderr)
        return 2
    t0, problems = time.perf_counter(), []
    with serve(site) as base, chromium() as browser:
        for viewport, check in ((PHONE, check_phone), (DESKTOP, check_desktop)):
            for rel in PAGES:
                page = browser.new_page(viewport=viewport)
                traffic = Traffic(base).watch(page)
                page.goto(f"{base}/{rel}", wait_until="load")
                found = check(page, rel) + [f"{rel}: {p}" for p in traffic.problems()]
                print(f"  {'FAIL' if found else 'ok  '} {rel} at {viewport['width']} px")
                problems += found
                page.close()
    return verdict("contents check", problems, t0)


if __name__ == "__main__":
    sys.exit(main())
