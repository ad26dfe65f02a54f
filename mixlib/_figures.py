"""Numbered figures with captions and alt text for the images a chapter's code cells draw.

A chapter's matplotlib figures reach the site as bare image outputs: myst-nb gives such an image its own file
path as ``alt`` (a screen reader reads a hash) and no caption, so a figure has no number (``numfig`` numbers only
figure nodes). A code cell names its figures in its metadata, one entry per image it outputs, in order::

    "metadata": {"mixbook": {"figures": [{"caption": "層ごとの混ぜる割合と論文の値",
                                           "alt": "折れ線グラフ。横軸は層、縦軸は混ぜる割合 (%)。…"}]}}

and :class:`FigureTransform` (registered by :func:`setup`) wraps each of the cell's image outputs in a figure
with that caption, sets the image's alt text, and gives the figure an id, so that Sphinx numbers it
(図 10.3: ``numfig`` with ``numfig_secnum_depth: 1``) and a lecturer can name it. An optional ``"name"``
gives a label for ``{numref}``. myst-nb's own cell metadata (``mystnb.figure``, ``mystnb.image``) is not used:
it wraps *every* display output of the cell in the same figure, a table beside the chart included, and gives two
images of one cell the same name; fourteen of the book's figure cells show a table or a second image.

A cell whose image count differs from its list, or a notebook image with no entry, is a build warning, and the
book builds with ``-W``: a new figure cannot reach the site without its caption and alt text.

On the page, each figure's image links to its own file (:func:`link_full_size`), so that on a phone, where a
figure drawn for the 688 px column is shown at about half its size, a tap opens it at full size.
"""

from __future__ import annotations

import posixpath
from typing import Any

from docutils import nodes
from sphinx.transforms import SphinxTransform
from sphinx.util import logging
from sphinx.util.osutil import relative_uri

logger = logging.getLogger(__name__)

#: The class of the figures this module makes (``book/_static/mixbook.css`` styles them).
FIGURE_CLASS = "mixbook-figure"


def _is_image_bundle(node: nodes.Node) -> bool:
    """A myst-nb output (a ``mime_bundle``) that holds an image."""
    return (isinstance(node, nodes.container) and node.get("nb_element") == "mime_bundle"
            and any(str(c.get("mime_type", "")).startswith("image/") for c in node.children
                    if isinstance(c, nodes.container)))


def figure_entries(metadata: dict[str, Any]) -> list[dict[str, str]] | None:
    """The cell's figure list (``metadata["mixbook"]["figures"]``), checked; ``None`` when the cell has none.

    Each entry needs a non-empty ``caption`` and ``alt``; a ``name`` is optional. A malformed list raises
    ``ValueError`` with what was wrong.
    """
    entries = (metadata.get("mixbook") or {}).get("figures")
    if entries is None:
        return None
    if not isinstance(entries, list):
        raise ValueError(f"mixbook.figures must be a list of {{caption, alt}}, got {type(entries).__name__}")
    for k, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ValueError(f"mixbook.figures[{k}] must be an object with caption and alt")
        unknown = set(entry) - {"caption", "alt", "name"}
        if unknown:
            raise ValueError(f"mixbook.figures[{k}] has unknown keys {sorted(unknown)} (allowed: caption, alt, name)")
        for key in ("caption", "alt"):
            if not str(entry.get(key, "")).strip():
                raise ValueError(f"mixbook.figures[{k}] needs a non-empty {key!r}")
    return entries


class FigureTransform(SphinxTransform):
    """Wrap each image output of a notebook's code cells in a numbered figure with a caption and alt text."""

    default_priority = 200  # early: before the collectors read figures and labels

    def apply(self, **kwargs: Any) -> None:
        stem = posixpath.basename(self.env.docname)
        for cell in list(self.document.findall(nodes.container)):
            if cell.get("nb_element") != "cell_code":
                continue
            bundles = [b for b in cell.findall(nodes.container) if _is_image_bundle(b)]
            try:
                entries = figure_entries(cell.get("cell_metadata") or {})
            except ValueError as exc:
                logger.warning(f"{self._where(cell)}: {exc}", location=cell)
                continue
            if not bundles and not entries:
                continue
            if entries is None or len(entries) != len(bundles):
                logger.warning(f"{self._where(cell)} shows {len(bundles)} image(s) but its metadata mixbook.figures "
                               f"names {len(entries or [])}: give each image a caption and alt text "
                               "(mixlib/_figures.py)", location=cell)
                continue
            for k, (bundle, entry) in enumerate(zip(bundles, entries)):
                self._wrap(bundle, entry, entry.get("name") or f"fig-{stem}-{cell.get('cell_index')}-{k}")

    def _where(self, cell: nodes.Element) -> str:
        """The cell for a warning: its index, the chapter and its code's first line."""
        code = cell.next_node(nodes.literal_block)
        lines = code.astext().strip().splitlines() if code is not None else []
        return f"cell {cell.get('cell_index')} of {self.env.docname} ({(lines[0][:60] if lines else '')!r})"

    def _wrap(self, bundle: nodes.Element, entry: dict[str, str], name: str) -> None:
        for image in bundle.findall(nodes.image):
            image["alt"] = str(entry["alt"]).strip()
        figure = nodes.figure(classes=[FIGURE_CLASS])
        bundle.replace_self(figure)
        figure += bundle
        caption = str(entry["caption"]).strip()
        figure += nodes.caption(caption, caption)
        figure["names"].append(nodes.fully_normalize_name(name))
        self.document.note_explicit_target(figure, figure)


def link_full_size(app: Any, doctree: nodes.document, docname: str) -> None:
    """Link each figure's image to its own file (``doctree-resolved``: the image's name in ``_images`` is known).

    On a phone the image is scaled down to the column; the link opens it at full size.
    """
    if app.builder.format != "html" or app.builder.name.startswith("epub"):
        return
    imgpath = relative_uri(app.builder.get_target_uri(docname), "_images")
    for figure in doctree.findall(nodes.figure):
        if FIGURE_CLASS not in figure["classes"]:
            continue
        for image in list(figure.findall(nodes.image)):
            if isinstance(image.parent, nodes.reference):
                continue
            uri = image.get("candidates", {}).get("*", image["uri"])
            if uri not in app.env.images:
                continue
            reference = nodes.reference("", "", internal=True, classes=["mixbook-full-size"],
                                        refuri=posixpath.join(imgpath, app.env.images[uri][1]))
            image.replace_self(reference)
            reference += image


def setup(app: Any) -> dict[str, Any]:
    app.add_transform(FigureTransform)
    app.connect("doctree-resolved", link_full_size)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
