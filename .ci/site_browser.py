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


#: What GitHub Pages sends gzip-compressed (text, scripts, data, SVG and the uncompressed font formats); PNG, WOFF
#: and WOFF2 are compressed already and go as they are.
GZIP_TYPES = ("text/", "application/javascript", "application/json", "image/svg+xml", "application/xml",
              "font/ttf", "font/otf", "application/vnd.ms-fontobject", "application/x-font-ttf")


@functools.lru_cache(maxsize=512)
def gzipped(path: str, mtime: float) -> bytes:
    """``path``'s bytes as gzip sends them (level 6, the usual web server's); cached per file and modification time."""
    import gzip

    return gzip.compress(Path(path).read_bytes(), compresslevel=6, mtime=0)


class Link:
    """A slow network link shared by every connection: ``rate`` bytes a second and ``latency`` seconds a response.

    Chromium's own throttling (DevTools' ``Network.emulateNetworkConditions``) stalled a page's requests for about
    78 s now and then (one page in 15–45 in headless Chromium 156), so the site's server is the slow link instead.
    """

    def __init__(self, rate: float, latency: float) -> None:
        self.rate, self.latency = rate, latency
        self._lock = threading.Lock()
        self._free_at = 0.0  # when the link has sent everything queued so far

    def send(self, write, data: bytes, chunk: int = 16384) -> None:
        import time

        time.sleep(self.latency)
        for i in range(0, len(data), chunk):
            piece = data[i:i + chunk]
            with self._lock:  # the pieces of all connections queue on the one link
                self._free_at = max(self._free_at, time.monotonic()) + len(piece) / self.rate
                due = self._free_at
            time.sleep(max(0.0, due - time.monotonic()))
            write(piece)


@contextlib.contextmanager
def serve(root: Path, gzip: bool = False, link: Link | None = None) -> Iterator[str]:
    """Serve ``root`` on a free 127.0.0.1 port for the ``with`` block; yields the base URL (no trailing slash).

    With ``gzip``, a text file goes gzip-compressed to a browser that accepts it, as GitHub Pages serves the site;
    with a :class:`Link`, every response goes through it, over kept-alive connections as a real web server's
    (``.ci/check_reader.py`` measures a page's weight and first paint over a slow network that way).
    """
    class Quiet(http.server.SimpleHTTPRequestHandler):
        if link is not None:
            protocol_version = "HTTP/1.1"  # keep-alive: a page's fifty files over a few connections

        def log_message(self, *args):  # noqa: D401 - silence the access log
            pass

        def copyfile(self, source, outputfile):
            if link is None:
                return super().copyfile(source, outputfile)
            link.send(outputfile.write, source.read())

        def do_GET(self):  # noqa: N802 - the http.server name
            path = self.translate_path(self.path)
            ctype = self.guess_type(path)
            if not (gzip and Path(path).is_file() and "gzip" in self.headers.get("Accept-Encoding", "")
                    and ctype.startswith(GZIP_TYPES)):
                return super().do_GET()
            body = gzipped(path, Path(path).stat().st_mtime)
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if link is None:
                self.wfile.write(body)
            else:
                link.send(self.wfile.write, body)

    class Server(http.server.ThreadingHTTPServer):
        # a page asks for about fifty files at once; the default backlog is 5
        request_queue_size = 128
        daemon_threads = True

    server = Server(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
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


def site_argument(doc: str, argv: list[str] | None) -> Path:
    """A site check's one argument, the built site's folder (``_build/html``), resolved; ``doc``: the check's docstring."""
    import argparse

    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("site", type=Path, help="the built site, e.g. _build/html")
    return ap.parse_args(argv).site.resolve()


def verdict(what: str, problems: list[str], started: float) -> int:
    """Print each problem and one closing line (``<what>: passed in N s``); the exit status of a check."""
    import time

    for p in problems:
        print(f"  FAIL {p}")
    print(f"{what}: {'failed' if problems else 'passed'} in {time.perf_counter() - started:.0f} s")
    return 1 if problems else 0
