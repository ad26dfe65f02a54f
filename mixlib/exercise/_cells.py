"""Reading a chapter's exercises: each one's hidden solution code and its self-check cell.

An exercise is a ``:::{solution} ex-…`` block in a markdown cell (its python
code blocks are the solution) and a code cell that starts with
``# 演習 ex-… の自己チェック``, where the student replaces ``ans_… = None`` (or
the body of a stub function) and runs the check.
"""

from __future__ import annotations

import copy
import re

import nbformat

CHECK_HEADER = re.compile(r"# 演習 (ex-[\d-]+) の自己チェック")
SOLUTION = re.compile(r":::\{solution\} (ex-[\d-]+)\n(.*?)\n:::", re.S)
CODE_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
#: the lines a student replaces: an answer still None, or a stub function's body
ANSWER_LINE = re.compile(r"^(ans_\w+|my_ids|my_group) = None\b|^    return None  # ← ここを書く")


def solutions(nb: nbformat.NotebookNode) -> dict[str, str]:
    """label → the python code of its solution ('' when the solution has no code)."""
    out = {}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for m in SOLUTION.finditer(cell.source):
                out[m.group(1)] = "\n".join(CODE_BLOCK.findall(m.group(2)))
    return out


def check_cells(nb: nbformat.NotebookNode) -> dict[str, int]:
    """label → the index of its self-check code cell."""
    out = {}
    for i, cell in enumerate(nb.cells):
        m = CHECK_HEADER.match(cell.source) if cell.cell_type == "code" else None
        if m:
            out[m.group(1)] = i
    return out


def with_solutions(nb: nbformat.NotebookNode, sols: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose check cells run the solution right after the lines a student fills in (``sols``:
    label → code, by default :func:`solutions` of ``nb``; the Colab edition takes its chapter's)."""
    nb = copy.deepcopy(nb)
    sols = solutions(nb) if sols is None else sols
    for label, i in check_cells(nb).items():
        lines = nb.cells[i].source.split("\n")
        at = [k for k, line in enumerate(lines) if ANSWER_LINE.match(line)]
        if not at or not sols.get(label):
            raise ValueError(f"{label}: no answer line in its check cell or no solution code to run")
        lines[at[-1] + 1:at[-1] + 1] = ["", sols[label].rstrip("\n"), ""]
        nb.cells[i].source = "\n".join(lines)
    return nb


def check_call(source: str) -> tuple[str, str, dict[str, str]]:
    """The ``check_answer(label, answer, **data)`` call of a check cell, as source text: the label, the answer's
    expression (``ans_word``, ``{"コサイン": ans_cos, …}``) and each data keyword's expression."""
    import ast

    tree = ast.parse(source)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "check_answer"]
    if len(calls) != 1 or len(calls[0].args) != 2 or not isinstance(calls[0].args[0], ast.Constant):
        raise ValueError(f"a check cell must hold one check_answer(label, answer, **data) call:\n{source}")
    call = calls[0]
    segment = lambda node: ast.get_source_segment(source, node)  # noqa: E731
    return call.args[0].value, segment(call.args[1]), {k.arg: segment(k.value) for k in call.keywords}


#: a data keyword whose expression is one of these names is the student's own answer (a sentence pair they chose),
#: not the chapter's data: it is not compared with the grader's run
OWN_NAME = re.compile(r"^(ans_\w+|my_\w+)$")


def own_names(data: dict[str, str]) -> list[str]:
    """The data keywords of a check call that carry the student's own answers."""
    return sorted(name for name, expr in data.items() if OWN_NAME.match(expr))


def with_self_tests(nb: nbformat.NotebookNode, student: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` (the chapter with its solutions filled in) in which, right after each check cell, a cell
    runs :func:`mixlib.exercise._grading.self_test` with the check cell as ``student`` has it: the grading of
    every exercise tested inside the same run (which must have ``MIXLIB_RECORD`` set)."""
    nb = copy.deepcopy(nb)
    student_cells = check_cells(student)
    for label, i in sorted(check_cells(nb).items(), key=lambda item: -item[1]):
        source = student.cells[student_cells[label]].source
        _, answer, data = check_call(source)
        call = (f'__import__("mixlib.exercise._grading", fromlist=["self_test"]).self_test('
                f"{label!r}, {answer!r}, {data!r}, {own_names(data)!r}, {source!r}, globals())")
        nb.cells.insert(i + 1, nbformat.v4.new_code_cell(call))
    return nb
