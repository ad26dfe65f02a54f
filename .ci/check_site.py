"""Open every page of the built book in headless Chromium, as a reader would, and fail on what a reader would see.

Serves ``_build/html`` on 127.0.0.1 (a random free port) and loads each page in
Debian's Chromium (``/usr/bin/chromium``; no browser is downloaded), then checks:

* the page loads and has a title;
* every resource the page requested from the server (scripts, CSS, images,
  fonts) answered 200 — a 404 means a broken local link or image;
* every local ``<a href>`` and ``<img src>`` in the page points to an existing
  file (and, for links into another page, to an existing ``#anchor``), and every
  local image decodes;
* pages with math have it typeset by MathJax (``mjx-container`` in the DOM and no
  raw ``\\(`` left) — from the book's own MathJax copy, no CDN;
* saved ipywidgets states render (the HTML manager replaced the widget-view
  script tags with widget DOM);
* every chapter page (``notebooks/*.html``) shows at least one figure, unless its
  source is still a PLACEHOLDER (reported, not failed: tests/test_book.py fails on those);
* no uncaught JavaScript error.

Screenshots of the intro and of one analysis chapter go to ``--screenshots``.

Usage::

    python .ci/check_site.py _build/html --screenshots _build/screenshots
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--hide-scrollbars",
    "--mute-audio",
]
#: pages whose screenshots are saved (relative to the site root)
SCREENSHOT_PAGES = {"intro": "book/intro.html", "10_mixing": "notebooks/10_mixing.html"}
#: milliseconds of virtual time Chromium gives a page's scripts (MathJax, widget manager) before dumping
VIRTUAL_TIME_MS = 15000
#: generated pages that are not part of the reading flow (still loaded, fewer checks)
GENERATED = {"genindex.html", "search.html", "py-modindex.html"}


# ---------------------------------------------------------------------------
# local server that remembers what each page requested
# ---------------------------------------------------------------------------


class _Log:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.failures: list[tuple[str, str, int]] = []  # (referer path, requested path, status)

    def add(self, referer: str, path: str, status: int) -> None:
        with self.lock:
            self.failures.append((referer, path, status))


def _serve(root: Path, log: _Log) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_request(self, code="-", size="-"):  # noqa: D401 - http.server API
            try:
                status = int(code)
            except (TypeError, ValueError):
                status = 0
            if status >= 400 and self.path != "/favicon.ico":  # browsers ask for it unprompted
                referer = urlsplit(self.headers.get("Referer") or "").path
                log.add(unquote(referer), unquote(urlsplit(self.path).path), status)

        def log_message(self, *args):  # silence the default stderr log
            pass

    handler = functools.partial(Handler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


# ---------------------------------------------------------------------------
# HTML parsing (stdlib only)
# ---------------------------------------------------------------------------


@dataclass
class PageInfo:
    title: str = ""
    ids: set[str] = field(default_factory=set)
    links: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    math_nodes: int = 0
    mjx: int = 0
    widget_views: int = 0
    widget_dom: int = 0
    article_images: int = 0  # images in the page's article (not the header's launch-button logos)


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.info = PageInfo()
        self._in_title = False
        self._in_article = False
        self._script_type: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.info.ids.add(a["id"])
        if a.get("name") and tag == "a":
            self.info.ids.add(a["name"])
        cls = a.get("class") or ""
        if tag == "title":
            self._in_title = True
        elif tag == "a" and a.get("href"):
            self.info.links.append(a["href"])
        elif tag == "img" and a.get("src") is not None:
            self.info.images.append(a["src"])
            if self._in_article:
                self.info.article_images += 1
        elif tag == "mjx-container":
            self.info.mjx += 1
        elif tag == "script":
            self._script_type = a.get("type")
            if a.get("type") == "application/vnd.jupyter.widget-view+json":
                self.info.widget_views += 1
        if tag in ("span", "div") and re.search(r"(^|\s)math(\s|$)", cls):
            self.info.math_nodes += 1
        if re.search(r"(^|\s)(jupyter-widgets|widget-[a-z]+|lm-Widget)(\s|$)", cls):
            self.info.widget_dom += 1
        if tag == "article" and "bd-article" in cls:
            self._in_article = True

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False
        elif tag == "script":
            self._script_type = None
        elif tag == "article":
            self._in_article = False

    def handle_data(self, data):
        if self._in_title:
            self.info.title += data


def parse(html: str) -> PageInfo:
    p = _Parser()
    p.feed(html)
    return p.info


# ---------------------------------------------------------------------------
# Chromium
# ---------------------------------------------------------------------------


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit("Chromium not found: install Debian's package (apt-get install -y chromium); .ci/run does this.")


def chromium(binary: str, args: list[str], timeout: float = 90) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="site-check-") as profile:
        cmd = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def dump_dom(binary: str, url: str) -> tuple[str, list[str]]:
    res = chromium(binary, [f"--virtual-time-budget={VIRTUAL_TIME_MS}", "--run-all-compositor-stages-before-draw", "--dump-dom", url])
    errors = [line for line in res.stderr.splitlines() if "Uncaught" in line]
    if res.returncode != 0 and not res.stdout:
        errors.append(f"chromium exited {res.returncode}: {res.stderr[-500:]}")
    return res.stdout, errors


def screenshot(binary: str, url: str, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    res = chromium(binary, [f"--virtual-time-budget={VIRTUAL_TIME_MS}", "--window-size=1280,1800",
                            f"--screenshot={out}", url])
    if not out.is_file():
        raise RuntimeError(f"no screenshot written for {url}: {res.stderr[-500:]}")


# ---------------------------------------------------------------------------
# checks
# ---------------------------------------------------------------------------


def _local_target(site: Path, page: Path, ref: str) -> tuple[Path | None, str]:
    """The file a local href/src points to (None for external or page-internal refs) and its fragment."""
    parts = urlsplit(ref)
    if parts.scheme or parts.netloc or ref.startswith(("mailto:", "javascript:", "data:")):
        return None, ""
    if not parts.path:
        return page, parts.fragment
    target = (page.parent / unquote(parts.path)).resolve()
    if target.is_dir():
        target = target / "index.html"
    return target, parts.fragment


def _image_ok(path: Path) -> str | None:
    if path.suffix.lower() == ".svg":
        return None if path.stat().st_size > 0 else "empty SVG"
    try:
        from PIL import Image

        with Image.open(path) as im:
            im.verify()
    except Exception as err:  # noqa: BLE001 - any decoding failure is a broken image
        return f"does not decode ({type(err).__name__}: {err})"
    return None


def source_of(site: Path, page: Path) -> Path | None:
    """The notebook or markdown source of a built page (from _sources/)."""
    rel = page.relative_to(site).with_suffix("")
    for suffix in (".ipynb", ".md"):
        src = site.parent.parent / f"{rel}{suffix}"
        if src.is_file():
            return src
    return None


def check_page(binary: str, site: Path, base: str, page: Path, infos: dict[Path, PageInfo]) -> tuple[list[str], list[str], float]:
    """Problems (fail) and notes (print) for one page, and the seconds it took."""
    t0 = time.perf_counter()
    rel = page.relative_to(site).as_posix()
    problems: list[str] = []
    notes: list[str] = []
    static = infos[page]

    dom_html, js_errors = dump_dom(binary, urljoin(base, rel))
    dom = parse(dom_html)
    if not dom_html.strip() or not dom.title.strip():
        problems.append("did not load (empty DOM or no <title>)")
        return problems, notes, time.perf_counter() - t0
    problems += [f"JavaScript error: {e.strip()[:300]}" for e in js_errors]

    # links and images, from the served file (what Sphinx wrote)
    for href in static.links:
        target, frag = _local_target(site, page, href)
        if target is None:
            continue
        if not target.exists():
            problems.append(f"broken link {href!r}")
        elif frag and target.suffix == ".html" and target in infos and frag not in infos[target].ids:
            problems.append(f"link {href!r}: no id {frag!r} in {target.relative_to(site)}")
    for src in static.images:
        target, _ = _local_target(site, page, src)
        if target is None:
            continue
        if not target.is_file():
            problems.append(f"broken image {src!r}")
        else:
            bad = _image_ok(target)
            if bad:
                problems.append(f"image {src!r} {bad}")

    if rel in GENERATED:
        return problems, notes, time.perf_counter() - t0

    # math typeset by the local MathJax
    if static.math_nodes:
        if dom.mjx == 0:
            problems.append(f"{static.math_nodes} math node(s) but no mjx-container after load: MathJax did not render")
        elif re.search(r"\\\(|\\\[", re.sub(r"<script.*?</script>", "", dom_html, flags=re.S)):
            notes.append("raw \\( or \\[ left in the DOM after MathJax ran")
    # saved widget states rendered by the local HTML manager
    if static.widget_views:
        if dom.widget_dom == 0:
            problems.append(f"{static.widget_views} saved widget view(s) but no widget DOM after load")
    # a chapter shows at least one figure
    if rel.startswith("notebooks/"):
        src = source_of(site, page)
        placeholder = src is not None and "PLACEHOLDER" in src.read_text(encoding="utf-8")
        if static.article_images == 0 and dom.article_images == 0:
            if placeholder:
                notes.append("placeholder chapter without figures (not failed here; tests/test_book.py fails on it)")
            else:
                problems.append("chapter page shows no figure")
    return problems, notes, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", type=Path, help="the built site, e.g. _build/html")
    ap.add_argument("--screenshots", type=Path, default=None, help="folder for screenshots (default: <site>/../screenshots)")
    ap.add_argument("--jobs", type=int, default=2, help="pages loaded in parallel (default: 2)")
    args = ap.parse_args(argv)

    site = args.site.resolve()
    if not (site / "index.html").is_file():
        print(f"{site}/index.html does not exist: run `make book` first.", file=sys.stderr)
        return 2
    shots = (args.screenshots or site.parent / "screenshots").resolve()
    binary = find_chromium()
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()

    pages = sorted(p for p in site.rglob("*.html") if "_static" not in p.parts and "_sources" not in p.parts)
    infos = {p: parse(p.read_text(encoding="utf-8", errors="replace")) for p in pages}
    log = _Log()
    server, base = _serve(site, log)
    print(f"site check: {len(pages)} pages, {version}, served at {base}")
    t_start = time.perf_counter()
    failed = 0
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = {pool.submit(check_page, binary, site, base, p, infos): p for p in pages}
            results = {futures[f]: f.result() for f in concurrent.futures.as_completed(futures)}
        # resources that answered 404 etc., attributed to the page that asked
        by_page: dict[str, list[str]] = {}
        for referer, path, status in log.failures:
            by_page.setdefault(referer.lstrip("/") or "?", []).append(f"{path} -> HTTP {status}")
        for page in pages:
            rel = page.relative_to(site).as_posix()
            problems, notes, seconds = results[page]
            problems = problems + [f"requested {r}" for r in by_page.pop(rel, [])]
            status = "FAIL" if problems else "ok  "
            print(f"  {status} {rel}  ({seconds:.1f} s)")
            for n in notes:
                print(f"         note: {n}")
            for p in problems:
                print(f"         {p}")
            failed += bool(problems)
        for referer, reqs in by_page.items():  # requests whose referer is not a page we loaded
            print(f"  FAIL requests from {referer}: {reqs}")
            failed += 1

        for name, rel in SCREENSHOT_PAGES.items():
            if (site / rel).is_file():
                out = shots / f"{name}.png"
                screenshot(binary, urljoin(base, rel), out)
                print(f"  screenshot: {out}")
            else:
                print(f"  FAIL screenshot page {rel} does not exist")
                failed += 1
    finally:
        server.shutdown()

    total = time.perf_counter() - t_start
    print(f"site check: {len(pages) - failed} passed, {failed} failed in {total:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
