"""What a page of the book's site loads: nothing it does not use.

Measured on the built site (``.ci/check_reader.py`` prints each chapter's bytes and first paint), two things made a
chapter heavy for what it shows:

* **the ipywidgets HTML manager** (1.9 MB with its own copy of Font Awesome) was a render-blocking script in the
  head of every chapter whose executed notebook saved widget state (chapters 0, 3, 8, 10 and 11), though no page
  shows a widget view: the explorers that need a kernel show one line instead (``mixlib/_mystnb.py``).
  :func:`drop_unused_widget_manager` removes the manager, its shim and the saved state from a page whose body holds
  no widget view; a page that shows one keeps them;
* **the search index** (``searchindex.js``, with Sphinx's search tools) was loaded in every page's head for a
  search-as-you-type box the book does not turn on; ``book/_templates/layout.html`` leaves them to the search page.
"""

from __future__ import annotations

from typing import Any

from ._mystnb import WIDGET_VIEW_MIME

WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"


def _is_widget_script(js: Any, manager_paths: set[str]) -> bool:
    filename = str(getattr(js, "filename", js) or "")
    attributes = getattr(js, "attributes", {}) or {}
    # Sphinx names a file of html_static_path as _static/<path>
    return attributes.get("type") == WIDGET_STATE_MIME or filename.removeprefix("_static/") in manager_paths


def drop_unused_widget_manager(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """``html-page-context``, after myst-nb's: no widget manager on a page that shows no widget view."""
    if WIDGET_VIEW_MIME in context.get("body", ""):
        return
    manager_paths = set(getattr(app.config, "nb_ipywidgets_js", {}) or {})
    scripts = context["script_files"]
    scripts[:] = [js for js in scripts if not _is_widget_script(js, manager_paths)]


def setup(app: Any) -> dict[str, Any]:
    app.connect("html-page-context", drop_unused_widget_manager, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
