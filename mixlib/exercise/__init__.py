"""Self-checks for the chapters' exercises that never reveal the expected answer.

A check cell holds the student's answer and one call::

    ans_share = None  # ← 答えを入れる
    check_answer("ex-10-3", ans_share, m=m, enc=enc)

:func:`check_answer` computes the reference from the chapter's own data
(passed as keywords) with the function registered here for that exercise, so
the cell shows nothing a student could print instead of solving. It prints
``正解``, ``もう一度`` plus a hint, or ``未回答`` for each part of the answer,
never the reference value, and computes no reference while every part is
still ``None``. An exercise with several answers takes a dict keyed by its
part names::

    check_answer("ex-11-2", {"割合": ans_reach, "コサイン": ans_cos}, stretch=stretch, bounds=bounds, E=E)

The references are in one module per part of the book:
:mod:`~mixlib.exercise.part0` (chapter 0), :mod:`~mixlib.exercise.part1`
(chapters 1-3), :mod:`~mixlib.exercise.part2` (chapters 4-5),
:mod:`~mixlib.exercise.part3` (chapters 6-7), :mod:`~mixlib.exercise.part4`
(chapters 8-9) and :mod:`~mixlib.exercise.part5` (chapters 10-13). Each is an
independent computation where one exists. ``tests/test_exercises.py`` fails
if a check cell contains its solution's computation or shows anything of its
own; ``tests/test_notebooks.py`` runs every hidden solution through its check.

:func:`check` and :func:`matches` are the verdict for one value against one
reference, which check_answer prints for each part.

A lecturer grades collected notebooks with ``make grade`` (:mod:`mixlib._grade`):
with ``MIXLIB_RECORD`` set, check_answer also records what it computed in the
grader's own run of the chapter (:mod:`mixlib.exercise._grading`), and each
submission is graded against those records, not against what its check cell
passes in.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mixlib.exercise import _grading
from mixlib.exercise._check import CORRECT, MISSING, WRONG, check, matches

__all__ = ["CORRECT", "MISSING", "WRONG", "Part", "Verdict", "check", "check_answer", "exercises", "matches", "reference"]


class Verdict:
    """What :func:`check_answer` returns: true when every part is correct.

    It shows nothing as a cell's last value (the verdict is already printed),
    so a check cell ends with the call and no ``True``/``False`` line.
    """

    __slots__ = ("ok",)

    def __init__(self, ok: bool) -> None:
        self.ok = bool(ok)

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return f"Verdict({self.ok})"

    def _ipython_display_(self) -> None:
        pass


@dataclass(frozen=True)
class Part:
    """One answer of an exercise: its name ("" when the exercise has one), hint and tolerance."""

    name: str = ""
    hint: str = ""
    rtol: float = 1e-3
    atol: float = 1e-6


@dataclass(frozen=True)
class _Exercise:
    label: str
    parts: tuple[Part, ...]
    func: Callable[..., Any]
    judge: bool
    one_answer: bool
    needs: tuple[str, ...]
    optional: tuple[str, ...]


_EXERCISES: dict[str, _Exercise] = {}


def reference(
    label: str, *parts: Part, judge: bool = False, one_answer: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the reference computation of exercise ``label``.

    The decorated function takes the chapter's data as keyword arguments. It
    returns the expected value (one part) or a dict part name → expected
    value. With ``judge=True`` it takes the answers first (a dict part name →
    the student's value, ``None`` when unanswered) and returns part name →
    ``(given, expected)``: for answers that must be run or tested before they
    can be compared (a function the student wrote, a vector with a property).
    With ``one_answer=True`` the student gives one answer (say, a function)
    that the judge tests for every part.
    """
    if not parts:
        parts = (Part(),)
    names = [p.name for p in parts]
    if len(set(names)) != len(names) or (len(parts) > 1 and "" in names):
        raise ValueError(f"{label}: parts need distinct, non-empty names when there are several; got {names}")

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        if label in _EXERCISES:
            raise ValueError(f"exercise {label!r} is registered twice")
        params = list(inspect.signature(func).parameters.values())[1 if judge else 0:]
        needs = tuple(p.name for p in params if p.default is inspect.Parameter.empty)
        optional = tuple(p.name for p in params if p.default is not inspect.Parameter.empty)
        _EXERCISES[label] = _Exercise(label, tuple(parts), func, judge, one_answer, needs, optional)
        return func

    return register


def exercises() -> dict[str, tuple[str, ...]]:
    """Every registered exercise: label → the names of its parts (``("",)`` for a single answer)."""
    return {label: tuple(p.name for p in ex.parts) for label, ex in sorted(_EXERCISES.items())}


def _answers(ex: _Exercise, answer: Any) -> dict[str, Any]:
    names = [p.name for p in ex.parts]
    if len(names) == 1 or ex.one_answer:
        return dict.fromkeys(names, answer)
    if not isinstance(answer, Mapping) or set(answer) != set(names):
        got = sorted(answer) if isinstance(answer, Mapping) else type(answer).__name__
        want = ", ".join(f'"{n}": …' for n in names)
        raise TypeError(f"{ex.label} has {len(names)} answers; pass a dict {{{want}}} (got {got}).")
    return dict(answer)


def check_answer(label: str, answer: Any, /, **data: Any) -> Verdict:
    """Print the verdict for each part of exercise ``label``'s answer.

    Parameters
    ----------
    label : str
        The exercise label, e.g. ``"ex-10-3"``.
    answer : Any
        The student's answer (``None`` while unanswered), or a dict part name
        → answer for an exercise with several parts.
    **data
        The chapter's variables the reference is computed from (a missing
        or misnamed one is a TypeError that names what the check needs).

    Returns
    -------
    Verdict
        True (as a bool) when every part is correct; shows nothing in a notebook.

    Raises
    ------
    ValueError
        For an unknown label.
    TypeError
        When a part is missing from the dict, or the chapter data the
        reference needs are missing or misnamed.
    """
    ex = _EXERCISES.get(label)
    if ex is None:
        raise ValueError(f"no exercise {label!r} has a registered check; known: {', '.join(sorted(_EXERCISES))}.")
    answers = _answers(ex, answer)
    missing = [n for n in ex.needs if n not in data]
    unknown = [n for n in data if n not in ex.needs and n not in ex.optional]
    if missing or unknown:
        what = "; ".join(
            s for s in (
                missing and "needs the chapter's " + ", ".join(f"{n}={n}" for n in missing),
                unknown and "does not take " + ", ".join(unknown),
            ) if s
        )
        raise TypeError(f"check_answer({label!r}) {what} (run the chapter's cells above first).")

    def name_of(part: Part) -> str:  # "ex-01-2 (a) 生のコサイン", not "ex-01-2 ((a) 生のコサイン)"
        if not part.name:
            return label
        return f"{label} {part.name}" if part.name.startswith("(") else f"{label} ({part.name})"

    if all(v is None for v in answers.values()):
        for part in ex.parts:
            check(None, None, name=name_of(part))
        return Verdict(False)
    if ex.judge:
        pairs = ex.func(answers, **data)
        expected = None
    else:
        expected = ex.func(**data)
        expected = expected if len(ex.parts) > 1 else {ex.parts[0].name: expected}
        pairs = {n: (answers[n], expected[n]) for n in answers}
    if os.environ.get(_grading.RECORD_ENV):  # the grader's own run of the chapter (make grade)
        _grading.record(label, expected=expected, data=data)
    ok = True
    for part in ex.parts:
        given, expected = pairs[part.name]
        ok &= check(given, expected, name=name_of(part), hint=part.hint, rtol=part.rtol, atol=part.atol)
    return Verdict(ok)


# Registers the references of every chapter (imported last: they use `reference` and `Part`).
from mixlib.exercise import part0, part1, part2, part3, part4, part5  # noqa: E402,F401
