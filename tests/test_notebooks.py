"""Execute every chapter notebook top to bottom in a fresh kernel, in fast mode: its Colab edition.

What runs is each chapter's Colab edition (``notebooks/colab/``, :mod:`mixlib._edition`): the chapter's code cells
unchanged (``tests/test_edition.py`` holds them equal), plus the folded cells that show the prose's numbers. So one
run proves the chapter runs and that, in Colab, every number and verdict the site's prose states appears, computed
by that run: each prose cell's paragraph must equal the chapter's paragraph filled in with the values myst-nb glued
in the same run, formatted by myst-nb's own ``{glue:text}`` code (where myst-nb is installed; in the Colab replica,
without it, no value may be missing).

One test per notebook (so pytest-xdist can spread them over workers). Each runs
from ``notebooks/`` with ``MIXLIB_FAST=1`` (the parameters cell shrinks sizes)
and ``HF_HUB_OFFLINE=1`` (the packaged model, no network). Besides "no cell
raised", the executed notebook must show what a reader of the static book sees:
no "Glyph ... missing from font" warning, at least one figure in a written
chapter, and every widget preceded by a static figure and saved in the
notebook's widget state; in chapters 8 and 10-12 every widget is in a cell tagged needs-kernel and
at least one kernel-free chart (mixlib.interactive) shows. The chapters whose self-checks go through
``mixlib.exercise.check_answer`` run with every exercise's hidden solution
filled in, and each check must say 正解 (the book builds them unanswered).

Time per notebook is reported by ``make test`` (pytest ``--durations``); the
fast-mode budget (≤ 25 s per notebook here) is a target, not an assertion.

Chapter 13 (a Japanese BERT) runs on ``tests/standin_ja.py``'s stand-in for tohoku-nlp/bert-base-japanese-v3 where
``mixlib[ja]`` is installed, and once more with an empty model cache: then it must say so in one line and show no
number of the Japanese model (``test_japanese_chapter_offline``), as the book's offline build shows it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from queue import Empty

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
# The same fix `make book` uses: widget cells could otherwise stall for the whole cell timeout.
sys.path.insert(0, str(ROOT / ".ci"))
import nbexec_fix  # noqa: E402
from exercise_cells import check_cells, with_self_tests, with_solutions  # noqa: E402
from exercise_cells import solutions as exercise_solutions  # noqa: E402
from test_exercises import CHECKED  # noqa: E402

from mixlib import plots  # noqa: E402
from mixlib._mystnb import VEGALITE_MIME  # noqa: E402
from mixlib.exercise import exercises  # noqa: E402
from mixlib.interactive import NEEDS_KERNEL_TAG  # noqa: E402

nbexec_fix.install()
NB_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("*.ipynb"))
#: the Colab edition of each chapter (what Colab opens), run in its place
EDITION_DIR = ROOT / "notebooks" / "colab"
#: seconds any single cell may take in fast mode before the test fails (a hang, not a slow cell)
CELL_TIMEOUT = 300
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: Every widget must be in a cell tagged needs-kernel (it needs what the reader types, or a model run on it): on
#: the site such a cell shows one line instead of dead controls; every other explorer is a kernel-free chart
#: (mixlib.interactive, mixlib.course.charts). Each chapter but 3 (whose explorer takes the words the reader
#: types) must show at least one.
KERNEL_FREE = {path.stem for path in NOTEBOOKS} - {"03_word2vec"}
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
#: what matplotlib warns when a glyph is missing ("Glyph 8722 (...) missing from font(s) IPAexGothic.")
FONT_WARNING = "missing from font"


def _text_of(output: dict) -> str:
    """All text an output shows: stream text, tracebacks, text/plain."""
    if output.get("output_type") == "stream":
        return output.get("text", "")
    if output.get("output_type") == "error":
        return "\n".join(output.get("traceback", []))
    data = output.get("data", {})
    return str(data.get("text/plain", "")) + str(data.get("text/html", ""))


#: The chapter on a Japanese BERT: it runs on tests/standin_ja.py's stand-in for tohoku-nlp/bert-base-japanese-v3
#: (where mixlib[ja] is installed), and once more without it (test_japanese_chapter_offline).
JA_CHAPTER = "13_japanese"
#: what chapter 13 prints, in one line, when the Japanese model cannot be loaded
JA_OFFLINE_LINE = "日本語の節は実行しない"


def _has_fugashi() -> bool:
    import importlib.util

    return importlib.util.find_spec("fugashi") is not None


def _ja_standin_cache(tmp: Path, monkeypatch) -> None:
    """A Hugging Face cache holding the Japanese stand-in next to whatever models the current cache holds (the
    bert-base-uncased stand-in under make test-colab), as links: the English side of chapter 13 keeps its model."""
    import os

    sys.path.insert(0, str(ROOT / "tests"))
    import standin_ja  # noqa: PLC0415

    hub = tmp / "hub"
    hub.mkdir(parents=True, exist_ok=True)
    sources = [Path(standin_ja.env()["HF_HUB_CACHE"])]
    if os.environ.get("HF_HUB_CACHE"):
        sources.insert(0, Path(os.environ["HF_HUB_CACHE"]))
    for source in sources:
        for model in source.glob("models--*"):
            if not (hub / model.name).exists():
                (hub / model.name).symlink_to(model.resolve(), target_is_directory=True)
    monkeypatch.setenv("HF_HOME", str(tmp))
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.delenv("MIXLIB_JA_MODEL", raising=False)


def _execute(path: Path, monkeypatch, *, solutions: bool = True, source: Path | None = None) -> nbformat.NotebookNode:
    """Run ``path`` in fast mode (with its exercises' solutions filled in, taken from ``source``, the chapter, when
    ``path`` is its Colab edition)."""
    # The kernel inherits this process's environment.
    monkeypatch.setenv("MIXLIB_FAST", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv(plots.TEXT_CHECK_ENV, f"{plots.MIN_TEXT_PX:g}")  # plots.setup() measures every figure's text
    nb = nbformat.read(path, as_version=4)
    if path.stem in CHECKED and solutions:
        # the solutions filled in, and after each check cell the grading of that exercise tested in this same run
        # (make grade's: the reference earns every part, the check cell as the student edition has it none)
        record = tempfile.NamedTemporaryFile(prefix="mixlib-record-", suffix=".jsonl", delete=False)
        record.close()
        monkeypatch.setenv("MIXLIB_RECORD", record.name)
        nb = with_self_tests(with_solutions(nb, exercise_solutions(nbformat.read(source or path, as_version=4))), nb)
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(NB_DIR)}},
        store_widget_state=True,
    )
    try:
        client.execute()
    except CellExecutionError as err:
        pytest.fail(f"{path.name} failed in fast mode:\n{err}", pytrace=False)
    finally:
        if path.stem in CHECKED and solutions:
            os.unlink(record.name)
    return nb


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_in_fast_mode(path, monkeypatch, tmp_path):
    if path.stem == JA_CHAPTER:
        if not _has_fugashi():  # Python 3.13's and Colab's runtimes before mixlib[ja]: test_japanese_chapter_offline
            pytest.skip("mixlib[ja] (fugashi) is not installed: chapter 13's Japanese sections cannot run here")
        _ja_standin_cache(tmp_path, monkeypatch)
    nb = _execute(EDITION_DIR / path.name, monkeypatch, source=path)
    _check_findings(path, nb)
    if path.stem == JA_CHAPTER:
        said = "".join(_text_of(o) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
        assert JA_OFFLINE_LINE not in said and "tohoku-nlp/bert-base-japanese-v3（12層" in said, (
            f"{path.name} did not run its Japanese sections on the stand-in:\n{said[:1500]}")
    placeholder = "PLACEHOLDER" in path.read_text(encoding="utf-8")

    images_so_far = 0
    charts = 0
    widget_models: list[str] = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            text = _text_of(out)
            assert FONT_WARNING not in text, (
                f"{path.name} cell {i}: a figure uses a glyph the Japanese font lacks:\n{text[:500]}"
            )
            assert plots.SMALL_TEXT_WARNING not in text, f"{path.name} cell {i}: {text[text.find(plots.SMALL_TEXT_WARNING):][:700]}"
            data = out.get("data", {})
            if WIDGET_VIEW in data:
                assert images_so_far > 0, (
                    f"{path.name} cell {i} shows a widget with no static figure before it "
                    "(the static book must show the widget's default state as a normal figure)"
                )
                widget_models.append(data[WIDGET_VIEW]["model_id"])
                assert NEEDS_KERNEL_TAG in cell.metadata.get("tags", []), (
                    f"{path.name} cell {i} shows a widget in a cell not tagged {NEEDS_KERNEL_TAG!r}: on the site its "
                    "controls would be dead (make a kernel-free chart with mixlib.course.charts / mixlib.interactive, "
                    "or tag the cell)")
            vega = [k for k in data if VEGALITE_MIME.match(k)]
            if vega:
                # a moving chart: Altair's own display for Jupyter / Colab, and a specification with bound controls
                charts += 1
                spec = data[vega[0]]
                assert "text/html" in data, f"{path.name} cell {i}: a chart without Altair's own display"
                assert any("bind" in p for p in spec.get("params", [])), f"{path.name} cell {i}: a chart without controls"
            if "image/png" in data or "image/svg+xml" in data:
                images_so_far += 1

    if not placeholder:
        assert images_so_far > 0, f"{path.name} draws no figure"
    if path.stem in KERNEL_FREE:
        assert charts > 0, f"{path.name} shows no kernel-free chart"
    if path.stem in CHECKED:
        # The chapter ran with every exercise's hidden solution filled in: each check must say 正解 for every part.
        parts = exercises()
        wrong = {}
        for label, i in check_cells(nb).items():
            said = "".join(_text_of(o) for o in nb.cells[i].get("outputs", []))
            verdicts = re.findall(r"^ex-[\d-]+(?: .*?)?: (正解|もう一度|未回答)", said, re.M)  # "ex-01-2 (a) 生のコサイン: 正解"
            if verdicts != ["正解"] * len(parts[label]):
                wrong[label] = said.strip()[:300]
        assert not wrong, f"{path.name}: solutions that fail their own check: {wrong}"
    if widget_models:
        state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
        missing = [m for m in widget_models if m not in state]
        assert not missing, f"{path.name}: widget views without saved state (the static page cannot show them): {missing}"


def _check_findings(path: Path, nb: nbformat.NotebookNode) -> None:
    """Every value the chapter's prose states appears in its Colab edition's run, as the site would state it."""
    from mixlib._edition import prose_template
    from mixlib.glue import MISSING, PLACEHOLDER

    try:
        from myst_nb.core.variables import format_plain_text
        from myst_nb.ext.glue import GLUE_PREFIX
    except ImportError:  # the Colab replica: no myst-nb, as on Colab
        format_plain_text = GLUE_PREFIX = None
    glued = {}  # key -> text/plain, as myst-nb recorded it in this run
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name and GLUE_PREFIX:
                glued[name] = out["data"][GLUE_PREFIX + "text/plain"]
    source_keys = set(re.findall(r"\{glue:text\}`([A-Za-z_]\w*)", "".join(
        c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")))
    shown_keys, problems = set(), []
    for i, cell in enumerate(nb.cells):
        template = prose_template(cell.source) if cell.cell_type == "code" else None
        if template is None:
            continue
        shown_keys.update(m.group(1) for m in PLACEHOLDER.finditer(template))
        said = [o for o in cell.get("outputs", []) if "text/markdown" in o.get("data", {})]
        if len(said) != 1 or said[0]["metadata"]["mixbook"]["missing"]:
            problems.append(f"cell {i}: {[o.get('metadata') for o in said] or 'no paragraph shown'}")
            continue
        text = said[0]["data"]["text/markdown"]
        assert MISSING.split("{")[0] not in text
        if format_plain_text is not None:
            expected = PLACEHOLDER.sub(lambda m: format_plain_text(glued[m.group(1)], m.group(2) or "s"), template)
            if text != expected:
                problems.append(f"cell {i}: shows\n{text[:400]}\nthe site would state\n{expected[:400]}")
    assert source_keys <= shown_keys, f"{path.name}: prose values no prose cell shows: {sorted(source_keys - shown_keys)}"
    assert not problems, f"{path.name}'s Colab edition: " + "\n".join(problems)


def test_font_warning_check_catches_a_real_warning(monkeypatch, tmp_path):
    """The Glyph check above must be able to fail: a title with ⊙ (U+2299), which IPAexGothic lacks."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import matplotlib.pyplot as plt\nfrom mixlib import plots\nplots.setup()\n"
            "fig, ax = plt.subplots()\nax.plot([0, 1], [0, 1])\nax.set_title('要素ごとの積 \u2299')\nplt.show()"
        )
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "glyph.ipynb"
    nbformat.write(nb, path)
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    texts = [_text_of(o) for c in nb.cells for o in c.get("outputs", [])]
    assert any(FONT_WARNING in t for t in texts), (
        "expected matplotlib to warn about U+2299 with IPAexGothic; if the font gained the glyph, pick another one: "
        + json.dumps(texts, ensure_ascii=False)[:500]
    )


def test_small_text_check_catches_a_figure_shrunk_by_the_column(monkeypatch, tmp_path):
    """The text-size check above must be able to fail in a kernel: Jupyter's inline backend renders through
    the wrapped print_figure. A 14 in wide figure with 9 pt text is shown at about 7 px; a 6 in one is not."""
    nb = nbformat.v4.new_notebook()
    code = ("import matplotlib.pyplot as plt\nfrom mixlib import plots\nplots.setup()\n"
            "fig, ax = plt.subplots(figsize=({w}, 3))\nax.set_title('{title}', fontsize=9)\nplt.show()")
    nb.cells = [nbformat.v4.new_code_cell(code.format(w=14, title="広すぎる図")),
                nbformat.v4.new_code_cell(code.format(w=6, title="列に収まる図"))]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv(plots.TEXT_CHECK_ENV, f"{plots.MIN_TEXT_PX:g}")
    NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    wide, narrow = ("".join(_text_of(o) for o in c.get("outputs", [])) for c in nb.cells)
    assert plots.SMALL_TEXT_WARNING in wide and "広すぎる図" in wide, wide[:500]
    assert plots.SMALL_TEXT_WARNING not in narrow, narrow[:500]
    assert any("image/png" in o.get("data", {}) for o in nb.cells[1].outputs)


def test_sliced_get_msg_keeps_its_contract():
    """The patched get_msg returns a waiting message at once and raises Empty only after the timeout."""
    import zmq
    import zmq.asyncio
    from jupyter_client.channels import AsyncZMQSocketChannel
    from jupyter_client.session import Session

    assert AsyncZMQSocketChannel.get_msg.__doc__.endswith("(Polls in slices; see .ci/nbexec_fix.py.)")

    async def scenario():
        ctx = zmq.asyncio.Context()
        a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
        a.bind("inproc://nbexec-fix-test")
        b.connect("inproc://nbexec-fix-test")
        session = Session(key=b"k")
        channel = AsyncZMQSocketChannel(b, session)
        try:
            t0 = time.monotonic()
            with pytest.raises(Empty):
                await channel.get_msg(timeout=1.2)  # spans three slices
            waited = time.monotonic() - t0
            assert 1.15 <= waited < 5, waited  # poll timeouts are whole milliseconds: allow rounding

            async def send_later():
                await asyncio.sleep(0.7)
                session.send(a, "execute_reply", content={"status": "ok"})

            sender = asyncio.ensure_future(send_later())
            msg = await channel.get_msg(timeout=30)
            await sender
            assert msg["msg_type"] == "execute_reply" and msg["content"] == {"status": "ok"}
        finally:
            a.close(linger=0)
            b.close(linger=0)
            ctx.term()

    asyncio.run(scenario())


@pytest.mark.slow
def test_japanese_chapter_offline(monkeypatch, tmp_path):
    """Without the Japanese model (an empty cache, no network), chapter 13 says so in one line and shows no
    number of its own: every cell that needs the model (one that starts with ``if HAVE_JA:``) shows nothing, the
    English side still draws its figure, and the self-checks still answer 未回答."""
    path = NB_DIR / f"{JA_CHAPTER}.ipynb"
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("MIXLIB_MODEL", raising=False)
    monkeypatch.delenv("MIXLIB_JA_MODEL", raising=False)
    nb = _execute(path, monkeypatch, solutions=False)
    said = [(i, _text_of(o)) for i, c in enumerate(nb.cells) if c.cell_type == "code" for o in c.get("outputs", [])]
    lines = [line for _, text in said for line in text.splitlines() if JA_OFFLINE_LINE in line]
    assert len(lines) == 1, f"expected the offline line once, got {lines}"
    assert "bert-base-japanese-v3" in lines[0] and ("mixlib[ja]" in lines[0] or "Colab" in lines[0]), lines[0]
    only_ja = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.lstrip().startswith("if HAVE_JA:")]
    assert len(only_ja) >= 2, "chapter 13 has fewer cells that run only with the Japanese model than expected (changed?)"
    shown = {i: text[:200] for i, text in said if i in only_ja}
    assert not shown, f"cells that need the Japanese model showed output without it: {shown}"
    assert all("tohoku-nlp/bert-base-japanese-v3（" not in text for _, text in said), "a Japanese model's card was shown"
    assert any("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])), (
        "the English side drew no figure")
    unanswered = [text for _, text in said if text.startswith("ex-13-")]
    assert unanswered and all("未回答" in t for t in unanswered), unanswered


@pytest.mark.slow
@pytest.mark.parametrize("case", ["no-mecab", "sudachi"])
def test_japanese_chapter_names_what_is_missing(case, monkeypatch, tmp_path):
    """The load cell's other two reasons, each in its one line: MeCab not installed (fugashi hidden in the kernel),
    and a model whose tokenizer mixlib does not support (a local copy of the stand-in whose tokenizer_config.json
    asks for Sudachi). Only the cells up to the load cell run."""
    if not _has_fugashi():
        pytest.skip("mixlib[ja] (fugashi) is not installed: the stand-in cannot be built here")
    import json as _json

    sys.path.insert(0, str(ROOT / "tests"))
    import standin_ja  # noqa: PLC0415

    env = standin_ja.env()
    for name in ("HF_HOME", "HF_HUB_CACHE"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.delenv("MIXLIB_MODEL", raising=False)
    nb = nbformat.read(NB_DIR / f"{JA_CHAPTER}.ipynb", as_version=4)
    last = next(i for i, c in enumerate(nb.cells) if "HAVE_JA = ja is not None" in c.source)
    nb.cells = nb.cells[: last + 1]
    if case == "no-mecab":
        monkeypatch.delenv("MIXLIB_JA_MODEL", raising=False)
        nb.cells.insert(0, nbformat.v4.new_code_cell("import sys\nsys.modules['fugashi'] = None  # as if not installed"))
        expected = "MeCab（fugashi と辞書）が入っていない"
    else:
        src = Path(env["HF_HUB_CACHE"]) / f"models--{standin_ja.MODEL.replace('/', '--')}" / "snapshots"
        snapshot = next(src.iterdir())
        folder = tmp_path / "sudachi-model"
        folder.mkdir()
        for f in snapshot.iterdir():
            if f.name != "tokenizer_config.json":
                (folder / f.name).symlink_to(f.resolve())
        config = _json.loads((snapshot / "tokenizer_config.json").read_text(encoding="utf-8"))
        (folder / "tokenizer_config.json").write_text(_json.dumps({**config, "word_tokenizer_type": "sudachi"}), encoding="utf-8")
        monkeypatch.setenv("MIXLIB_JA_MODEL", str(folder))
        expected = "このモデルの分かち書きか設定に対応していない"
    path = tmp_path / f"{JA_CHAPTER}.ipynb"
    nbformat.write(nb, path)
    nb = _execute(path, monkeypatch, solutions=False)
    said = [line for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            for line in _text_of(o).splitlines() if JA_OFFLINE_LINE in line]
    assert len(said) == 1 and expected in said[0], said
    assert not any(o.get("output_type") == "error" for c in nb.cells for o in c.get("outputs", []))
