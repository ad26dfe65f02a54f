"""The parts of ``make grade`` that need no otter and run no chapter (``make test``): reading the input, refusing
what cannot be graded, the stored references, the fingerprints of the chapter's data, the judging of one part,
the table and the feedback. ``tests/test_grade_run.py`` grades real submissions with otter (``make test-grade``).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from mixlib import _grade
from mixlib.exercise import _grading, check_answer

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = "00_environment"


def _notebook(*sources: str) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": s} for s in sources]}


def _write(path: Path, nb) -> Path:
    path.write_text(nb if isinstance(nb, str) else json.dumps(nb), encoding="utf-8")
    return path


# -------------------------------------------------------------------------------------------- the input

def test_chapter_names():
    assert _grade.chapter_of("0") == "00_environment" == _grade.chapter_of("00_environment")
    assert _grade.chapter_of("10") == "10_mixing"
    with pytest.raises(_grade.GradeError, match="chapter 12 has 2 notebooks; name one: 12_positional, 12_positional_attention"):
        _grade.chapter_of("12")
    with pytest.raises(_grade.GradeError, match="no chapter '99'"):
        _grade.chapter_of("99")


def test_screen_refuses_what_cannot_be_graded_and_says_why(tmp_path):
    good = _write(tmp_path / "a.ipynb", _notebook("x = 1", "# 演習 ex-00-1 の自己チェック\nans_word = None"))
    assert _grade.screen(good, CHAPTER) == ""
    cases = {
        "not a notebook (.ipynb): b.txt": _write(tmp_path / "b.txt", "text"),
        "not JSON (JSONDecodeError at byte 1)": _write(tmp_path / "c.ipynb", "{]"),
        "not JSON (UnicodeDecodeError": tmp_path / "d.ipynb",
        "JSON, but not a notebook": _write(tmp_path / "e.ipynb", "[1, 2]"),
        "another chapter's notebook (chapter 3), not chapter 0's": _write(
            tmp_path / "f.ipynb", _notebook("# 演習 ex-03-1 の自己チェック\nmy_grad = None")),
        "no exercise check cell of chapter 0": _write(tmp_path / "g.ipynb", _notebook("print(1)")),
    }
    (tmp_path / "d.ipynb").write_bytes(b"\xff\xfe\x00")
    for why, path in cases.items():
        assert _grade.screen(path, CHAPTER).startswith(why), (path.name, _grade.screen(path, CHAPTER))
        assert _grade._refusal_ja(_grade.screen(path, CHAPTER))  # and the student's words for it
    big = tmp_path / "h.ipynb"
    with open(big, "wb") as f:
        f.truncate(_grade.MAX_BYTES + 1)
    assert _grade.screen(big, CHAPTER).startswith("larger than 50 MB")


def test_collect_reads_a_folder_or_a_zip_without_leaving_the_inbox(tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    _write(folder / "a.ipynb", "{}")
    _write(folder / ".hidden", "x")
    (folder / "x" / ".ipynb_checkpoints").mkdir(parents=True)
    _write(folder / "x" / "a.ipynb", "{}")  # the same name in a subfolder stays a submission of its own
    _write(folder / "x" / ".ipynb_checkpoints" / "a-checkpoint.ipynb", "{}")
    got = _grade.collect(folder, tmp_path / "inbox")
    assert [name for name, _ in got] == ["a.ipynb", "x/a.ipynb"] and got[1][1] == folder / "x" / "a.ipynb"
    assert [_grade._safe(name) for name, _ in got] == ["a.ipynb", "x__a.ipynb"]
    archive = tmp_path / "subs.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("../../escape.ipynb", "{}")  # a path out of the inbox: it stays in the inbox
        zf.writestr("alice/10_mixing.ipynb", "1")  # an LMS export that names the student by a folder
        zf.writestr("bob/10_mixing.ipynb", "2")
        with pytest.warns(UserWarning, match="Duplicate name"):
            zf.writestr("bob/10_mixing.ipynb", "3")  # the same path twice
        zf.writestr("__MACOSX/._a.ipynb", "")
    got = dict(_grade.collect(archive, tmp_path / "inbox"))
    assert sorted(got) == ["alice/10_mixing.ipynb", "bob/10_mixing-1.ipynb", "bob/10_mixing.ipynb", "escape.ipynb"]
    assert all(p.parent == tmp_path / "inbox" for p in got.values())
    assert [got[n].read_text() for n in ("alice/10_mixing.ipynb", "bob/10_mixing.ipynb", "bob/10_mixing-1.ipynb")] == ["1", "2", "3"]
    assert got["alice/10_mixing.ipynb"].name == "alice__10_mixing.ipynb"
    assert not (tmp_path.parent / "escape.ipynb").exists()
    for bad, why in [(tmp_path / "none", "does not exist"), (_write(tmp_path / "f.txt", "x"), "neither a folder nor a zip"),
                     (tmp_path / "inbox2", "holds no file")]:
        if why == "holds no file":
            bad.mkdir()
        with pytest.raises(_grade.GradeError, match=why):
            _grade.collect(bad, tmp_path / "in3")


def test_the_command_refuses_bad_input_in_one_line_before_any_work(tmp_path):
    for args, why in [(["grade", "99", str(tmp_path)], "no chapter '99'"),
                      (["grade", "0", str(tmp_path / "none")], "does not exist"),
                      (["grade", "0", str(tmp_path), "--jobs", "0"], "--jobs must be at least 1"),
                      (["autograder", "10", "--cell-limit", "0"], "--cell-limit must be at least 1 second"),
                      (["autograder", "12"], "chapter 12 has 2 notebooks")]:
        p = subprocess.run([sys.executable, "-m", "mixlib._grade", *args, "--out", str(tmp_path / "out")],
                           capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and why in p.stderr, p.stderr
        assert not (tmp_path / "out" / "autograder.zip").exists()


def test_the_grading_kernels_find_the_models_this_machine_keeps(tmp_path, monkeypatch):
    """HOME and XDG_CACHE_HOME are the grading's own; a model fetched beforehand (hf download) is still found."""
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    env = _grade._grading_env(tmp_path / "work", tmp_path / "cache", fast=True)
    assert env["HOME"] == str(tmp_path / "work") and env["HF_HUB_CACHE"] == constants.HF_HUB_CACHE
    assert env["HF_HUB_OFFLINE"] == "1" and env["MIXLIB_FAST"] == "1"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # the lecturer's own setting wins
    assert _grade._grading_env(tmp_path / "work", tmp_path / "cache", fast=False)["HF_HUB_CACHE"] == str(tmp_path / "hub")


@pytest.mark.skipif(__import__("importlib").util.find_spec("otter") is not None, reason="otter is installed here")
def test_without_otter_the_command_says_where_it_is(tmp_path):
    p = subprocess.run([sys.executable, "-m", "mixlib._grade", "grade", "0", str(tmp_path), "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 2 and p.stderr == ("error: otter-grader is not installed in this Python: run `make grade` or "
                                              "`make autograder`, which set up .venv-grade\n")


def test_prepare_checks_each_exercise_after_its_cell_and_ignores_the_submissions_own_otter_metadata():
    nb = _notebook("x = 1", "# 演習 ex-00-1 の自己チェック\nans_word = 'king'", "y = 2")
    nb["cells"][0]["metadata"] = {"otter": {"tests": ["ex-00-3"]}}  # a submission cannot choose what is checked
    nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": ["# ", "title"]})
    nb["cells"].append("not a cell")
    out = _grade.prepare(nb, cell_limit=7, events="/x/e.jsonl")
    assert "_MX_LIMIT = 7" in out["cells"][0]["source"] and "'/x/e.jsonl'" in out["cells"][0]["source"]
    assert [c["metadata"].get("otter") for c in out["cells"][1:]] == [None, {"tests": ["ex-00-1"]}, None, None]
    assert out["cells"][-1]["source"] == "# title" and out["metadata"]["kernelspec"]["name"] == "python3"


def test_cell_errors_name_the_exercise_they_cost(tmp_path):
    events = tmp_path / "e.jsonl"
    lines = [{"kernel": 3}, {"cell": "x = 1"}, {"error": "NameError", "message": "name 'y' is not defined"},
             {"cell": "# 演習 ex-00-1 の自己チェック"}, {"cell": "# 演習 ex-00-2 の自己チェック"}, {"error": "CellTimeLimit"},
             {"cell": "print(1)"}, {"error": "OSError"}]
    events.write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n", encoding="utf-8")
    assert _grade._cell_errors(events) == [("ex-00-1", "NameError", "name 'y' is not defined"),
                                           ("ex-00-2", "CellTimeLimit", ""), (None, "OSError", "")]


# ---------------------------------------------------------------------------------- stored references

@pytest.mark.parametrize("value", [3, 2.5, "king", None, True, [1, "a"], (1, 2), {1, 2}, {"a": 1, 2: [3]},
                                   np.arange(6.0).reshape(2, 3), torch.tensor([1, 2]), np.float32(1.5), {(1, 2): "x"}])
def test_expected_values_round_trip_through_json(value):
    back = _grading.decode(json.loads(json.dumps(_grading.encode(value))))
    if isinstance(value, (np.ndarray, torch.Tensor)):
        assert np.array_equal(back, np.asarray(value)) and back.dtype == np.asarray(value).dtype
    else:
        assert back == value and type(back) is type(value.item() if isinstance(value, np.generic) else value)


def test_a_value_that_cannot_be_stored_is_an_error():
    with pytest.raises(TypeError, match="of type object cannot be stored"):
        _grading.encode(object())


def test_fingerprints_see_a_change_of_the_data_but_not_a_rounding():
    E = torch.randn(50, 8, generator=torch.Generator().manual_seed(0))
    fp = _grading.fingerprint(E)
    assert _grading.same_fingerprint(fp, _grading.fingerprint(E + 1e-9))
    for changed in (E[:49], E * 1.01, E.flip(0), E.T.contiguous()):
        assert not _grading.same_fingerprint(fp, _grading.fingerprint(changed))
    assert _grading.same_fingerprint(_grading.fingerprint(["a", "b"]), _grading.fingerprint(["a", "b"]))
    assert not _grading.same_fingerprint(_grading.fingerprint(["a", "b"]), _grading.fingerprint(["b", "a"]))
    model = torch.nn.Linear(3, 2)
    fp = _grading.fingerprint(model)
    with torch.no_grad():
        model.weight[0, 0] += 1
    assert not _grading.same_fingerprint(fp, _grading.fingerprint(model))
    assert not _grading.same_fingerprint(_grading.fingerprint(1.0), _grading.fingerprint("1.0"))


def test_check_answer_records_what_it_computed_only_when_asked(tmp_path, monkeypatch, capsys):
    from mixlib.course.word2vec import WordVectors

    wv = WordVectors(["king", "queen", "bus"], np.array([[1.0, 0], [0.9, 0.1], [0, 1]]))
    check_answer("ex-00-3", 1, word_vectors=wv)
    path = tmp_path / "record.jsonl"
    monkeypatch.setenv(_grading.RECORD_ENV, str(path))
    check_answer("ex-00-3", 1, word_vectors=wv)
    (entry,) = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert entry["label"] == "ex-00-3" and entry["expected"] == {"": 1}
    assert entry["data"]["word_vectors"] == _grading.fingerprint(wv)


def _spec(label, answer, data, expected, fingerprints=None, own=()):
    return {"label": label, "answer": answer, "data": data, "own": list(own),
            "expected": expected, "fingerprints": fingerprints or {}}


def test_a_part_is_judged_against_the_graders_value_not_the_notebooks_data(tmp_path, monkeypatch):
    monkeypatch.setenv(_grading.SCORES_ENV, str(tmp_path / "scores.jsonl"))
    spec = _spec("ex-00-2", '{"コサイン": ans_cos, "内積": ans_dot}', {"E": "E"}, {"コサイン": 0.5, "内積": 2.0})
    _grading.assert_part(spec, "コサイン", {"ans_cos": 0.5, "ans_dot": None})
    with pytest.raises(_grading.GradingError, match="^未回答$"):
        _grading.assert_part(spec, "内積", {"ans_cos": 0.5, "ans_dot": None})
    with pytest.raises(_grading.GradingError, match="ヒント：成分ごとの積の和") as err:
        _grading.assert_part(spec, "内積", {"ans_cos": 0.5, "ans_dot": 3.0})
    assert "2.0" not in str(err.value)
    with pytest.raises(_grading.GradingError, match="ans_dot を消したり"):
        _grading.assert_part(spec, "内積", {"ans_cos": 0.5})
    scores = [json.loads(x) for x in (tmp_path / "scores.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [s["passed"] for s in scores] == [True, False, False, False]


def test_a_judged_answer_runs_only_on_the_chapters_own_data():
    kami = ["むすめふさほせ", "うかり", "うらみ"]
    spec = _spec("ex-07-2", "kimariji", {"kami": "poems_kami"}, None,
                 {"kami": _grading.fingerprint(kami)})

    def kimariji(ks):  # the right answer: the shortest prefix no other poem starts with
        return [next(n for n in range(1, len(k) + 1) if not any(o.startswith(k[:n]) for o in ks if o != k)) for k in ks]

    _grading.assert_part(spec, "", {"kimariji": kimariji, "poems_kami": kami})
    with pytest.raises(_grading.GradingError, match="課題のものと違う"):  # a student's own list earns nothing
        _grading.assert_part(spec, "", {"kimariji": kimariji, "poems_kami": kami[:2]})
    with pytest.raises(_grading.GradingError, match="答えを実行すると ZeroDivisionError"):
        _grading.assert_part(spec, "", {"kimariji": lambda ks: 1 / 0, "poems_kami": kami})
    with pytest.raises(_grading.GradingError, match="章のデータ poems_kami がない"):
        _grading.assert_part(spec, "", {"kimariji": kimariji})


# ------------------------------------------------------------------------------------ table and feedback

def test_the_table_and_the_feedback_say_points_and_hints_only(tmp_path):
    manifest = {"chapter": CHAPTER, "questions": {"ex-00-1": [""], "ex-00-2": ["コサイン", "内積"]}}
    rows = [_grade.Row("b.ipynb", None, {"ex-00-1": 1.0, "ex-00-2": 1.0}, {"ex-00-2": ["内積: 不正解 — ヒント：和"]}, seconds=3.25),
            _grade.Row("a.txt", None, {"ex-00-1": 0.0, "ex-00-2": 0.0}, problem="not a notebook (.ipynb): a.txt",
                       note="採点できなかった：提出されたファイルがノートブック（.ipynb）でない")]
    path = _grade.write_outputs(rows, manifest, tmp_path)
    with open(path, encoding="utf-8") as f:
        table = list(csv.reader(f))
    assert table[0] == ["submission", "ex-00-1", "ex-00-2", "total", "max", "written", "seconds", "problem"]
    assert table[1] == ["b.ipynb", "1", "1", "2", "3", "", "3.2", ""]
    assert table[2][3:5] == ["0", "3"] and table[2][7] == "not a notebook (.ipynb): a.txt"
    assert not (tmp_path / "open_answers").exists()  # chapter 0 has no open-answer exercise
    text = (tmp_path / "feedback" / "b.ipynb.md").read_text(encoding="utf-8")
    assert "合計 2 / 3 点" in text and "- ex-00-2：1 / 2\n  - 内積: 不正解 — ヒント：和" in text
    assert "採点の注意：採点できなかった" in (tmp_path / "feedback" / "a.txt.md").read_text(encoding="utf-8")


def test_the_written_parts_are_collected_for_the_lecturer_as_written_and_never_scored(tmp_path):
    opens = _grade.open_statements("01_vectors_cosine")
    assert list(opens) == ["ex-01-2", "ex-01-4"] and "ベクトルの向きの言葉で説明せよ" in opens["ex-01-2"]
    assert "{term}" not in "".join(opens.values())  # roles read as text, as in the Colab edition
    manifest = {"chapter": "01_vectors_cosine", "questions": {"ex-01-2": ["a", "b"], "ex-01-4": [""]}}
    tricky = "平均を引くと共通の成分が消える。\n```\n# not a heading\n```\n<script>x</script>"
    rows = [_grade.Row("a.ipynb", None, {"ex-01-2": 2.0}, written={"ex-01-2": tricky, "ex-01-4": ""}),
            _grade.Row("b.ipynb", None, {"ex-01-2": 1.0}, written={"ex-01-4": "二乗誤差を b で微分すると…"}),
            _grade.Row("c.txt", None, {}, problem="not a notebook (.ipynb): c.txt")]
    path = _grade.write_outputs(rows, manifest, tmp_path, opens)
    with open(path, encoding="utf-8") as f:
        table = {r["submission"]: r for r in csv.DictReader(f)}
    assert [table[n]["written"] for n in ("a.ipynb", "b.ipynb", "c.txt")] == ["1/2", "1/2", ""]  # c.txt: not graded
    text = (tmp_path / "open_answers" / "ex-01-2.md").read_text(encoding="utf-8")
    assert text.index("## 問題") < text.index("## a.ipynb") < text.index("## b.ipynb") < text.index("## c.txt")
    assert "````text\n" + tricky + "\n````" in text  # in a fence longer than the student's own: shown as written
    assert "（記述のセルが見つからない" in text.split("## b.ipynb")[1] and "採点できなかった提出物" in text.split("## c.txt")[1]
    assert "（未記入）" in (tmp_path / "open_answers" / "ex-01-4.md").read_text(encoding="utf-8").split("## a.ipynb")[1]
    feedback = (tmp_path / "feedback" / "a.ipynb.md").read_text(encoding="utf-8")
    assert "記述：提出された。先生が読む（点には入らない）" in feedback and "記述：書かれていない" in feedback
    assert "合計 2 / 3 点" in feedback  # the written parts add no points
    assert "記述" not in (tmp_path / "feedback" / "c.txt.md").read_text(encoding="utf-8")


def test_the_autograder_test_file_is_otters_exception_format():
    text = _grade._test_file("ex-00-2", ["コサイン", "内積"], _spec("ex-00-2", "x", {}, {"コサイン": 1, "内積": 2}))
    env: dict = {}
    exec(compile(text.replace("from otter.test_files import test_case", "test_case = lambda **kw: (lambda f: (kw, f))"), "t", "exec"), env)
    assert env["OK_FORMAT"] is False and env["name"] == "ex-00-2" and env["points"] == 2.0
    assert env["SPEC"]["expected"] == {"コサイン": 1, "内積": 2}
    assert [env[f"test_{k}"][0] for k in (0, 1)] == [{"name": "ex-00-2 コサイン", "points": 1, "hidden": False},
                                                    {"name": "ex-00-2 内積", "points": 1, "hidden": False}]


def test_the_grading_requirements_pin_otter_and_leave_out_the_book_tools():
    req = _grade._grading_requirements(ROOT)
    assert f"otter-grader=={_grade.OTTER_VERSION}" in req and "torch==" in req and "mixlib @ git+https://github.com/" in req
    assert "jupyter-book" not in req and "pytest" not in req and "playwright" not in req
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'grade = ["otter-grader=={_grade.OTTER_VERSION}"' in pyproject



def test_an_autograder_is_built_again_when_what_its_references_depend_on_changes(tmp_path, monkeypatch):
    monkeypatch.delenv("MIXLIB_MODEL", raising=False)
    for path, text in {"notebooks/00_x.ipynb": "{}", "mixlib/course/a.py": "x = 1", "data/d.tsv": "1"}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    digest = _grade._source_hash("00_x", tmp_path, True)
    assert digest == _grade._source_hash("00_x", tmp_path, True)
    assert digest != _grade._source_hash("00_x", tmp_path, False)  # fast or full mode
    monkeypatch.setenv("MIXLIB_MODEL", "bert-base-uncased")  # another model
    assert digest != _grade._source_hash("00_x", tmp_path, True)
    monkeypatch.delenv("MIXLIB_MODEL")
    (tmp_path / "mixlib/course/a.py").write_text("x = 2", encoding="utf-8")  # any of mixlib, not only the exercises
    assert digest != _grade._source_hash("00_x", tmp_path, True)
    (tmp_path / "mixlib/course/a.py").write_text("x = 1", encoding="utf-8")
    (tmp_path / "data/d.tsv").write_text("12", encoding="utf-8")  # a data file
    assert digest != _grade._source_hash("00_x", tmp_path, True)


def test_self_test_fails_when_the_grading_of_an_exercise_is_wrong_either_way(tmp_path, monkeypatch):
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv(_grading.RECORD_ENV, str(record))
    data = {"E": "E", "tokenizer": "enc.tokenizer"}
    student_cell = '# 演習 ex-00-2 の自己チェック\nans_cos = None\nans_dot = None\ncheck_answer("ex-00-2", {"コサイン": ans_cos, "内積": ans_dot})'
    args = ("ex-00-2", '{"コサイン": ans_cos, "内積": ans_dot}', data, [], student_cell)
    env = {"ans_cos": 0.5, "ans_dot": 2.0, "check_answer": lambda *a, **k: None}
    record.write_text(json.dumps({"label": "ex-00-2", "expected": {"コサイン": 0.5, "内積": 2.0}, "data": {}}) + "\n", encoding="utf-8")
    _grading.self_test(*args, env)  # the reference earns both parts; the untouched cell none
    with pytest.raises(AssertionError, match="ex-00-2 内積: the reference solution does not earn its point: 不正解"):
        _grading.self_test(*args, {**env, "ans_dot": 3.0})
    with pytest.raises(AssertionError, match="ex-00-2 コサイン: the untouched student edition would earn this point"):
        _grading.self_test(*args[:4], student_cell.replace("ans_cos = None", "ans_cos = 0.5"), env)
    with pytest.raises(AssertionError, match="ex-00-3: its check cell recorded nothing"):
        _grading.recorded("ex-00-3")


def test_every_chapter_run_in_make_test_tests_its_grading_after_each_check_cell():
    import nbformat

    from mixlib.exercise._cells import check_cells, own_names, with_self_tests

    nb = nbformat.read(ROOT / "notebooks" / "colab" / "09_sentence_vectors.ipynb", as_version=4)
    tested = with_self_tests(nb, nb)
    checks = check_cells(tested)
    assert len(tested.cells) == len(nb.cells) + len(checks)
    for label, i in checks.items():
        assert tested.cells[i + 1].source.startswith('__import__("mixlib.exercise._grading"') and repr(label) in tested.cells[i + 1].source
    assert own_names({"enc": "enc", "pair_a": "ans_a", "pair_b": "ans_b", "ids": "my_ids"}) == ["ids", "pair_a", "pair_b"]


def test_a_notebook_that_reaches_for_the_grader_is_flagged():
    honest = _notebook("ans_word = 'king'", "check_answer('ex-00-1', ans_word)")
    assert _grade.touches_grader(honest) == []
    forged = _notebook("import mixlib.exercise._grading as g\ng.judge_part = lambda *a: None")
    assert _grade.touches_grader(forged) == ["_grading", "judge_part"]
    forged["cells"].append({"cell_type": "markdown", "source": "otter"})  # prose may say anything
    assert _grade.touches_grader(forged) == ["_grading", "judge_part"]
    for path in sorted((ROOT / "notebooks" / "colab").glob("*.ipynb")):  # no chapter trips it
        assert _grade.touches_grader(json.loads(path.read_text(encoding="utf-8"))) == [], path.name


def test_without_unshare_a_timed_out_run_still_takes_its_kernel_with_it(tmp_path, monkeypatch):
    """Where unshare is missing (no pid namespace), the kernel runs in a session of its own: _kill_tree kills it
    by the pid its limits cell logged, as well as the worker's process group."""
    import signal
    import time as _time

    monkeypatch.setattr(_grade.shutil, "which", lambda name: None)
    assert _grade._isolation() == []
    kernel = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    (tmp_path / _grade.EVENTS).write_text(json.dumps({"kernel": kernel.pid}) + "\n", encoding="utf-8")
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    _grade._kill_tree(worker, tmp_path)
    for _ in range(50):
        if kernel.poll() is not None:
            break
        _time.sleep(0.1)
    assert worker.returncode == -signal.SIGKILL and kernel.returncode == -signal.SIGKILL


def test_each_batch_has_its_own_folder_so_one_never_overwrites_another(tmp_path):
    (tmp_path / "class-a").mkdir()
    (tmp_path / "late.zip").write_bytes(b"")
    assert _grade.batch_dir(tmp_path / "out", tmp_path / "class-a") == tmp_path / "out" / "class-a"
    assert _grade.batch_dir(tmp_path / "out", tmp_path / "late.zip") == tmp_path / "out" / "late"
    (tmp_path / "build").mkdir()  # a name the chapter's own files use is refused before any work
    with pytest.raises(_grade.GradeError, match="other than 'build'"):
        _grade.grade(CHAPTER, tmp_path / "build", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_kernels_limits_cell_refuses_the_network_even_without_a_namespace(tmp_path):
    """The limits cell run in a plain Python (no network namespace): a raw connect to the internet is refused
    before any packet leaves, a loopback connect is not; a cell past its limit raises CellTimeLimit."""
    cell = _grade.LIMITS_CELL.format(cell_limit=1, events=str(tmp_path / "e.jsonl"))
    script = ("import types, socket, time\n"
              "hooks = {}\n"
              "ip = types.SimpleNamespace(events=types.SimpleNamespace(register=lambda name, f: hooks.__setitem__(name, f)))\n"
              "get_ipython = lambda: ip\n"
              f"exec({cell!r})\n"
              "try:\n    socket.socket().connect(('1.1.1.1', 80))\nexcept OSError as e:\n    print('refused:', e)\n"
              "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); c = socket.socket(); c.connect(s.getsockname()); print('loopback ok')\n"
              "hooks['pre_run_cell'](types.SimpleNamespace(raw_cell='while True: pass'))\n"
              "try:\n    time.sleep(5)\nexcept Exception as e:\n    print(type(e).__name__)\n")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert p.stdout.splitlines() == ["refused: 採点中はネットワークを使えない", "loopback ok", "CellTimeLimit"], p.stdout + p.stderr
