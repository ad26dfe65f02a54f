"""The papers' published numbers, as data, so that a chapter can print "paper vs. ours".

The numbers live in ``mixlib/reference/<name>.json`` with their source (paper,
table or figure, model, data); nothing here is computed. Currently:

``kobayashi2021``
    Analysis A on bert-base-uncased, 992 Wikipedia sequences of Clark et al.
    (2019), 12% masked: the pooled mixing-ratio variants (EMNLP 2021, Table 1)
    and AttnResLn-N per layer and token category (NLP2021, Fig. 2).

All values are percentages, like the tables of :func:`mixlib.mixing_table`
(ratio metrics) and :func:`mixlib.mixing_summary` by default. Layers are
0-based here (the paper's layer 1 is row 0).
"""

from __future__ import annotations

import json
import warnings
from functools import lru_cache
from importlib import resources
from typing import Any

__all__ = ["available", "load_reference", "paper_table", "paper_summary", "compare", "source"]

_DEFAULT = "kobayashi2021"


def available() -> list[str]:
    """Names of the reference data sets shipped with mixlib."""
    folder = resources.files("mixlib") / "reference"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


@lru_cache(maxsize=8)
def _load(name: str) -> str:
    if name not in available():
        raise ValueError(f"no reference data named {name!r}; available: {', '.join(available())}.")
    return (resources.files("mixlib") / "reference" / f"{name}.json").read_text(encoding="utf-8")


def load_reference(name: str = _DEFAULT) -> dict[str, Any]:
    """The raw reference record (a fresh copy of the JSON), sources included."""
    return json.loads(_load(name))


def source(name: str = _DEFAULT) -> dict[str, str]:
    """Where each part of the reference comes from: ``{"summary": ..., "per_layer": ..., "note": ...}``."""
    ref = load_reference(name)
    return {"summary": ref["summary"]["source"], "per_layer": ref["per_layer"]["source"], "note": ref["note"]}


def paper_table(name: str = _DEFAULT, metric: str = "ratio") -> Any:
    """The paper's per-layer table in the shape of :func:`mixlib.mixing_table`.

    Parameters
    ----------
    name : str, default "kobayashi2021"
    metric : str, default "ratio"
        Only the metric the paper reports per layer (AttnResLn-N, ``"ratio"``).

    Returns
    -------
    pandas.DataFrame
        Index ``layer`` (0-based), columns ``全体`` then
        :data:`mixlib.plots.CATEGORY_ORDER`, in percent; NaN for the
        categories whose numbers are not recorded (句読点, その他).
    """
    import pandas as pd

    from .data import category_names
    from .mixing import OVERALL

    ref = load_reference(name)
    per_layer = ref["per_layer"]
    if metric != per_layer["metric"]:
        raise ValueError(f"the reference {name!r} has per-layer numbers for metric={per_layer['metric']!r} only; got {metric!r}.")
    columns = [OVERALL, *category_names()]
    data = per_layer["columns"]
    n = len(next(iter(data.values())))
    df = pd.DataFrame({c: [float(v) for v in data[c]] if c in data else [float("nan")] * n for c in columns}, index=pd.Index(range(n), name="layer"))
    df.columns.name = "category"
    return df


def paper_summary(name: str = _DEFAULT) -> Any:
    """The paper's pooled Table 1 in the shape of :func:`mixlib.mixing_summary` (percent; NaN where not recorded)."""
    import pandas as pd

    from .mixing import RATIO_METRICS, SUMMARY_ROWS

    rows = load_reference(name)["summary"]["rows"]
    index = [RATIO_METRICS[r] for r in SUMMARY_ROWS]
    df = pd.DataFrame(
        {stat: [float(rows.get(v, {}).get(stat, float("nan"))) for v in index] for stat in ("mean", "max", "min")},
        index=pd.Index(index, name="variant"),
    )
    return df


def compare(ours: Any, paper: Any) -> Any:
    """Paper vs. ours side by side, with the difference (ours - paper).

    Parameters
    ----------
    ours, paper : pandas.DataFrame
        Tables of the same kind and unit, e.g. ``mixing_table(m)`` and
        :func:`paper_table`, or ``mixing_summary(m)`` and :func:`paper_summary`.

    Returns
    -------
    pandas.DataFrame
        Rows common to both tables; for every column the paper fills, three
        columns ``(column, "paper")``, ``(column, "ours")``, ``(column, "diff")``.

    Raises
    ------
    ValueError
        The tables share no row, or no column with numbers in ``paper``.
    """
    import numpy as np
    import pandas as pd

    rows = [r for r in paper.index if r in ours.index]
    if not rows:
        raise ValueError(f"the tables share no row: ours has {list(ours.index)}, the paper {list(paper.index)}.")
    cols = [c for c in paper.columns if c in ours.columns and paper[c].notna().any()]
    if not cols:
        raise ValueError(f"no column of the paper's table is in ours: {list(paper.columns)} vs {list(ours.columns)}.")
    if len(rows) != len(paper.index) or len(rows) != len(ours.index):
        warnings.warn(
            f"comparing only the {len(rows)} rows both tables have (ours: {len(ours.index)}, paper: {len(paper.index)}); "
            "a model with another number of layers is not directly comparable layer by layer.",
            UserWarning,
            stacklevel=2,
        )
    p = paper.loc[rows, cols].astype(float)
    o = ours.loc[rows, cols].astype(float)
    # a fraction table against a percent table is the easiest mistake to make here
    if np.nanmax(np.abs(o.to_numpy())) <= 1.0 < np.nanmax(np.abs(p.to_numpy())):
        warnings.warn("ours looks like fractions while the paper is in percent; use mixing_table(..., percent=True).", UserWarning, stacklevel=2)
    parts = {}
    for c in cols:
        parts[(c, "paper")] = p[c]
        parts[(c, "ours")] = o[c]
        parts[(c, "diff")] = o[c] - p[c]
    out = pd.DataFrame(parts)
    out.columns = pd.MultiIndex.from_tuples(out.columns, names=[paper.columns.name or "column", "source"])
    out.index.name = paper.index.name
    return out
