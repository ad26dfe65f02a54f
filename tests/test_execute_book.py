"""`.ci/execute_book.py`: the book's notebooks executed into jupyter-cache, two at a time, before the build.

`make book` runs it on the real book (CI's clean build); here a two-notebook book in a temporary folder: what it
caches is what myst-nb's cache mode then finds, a failing notebook is reported and left out, a second run
executes only what is missing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / ".ci"))

import execute_book  # noqa: E402

pytestmark = pytest.mark.slow  # starts kernels


def _notebook(path: Path, *sources: str) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def _book(root: Path, mode: str = "cache") -> None:
    (root / "notebooks").mkdir()
    (root / "_config.yml").write_text(f"execute:\n  execute_notebooks: {mode}\n  cache: .jupyter_cache\n  timeout: 60\n",
                                      encoding="utf-8")
    (root / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n- file: notebooks/good\n- file: notebooks/bad\n",
                                   encoding="utf-8")
    (root / "intro.md").write_text("# intro\n", encoding="utf-8")
    # the cell writes in the notebook's own folder (myst-nb's run_in_temp: false)
    _notebook(root / "notebooks" / "good.ipynb", "from pathlib import Path\nPath('here.txt').write_text('x')\nprint(6 * 7)")
    _notebook(root / "notebooks" / "bad.ipynb", "raise ValueError('broken on purpose')")


def _cached(root: Path, name: str) -> nbformat.NotebookNode | None:
    from jupyter_cache import get_cache
    from myst_nb.core.read import standard_nb_read

    cache = get_cache(str(root / ".jupyter_cache"))
    nb = standard_nb_read((root / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
    try:
        cache.match_cache_notebook(nb)
    except KeyError:
        return None
    return cache.merge_match_into_notebook(nb)[1]


def test_executes_what_the_cache_lacks_and_reports_a_failure(tmp_path, capsys):
    _book(tmp_path)
    assert [p.name for p in execute_book.book_notebooks(tmp_path)] == ["good.ipynb", "bad.ipynb"]
    assert execute_book.main(["--root", str(tmp_path), "--jobs", "2"]) == 1
    out = capsys.readouterr().out
    assert "2 of 2 notebooks to execute, 2 at a time" in out
    assert "notebooks/bad.ipynb FAILED" in out and "broken on purpose" in out and "failed: notebooks/bad.ipynb" in out
    # what myst-nb's cache mode looks up: the good notebook with its output, run in its own folder; not the bad one
    good = _cached(tmp_path, "good")
    assert good is not None and good.cells[0].outputs[0]["text"] == "42\n"
    assert (tmp_path / "notebooks" / "here.txt").exists()
    assert _cached(tmp_path, "bad") is None

    # fixed: only it runs; then nothing does
    _notebook(tmp_path / "notebooks" / "bad.ipynb", "print('fixed')")
    assert execute_book.main(["--root", str(tmp_path), "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "1 of 2 notebooks to execute" in out and "bad.ipynb executed" in out and "good.ipynb" not in out
    assert execute_book.main(["--root", str(tmp_path)]) == 0
    assert "all 2 notebooks are in the cache" in capsys.readouterr().out


def test_refuses_a_book_that_does_not_use_the_cache(tmp_path):
    _book(tmp_path, mode="force")
    with pytest.raises(SystemExit, match="not 'cache'"):
        execute_book.main(["--root", str(tmp_path)])
    with pytest.raises(SystemExit):
        execute_book.main(["--root", str(tmp_path), "--jobs", "0"])
    # a book that runs its notebooks in a temporary folder: this script runs them in their own, so it refuses
    config = tmp_path / "_config.yml"
    config.write_text(config.read_text(encoding="utf-8").replace("force", "cache") + "  run_in_temp: true\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="run_in_temp"):
        execute_book.main(["--root", str(tmp_path)])
