"""What the two browser checks share: the built site served on 127.0.0.1, and Debian's Chromium through Playwright.

``check_site.py`` (every page) and ``check_charts.py`` (every chart's controls) use
the same server and the same browser set-up, and record what a page asked the
network for the same way: a resource that failed (HTTP >= 400 or no answer) and a
request that left the local site are both defects of an offline book.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"


@contextlib.contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` on a free 127.0.0.1 port for the ``with`` block; yields the base URL (no trailing slash)."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # noqa: D401 - silence the access log
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@contextlib.contextmanager
def chromium() -> Iterator[object]:
    """A headless Debian Chromium driven by Playwright (no browser is downloaded)."""
    if not Path(CHROMIUM).is_file():
        raise SystemExit(f"{CHROMIUM} not found: install Debian's package (apt-get install -y chromium); .ci/run does this.")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Traffic:
    """What one page did on the network and in its console, recorded from Playwright's events."""

    base: str
    errors: list[str] = field(default_factory=list)  # uncaught exceptions and console errors
    failed: list[str] = field(default_factory=list)  # "404 http://…" or "net::ERR_… http://…"
    outside: list[str] = field(default_factory=list)  # requests that left the local site

    def watch(self, page) -> Traffic:
        # a failed resource is reported with its address in ``failed`` (the console's own line has none);
        # browsers ask for /favicon.ico unprompted
        page.on("console", lambda m: self.errors.append(m.text)
                if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
        page.on("pageerror", lambda e: self.errors.append(f"uncaught {e}"))
        page.on("response", lambda r: self.failed.append(f"{r.status} {r.url}")
                if r.status >= 400 and not r.url.endswith("/favicon.ico") else None)
        page.on("requestfailed", lambda r: self.failed.append(f"{r.failure} {r.url}"))
        page.on("request", lambda r: self.outside.append(r.url)
                if not r.url.startswith((self.base, "data:", "blob:", "about:")) else None)
        return self

    def problems(self) -> list[str]:
        out = []
        if self.errors:
            out.append(f"JavaScript errors: {self.errors[:3]}")
        if self.failed:
            out.append(f"failed requests: {self.failed[:3]}")
        if self.outside:
            out.append(f"requests that leave the site: {sorted(set(self.outside))[:3]}")
        return out


def verdict(what: str, problems: list[str], started: float) -> int:
    """Print each problem and one closing line (``<what>: passed in N s``); the exit status of a check."""
    import time

    for p in problems:
        print(f"  FAIL {p}")
    print(f"{what}: {'failed' if problems else 'passed'} in {time.perf_counter() - started:.0f} s")
    return 1 if problems else 0
