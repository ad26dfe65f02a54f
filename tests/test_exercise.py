"""mixlib.exercise: verdicts, and the reference value never appears in what is printed."""

from __future__ import annotations

import numpy as np
import pytest

from mixlib.exercise import check, matches


@pytest.mark.parametrize(
    "answer, reference, expected",
    [
        (0.7071, 2 ** -0.5, True),
        (0.70, 2 ** -0.5, False),
        ([1.0, 2.0], np.array([1.0, 2.0]), True),
        ([1.0, 2.0], [1.0, 2.0, 3.0], False),
        (" queen ", "queen", True),
        ("king", "queen", False),
        (3, "3", False),
        ({"a", "b"}, {"b", "a"}, True),
        (None, 1.0, False),
        (float("nan"), 1.0, False),
        ("not a number", 1.0, False),
    ],
)
def test_matches(answer, reference, expected):
    assert matches(answer, reference) is expected


def test_check_never_prints_the_reference(capsys):
    ref = 0.123456
    assert check(0.5, ref, name="ex", hint="平均を引く") is False
    out = capsys.readouterr().out
    assert "もう一度" in out and "平均を引く" in out
    for shown in ("0.123", "0.12", "1.23"):
        assert shown not in out
    assert check(ref * (1 + 1e-5), ref, name="ex") is True
    assert "正解" in capsys.readouterr().out
    assert check(None, ref) is False
    assert "未回答" in capsys.readouterr().out
