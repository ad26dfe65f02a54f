"""mixlib.glue: numbers glued as plain Python types, sentences without quotes, and a no-op where myst-nb is missing (Colab)."""

from __future__ import annotations

import builtins
import importlib
import sys

import numpy as np
import pytest

import mixlib.glue


def test_g_glues_plain_numbers(monkeypatch):
    seen = []
    monkeypatch.setattr(mixlib.glue, "glue", lambda name, value, display=True: seen.append((name, value, display)))
    assert mixlib.glue.g("n", np.int64(3)) == 3 and mixlib.glue.g("x", np.float32(0.5)) == 0.5
    assert [(n, type(v), d) for n, v, d in seen] == [("n", int, False), ("x", float, False)]
    assert repr(mixlib.glue.Text("平均は 0.3")) == "平均は 0.3"


def test_without_myst_nb_glue_does_nothing(monkeypatch):
    real_import = builtins.__import__

    def no_myst(name, *args, **kwargs):
        if name == "myst_nb" or name.startswith("myst_nb."):
            raise ImportError("no myst_nb here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_myst)
    monkeypatch.delitem(sys.modules, "myst_nb", raising=False)
    try:
        mod = importlib.reload(mixlib.glue)
        assert mod.glue.__module__ == "mixlib.glue" and mod.glue("a", 1.0, display=False) is None
        assert mod.g("a", np.float64(2.0)) == 2.0
    finally:
        monkeypatch.undo()
        importlib.reload(mixlib.glue)


# -- the Colab edition: values kept for prose(), formatted as myst-nb's {glue:text} formats them ----------------

VALUES = [0.123456, 1234.5, -0.5, 3, 0, np.float64(2.5e-7), 12345678, "12,345", "含む", mixlib.glue.Text("左右どちらも読まれている"),
          mixlib.glue.Text("1.25"), True, 0.049999]
SPECS = [None, ".2f", ".3f", ".0%", ".1%", "+.1f", ",", "d", ".2e", ".3g", "s", ""]


def _myst_text(value, spec):
    """What the site shows: myst-nb's own glue (its display data) and its own {glue:text} formatter."""
    from IPython.core.formatters import format_display_data
    from myst_nb.core.variables import format_plain_text

    plain = format_display_data(value)[0]["text/plain"]
    return format_plain_text(plain, "s" if spec is None else spec)


def test_format_value_equals_myst_nb():
    import pytest

    pytest.importorskip("myst_nb")
    compared = 0
    for value in VALUES:
        for spec in SPECS:
            try:
                expected = _myst_text(value, spec)
            except (ValueError, TypeError):  # a spec the value cannot take: the site's build warns and fails
                with pytest.raises((ValueError, TypeError)):
                    mixlib.glue.format_value(mixlib.glue._plain_text(value), spec)
                continue
            assert mixlib.glue.format_value(mixlib.glue._plain_text(value), spec) == expected, (value, spec)
            compared += 1
    assert compared > 60


def test_glue_keeps_every_value_for_prose(monkeypatch):
    monkeypatch.setattr(mixlib.glue, "VALUES", {})
    monkeypatch.setattr(mixlib.glue, "_myst_glue", None)  # as on Colab
    mixlib.glue.g("n", np.int64(12))
    mixlib.glue.g("share", np.float32(0.25))
    mixlib.glue.glue("verdict", mixlib.glue.Text("含む"), display=False)
    mixlib.glue.glue("count", f"{12345:,}", display=False)
    assert mixlib.glue.VALUES == {"n": "12", "share": "0.25", "verdict": "含む", "count": "'12,345'"}
    text, shown, missing = mixlib.glue.render("文は {{n}} 個、割合 {{share:.0%}}（{{count}}）で、区間は 1/2 を{{verdict}}。$x_{i}$ と {{later:.2f}}")
    assert text == f"文は 12 個、割合 25%（12,345）で、区間は 1/2 を含む。$x_{{i}}$ と {mixlib.glue.MISSING.format(key='later')}"
    assert shown == {"n": "12", "share:.0%": "25%", "count": "12,345", "verdict": "含む"} and missing == ["later"]
    # a value of another type than its spec expects (a sentence where the site formats a number) stops nothing
    assert mixlib.glue.render("{{verdict:.2f}}")[0] == "含む"


class _Handle:
    def __init__(self, log):
        self.log = log

    def update(self, obj, metadata=None):
        self.log.append(("update", obj.data, metadata))


def test_prose_shows_markdown_with_its_values_and_fills_in_a_later_one(monkeypatch):
    from IPython.display import Markdown

    log = []

    def display(obj, metadata=None, display_id=None):
        assert isinstance(obj, Markdown)
        log.append(("display", obj.data, metadata))
        return _Handle(log) if display_id else None

    monkeypatch.setattr("IPython.display.display", display)
    monkeypatch.setattr(mixlib.glue, "VALUES", {"x": "0.5"})
    monkeypatch.setattr(mixlib.glue, "_myst_glue", None)
    monkeypatch.setattr(mixlib.glue, "_PENDING", [])
    mixlib.glue.prose("値は **{{x:.1f}}**。")
    mixlib.glue.prose("値は {{x:.1f}} と {{y}}（次のセルが数える）。")
    missing = mixlib.glue.MISSING.format(key="y")
    assert log == [("display", "値は **0.5**。", {"mixbook": {"shown": {"x:.1f": "0.5"}, "missing": []}}),
                   ("display", f"値は 0.5 と **{missing}**（次のセルが数える）。",
                    {"mixbook": {"shown": {"x:.1f": "0.5"}, "missing": ["y"]}})]
    mixlib.glue.g("z", 1)  # not in the paragraph: nothing shown again
    assert len(log) == 2
    mixlib.glue.g("y", 7)  # the next cell: the paragraph is shown again, in place, complete
    assert log[2] == ("update", "値は 0.5 と 7（次のセルが数える）。", {"mixbook": {"shown": {"x:.1f": "0.5", "y": "7"}, "missing": []}})
    assert mixlib.glue._PENDING == []
    # a value the edition knows a later cell computes says so (not "run the cells above"), and fills in the same way
    mixlib.glue.prose("{{x:.1f}} と {{w}} と {{v}}。", later=("w",))
    later, missing = mixlib.glue.LATER.format(key="w"), mixlib.glue.MISSING.format(key="v")
    assert log[3] == ("display", f"0.5 と **{later}** と **{missing}**。", {"mixbook": {"shown": {"x:.1f": "0.5"}, "missing": ["w", "v"]}})
    mixlib.glue.g("w", 2)
    assert log[4] == ("update", f"0.5 と 2 と **{missing}**。", {"mixbook": {"shown": {"x:.1f": "0.5", "w": "2"}, "missing": ["v"]}})
    assert "このあとのセル" in later and "上のセル" in missing


def test_sentence_glues_text_without_quotes(monkeypatch):
    from mixlib import glue as G

    got = {}
    monkeypatch.setattr(G, "_myst_glue", lambda name, value, display=True: got.setdefault(name, (repr(value), display)))
    assert G.sentence("verdict", "論文の値に近く、再現した") is None  # a cell ending with it prints nothing
    assert got["verdict"] == ("論文の値に近く、再現した", False) and G.VALUES["verdict"] == "論文の値に近く、再現した"
    with pytest.raises(TypeError, match="takes a str"):
        G.sentence("x", 0.5)
