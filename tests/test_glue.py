"""mixlib.glue: numbers glued as plain Python types, sentences without quotes, and a no-op where myst-nb is missing (Colab)."""

from __future__ import annotations

import builtins
import importlib
import sys

import numpy as np

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
