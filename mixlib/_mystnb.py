"""How the book's site shows what needs no kernel and what does (a myst-nb mime renderer plugin).

Registered in ``pyproject.toml`` under the entry-point group
``myst_nb.mime_renderers``, so myst-nb uses it whenever the book is built
(``make book``); nothing else imports it. It does two things on the HTML
builder:

* a Vega-Lite output (``application/vnd.vegalite.v5+json`` or ``v6``, what an
  Altair chart from :mod:`mixlib.interactive` displays in Jupyter and Colab)
  becomes a ``<div class="mixbook-vega">`` holding the specification as JSON,
  and the page loads the site's own vega, vega-lite and vega-embed
  (``book/_static/vendor/vega``, fetched by ``make vendor``) and
  ``mixbook_vega.js``, which draws every such div: the chart's sliders and
  dropdowns work with no kernel and no CDN;
* an ipywidgets view in a cell tagged ``needs-kernel``
  (:data:`mixlib.interactive.NEEDS_KERNEL_TAG`: an explorer that runs the model
  on what the reader types) becomes one line saying that it runs in Colab /
  Jupyter, instead of controls that would do nothing on a static page.

Anything else is left to myst-nb.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any, ClassVar

#: Vega-Lite mime types (Altair 5 writes v5, Altair 6 v6).
VEGALITE_MIME = re.compile(r"^application/vnd\.vegalite\.v\d+\+json$")
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
#: Scripts a page with a chart loads, in order (paths under html_static_path).
VEGA_SCRIPTS = ("vendor/vega/vega.min.js", "vendor/vega/vega-lite.min.js", "vendor/vega/vega-embed.min.js",
                "mixbook_vega.js")
NEEDS_KERNEL_NOTE = ("この操作パネルは Python のカーネルで動くので、このページの上では動かない。"
                     "ページ上部のロケットのボタンから Colab で開くか、Jupyter でノートブックを実行すると使える。")


def vega_html(spec: dict[str, Any]) -> str:
    """The HTML that ``mixbook_vega.js`` turns into a chart: a view div and the specification as JSON."""
    body = json.dumps(spec, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    return ('<div class="mixbook-vega"><div class="mixbook-vega-view"></div>'
            f'<script type="application/json" class="mixbook-vega-spec">{body}</script></div>')


def needs_kernel_html(note: str = NEEDS_KERNEL_NOTE) -> str:
    return f'<p class="mixbook-needs-kernel">▶ {html.escape(note)}</p>'


class VegaLiteMime:
    """myst-nb mime renderer plugin (see the module docstring)."""

    # ahead of the widget view (10) and text/html (30) in the HTML builder's priority list
    mime_priority_overrides: ClassVar[list[tuple[str, str, int | None]]] = [
        ("html", f"application/vnd.vegalite.v{v}+json", 5) for v in (4, 5, 6)
    ]

    @staticmethod
    def handle_mime(renderer: Any, data: Any, inline: bool) -> Any:
        from docutils import nodes

        if inline:
            return None
        if VEGALITE_MIME.match(data.mime_type):
            spec = data.content if isinstance(data.content, dict) else json.loads(data.string)
            for i, path in enumerate(VEGA_SCRIPTS):
                renderer.add_js_file(f"mixbook_vega_{i}", path, {"defer": "defer"})
            return [nodes.raw(text=vega_html(spec), format="html")]
        if data.mime_type == WIDGET_VIEW_MIME:
            from .interactive import NEEDS_KERNEL_TAG

            if NEEDS_KERNEL_TAG in (data.cell_metadata or {}).get("tags", []):
                return [nodes.raw(text=needs_kernel_html(), format="html")]
        return None
