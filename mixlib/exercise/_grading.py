"""Grading the exercises of a submitted notebook (``make grade``): what runs inside the grading kernel.

The grader first runs the chapter itself, with the reference solutions, and records what each check cell
computes (:func:`record`, switched on by the environment variable ``MIXLIB_RECORD``): the expected value of
every part, and a fingerprint of the chapter's data the check used. A submission is then graded right after
each of its check cells by :func:`assert_part`, which reads the student's answer from the kernel with the
*original* check cell's expression and compares it with the recorded value. What a student's check cell passes
to ``check_answer`` plays no part: a cell edited to pass other data earns nothing. An exercise whose answer must
be run to be judged (a function the student wrote) is judged with the kernel's data only when their fingerprint
is the grader's run's.

A failed part raises :class:`AssertionError` with the part's hint, never the expected value.
Values are stored as JSON (no pickle), with arrays, tuples, sets and dicts tagged.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
from collections.abc import Mapping, Set
from typing import Any

import numpy as np

__all__ = ["GradingError", "assert_part", "decode", "encode", "fingerprint", "judge_part", "record", "same_fingerprint", "self_test"]

#: the environment variable that makes check_answer record what it computed (a JSON-lines file)
RECORD_ENV = "MIXLIB_RECORD"
#: where each graded part's outcome is appended while a submission runs (read by ``make grade``)
SCORES_ENV = "MIXLIB_GRADE_SCORES"
_DEPTH = 3  # how deep a fingerprint looks into an object's attributes
_MAX_ITEMS = 64  # the items of a long list or dict that a fingerprint summarises one by one


class GradingError(AssertionError):
    """A part earns nothing; the message is for the student (a hint or what went wrong), never the answer."""


def _array(x: Any) -> np.ndarray | None:
    if hasattr(x, "detach") and hasattr(x, "numpy"):  # a torch tensor
        return x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        return x
    return None


def encode(value: Any) -> Any:
    """A JSON-able form of an expected value (:func:`decode` gives it back)."""
    arr = _array(value)
    if arr is not None:
        return {"__ndarray__": arr.tolist(), "dtype": str(arr.dtype)}
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, (Set, frozenset)):
        return {"__set__": [encode(v) for v in sorted(value, key=repr)]}
    if isinstance(value, Mapping):
        return {"__dict__": [[encode(k), encode(v)] for k, v in value.items()]}
    raise TypeError(f"an expected value of type {type(value).__name__} cannot be stored for grading")


def decode(value: Any) -> Any:
    """The value :func:`encode` stored (arrays come back as numpy arrays)."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        if "__ndarray__" in value:
            return np.asarray(value["__ndarray__"], dtype=value["dtype"])
        if "__tuple__" in value:
            return tuple(decode(v) for v in value["__tuple__"])
        if "__set__" in value:
            return {_hashable(decode(v)) for v in value["__set__"]}
        if "__dict__" in value:
            return {_hashable(decode(k)): decode(v) for k, v in value["__dict__"]}
    return value


def _hashable(v: Any) -> Any:
    return tuple(_hashable(x) for x in v) if isinstance(v, list) else v


def fingerprint(obj: Any, depth: int = _DEPTH) -> Any:
    """A JSON-able summary of the chapter's data that changes when the data do (shape, sums, values, lengths).

    Numbers are compared with a tolerance by :func:`same_fingerprint`, so a rerun on other threads still matches.
    """
    arr = _array(obj)
    if arr is None and type(obj).__module__.startswith("pandas"):
        arr = obj.to_numpy() if hasattr(obj, "to_numpy") else None
        if arr is not None and arr.dtype == object:
            return {"pandas": [fingerprint(v, depth - 1) for v in arr.ravel()[:_MAX_ITEMS].tolist()], "shape": list(arr.shape)}
    if arr is not None:
        if arr.dtype.kind in "biuf":
            a = arr.astype(np.float64).ravel()
            a = np.where(np.isfinite(a), a, 0.0)
            w = np.cos(np.arange(a.size) * 0.618)  # a fixed weighting: a permutation of the values changes it
            return {"array": list(arr.shape), "sum": float(a.sum()), "abs": float(np.abs(a).sum()), "w": float(a @ w)}
        return {"array": list(arr.shape), "values": [str(v) for v in arr.ravel()[:_MAX_ITEMS]]}
    if isinstance(obj, np.generic):
        obj = obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if depth <= 0:
        return {"type": type(obj).__name__}
    if isinstance(obj, (list, tuple)):
        return {"len": len(obj), "items": [fingerprint(v, depth - 1) for v in obj[:_MAX_ITEMS]]}
    if isinstance(obj, (Set, frozenset)):
        return {"len": len(obj), "items": sorted(repr(v) for v in obj)[:_MAX_ITEMS]}
    if isinstance(obj, Mapping):
        keys = list(obj)[:_MAX_ITEMS]
        return {"len": len(obj), "items": {repr(k): fingerprint(obj[k], depth - 1) for k in keys}}
    if hasattr(obj, "state_dict") and callable(obj.state_dict):  # a torch module: its weights
        return {"module": type(obj).__name__, "state": {k: fingerprint(v, 1) for k, v in obj.state_dict().items()}}
    if hasattr(obj, "get_vocab") and hasattr(obj, "convert_tokens_to_ids"):  # a tokenizer
        return {"tokenizer": type(obj).__name__, "vocab": len(obj.get_vocab())}
    if callable(obj):
        return {"callable": getattr(obj, "__qualname__", type(obj).__name__)}
    fields = {k: v for k, v in vars(obj).items() if not k.startswith("_")} if hasattr(obj, "__dict__") else {}
    return {"type": type(obj).__name__, "fields": {k: fingerprint(v, depth - 1) for k, v in sorted(fields.items())}}


def same_fingerprint(a: Any, b: Any, rtol: float = 1e-4) -> bool:
    """Whether two fingerprints describe the same data (floats within ``rtol``, relative to the array's size)."""
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or isinstance(a, bool) or isinstance(b, bool):
            return False
        return math.isclose(a, b, rel_tol=rtol, abs_tol=1e-6)
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return False
        if "array" in a and "sum" in a:  # sums of many values: compare on the scale of their absolute sum
            scale = max(abs(a["abs"]), abs(b["abs"]), 1e-12)
            return a["array"] == b["array"] and all(abs(a[k] - b[k]) <= rtol * scale + 1e-9 for k in ("sum", "abs", "w"))
        return all(same_fingerprint(a[k], b[k], rtol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_fingerprint(x, y, rtol) for x, y in zip(a, b))
    return a == b


def _append(env_name: str, entry: Any) -> None:
    """Append ``entry`` as a JSON line to the file the environment variable ``env_name`` names (if it does)."""
    path = os.environ.get(env_name)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry() if callable(entry) else entry, ensure_ascii=False) + "\n")


def record(label: str, *, expected: Mapping[str, Any] | None, data: Mapping[str, Any]) -> None:
    """In the grader's own run of the chapter: append what a check computed to the file ``$MIXLIB_RECORD``."""
    _append(RECORD_ENV, lambda: {  # computed only when recording
        "label": label,
        "expected": None if expected is None else {k: encode(v) for k, v in expected.items()},
        "data": {k: fingerprint(v) for k, v in data.items()},
    })


def record_model(name: str, source: str) -> None:
    """In the grader's own run: note a model the chapter loaded (the grading command names it)."""
    _append(RECORD_ENV, {"model": name, "source": source})


def assert_part(spec: Mapping[str, Any], part: str, env: Mapping[str, Any]) -> None:
    """Grade one part of an exercise (:func:`judge_part`) and append the outcome to ``$MIXLIB_GRADE_SCORES``.

    The grading command reads that file as well as otter's results: a run that is cut by its time limit keeps
    the points of the exercises graded before.
    """
    try:
        judge_part(spec, part, env)
    except GradingError as err:
        _score(spec["label"], part, False, str(err))
        raise
    except Exception as err:  # noqa: BLE001
        _score(spec["label"], part, False, f"採点できなかった（{type(err).__name__}）")
        raise GradingError(f"採点できなかった（{type(err).__name__}）") from None
    _score(spec["label"], part, True, "")


def _score(label: str, part: str, passed: bool, message: str) -> None:
    _append(SCORES_ENV, {"label": label, "part": part, "passed": passed, "message": message})


def judge_part(spec: Mapping[str, Any], part: str, env: Mapping[str, Any]) -> None:
    """Grade one part of an exercise in the kernel's namespace ``env``; raise :class:`GradingError` if it fails.

    ``spec`` is what the autograder stored for the exercise: ``label``, ``answer`` (the check cell's answer
    expression), ``data`` (name → expression), ``own`` (the data names that are the student's own answers),
    ``expected`` (part → encoded value, or None for a judged exercise) and ``fingerprints`` (name → fingerprint).
    """
    from mixlib.exercise import _EXERCISES, _answers, matches

    label = spec["label"]
    ex = _EXERCISES[label]
    p = next(x for x in ex.parts if x.name == part)
    scope = dict(env)
    try:
        answers = _answers(ex, eval(spec["answer"], scope))  # noqa: S307 (the grader's own expression)
    except NameError as err:
        raise GradingError(f"答えの変数がない（{err.name} を消したり名前を変えたりしていないか）") from None
    except TypeError as err:
        raise GradingError(f"答えの形が違う：{err}") from None
    given = answers.get(part)
    if given is None:
        raise GradingError("未回答")
    if not ex.judge:
        expected = decode(spec["expected"][part])
    else:
        data = {}
        for name, expr in spec["data"].items():
            try:
                data[name] = eval(expr, scope)  # noqa: S307
            except Exception as err:  # noqa: BLE001
                raise GradingError(f"章のデータ {expr} がない（{type(err).__name__}）：章のセルを上から実行したか") from None
            if name not in spec["own"] and not same_fingerprint(fingerprint(data[name]), spec["fingerprints"][name]):
                raise GradingError(f"章のデータ {expr} が課題のものと違う：章のセルを書き換えずに解き直す")
        try:
            pairs = ex.func(answers, **data)
            given, expected = pairs[part]
        except Exception as err:  # noqa: BLE001 (the student's function raised inside the judge)
            raise GradingError(f"答えを実行すると {type(err).__name__} になった") from None
    if given is None or not matches(given, expected, rtol=p.rtol, atol=p.atol):
        raise GradingError(f"不正解 — ヒント：{p.hint}" if p.hint else "不正解")


def recorded(label: str, path: str | os.PathLike | None = None) -> dict:
    """The first entry recorded for ``label`` (the check cell's own call) in the record file."""
    path = path or os.environ.get(RECORD_ENV)
    for line in open(path, encoding="utf-8"):
        entry = json.loads(line)
        if entry.get("label") == label:
            return entry
    raise AssertionError(f"{label}: its check cell recorded nothing (did the reference solution reach check_answer?)")


def spec_for(label: str, answer: str, data: Mapping[str, str], own: list[str], entry: Mapping[str, Any]) -> dict:
    """What the autograder stores for an exercise (see :func:`assert_part`)."""
    return {"label": label, "answer": answer, "data": dict(data), "own": list(own),
            "expected": entry["expected"], "fingerprints": entry["data"]}


def self_test(label: str, answer: str, data: Mapping[str, str], own: list[str], student_cell: str, env: dict) -> None:
    """Right after a check cell of the grader's own run: the reference solution must earn every part, and the
    check cell as the student edition has it (``student_cell``, run on a copy of the namespace) none.

    This is how every chapter's grading is tested inside the executions ``make test`` makes anyway
    (``tests/test_notebooks.py``); ``make test-grade`` runs the same through otter on chapter 0.
    """
    from mixlib.exercise import _EXERCISES

    spec = spec_for(label, answer, data, own, recorded(label))
    parts = [p.name for p in _EXERCISES[label].parts]
    for part in parts:
        try:
            judge_part(spec, part, env)
        except GradingError as err:
            raise AssertionError(f"{label} {part}: the reference solution does not earn its point: {err}") from None
    untouched = dict(env)
    with contextlib.redirect_stdout(io.StringIO()):  # its check_answer prints 未回答
        exec(compile(student_cell, f"<{label}: the student edition's check cell>", "exec"), untouched)  # noqa: S102
    for part in parts:
        try:
            judge_part(spec, part, untouched)
        except GradingError:
            continue
        raise AssertionError(f"{label} {part}: the untouched student edition would earn this point")
