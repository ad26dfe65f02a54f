"""The verdict of one answer against one reference: 正解 / もう一度 / 未回答.

:func:`check` prints the verdict and the hint, never the reference value.
The chapters call it through :func:`mixlib.exercise.check_answer`, which
computes the reference out of the student's sight.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

import numpy as np

__all__ = ["check", "matches"]

CORRECT = "正解"
WRONG = "もう一度"
MISSING = "未回答"


def _as_array(x: Any) -> np.ndarray | None:
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        return None
    return a


def matches(answer: Any, reference: Any, *, rtol: float = 1e-3, atol: float = 1e-6) -> bool:
    """Whether ``answer`` equals ``reference`` within the tolerance.

    Numbers and array-likes are compared elementwise with ``numpy.isclose``
    (shapes must agree); strings exactly after stripping surrounding spaces;
    sets and mappings by equality; anything else with ``==``.

    Parameters
    ----------
    answer, reference : Any
        The student's answer and the value computed from the chapter's data.
    rtol, atol : float
        Relative and absolute tolerance for numbers.

    Returns
    -------
    bool

    Examples
    --------
    >>> matches(0.7071, 2 ** -0.5)
    True
    >>> matches([1, 2], [1, 2, 3])
    False
    """
    if answer is None:
        return False
    if isinstance(reference, str) or isinstance(answer, str):
        return isinstance(answer, str) and isinstance(reference, str) and answer.strip() == reference.strip()
    if isinstance(reference, (Set, Mapping)):
        return answer == reference
    a, r = _as_array(answer), _as_array(reference)
    if a is None or r is None:
        return bool(answer == reference)
    if a.shape != r.shape or not np.all(np.isfinite(a)):
        return False
    return bool(np.all(np.isclose(a, r, rtol=rtol, atol=atol)))


def check(answer: Any, reference: Any, *, name: str = "", hint: str = "", rtol: float = 1e-3, atol: float = 1e-6) -> bool:
    """Print 正解 / もう一度 (with ``hint``) / 未回答 for one exercise answer.

    The reference value is never printed, so running the check does not give
    the answer away.

    Parameters
    ----------
    answer : Any
        The student's answer; ``None`` means not answered yet.
    reference : Any
        The expected value (:func:`mixlib.exercise.check_answer` computes it out of the cell).
    name : str
        The exercise label, e.g. ``"ex-01-2 (a)"``; printed before the verdict.
    hint : str
        Shown after もう一度: what to look at again, not the answer.
    rtol, atol : float
        Tolerances passed to :func:`matches`.

    Returns
    -------
    bool
        True when the answer is correct.
    """
    prefix = f"{name}: " if name else ""
    if answer is None:
        print(f"{prefix}{MISSING}（答えを入れてから、このセルを実行し直す）")
        return False
    if matches(answer, reference, rtol=rtol, atol=atol):
        print(f"{prefix}{CORRECT}")
        return True
    print(f"{prefix}{WRONG}" + (f" — ヒント：{hint}" if hint else ""))
    return False
