"""``make grade`` end to end on chapter 0, with otter-grader (the CI stage ``make test-grade``, in ``.venv-grade``).

The autograder is built from the grader's own run of the chapter and must give the reference solutions full
marks and the untouched student edition 0 (checked while it is built). Then one batch of submissions: one wrong
answer, an endless loop in one exercise, a notebook whose check cell passes other data, a hostile one (raises,
prints megabytes, tries the network, deletes its answer), one whose cell metadata were lost, and three that
cannot be graded (not JSON, another chapter's, not a notebook). Each gets its row with exactly the points it
should, and nothing is written outside the output folder.

Skipped where otter-grader is not installed (``make test``); ``make test-grade`` sets MIXLIB_REQUIRE_OTTER=1,
so there it fails instead.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import time
from pathlib import Path

import pytest

if os.environ.get("MIXLIB_REQUIRE_OTTER") != "1":
    pytest.importorskip("otter", reason="otter-grader lives in .venv-grade: run make test-grade")

from mixlib import _assign, _edition, _grade  # noqa: E402
from mixlib.exercise._cells import CHECK_HEADER, check_cells, solutions, with_solutions  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
CHAPTER = "00_environment"
CELL_LIMIT = 10  # seconds: the endless loop is stopped this soon
RUN_LIMIT = 75  # seconds a notebook may take (a normal one takes about 25 s here, two at a time)


def _student() -> dict:
    nb = json.loads((ROOT / "notebooks" / f"{CHAPTER}.ipynb").read_text(encoding="utf-8"))
    import nbformat

    return nbformat.reads(_edition._dump(_assign.student_notebook(nb, f"notebooks/{CHAPTER}", _edition.read_book(ROOT))), as_version=4)


def _solved(nb):
    import nbformat

    return with_solutions(nb, solutions(nbformat.read(ROOT / "notebooks" / f"{CHAPTER}.ipynb", as_version=4)))


def _edit(nb, label: str, before: str = "", after: str = ""):
    """``nb`` with code put before / after the body of ``label``'s check cell."""
    nb = copy.deepcopy(nb)
    cell = nb.cells[check_cells(nb)[label]]
    head, body = cell.source.split("\n", 1)
    cell.source = "\n".join(filter(None, [head, before, body, after]))
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    import nbformat

    subs = tmp_path_factory.mktemp("submissions")
    student = _student()
    solved = _solved(student)
    notebooks = {
        "wrong_one.ipynb": _edit(solved, "ex-00-1", after='ans_word = "bus" if ans_word != "bus" else "car"'),
        "endless.ipynb": _edit(solved, "ex-00-2", before="while True:\n    pass"),
        # the check cell made to say 正解 for a wrong word, by passing other data: earns nothing
        "other_data.ipynb": _edit(solved, "ex-00-1", after='ans_word = "bus"\nWORDS = ["bus"] * len(WORDS)'),
        # stops the per-cell alarm, then loops: only the notebook's time limit ends it; what was graded stays
        "alarm_off.ipynb": _edit(solved, "ex-00-3", before="import signal\nsignal.alarm(0)\nwhile True:\n    pass"),
        "hostile.ipynb": _edit(_edit(_edit(solved, "ex-00-1", before="1 / 0"), "ex-00-3", after="del ans_rank"),
                               "ex-00-2", before='print("x" * 5_000_000)\nimport socket\ntry:\n    socket.socket().connect(("1.1.1.1", 80))\n'
                                                 'except OSError:\n    print("no network")\nelse:\n    raise SystemExit("the network was reachable")'),
    }
    for name, nb in notebooks.items():
        nbformat.write(nb, subs / name)
    bare = json.loads(nbformat.writes(solved))
    for cell in bare["cells"]:
        cell["metadata"] = {}
        cell.pop("id", None)
    (subs / "no_metadata.ipynb").write_text(json.dumps(bare), encoding="utf-8")
    (subs / "not_json.ipynb").write_text('{"cells": [', encoding="utf-8")
    (subs / "notes.txt").write_text("my answers", encoding="utf-8")
    other = json.loads((ROOT / "notebooks" / "colab" / "01_vectors_cosine.ipynb").read_text(encoding="utf-8"))
    (subs / "chapter1.ipynb").write_text(json.dumps(other), encoding="utf-8")
    out = tmp_path_factory.mktemp("grade")
    before = _outside_files()
    t0 = time.monotonic()
    rows = _grade.grade(CHAPTER, subs, out, fast=True, jobs=2, cell_limit=CELL_LIMIT, run_limit=RUN_LIMIT)
    seconds = time.monotonic() - t0
    return {r.name: r for r in rows}, out, seconds, before


def _outside_files() -> set[str]:
    """Files in the repository and the temporary folder outside the test's folders (what a run could leave)."""
    import tempfile

    tmp = Path(tempfile.gettempdir())
    return {str(p) for p in tmp.iterdir() if not p.name.startswith("pytest-")}


def _points(row) -> dict[str, float]:
    return {k: v for k, v in row.points.items()}


def test_one_wrong_answer_loses_exactly_that_question(graded):
    rows, *_ = graded
    assert _points(rows["wrong_one.ipynb"]) == {"ex-00-1": 0, "ex-00-2": 2, "ex-00-3": 1}
    assert rows["wrong_one.ipynb"].problem == ""
    assert _points(rows["no_metadata.ipynb"]) == {"ex-00-1": 1, "ex-00-2": 2, "ex-00-3": 1}


def test_an_endless_loop_costs_its_question_within_the_cell_limit(graded):
    rows, *_ = graded
    row = rows["endless.ipynb"]
    assert _points(row) == {"ex-00-1": 1, "ex-00-2": 0, "ex-00-3": 1}
    assert "ex-00-2" in row.problem and "CellTimeLimit" in row.problem
    assert row.seconds < 120


def test_a_notebook_past_its_time_limit_keeps_the_points_graded_before(graded):
    rows, *_ = graded
    row = rows["alarm_off.ipynb"]
    assert _points(row) == {"ex-00-1": 1, "ex-00-2": 2, "ex-00-3": 0}
    assert row.problem.startswith(f"timed out after {RUN_LIMIT} s") and "時間切れ" in row.note
    assert RUN_LIMIT <= row.seconds < RUN_LIMIT + 30


def test_passing_other_data_to_the_check_earns_nothing(graded):
    rows, *_ = graded
    assert _points(rows["other_data.ipynb"])["ex-00-1"] == 0
    assert _points(rows["other_data.ipynb"])["ex-00-2"] == 2


def test_a_hostile_notebook_gets_its_row(graded):
    rows, *_ = graded
    row = rows["hostile.ipynb"]
    assert _points(row) == {"ex-00-1": 0, "ex-00-2": 2, "ex-00-3": 0}, row
    assert "ZeroDivisionError" in row.problem
    assert any("ans_rank" in m for m in row.messages["ex-00-3"])


@pytest.mark.parametrize("name, why", [("not_json.ipynb", "not JSON"), ("notes.txt", "not a notebook"),
                                       ("chapter1.ipynb", "another chapter's notebook (chapter 1)")])
def test_what_cannot_be_graded_gets_its_row_and_nothing_runs(graded, name, why):
    rows, *_ = graded
    assert why in rows[name].problem
    assert sum(rows[name].points.values()) == 0 and rows[name].seconds == 0


def test_the_table_and_the_feedback(graded):
    rows, out, seconds, _ = graded
    with open(out / "grades.csv", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    assert [r["submission"] for r in table] == sorted(rows)
    assert {r["submission"]: r["total"] for r in table}["wrong_one.ipynb"] == "3"
    assert all(r["max"] == "4" for r in table)
    feedback = (out / "feedback" / "wrong_one.md").read_text(encoding="utf-8")
    assert "3 / 4" in feedback and "ヒント" in feedback
    # never an expected value: the reference's word and numbers are in no feedback file
    spec = json.loads((out / "build" / "record.jsonl").read_text(encoding="utf-8").splitlines()[0])
    word = spec["expected"][""]
    for path in (out / "feedback").glob("*.md"):
        assert word not in path.read_text(encoding="utf-8"), path.name
    print(f"\nchapter 0: {len(rows)} submissions graded in {seconds:.0f} s")


def test_nothing_is_written_outside_the_output_folder(graded):
    *_, before = graded
    assert _outside_files() - before == set()


def test_every_check_cell_is_graded_right_after_it():
    nb = _grade.prepare(json.loads(_edition._dump(_student())), cell_limit=5, events="e.jsonl")
    labels = [c["metadata"]["otter"]["tests"][0] for c in nb["cells"] if "otter" in c["metadata"]]
    assert labels == ["ex-00-1", "ex-00-2", "ex-00-3"]
    assert all(CHECK_HEADER.match(c["source"]) for c in nb["cells"] if "otter" in c["metadata"])
