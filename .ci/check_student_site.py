"""The site without solutions (``make book-student``): no solution on any page, and its Colab buttons open the
student edition.

Checks the built pages' HTML (no browser: the pages are the book's own, which ``make site-check`` opens in
Chromium):

* every chapter of the book has its page;
* no page holds a solution: no element of sphinx-exercise's ``solution`` class, and no line of any chapter's
  ``{solution}`` blocks that occurs nowhere else in the chapter (:func:`mixlib._assign.solution_lines`) is in the
  text of the chapter's page. With ``--book _build/html`` (the site with solutions), the same search must find
  those lines there, so it is known to find what it looks for;
* every chapter page's Colab button opens the chapter's student edition (``notebooks/student/``), and no page
  links to the Colab edition, which shows the solutions (a URL shown as text, as the guide's example, is no link);
* every page shows the note that this is the student site (a redirect page shows nothing).

Usage::

    python .ci/check_student_site.py _build/student/_build/html --book _build/html
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mixlib import _assign  # noqa: E402
from mixlib._repo import COLAB_EDITION_DIR, STUDENT_EDITION_DIR, colab_url  # noqa: E402

SOLUTION_CLASS = re.compile(r"""class="[^"]*\bsolution\b""")


def page_text(page: Path) -> str:
    """The page's text as a reader sees it (tags dropped, entities decoded, each line stripped)."""
    raw = page.read_text(encoding="utf-8")
    raw = re.sub(r"<(script|style)\b.*?</\1>", " ", raw, flags=re.S)
    text = html.unescape(re.sub(r"<[^>]+>", "", raw))
    return "\n".join(line.strip() for line in text.splitlines())


def found_solutions(site: Path, chapter: Path) -> list[str]:
    """The chapter's own solution lines that its page in ``site`` shows."""
    page = site / "notebooks" / f"{chapter.stem}.html"
    if not page.is_file():
        return []
    text = page_text(page)
    lines = _assign.solution_lines(json.loads(chapter.read_text(encoding="utf-8")))
    return sorted(line for line in lines if line in text)


def check(site: Path, book: Path | None) -> list[str]:
    problems = []
    chapters = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    pages = sorted(p for p in site.rglob("*.html") if "_static" not in p.parts and "_sources" not in p.parts)
    note = _assign.STUDENT_SITE_NOTE
    seen_in_book = 0
    for chapter in chapters:
        page = site / "notebooks" / f"{chapter.stem}.html"
        if not page.is_file():
            problems.append(f"{chapter.stem}: no page in {site}")
            continue
        raw = page.read_text(encoding="utf-8")
        if SOLUTION_CLASS.search(raw):
            problems.append(f"{page.relative_to(site)}: an element of the solution class")
        if leaked := found_solutions(site, chapter):
            problems.append(f"{page.relative_to(site)}: {len(leaked)} solution lines, e.g. {leaked[0]!r}")
        if colab_url(f"{chapter.stem}.ipynb", STUDENT_EDITION_DIR) not in raw:
            problems.append(f"{page.relative_to(site)}: its Colab button does not open the student edition")
        if book is not None:
            seen_in_book += len(found_solutions(book, chapter))
    to_edition = re.compile(rf'href="[^"]*/{re.escape(COLAB_EDITION_DIR)}/')
    for page in pages:
        raw = page.read_text(encoding="utf-8")
        if to_edition.search(raw):
            problems.append(f"{page.relative_to(site)}: links to the Colab edition ({COLAB_EDITION_DIR}/), which shows the solutions")
        if note not in raw and 'http-equiv="Refresh"' not in raw:  # a redirect page shows nothing
            problems.append(f"{page.relative_to(site)}: no note that this is the student site")
    if book is not None and seen_in_book == 0:
        problems.append(f"the search found no solution line in {book} either: it is broken")
    print(f"student site: {len(pages)} pages, {len(chapters)} chapters checked"
          + (f"; the same search finds {seen_in_book} solution lines in {book}" if book is not None else ""))
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", type=Path, help="the site without solutions, e.g. _build/student/_build/html")
    ap.add_argument("--book", type=Path, default=None, help="the site with solutions (_build/html): the search must find them there")
    args = ap.parse_args(argv)
    if not (args.site / "index.html").is_file():
        print(f"{args.site}/index.html does not exist: run `make book-student` first.", file=sys.stderr)
        return 2
    book = args.book if args.book is not None and (args.book / "index.html").is_file() else None
    problems = check(args.site, book)
    for p in problems:
        print(f"  {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
