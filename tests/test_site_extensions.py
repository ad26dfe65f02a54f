"""The book's Sphinx extensions for its readers, built on a small project of notebooks with saved outputs.

``mixlib._figures``: a cell's image outputs become numbered figures with the caption and alt text its metadata
names, linked to their full-size files; a cell whose images and entries differ, or a malformed entry, is a warning
(the book builds with ``-W``). ``mixlib._weight``: a page with saved widget state but no widget view loads no
widget manager; a page that shows a view keeps it.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

pytest.importorskip("myst_nb")

from mixlib._figures import figure_entries  # noqa: E402

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
STATE = {"application/vnd.jupyter.widget-state+json": {"version_major": 2, "version_minor": 0, "state": {
    "m1": {"model_name": "IntSliderModel", "model_module": "@jupyter-widgets/controls",
           "model_module_version": "2.0.0", "state": {"value": 3}}}}}


def _image(n=1):
    return [{"output_type": "display_data", "metadata": {},
             "data": {"image/png": PNG, "text/plain": f"<Figure {k}>"}} for k in range(n)]


def _cell(outputs, figures=None, source="draw()"):
    meta = {"mixbook": {"figures": figures}} if figures is not None else {}
    return {"cell_type": "code", "execution_count": 1, "id": f"c{abs(hash(source)) % 10**8}", "metadata": meta,
            "outputs": outputs, "source": source}


def _notebook(title, cells, widgets=False):
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    if widgets:
        meta["widgets"] = STATE
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": meta,
            "cells": [{"cell_type": "markdown", "id": "title", "metadata": {}, "source": f"# {title}"}, *cells]}


def _build(tmp_path: Path, docs: dict) -> tuple[Path, str]:
    from sphinx.application import Sphinx

    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        "extensions = ['myst_nb', 'mixlib._figures', 'mixlib._weight']\n"
        "nb_execution_mode = 'off'\nnumfig = True\nlanguage = 'ja'\n"
        "nb_ipywidgets_js = {'embed.js': {}}\n", encoding="utf-8")
    (src / "index.md").write_text("# Top\n\n```{toctree}\n:numbered:\n" + "\n".join(docs) + "\n```\n", encoding="utf-8")
    for name, nb in docs.items():
        (src / f"{name}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    warnings = io.StringIO()
    app = Sphinx(str(src), str(src), str(tmp_path / "out"), str(tmp_path / "doctrees"), "html",
                 status=None, warning=warnings, freshenv=True)
    app.build()
    return tmp_path / "out", warnings.getvalue()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    two = [{"caption": "一つ目の図", "alt": "折れ線グラフ。横軸は層。"},
           {"caption": "二つ目の図", "alt": "ヒートマップ。行は層。", "name": "fig-second"}]
    view = {"output_type": "display_data", "metadata": {},
            "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "m1", "version_major": 2,
                                                                   "version_minor": 0}, "text/plain": "slider"}}
    docs = {
        "one": _notebook("一", [_cell([{"output_type": "stream", "name": "stdout", "text": "表\n"}, *_image(2)], two)],
                         widgets=True),
        "two": _notebook("二", [_cell(_image(1), None, "plt.plot(x)  # no entry"),
                                _cell(_image(1), [{"caption": "図", "alt": ""}], "bad()")]),
        "three": _notebook("三", [_cell([view], None, "slider")], widgets=True),
    }
    return _build(tmp_path_factory.mktemp("site"), docs)


def test_each_image_becomes_a_numbered_figure_with_its_caption_alt_text_and_full_size_link(site):
    out, _ = site
    html = (out / "one.html").read_text(encoding="utf-8")
    figures = re.findall(r"<figure.*?</figure>", html, flags=re.S)
    assert len(figures) == 2
    for k, (fig, caption, alt) in enumerate(zip(figures, ("一つ目の図", "二つ目の図"),
                                                 ("折れ線グラフ。横軸は層。", "ヒートマップ。行は層。"))):
        assert "mixbook-figure" in fig
        assert f'alt="{alt}"' in fig
        assert re.search(rf'class="caption-number">図 1\.{k + 1} </span>', fig), fig
        assert caption in fig
        href = re.search(r'<a class="[^"]*mixbook-full-size[^"]*" href="([^"]+)"', fig).group(1)
        assert (out / href).is_file() and href.endswith(".png")
    assert 'id="fig-second"' in figures[1]
    # the printed output is not in a figure
    assert "表" not in "".join(figures)


def test_a_cell_whose_images_lack_entries_or_whose_entry_is_malformed_is_a_warning(site):
    out, warnings = site
    assert re.search(r"cell \d+ of two \('plt\.plot\(x\)  # no entry'\) shows 1 image\(s\) but its metadata "
                     r"mixbook\.figures names 0", warnings), warnings
    assert "mixbook.figures[0] needs a non-empty 'alt'" in warnings
    assert "<figure" not in (out / "two.html").read_text(encoding="utf-8")


def test_the_widget_manager_only_on_a_page_that_shows_a_widget(site):
    out, _ = site
    one, three = ((out / f"{n}.html").read_text(encoding="utf-8") for n in ("one", "three"))
    assert "embed.js" not in one and "widget-state+json" not in one
    assert "embed.js" in three and "widget-state+json" in three and "widget-view+json" in three


@pytest.mark.parametrize("meta, message", [
    ({"mixbook": {"figures": {"caption": "a"}}}, "must be a list"),
    ({"mixbook": {"figures": ["a"]}}, "must be an object"),
    ({"mixbook": {"figures": [{"caption": "a", "alt": "b", "title": "c"}]}}, "unknown keys ['title']"),
    ({"mixbook": {"figures": [{"caption": " ", "alt": "b"}]}}, "non-empty 'caption'"),
])
def test_figure_entries_say_what_is_wrong(meta, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        figure_entries(meta)
    assert figure_entries({}) is None
    assert figure_entries({"mixbook": {"figures": [{"caption": "a", "alt": "b"}]}}) == [{"caption": "a", "alt": "b"}]


def test_the_reader_check_says_what_is_wrong_with_an_image():
    """.ci/check_reader.py's verdict on one image: a path for alt text, no number, no link to the full size."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / ".ci"))
    from check_reader import check_images

    good = {"src": "../_images/a1.png", "alt": "折れ線グラフ。横軸は k / d。", "number": "図 10.1", "caption": "層",
            "href": "../_images/a1.png", "shown": 345.0, "natural": 688}
    assert check_images("p", [good]) == []
    assert check_images("p", [{**good, "shown": 688.0, "href": ""}]) == []  # shown at full size: no link needed
    path, bare, small = (check_images("p", [{**good, **change}]) for change in (
        {"alt": "../_images/a1.png"}, {"number": "", "caption": ""}, {"href": ""}))
    assert path == ["p: image a1.png has no alt text but '../_images/a1.png'"]
    assert bare == ["p: image a1.png is not in a numbered figure with a caption"]
    assert small == ["p: image a1.png is shown at 345 of its 688 px and does not open at full size"]


def test_every_chapter_names_its_figures_well():
    """Each chapter's figure entries are well formed: a caption without 「。」, alt text in sentences; 83 cells."""
    root = Path(__file__).resolve().parents[1]
    cells = 0
    for path in sorted((root / "notebooks").glob("[0-9]*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            entries = figure_entries(cell.get("metadata", {}))
            if entries is None:
                continue
            assert cell["cell_type"] == "code", path.name
            cells += 1
            for entry in entries:
                assert not entry["caption"].endswith("。") and len(entry["caption"]) <= 60, (path.name, entry)
                assert entry["alt"].endswith("。") and entry["alt"] != entry["caption"], (path.name, entry)
    assert cells >= 83
