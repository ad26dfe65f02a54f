"""The student edition (``make assign``, :mod:`mixlib._assign`): the Colab edition without a single solution."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import pytest

from mixlib import _assign, _edition

pytestmark = pytest.mark.torch_free

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def student() -> dict[str, dict]:
    return {name: json.loads(text) for name, text in _assign.build(ROOT).items()}


def _text(nb: dict) -> str:
    return "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in nb["cells"])


def _solutions_and_rest(path: Path) -> tuple[list[str], str]:
    return _assign.solutions_and_rest(json.loads(path.read_text(encoding="utf-8")))


_own_lines = _assign.own_lines


def test_every_chapter_has_a_student_edition(student):
    assert sorted(student) == [p.name for p in CHAPTERS]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_line_of_any_solution_is_in_the_student_edition(path, student):
    solutions, rest = _solutions_and_rest(path)
    text = _text(student[path.name])
    assert "解答例" not in text or "解答例を除いてある" in text
    assert not re.search(r"<summary>解答例", text)
    leaked = sorted(line for body in solutions for line in _own_lines(body, rest) if line in text)
    assert not leaked, f"{path.name}: solution lines in the student edition: {leaked[:5]}"
    if re.search(r"\{exercise\}", rest):
        assert solutions, f"{path.name}: exercises but no solution found: the search is broken"


def test_no_line_of_the_references_is_in_any_student_edition(student):
    """The references (mixlib/exercise/part*.py) compute the expected answers: none of their own lines is handed out."""
    chapters = "\n".join(p.read_text(encoding="utf-8") for p in CHAPTERS)
    for part in sorted((ROOT / "mixlib" / "exercise").glob("part*.py")):
        own = {line for line in _own_lines(part.read_text(encoding="utf-8"), chapters)
               if not line.startswith(("#", '"""', "def ", "@", "return ", "import ", "from "))}
        assert own, part.name
        for name, nb in student.items():
            text = _text(nb)
            leaked = sorted(line for line in own if line in text)
            assert not leaked, f"{name}: lines of {part.name} in the student edition: {leaked[:5]}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_student_keeps_the_install_cell_every_exercise_and_every_check(path, student):
    colab = json.loads((ROOT / "notebooks" / "colab" / path.name).read_text(encoding="utf-8"))
    nb = student[path.name]
    assert nb["cells"][0] == colab["cells"][0], "the install cell comes first, as in the Colab edition"
    source = path.read_text(encoding="utf-8")
    text = _text(nb)
    n_exercises = len(re.findall(r"\{exercise\}", source))
    assert len(re.findall(r"^### 演習 ex-", text, flags=re.M)) == n_exercises
    checks = [c for c in nb["cells"] if c["cell_type"] == "code" and "check_answer(" in "".join(c["source"])]
    colab_checks = [c for c in colab["cells"] if c["cell_type"] == "code" and "check_answer(" in "".join(c["source"])]
    assert checks == colab_checks, "every self-check cell is kept as it is"
    assert "学生版" in text
    # nothing else differs from the Colab edition: the chapter's code cells are the same (a prose cell, which shows
    # a paragraph with this run's numbers, goes with its solution when the paragraph is part of one)
    def code(notebook):
        return [c["source"] for c in notebook["cells"] if c["cell_type"] == "code"
                and not "".join(c["source"]).startswith("#@title 本文（この実行の数で）")]
    assert code(nb) == code(colab)


#: words that ask for an answer in words; an exercise that uses one must be marked open-answer, or say here why not
ASKS_FOR_WORDS = re.compile(r"説明せよ|述べよ|示せ|なぜ|理由|考えよ|何が分かるか|言えるかを答えよ|どう変わるか|変わるか。|できるか。|比べて")
#: exercises that use such a word but whose every answer is a value the check cell checks
ALL_CHECKED = {
    "ex-10-4": "「混ぜる割合はどう変わるか」: the layer and the difference, both checked, are the answer",
}


def _exercises(path: Path) -> dict[str, str]:
    """label -> the exercise's MyST (options and statement), from the chapter's source."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    return {m.group(1): m.group(0) for m in re.finditer(r":::\{exercise\}\n:label: (ex-[\d-]+)\n.*?\n:::", text, re.S)}


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_an_exercise_that_asks_for_words_is_marked_open_answer(path):
    for label, text in _exercises(path).items():
        marked = "\n:class: open-answer\n" in text
        asks = ASKS_FOR_WORDS.search(re.sub(r"^:.*$", "", text, flags=re.M))  # the statement, not its options
        if label in ALL_CHECKED:
            assert asks and not marked, f"{label}: ALL_CHECKED is stale"
        elif asks and not marked:
            pytest.fail(f"{label} asks {asks.group(0)!r} but is not marked ':class: open-answer' (tests/test_assign.py: ALL_CHECKED says why not)")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_each_open_exercise_has_one_written_cell_right_after_its_check(path, student):
    nb = student[path.name]
    opens = _assign.open_exercises(json.loads(path.read_text(encoding="utf-8")))
    assert set(opens) == {label for label, text in _exercises(path).items() if ":class: open-answer" in text}
    cells = nb["cells"]
    written = [(i, c) for i, c in enumerate(cells) if c["cell_type"] == "markdown"
               and _assign.WRITTEN_HEADING.match("".join(c["source"]))]
    assert [c["metadata"]["mixbook"]["written"] for _, c in written] == list(opens)
    for i, cell in written:
        label = cell["metadata"]["mixbook"]["written"]
        before = "".join(cells[i - 1]["source"])
        assert cells[i - 1]["cell_type"] == "code" and before.startswith(f"# 演習 {label} の自己チェック"), label
    # as handed out, every written cell reads as unwritten; the student's words, and only they, are read back
    assert _assign.written_answers(nb) == dict.fromkeys(opens, "")
    if opens:
        label = next(iter(opens))
        edited = copy.deepcopy(nb)
        cell = next(c for c in edited["cells"] if c.get("metadata", {}).get("mixbook", {}).get("written") == label)
        cell["source"] = f"#### 記述 {label}\n\n向きが逆だから。\n\n$x$ の平均を引くと、共通の成分が消える。"
        cell["metadata"] = {}  # metadata lost on the way: the heading is enough
        assert _assign.written_answers(edited)[label] == "向きが逆だから。\n\n$x$ の平均を引くと、共通の成分が消える。"


def test_an_open_exercise_without_a_self_check_is_one_line_naming_it():
    nb = {"cells": [{"cell_type": "markdown", "source": ":::{exercise}\n:label: ex-01-9\n:class: open-answer\nなぜか。\n:::"},
                    {"cell_type": "code", "source": "# 演習 ex-01-8 の自己チェック\ncheck_answer('ex-01-8', None)"}]}
    assert _assign.open_exercises(nb) == {"ex-01-9": "なぜか。"}
    with pytest.raises(_edition.EditionError, match="ex-01-9 has no self-check cell"):
        _assign._add_written_cells(copy.deepcopy(nb), ["ex-01-9"], "notebooks/01_x")


def test_written_answers_reads_a_damaged_notebook_without_failing():
    assert _assign.written_answers({"cells": "x"}) == {}
    assert _assign.written_answers([]) == {}
    nb = {"cells": [{"cell_type": "markdown", "source": ["#### 記述 ex-01-2\n", "a"]},
                    {"cell_type": "markdown", "source": "#### 記述 ex-01-2\nb"},  # a second cell: both kept
                    {"cell_type": "markdown", "source": ["# 記述 ex-01-4"]}, 7, {"cell_type": "markdown", "source": [3]}]}
    assert _assign.written_answers(nb) == {"ex-01-2": "a\n\nb", "ex-01-4": ""}


def test_make_assign_writes_only_its_folder(tmp_path):
    out = tmp_path / "student"
    out.mkdir()
    (out / "99_old.ipynb").write_text("{}", encoding="utf-8")
    (out / "notes.txt").write_text("the lecturer's", encoding="utf-8")
    assert _assign.main(["--out", str(out)]) == 0  # a folder of the lecturer's: what was there stays
    assert sorted(p.name for p in out.iterdir()) == sorted([p.name for p in CHAPTERS] + ["99_old.ipynb", "notes.txt"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["student"]


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "00_environment.ipynb",
    # chapter 10's runs in the Colab replica (make test-colab sets MIXLIB_STUDENT_EDITION); make test runs the
    # chapter itself, with the same code cells, already
    pytest.param("10_mixing.ipynb", marks=pytest.mark.skipif(not os.environ.get("MIXLIB_STUDENT_EDITION"),
                                                             reason="runs in make test-colab, in the Colab replica")),
])
def test_the_untouched_student_edition_runs_and_every_check_says_unanswered(monkeypatch, tmp_path, name):
    """Chapters 0 and 10's student edition, as a student gets it, runs top to bottom (fast mode) and every
    self-check says 未回答, never 正解: the edition hands out no answer. ``make test-colab`` runs this in the
    replica of Colab's runtime too, where nothing Colab ships has been replaced."""
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from test_notebooks import _execute  # the notebook tests' runner (fast mode, offline, the stall fix)

    path = tmp_path / name
    made = os.environ.get("MIXLIB_STUDENT_EDITION")  # make test-colab makes it outside the replica (no Sphinx there)
    path.write_text(Path(made, name).read_text(encoding="utf-8") if made else _assign.build(ROOT)[name], encoding="utf-8")
    nb = _execute(path, monkeypatch, solutions=False)
    checks = [c for c in nb.cells if c.cell_type == "code" and "check_answer(" in c.source]
    assert checks, f"{name} has self-checks"
    for cell in checks:
        shown = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs)
        assert "未回答" in shown and "正解" not in shown, shown


def test_a_chapter_the_edition_cannot_convert_is_one_line_and_nothing_is_written(tmp_path, monkeypatch, capsys):
    def refuse(root):
        raise _edition.EditionError("notebooks/10_mixing, cell 3: the directive {figure} has no Colab form")

    monkeypatch.setattr(_assign, "build", refuse)
    assert _assign.main(["--out", str(tmp_path / "student")]) == 2
    assert capsys.readouterr().err == "error: notebooks/10_mixing, cell 3: the directive {figure} has no Colab form\n"
    assert not (tmp_path / "student").exists()


# -------------------------------------------------------------------------------- the site without solutions

def test_the_student_site_is_the_book_with_solutions_hidden_and_colab_on_the_student_edition(tmp_path):
    import yaml

    from mixlib._repo import SITE_URL, STUDENT_EDITION_DIR, STUDENT_SITE_DIR

    assert _assign.main(["--site-config", str(tmp_path / "site" / "_config.yml")]) == 0
    config = yaml.safe_load((tmp_path / "site" / "_config.yml").read_text(encoding="utf-8"))
    book = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    sphinx, book_sphinx = config["sphinx"]["config"], book["sphinx"]["config"]
    assert sphinx["hide_solutions"] is True and "hide_solutions" not in book_sphinx
    assert sphinx["mixbook_colab_folder"] == STUDENT_EDITION_DIR
    assert sphinx["html_theme_options"]["announcement"] == _assign.STUDENT_SITE_NOTE
    assert config["html"]["baseurl"] == f"{SITE_URL}{STUDENT_SITE_DIR}"
    assert Path(config["execute"]["cache"]) == (ROOT / book["execute"]["cache"]).resolve()  # the book's executions
    assert config["title"].startswith(book["title"]) and config["title"].endswith("（学生版）")
    # the rest is the book's own: the same extensions, parsing, exclusions, execution settings
    assert sphinx["extensions"] == book_sphinx["extensions"]
    assert {k: v for k, v in config.items() if k not in ("title", "execute", "html", "sphinx")} == \
           {k: v for k, v in book.items() if k not in ("title", "execute", "html", "sphinx")}
    assert {**config["execute"], "cache": None} == {**book["execute"], "cache": None}


def _check_student_site():
    import importlib.util

    spec = importlib.util.spec_from_file_location("check_student_site", ROOT / ".ci" / "check_student_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_student_site_check_finds_a_solution_a_colab_edition_link_and_a_missing_note(tmp_path):
    from mixlib._repo import STUDENT_EDITION_DIR, colab_url

    check = _check_student_site()
    chapters = [p for p in CHAPTERS if re.match(r"\d\d_", p.name)]
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=book/intro.html" />', encoding="utf-8")
    (tmp_path / "guide.html").write_text(f"<p>{_assign.STUDENT_SITE_NOTE}</p><pre>{colab_url('10_mixing.ipynb')}</pre>", encoding="utf-8")
    for path in chapters:
        page = f'<p>{_assign.STUDENT_SITE_NOTE}</p><a href="{colab_url(path.name, STUDENT_EDITION_DIR)}">Colab</a>'
        (tmp_path / "notebooks" / f"{path.stem}.html").write_text(page, encoding="utf-8")
    assert check.check(tmp_path, None) == []
    line = sorted(l for l in _assign.solution_lines(json.loads(chapters[1].read_text(encoding="utf-8"))) if "=" in l)[0]
    leaky = tmp_path / "notebooks" / f"{chapters[1].stem}.html"
    leaky.write_text(leaky.read_text(encoding="utf-8") + f'<pre><span class="n">{line.replace("<", "&lt;")}</span></pre>'
                     f'<div class="solution dropdown admonition"></div><a href="{colab_url(chapters[1].name)}">x</a>',
                     encoding="utf-8")
    (tmp_path / "notebooks" / f"{chapters[2].stem}.html").write_text("<p>no note, no button</p>", encoding="utf-8")
    problems = check.check(tmp_path, None)
    assert len(problems) == 5, problems
    assert any("solution class" in p for p in problems) and any("1 solution lines" in p for p in problems)
    assert any("links to the Colab edition" in p for p in problems) and any("no note" in p for p in problems)
    assert any(chapters[2].stem in p and "does not open the student edition" in p for p in problems)
    # the search must find the solutions on the site with them, or it is broken
    assert any("it is broken" in p for p in check.check(tmp_path, tmp_path / "empty"))
