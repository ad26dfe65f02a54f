"""The papers' published numbers, as data, so that a chapter can print "paper vs. ours".

The numbers live in ``mixlib/reference/<name>.json`` with their source (paper,
table or figure, model, data); nothing here is computed. Currently:

``kobayashi2021``
    Analysis A on bert-base-uncased, 992 Wikipedia sequences of Clark et al.
    (2019), 12% masked: the pooled mixing-ratio variants, mean/max/min (EMNLP
    2021, Table 1, as the authors' code prints it; roberta-base too) and
    AttnResLn-N per layer and token category (NLP2021, Fig. 2).
``maeda2024``
    Maeda et al. (NLP2024) on bert-base-uncased: the cluster examples
    (Table 1), the top clusters of three heads (Table 2), the clusters per
    type (Table 3), the upper clustering of appendix A, the reading of Fig. 3
    and the word/position numbers of appendix B ([CLS] x position 0 = 0.99).
    Read with :func:`maeda_table1`, :func:`maeda_table2`, :func:`maeda_table3`,
    :func:`paper_value` and :func:`paper_claims`.

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

__all__ = [
    "available", "load_reference", "paper_table", "paper_summary", "compare", "source",
    "paper_value", "paper_claims", "maeda_table1", "maeda_table2", "maeda_table3",
]

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
    """Where each part of the reference comes from: ``{part: source, ..., "note": ...}``.

    For ``kobayashi2021`` the parts are ``"summary"`` and ``"per_layer"``; for
    other records every section that names a source (e.g. ``"table2"``).
    """
    ref = load_reference(name)
    out = {k: v["source"] for k, v in ref.items() if isinstance(v, dict) and "source" in v}
    out["note"] = ref["note"]
    return out


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


def paper_summary(name: str = _DEFAULT, model: str | None = None) -> Any:
    """The paper's pooled Table 1 in the shape of :func:`mixlib.mixing_summary` (percent; NaN where not recorded).

    Parameters
    ----------
    name : str, default "kobayashi2021"
    model : str, optional
        The record's model (default; bert-base-uncased) or one of its
        ``other_models`` (``"roberta-base"``).
    """
    import pandas as pd

    from .mixing import RATIO_METRICS, SUMMARY_ROWS

    ref = load_reference(name)
    summary = ref["summary"]
    if model is None or model == ref["model"]:
        rows = summary["rows"]
    elif model in summary.get("other_models", {}):
        rows = summary["other_models"][model]["rows"]
    else:
        known = [ref["model"], *summary.get("other_models", {})]
        raise ValueError(f"the reference {name!r} has Table 1 for {', '.join(known)}; got model={model!r}.")
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


# --- Maeda et al. (2024) and other records with named values -------------------------------------


def paper_value(key: str, name: str = "maeda2024", *, with_source: bool = False) -> Any:
    """One published number, by ``"section.key"`` (e.g. ``"positional.cls_pos0_cos"``).

    Parameters
    ----------
    key : str
        ``"<section>.<value>"`` where ``<section>`` is a part of the record that
        holds a ``"values"`` mapping: for ``maeda2024`` ``"setup"`` (n_layers,
        n_heads, d_model, d_head, vocab_size, k, k_upper), ``"upper"``
        (k_upper, upper_mostly_words, upper_non_words, words_clusters_100plus)
        and ``"positional"`` (cls_pos0_cos, n_positions, n_words).
    name : str, default "maeda2024"
    with_source : bool, default False
        Return ``(value, source)`` instead of the value alone.

    Raises
    ------
    ValueError
        ``key`` is not ``section.value`` or names nothing in the record; the
        message lists what exists.
    """
    ref = load_reference(name)
    sections = {k: v for k, v in ref.items() if isinstance(v, dict) and isinstance(v.get("values"), dict)}
    known = [f"{s}.{k}" for s, v in sections.items() for k in v["values"]]
    section, _, item = str(key).partition(".")
    if section not in sections or item not in sections[section]["values"]:
        raise ValueError(f"{name!r} has no value {key!r}; known values: {', '.join(known) or '(none)'}.")
    value = sections[section]["values"][item]
    return (value, sections[section]["source"]) if with_source else value


def paper_claims(section: str, name: str = "maeda2024", *, lang: str = "ja") -> dict[str, str]:
    """The paper's qualitative statements of one section (e.g. ``"figure3"``, ``"positional"``), as ``{what: claim}``.

    ``lang="ja"`` (the default, for the chapters) gives them in Japanese, with the paper's hedging;
    ``lang="en"`` in English.
    """
    if lang not in ("ja", "en"):
        raise ValueError(f"lang={lang!r}; use 'ja' or 'en'.")
    ref = load_reference(name)
    part = ref.get(section)
    key = "claims_ja" if lang == "ja" else "claims"
    if not isinstance(part, dict) or not isinstance(part.get(key), dict):
        have = [k for k, v in ref.items() if isinstance(v, dict) and key in v]
        raise ValueError(f"{name!r} has no claims under {section!r}; sections with claims: {', '.join(have) or '(none)'}.")
    return dict(part[key])


def maeda_table1() -> Any:
    """Maeda et al.'s Table 1 (cluster examples, bert-base-uncased, k = 1000).

    Returns
    -------
    pandas.DataFrame
        Columns ``type``, ``cluster`` (the paper's id), ``tokens`` (the
        printed examples, comma-separated). The paper prints one label
        "Special Tags" for its last two rows; they are ``Special`` ([PAD],
        [unused...]) and ``Tags`` ([CLS], [MASK]) here, as in its Table 3.
    """
    import pandas as pd

    part = load_reference("maeda2024")["table1"]
    return pd.DataFrame([{"type": t, "cluster": int(c), "tokens": ", ".join(toks)} for t, c, toks in part["rows"]])


def maeda_table2() -> Any:
    """Maeda et al.'s Table 2: the five clusters with the largest psi_qkv in L3-H2, L3-H11 and L4-H6.

    Returns
    -------
    pandas.DataFrame
        Columns ``head`` (the paper's label), ``layer``, ``head_index``
        (0-based, see the record's ``"indexing"`` note), ``feature`` (what the
        paper says the head selects), ``cluster`` (the paper's id),
        ``tokens`` (printed examples, comma-separated) and ``psi_qkv``.
    """
    import pandas as pd

    part = load_reference("maeda2024")["table2"]
    rows = [dict(zip(part["columns"], r)) for r in part["rows"]]
    for r in rows:
        r["tokens"] = ", ".join(r["tokens"])
        r["psi_qkv"] = float(r["psi_qkv"])
    return pd.DataFrame(rows, columns=part["columns"])


def maeda_table3() -> Any:
    """Maeda et al.'s Table 3 in the shape of :func:`mixlib.cluster_summary` (indexed by type).

    Returns
    -------
    pandas.DataFrame
        Index ``type`` (Words, Subwords, Symbols, Numbers, Special, Tags,
        Total), columns ``n_clusters``, ``n_tokens``, ``tokens_per_cluster``,
        ``mean_norm``, ``mean_dist``. Types were assigned to whole clusters by
        hand in the paper.
    """
    import pandas as pd

    part = load_reference("maeda2024")["table3"]
    df = pd.DataFrame.from_dict(part["rows"], orient="index", columns=part["columns"])
    df.index.name = "type"
    return df.astype({"n_clusters": int, "n_tokens": int})
