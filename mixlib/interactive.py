"""Figures that move without a kernel: Vega-Lite charts (through Altair) over data computed here.

A reader of the rendered book has no Python kernel, so an ipywidgets explorer
shows dead controls there. The builders below compute every state a student
would want to see (each example x each layer x ...) with :mod:`mixlib` when the
chapter executes, embed those numbers in one Vega-Lite specification, and turn
the explorer's choices into chart parameters bound to dropdowns, sliders and
checkboxes. The same chart object renders

* in Jupyter and Colab, through Altair's own display (the Vega-Lite mime type);
* on the static site, through :class:`mixlib._mystnb.VegaLiteMime` and the
  site's own copy of vega / vega-lite / vega-embed (``make vendor``; no CDN).

What truly needs a kernel (a sentence the reader types) stays an ipywidget
(:mod:`mixlib.widgets`); on the site such a cell, tagged ``needs-kernel``, shows
one line that says it runs in Colab / Jupyter.

Each builder returns a :class:`Figure` (an Altair chart that displays in all
three places); :func:`chart_datasets` gives back the
embedded data, so tests can compare it with :mod:`mixlib`'s own results.

* :func:`mixing_chart` -- chapter 10: per token, what is mixed and what is kept,
  for every example sentence, layer and masking choice.
* :func:`context_chart` -- chapter 10: where one token takes its information
  from, by four measures, for every example, layer and receiving token.
* :func:`fill_mask_chart` -- chapter 8: each model's top fill-ins for a list of sentences with ``[MASK]``.
* :func:`head_chart` -- chapter 11: the clusters each head stretches most.
* :func:`token_chart` -- chapter 11: one token's psi in every head, for a list of tokens.
* :func:`position_head_chart` -- chapter 12: the attention the position
  embeddings alone produce, for every layer, head and LayerNorm setting.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "NEEDS_KERNEL_TAG",
    "Figure",
    "chart_datasets",
    "token_key",
    "split_token_key",
    "mixing_chart",
    "mixing_state",
    "context_chart",
    "context_state",
    "position_head_chart",
    "position_head_state",
    "head_chart",
    "head_state",
    "TOKEN_CHOICES",
    "token_chart",
    "token_state",
    "fill_mask_chart",
    "fill_mask_state",
    "vector_pair_chart",
    "vector_pair_state",
    "ranking_chart",
    "ranking_state",
]

#: Cell tag: the cell's widget needs a running kernel; the site shows a one-line note instead.
NEEDS_KERNEL_TAG = "needs-kernel"
#: Width of one token's column in pixels, at most (a longer sequence gets narrower columns, see :func:`_token_step`).
STEP = 12
#: :func:`position_head_chart` names no heaviest offset when the profile's maximum is below this multiple of uniform (1/n).
FLAT_PROFILE = 1.25
#: Width of one token's column in pixels, at least: its label, turned upright, stays :data:`LABEL_PX` tall and apart from
#: its neighbours' (a sequence longer than ``TOKEN_AXIS_WIDTH / MIN_STEP`` tokens makes the chart wider than the column).
MIN_STEP = 9
#: Smallest text a chart draws, in pixels: :data:`mixlib.plots.MIN_TEXT_PX`, the limit the book's figures are held to
#: (the site check measures every chart's text against it); kept here so that charts need no matplotlib.
LABEL_PX = 10
#: Width in pixels that a token axis may take: the book's text column (about 690 px) less the y axes.
TOKEN_AXIS_WIDTH = 560
#: Separator inside a token key ``"<position>|<category>|<token>"`` (the axis shows only the token).
_SEP = "|"


def _alt() -> Any:
    try:
        import altair as alt
    except ImportError as err:  # pragma: no cover - altair is a dependency of mixlib
        raise ImportError("mixlib.interactive needs altair (pip install 'altair>=5.5'); Colab ships it.") from err
    return alt


def token_key(pos: int, category: str, token: str) -> str:
    """``"<pos>|<category>|<token>"``: a unique, ordered axis value that still carries the token's text and type.

    The position is zero-padded (``"0012|…"``) so that the keys sort in token order as strings too: Vega
    sorts an ordinal domain shared by layers as strings (``"10|…"`` before ``"1|…"`` put the words out of order).
    """
    if not 0 <= int(pos) < 10_000:
        raise ValueError(f"pos={pos} is outside 0..9999: a token key holds a position in a sequence.")
    return f"{int(pos):04d}{_SEP}{category}{_SEP}{token}"


def split_token_key(key: str) -> tuple[int, str, str]:
    """Inverse of :func:`token_key` (the token itself may contain ``|``)."""
    pos, category, token = key.split(_SEP, 2)
    return int(pos), category, token


def _round(values: Any, digits: int) -> list[float]:
    """Plain floats rounded to ``digits`` decimals (NaN -> None, which JSON and Vega read as missing)."""
    out = []
    for v in np.asarray(values, dtype=float).ravel():
        out.append(None if not math.isfinite(v) else round(float(v), digits))
    return out


#: The name of a :class:`Figure`'s own dataset (``"data": {"name": "rows"}`` in its charts, ``"datasets"`` at the top).
ROWS = "rows"


def _rows_data() -> Any:
    """The data reference of a chart whose rows are given to :class:`Figure` (``Figure(chart, rows=rows)``)."""
    return _alt().NamedData(name=ROWS)


def _plain(value: Any) -> Any:
    """``json.dumps``'s fallback: numpy scalars and arrays as Python numbers and lists; anything else is an error."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"a chart's rows hold a {type(value).__name__} ({value!r}), which JSON cannot hold.")


class Figure:
    """An Altair chart that moves in Jupyter, in Colab and on the book's static site.

    Its display bundle is Altair's own (the active renderer: in Jupyter and Colab
    an HTML page that draws the chart) plus the Vega-Lite specification under
    its mime type, which the site's build turns into a chart drawn by the
    site's own copy of vega (:mod:`mixlib._mystnb`). ``chart`` is the Altair
    object, with its data (to change a property: ``Figure(fig.chart.properties(width=...))``).

    ``rows`` (optional) is the chart's data, given apart: the chart reads it as ``data=_rows_data()``
    (the dataset :data:`ROWS`), and it joins the specification only in :meth:`to_dict`. Altair checks every
    value of inline data one by one, when a chart is built and again when it is written out: chapter 10's
    token chart (1.3 MB of numbers) took 11 s to build and 5 s to show that way, about 1 s this way.
    """

    def __init__(self, chart: Any, rows: Sequence[Mapping[str, Any]] | None = None) -> None:
        # the view is laid out again whenever a control changes what is drawn (a longer sentence, a wider
        # label); Vega's default sizes it once, for the first state, and clips the others
        # text a size larger than Vega-Lite's defaults (axis labels 10 px, legends 10 px, titles 13 px): the book shows
        # a chart at its own size, beside static figures whose text is 11-12 px; a size set on a mark or an axis wins
        self._chart = (chart.properties(autosize=_alt().AutoSizeParams(type="pad", resize=True))
                       .configure_axis(labelFontSize=11, titleFontSize=12)
                       .configure_legend(labelFontSize=11, titleFontSize=12)
                       .configure_title(fontSize=14, subtitleFontSize=12))
        # a copy in JSON's own types (numpy numbers become Python's; anything JSON cannot hold is an error here)
        self._rows = None if rows is None else json.loads(json.dumps(list(rows), default=_plain))

    @property
    def chart(self) -> Any:
        """The Altair chart, its rows included (built on request: Altair then checks each value)."""
        if self._rows is None:
            return self._chart
        return self._chart.properties(datasets={ROWS: self._rows})

    def to_dict(self) -> dict[str, Any]:
        """The Vega-Lite specification, with the data it embeds."""
        spec = self._chart.to_dict()
        if self._rows is not None:
            spec["datasets"] = {**spec.get("datasets", {}), ROWS: self._rows}
        return spec

    @staticmethod
    def mime_type() -> str:
        """``application/vnd.vegalite.vN+json`` for the installed Altair's Vega-Lite major version."""
        alt = _alt()
        major = str(alt.SCHEMA_VERSION).lstrip("v").split(".")[0]
        return f"application/vnd.vegalite.v{major}+json"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
        alt = _alt()
        spec = self.to_dict()
        out = alt.renderers.get()(spec)
        data, meta = out if isinstance(out, tuple) else (out, {})
        return {**data, self.mime_type(): spec}, dict(meta or {})

    def __repr__(self) -> str:
        return f"Figure({type(self._chart).__name__}, params={[p.get('name') for p in self._chart.to_dict().get('params', [])]})"


def chart_datasets(chart: Any) -> dict[str, list[dict[str, Any]]]:
    """The data embedded in ``chart`` (a chart, a :class:`Figure` or its specification dict): name -> rows."""
    spec = chart if isinstance(chart, dict) else chart.to_dict()
    out = dict(spec.get("datasets", {}))
    data = spec.get("data")
    if isinstance(data, dict) and "values" in data:  # inline data of the top-level chart
        out["values"] = data["values"]
    return out


def _check_index(name: str, value: Any, n: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < n:
        raise ValueError(f"{name}={value!r} is out of range: give an int in 0..{n - 1}.")
    return int(value)


def _short(text: Any, width: int = 60) -> str:
    from .widgets import _short as short  # the explorers' own label shortener

    return short(text, width)


def _label_color(alt: Any) -> Any:
    """Axis label colour by the token's category (the middle field of the key), as in :mod:`mixlib.plots`."""
    from .plots import CATEGORY_COLORS

    conds = [{"test": f"indexof(datum.value, '{_SEP}{cat}{_SEP}') >= 0", "value": color}
             for cat, color in CATEGORY_COLORS.items() if cat not in ("全体", "その他")]
    return {"condition": conds, "value": CATEGORY_COLORS["その他"]}


def _token_text(expr: str) -> str:
    """Vega expression: the token part of the key ``expr`` ("pos|category|token" -> "token")."""
    first = f"indexof({expr}, '{_SEP}')"
    return f"slice({expr}, {first} + 1 + indexof(slice({expr}, {first} + 1), '{_SEP}') + 1)"


def _token_step(n_max: int) -> int:
    """Column width for a token axis whose longest sequence has ``n_max`` tokens: every state fits the text column."""
    return max(MIN_STEP, min(STEP, TOKEN_AXIS_WIDTH // max(1, n_max)))


def _token_axis(alt: Any, title: str | None = None, step: int = STEP) -> Any:
    # the key is "pos|category|token": show only the token, coloured by its category
    return alt.Axis(title=title, labelAngle=-90, labelFontSize=max(LABEL_PX, min(11, step - 1)), labelColor=_label_color(alt),
                    labelExpr=_token_text("datum.value"), labelOverlap=False)


def _state_line(chart: Any, label: str, color: str = "#222222") -> Any:
    """One line of text above a chart: the Vega expression ``label`` for the (single) row ``chart`` keeps.

    Every chart shows its state's key number in such a line (the site check reads it).
    """
    alt = _alt()
    return (chart.transform_calculate(label=label)
            .mark_text(align="left", baseline="middle", fontSize=12, color=color)
            .encode(x=alt.value(0), y=alt.value(8), text="label:N")
            .properties(height=16, width=300, view={"stroke": None}))


# ---------------------------------------------------------------------------
# chapter 10: mixing per token
# ---------------------------------------------------------------------------


def _mixing_rows(m: Any, e: int, masked: int, digits: int) -> list[dict[str, Any]]:
    """One row per layer of sequence ``e`` of a :class:`mixlib.Mixing`; the first carries the token keys."""
    toks = m.tokens(e)
    idx = np.nonzero(m.real[e].numpy())[0][: len(toks)]
    keys = [token_key(p, str(c), t) for p, (c, t) in enumerate(zip(m.categories[e][idx], toks))]
    rows = []
    for k, li in enumerate(m.layers):
        r = m.row(li)
        row = {"e": e, "m": masked, "l": int(li)}
        if k == 0:
            row["tok"] = keys
        row |= {"res": _round(m.norm_res_ln[r, e].numpy()[idx], digits),
                "attn": _round(m.norm_keep_attn_ln[r, e].numpy()[idx], digits),
                "mix": _round(m.norm_mix_ln[r, e].numpy()[idx], digits),
                "ratio": _round(100.0 * m.ratio[r, e].numpy()[idx], max(digits - 1, 1))}
        rows.append(row)
    return rows


def _count(name: str, n: Any, cap: int) -> int:
    """A positive int argument, capped at what is available."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{name}={n!r}; give a positive int.")
    return min(int(n), cap)


def _labels(texts: Sequence[Any] | None, k: int, tokens: Sequence[Sequence[str]]) -> list[str]:
    """Labels of the first ``k`` examples: the texts when given, else the tokens without specials."""
    if texts is not None:
        texts = list(texts)
        if len(texts) < k:
            raise ValueError(f"texts has {len(texts)} entries; the chart offers {k} examples: give the analysed texts in order.")
        return [_short(t) for t in texts[:k]]
    return [_short(" ".join(t for t in toks if t not in ("[CLS]", "[SEP]", "[PAD]"))) for toks in tokens]


def _example_param(alt: Any, texts: Sequence[str], value: int) -> Any:
    return alt.param(name="example", value=value,
                     bind=alt.binding_select(options=list(range(len(texts))),
                                             labels=[f"{i}: {t}" for i, t in enumerate(texts)], name="例文 "))


def _layer_param(alt: Any, layers: Sequence[int], value: int) -> Any:
    if value not in layers:
        raise ValueError(f"layer={value!r} was not analysed; these results have layers {list(layers)}.")
    return alt.param(name="layer", value=int(value),
                     bind=alt.binding_range(min=int(min(layers)), max=int(max(layers)), step=1, name="層 "))


def _key_of_first_row(chart: Any, order: str) -> Any:
    """Copy the token keys (carried by the first row of the selection, sorted by ``order``) to every row."""
    return chart.transform_window(keys="first_value(tok)", sort=[{"field": order}], frame=[None, None])


def mixing_chart(m: Any, enc: Any, *, plain: Any = None, texts: Sequence[Any] | None = None, examples: int = 20,
                 layer: int | None = None, example: int = 0, masked: bool = True, rate: float | None = None,
                 digits: int = 2) -> Figure:
    """Per token of a chosen example and layer: the norms of what is kept and mixed, and the mixing ratio.

    The kernel-free form of :func:`mixlib.widgets.mixing_explorer` (without its
    text box), over results the chapter has already computed: a dropdown picks
    one of the first ``examples`` sequences, a slider the layer, and (when
    ``plain`` is given) a checkbox switches between the masked run ``m`` and the
    unmasked run ``plain`` of the same texts. Bars stack the three
    LayerNorm-side norms and dots give the ratio in percent, as
    :func:`mixlib.plots.plot_token_mixing`; a text line gives the mean ratio
    over the shown tokens.

    Parameters
    ----------
    m : mixlib.Mixing
        :func:`mixlib.decompose` of the (masked) texts.
    enc : mixlib.Encoder or str
        Named in the title.
    plain : mixlib.Mixing, optional
        The same texts without ``[MASK]``, in the same order.
    texts : list of str or of (str, str), optional
        The analysed texts, in order, for the dropdown's labels (default: the
        tokens of each sequence).
    examples : int, default 20
        How many sequences (from the first) the dropdown offers.
    layer, example : int
        Initial layer (default the last analysed) and example.
    masked : bool, default True
        Initial state of the checkbox (ignored without ``plain``).
    rate : float, optional
        The masking rate, for the checkbox's label.
    digits : int, default 2
        Decimals kept in the embedded norms (ratios keep ``digits - 1`` in percent).

    Returns
    -------
    Figure
        One dataset; rows ``e`` (sequence), ``m`` (1 masked / 0 plain), ``l``
        (layer) with per-token lists ``res``, ``attn``, ``mix`` (norms) and
        ``ratio`` (percent); the first layer's row also holds ``tok``
        (:func:`token_key` of each token).
    """
    alt = _alt()
    from .plots import COMPONENT_COLORS, COMPONENT_LABELS, model_label

    B = m.ratio.shape[1]  # sequences
    k = _count("examples", examples, B)
    example = _check_index("example", example, k)
    layers = [int(li) for li in m.layers]
    layer = layers[-1] if layer is None else int(layer)
    if plain is not None:
        if list(plain.layers) != layers or plain.ratio.shape[1] < k:
            raise ValueError("plain must be decompose() of the same texts with the same layers as m "
                             f"(m: layers {layers}, {B} sequences; plain: layers {list(plain.layers)}, "
                             f"{plain.ratio.shape[1]} sequences).")
    rows = []
    for e in range(k):
        rows += _mixing_rows(m, e, 1, digits)
        if plain is not None:
            rows += _mixing_rows(plain, e, 0, digits)
    params = [_example_param(alt, _labels(texts, k, [m.tokens(e) for e in range(k)]), example), _layer_param(alt, layers, layer)]
    if plain is not None:
        label = f"{rate:.0%} を [MASK] にする " if rate is not None else "[MASK] を入れる "
        params.append(alt.param(name="masked", value=bool(masked), bind=alt.binding_checkbox(name=label)))
        which = "datum.m == (masked ? 1 : 0)"
    else:
        which = "datum.m == 1"
    first = layers[0]
    parts = ["res", "attn", "mix"]
    names = {"res": COMPONENT_LABELS["keep_res"], "attn": COMPONENT_LABELS["keep_attn"], "mix": COMPONENT_LABELS["mix"]}
    colors = [COMPONENT_COLORS["keep_res"], COMPONENT_COLORS["keep_attn"], COMPONENT_COLORS["mix"]]
    step = _token_step(max(len(m.tokens(e)) for e in range(k)))
    x = alt.X("tok:N", sort=alt.SortField("pos"), axis=_token_axis(alt, step=step))
    base = _key_of_first_row(alt.Chart().transform_filter(f"datum.e == example && {which} && (datum.l == layer || datum.l == {first})"), "l")
    base = (base.transform_filter("datum.l == layer")
            .transform_flatten(["keys", "res", "attn", "mix", "ratio"], as_=["tok", "res", "attn", "mix", "ratio"])
            .transform_calculate(pos=f"toNumber(split(datum.tok, '{_SEP}')[0])"))
    bars = (base.transform_fold(parts, as_=["part", "norm"])
            .transform_calculate(order="indexof(" + repr(parts).replace("'", '"') + ", datum.part)",
                                 部品="{" + ", ".join(f'"{k}": "{v}"' for k, v in names.items()) + "}[datum.part]")
            .mark_bar()
            .encode(x=x, y=alt.Y("norm:Q", stack="zero", title="ノルム（層正規化の後）"),
                    color=alt.Color("部品:N", scale=alt.Scale(domain=[names[p] for p in parts], range=colors),
                                    legend=alt.Legend(orient="top", title=None)),
                    order=alt.Order("order:Q"),
                    tooltip=[alt.Tooltip("tok:N", title="トークン"), alt.Tooltip("部品:N"),
                             alt.Tooltip("norm:Q", title="ノルム", format=".3f")]))
    dots = base.mark_point(filled=True, color="#222222", size=30).encode(
        x=x, y=alt.Y("ratio:Q", title="混ぜる割合 (%)", axis=alt.Axis(orient="right", grid=False)),
        tooltip=[alt.Tooltip("tok:N", title="トークン"), alt.Tooltip("ratio:Q", title="混ぜる割合 (%)", format=".1f")])
    run = " + (masked ? '（[MASK] あり）' : '（[MASK] なし）')" if plain is not None else ""  # which run the checkbox shows
    mean = _state_line(base.transform_aggregate(mean="mean(ratio)", n="count()"),
                       f"'層 ' + layer{run} + '：' + datum.n + ' トークンの混ぜる割合の平均 ' + format(datum.mean, '.1f') + '%'")
    plot = (alt.layer(bars, dots).resolve_scale(y="independent").properties(width=alt.Step(step), height=260))
    return Figure(alt.vconcat(mean, plot, spacing=4, data=_rows_data())
                  .add_params(*params)
                  .properties(usermeta={"mixbook": {"kind": "mixing"}},
                              title=alt.Title("トークンごとの混ぜる量と残す量",
                                              subtitle=[f"モデル: {model_label(enc)}", "棒：三つの部品のノルム（左の軸）　黒い点：混ぜる割合（右の軸、%）"])), rows=rows)


def mixing_state(chart: Any, *, example: int, layer: int, masked: bool = True) -> dict[str, list[Any]]:
    """What :func:`mixing_chart` draws in one state, read from its embedded data (token, res, attn, mix, ratio)."""
    (rows,) = chart_datasets(chart).values()
    m = 1 if masked else 0
    sel = [r for r in rows if r["e"] == example and r["m"] == m]
    if not sel:
        raise ValueError(f"no data for example={example}, masked={masked}.")
    keys = min(sel, key=lambda r: r["l"])["tok"]
    (row,) = [r for r in sel if r["l"] == layer]
    return {"token": [split_token_key(k)[2] for k in keys], "res": row["res"], "attn": row["attn"],
            "mix": row["mix"], "ratio": row["ratio"]}


# ---------------------------------------------------------------------------
# chapter 10: token-to-token maps
# ---------------------------------------------------------------------------

#: The maps :func:`context_chart` shows, in the order of :func:`mixlib.plots.plot_context_row`.
CONTEXT_MEASURES = ("attention", "norm", "attn_res_ln", "alti")


def context_chart(cm: Any, enc: Any, *, texts: Sequence[Any] | None = None, examples: int = 5, example: int = 0,
                  layer: int | None = None, token: int = 0, measures: Sequence[str] = CONTEXT_MEASURES) -> Figure:
    """Where one token takes its information from, by several measures, for every example, layer and token.

    The kernel-free form of :func:`mixlib.widgets.context_explorer`, over maps the
    chapter has already computed (:func:`mixlib.context_maps`). For every
    layer and receiving token ``j`` of the first ``examples`` sequences, row
    ``j`` of each map is divided by its sum (a share, as
    :func:`mixlib.plots.plot_context_row` draws it) and embedded in thousandths
    (integers 0..1000, which keeps the page small: about 0.26 MB per example
    at 6 layers and 50 tokens, hence 5 examples by default). A dropdown picks the
    example, sliders the layer and the receiving token's position (a position
    past the sequence's end shows its last token); one panel per measure.

    Parameters
    ----------
    cm : mixlib.measures.ContextMaps
    enc : mixlib.Encoder
        Its tokenizer gives the tokens' categories (axis colours); named in the title.
    texts : list of str or of (str, str), optional
        The analysed texts, in order, for the dropdown's labels.
    examples : int, default 5
        How many sequences (from the first) the dropdown offers.
    example, layer, token : int
        The initial state (layer: default the last analysed).
    measures : sequence of str
        Keys of ``cm.maps``, one panel each.

    Returns
    -------
    Figure
        One dataset; rows ``e``, ``l``, ``j``, ``n`` (the sequence's length)
        and, per measure, a list of shares in thousandths over the sending
        tokens ``i``; the rows with ``j == 0`` also hold ``tok`` (:func:`token_key`).
    """
    alt = _alt()
    from .data import token_categories
    from .plots import MEASURE_LABELS, model_label

    measures = list(measures)
    unknown = [n for n in measures if n not in cm.maps]
    if unknown:
        raise ValueError(f"measures {unknown} are not in these maps; they have {sorted(cm.maps)}.")
    k = _count("examples", examples, len(cm.token_strings))
    example = _check_index("example", example, k)
    layers = [int(li) for li in cm.layers]
    layer = layers[-1] if layer is None else int(layer)
    cats = token_categories(enc, cm.input_ids[:k], cm.attention_mask[:k])
    rows, max_n = [], 0
    for e in range(k):
        toks = cm.token_strings[e]
        n = len(toks)
        max_n = max(max_n, n)
        real = np.nonzero(cm.attention_mask[e].numpy())[0][:n]
        keys = [token_key(p, str(c), t) for p, (c, t) in enumerate(zip(cats[e][real], toks))]
        for li in layers:
            shares = {}
            for name in measures:
                M = cm.map(name, li, e).astype(float)
                shares[name] = np.rint(1000 * M / M.sum(1, keepdims=True)).astype(int)
            for j in range(n):
                row = {"e": e, "l": li, "j": j, "n": n}
                if j == 0:
                    row["tok"] = keys
                row |= {name: shares[name][j].tolist() for name in measures}
                rows.append(row)
    token = _check_index("token", token, max_n)
    params = [_example_param(alt, _labels(texts, k, cm.token_strings[:k]), example), _layer_param(alt, layers, layer),
              alt.param(name="token", value=token,
                        bind=alt.binding_range(min=0, max=max_n - 1, step=1, name="受け取るトークンの位置 "))]
    # rows of the chosen example and layer: j == 0 (it carries the keys) and the chosen receiver
    chosen = "min(token, datum.n - 1)"
    sel = _key_of_first_row(alt.Chart().transform_filter(
        f"datum.e == example && datum.l == layer && (datum.j == 0 || datum.j == {chosen})"), "j").transform_filter(
        f"datum.j == {chosen}")
    charts, step = [], _token_step(max_n)
    for name in measures:
        axis = _token_axis(alt, step=step) if name == measures[-1] else alt.Axis(labels=False, ticks=False, title=None)
        charts.append(
            sel.transform_calculate(share=f"datum['{name}']", i="sequence(0, datum.n)")
            .transform_flatten(["keys", "share", "i"], as_=["tok", "share", "i"])
            .transform_calculate(share="datum.share / 1000", own="datum.i == datum.j ? 1 : 0")
            .mark_bar()
            .encode(x=alt.X("tok:N", sort=alt.SortField("i"), axis=axis),
                    y=alt.Y("share:Q", title="割合"),
                    color=alt.condition("datum.own == 1", alt.value("#1f3b70"), alt.value("#4c9be8")),
                    tooltip=[alt.Tooltip("tok:N", title="送るトークン"), alt.Tooltip("share:Q", title="割合", format=".3f")])
            .properties(width=alt.Step(step), height=90, title=alt.Title(MEASURE_LABELS.get(name, name), anchor="start", fontSize=11)))
    own = _state_line(sel.transform_calculate(tokj="datum.keys[datum.j]"),
                      "'層 ' + layer + '：位置 ' + datum.j + ' のトークン「' + " + _token_text("datum.tokj")
                      + " + '」はどこから情報を受け取るか'", color="#1f3b70")
    return Figure(alt.vconcat(own, *charts, spacing=6, data=_rows_data())
                  .add_params(*params)
                  .properties(usermeta={"mixbook": {"kind": "context"}},
                              title=alt.Title("トークンはどこから情報を受け取るか",
                                              subtitle=[f"モデル: {model_label(enc)}", "濃い棒：受け取るトークン自身（自分から受け取る割合）"])), rows=rows)


def context_state(chart: Any, *, example: int, layer: int, token: int) -> dict[str, Any]:
    """What :func:`context_chart` draws in one state: the receiver ``j``, the tokens and each measure's shares."""
    (rows,) = chart_datasets(chart).values()
    sel = [r for r in rows if r["e"] == example and r["l"] == layer]
    if not sel:
        raise ValueError(f"no data for example={example}, layer={layer}.")
    n = sel[0]["n"]
    j = min(int(token), n - 1)
    keys = next(r["tok"] for r in sel if r["j"] == 0)
    (row,) = [r for r in sel if r["j"] == j]
    shares = {k: [v / 1000 for v in row[k]] for k in row if isinstance(row[k], list) and k != "tok"}
    return {"j": j, "token": [split_token_key(k)[2] for k in keys], "shares": shares}


# ---------------------------------------------------------------------------
# chapter 12: attention from positions alone
# ---------------------------------------------------------------------------


def position_head_chart(enc: Any, *, n: int = 32, max_offset: int = 6, layer: int = 0, head: int = 0,
                        layernorm: bool = True) -> Figure:
    """Choose a layer, a head and the LayerNorm switch; see the attention the position embeddings alone produce.

    The kernel-free form of :func:`mixlib.widgets.position_head_explorer`: the
    weights of :func:`mixlib.position_attention` for every layer, head and
    LayerNorm setting over positions ``0..n-1`` (embedded in thousandths), drawn
    as the ``n x n`` map next to the mean weight at each relative offset
    (:func:`mixlib.plots.attention_by_offset`, computed here, 3 decimals), with
    the uniform weight ``1/n`` as a rule. ``n`` is smaller than the chapter's
    static figure so that the page stays light (about 0.4 MB at 6 layers x 12
    heads and ``n = 32``).

    Returns
    -------
    Figure
        One dataset with the map's rows (``l``, ``h``, ``ln``, ``q`` with the
        list ``w`` of weights in thousandths over the key positions) and the
        profile's (``l``, ``h``, ``ln`` with the lists ``off`` and ``p``).
    """
    alt = _alt()
    from .plots import attention_by_offset, model_label
    from .positional import position_attention

    L, H = enc.n_layers, enc.n_heads
    layer, head = enc.check_layer(layer), enc.check_head(head)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 2 <= n:
        raise ValueError(f"n={n!r}; give an int >= 2 (positions 0..n-1).")
    n = int(n)
    if isinstance(max_offset, bool) or not isinstance(max_offset, (int, np.integer)) or not 0 <= max_offset < n:
        raise ValueError(f"max_offset={max_offset!r} must be an int in 0..{n - 1}.")
    maps, profiles = [], []
    for li in range(L):
        for ln in (1, 0):
            A = position_attention(enc, layer=li, n=n, layernorm=bool(ln))  # (H, n, n)
            prof = attention_by_offset(A, int(max_offset))  # offsets x heads
            for h in range(H):
                profiles.append({"l": li, "h": h, "ln": ln, "off": [int(o) for o in prof.index],
                                 "p": _round(prof[h].to_numpy(), 3)})
                W = np.rint(1000 * A[h]).astype(int)
                maps += [{"l": li, "h": h, "ln": ln, "q": q, "w": W[q].tolist()} for q in range(n)]
    params = [alt.param(name="layer", value=int(layer), bind=alt.binding_range(min=0, max=L - 1, step=1, name="層 ")),
              alt.param(name="head", value=int(head), bind=alt.binding_range(min=0, max=H - 1, step=1, name="ヘッド ")),
              alt.param(name="layernorm", value=bool(layernorm), bind=alt.binding_checkbox(name="埋め込みの層正規化を通す "))]
    which = "datum.l == layer && datum.h == head && datum.ln == (layernorm ? 1 : 0)"
    heat = (alt.Chart().transform_filter(f"{which} && isValid(datum.q)")
            .transform_calculate(k=f"sequence(0, {n})")
            .transform_flatten(["w", "k"])
            .transform_calculate(weight="datum.w / 1000")
            .mark_rect()
            .encode(x=alt.X("k:O", title="キーの位置", axis=alt.Axis(values=list(range(0, n, 4)), labelAngle=0)),
                    y=alt.Y("q:O", title="クエリの位置", axis=alt.Axis(values=list(range(0, n, 4)))),
                    color=alt.Color("weight:Q", scale=alt.Scale(scheme="magma", domainMin=0), title="重み", legend=alt.Legend(orient="bottom", direction="horizontal", gradientLength=200, titleOrient="left")),
                    tooltip=[alt.Tooltip("q:O", title="クエリ"), alt.Tooltip("k:O", title="キー"),
                             alt.Tooltip("weight:Q", title="重み", format=".3f")])
            .properties(width=230, height=230))
    prof = (alt.Chart().transform_filter(f"{which} && isValid(datum.off)")
            .transform_flatten(["off", "p"])
            .transform_joinaggregate(pmax="max(p)"))
    bars = prof.mark_bar().encode(
        x=alt.X("off:O", title="相対位置（キー − クエリ）", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("p:Q", title="平均の重み"),
        # red: the heaviest offset; none when the profile is flat (the line says so; every bar would tie)
        color=alt.condition(f"datum.p == datum.pmax && datum.pmax >= {FLAT_PROFILE / n!r}", alt.value("#c44e52"), alt.value("#4c72b0")),
        tooltip=[alt.Tooltip("off:O", title="相対位置"), alt.Tooltip("p:Q", title="平均の重み", format=".3f")])
    uniform = alt.Chart(alt.Data(values=[{"u": 1.0 / n}])).mark_rule(color="#999999", strokeDash=[3, 3]).encode(y="u:Q")
    heaviest = (alt.Chart().transform_filter(f"{which} && isValid(datum.off)")
                .transform_flatten(["off", "p"])
                .transform_window(rank="row_number()", sort=[{"field": "p", "order": "descending"}, {"field": "off"}])
                .transform_filter("datum.rank == 1"))
    # a profile within FLAT_PROFILE of uniform has no heaviest offset worth naming (the first of near-equal ones would be)
    head_text = _state_line(heaviest, "'層 ' + layer + '・ヘッド ' + head + (layernorm ? '（層正規化あり）' : '（層正規化なし）')"
                                      f" + (datum.p < {FLAT_PROFILE / n!r} ? '：どの相対位置の重みもほぼ一様（最大 '"
                                      f" + format(datum.p, '.3f') + '、一様なら {1 / n:.3f}）'"
                                      " : '：もっとも重い相対位置 ' + format(datum.off, '+d') + '（平均の重み ' + format(datum.p, '.3f') + '）')")
    body = alt.hconcat(heat, alt.layer(bars, uniform).properties(width=230, height=230), spacing=20)
    # one dataset for both panels (the map's rows have q, the profile's off), shared from the top
    return Figure(alt.vconcat(head_text, body, spacing=6, data=_rows_data())
                  .add_params(*params)
                  .properties(usermeta={"mixbook": {"kind": "position_head", "n": n}},
                              title=alt.Title(f"位置ベクトルだけから計算した注意（位置 0〜{n - 1}、縦：クエリ、横：キー）",
                                              subtitle=[f"モデル: {model_label(enc)}",
                                                        f"右：相対位置ごとの平均の重み（赤：もっとも重い相対位置。ほぼ一様なら赤はない。点線：一様な重み 1/{n}）"])), rows=maps + profiles)


def position_head_state(chart: Any, *, layer: int, head: int, layernorm: bool) -> dict[str, Any]:
    """What :func:`position_head_chart` draws in one state: the map (n x n) and the profile by offset."""
    spec = chart if isinstance(chart, dict) else chart.to_dict()
    rows = [r for d in _all_data(spec) for r in d]  # the top-level dataset (and the rule's one-row dataset)
    ln = 1 if layernorm else 0
    sel = [r for r in rows if r.get("l") == layer and r.get("h") == head and r.get("ln") == ln]
    maps = sorted((r for r in sel if "q" in r), key=lambda r: r["q"])
    (prof,) = [r for r in sel if "off" in r]
    return {"map": np.array([r["w"] for r in maps], dtype=float) / 1000, "offsets": prof["off"], "profile": prof["p"]}


def _all_data(spec: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Every inline dataset of a specification (top level, ``datasets`` and nested charts)."""
    out = list(spec.get("datasets", {}).values())
    stack = [spec]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            data = node.get("data")
            if isinstance(data, dict) and isinstance(data.get("values"), list):
                out.append(data["values"])
            stack.extend(v for k, v in node.items() if k != "data" and isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, (dict, list)))
    return out


# ---------------------------------------------------------------------------
# chapter 11: norm stretch by head and by token
# ---------------------------------------------------------------------------


def _psi_title(normalized: bool) -> str:
    return "正規化したクラスタ平均 ψ_qkv" if normalized else "クラスタ平均 ψ_qkv"


def head_chart(cs: Any, clusters: Any, enc: Any, *, layers: Sequence[int] | None = None, top: int = 15, layer: int = 0,
               head: int = 0, n: int = 8, samples: int = 6, normalized: bool = False) -> Figure:
    """Choose a layer and a head; see the clusters with the largest mean psi_qkv and their tokens.

    The kernel-free form of :func:`mixlib.widgets.head_explorer`: for every head
    the ``top`` clusters of :func:`mixlib.top_clusters` (type, size, sample
    tokens, psi with 3 decimals), drawn as bars coloured by the cluster type,
    as :func:`mixlib.plots.plot_top_clusters`; sliders pick the layer, the head
    and how many clusters to show (3..``top``).

    Parameters
    ----------
    cs : numpy.ndarray, (L, H, K)
        :func:`mixlib.cluster_stretch`.
    clusters : mixlib.VocabClusters
    enc : mixlib.Encoder or str
        Named in the title.
    layers : sequence of int, optional
        The model layers of ``cs``'s rows (``stretch.layers``; default 0..L-1).
    top, n : int
        Clusters embedded per head, and shown at first.
    layer, head : int
        Initial model layer and head.
    normalized : bool
        ``cs`` comes from a normalised psi (axis title only).

    Returns
    -------
    Figure
        One dataset; rows ``l`` (model layer), ``h`` and per rank the lists
        ``c`` (cluster), ``typ``, ``lab`` (``"#c: tokens"``) and ``psi``.
    """
    alt = _alt()
    from .clusters import top_clusters
    from .plots import ALL_TYPE_ORDER, TYPE_COLORS, font_safe, model_label

    cs = np.asarray(cs)
    if cs.ndim != 3:
        raise ValueError(f"cs must have shape (L, H, K) from cluster_stretch(); got {cs.shape}.")
    L, H, K = cs.shape
    layers = list(range(L)) if layers is None else [int(x) for x in layers]
    if len(layers) != L:
        raise ValueError(f"layers has {len(layers)} entries; cs has {L} rows of layers.")
    top = _count("top", top, K)
    if layer not in layers:
        raise ValueError(f"layer={layer!r} is not among the analysed layers {layers}.")
    head = _check_index("head", head, H)
    n = max(1, min(int(n), top))
    rows = []
    for li, layer_ in enumerate(layers):
        for h in range(H):
            t = top_clusters(cs, clusters, li, h, n=top, samples=samples)
            rows.append({"l": layer_, "h": h, "r": list(range(1, len(t) + 1)), "c": t["cluster"].astype(int).tolist(),
                         "typ": t["type"].tolist(),
                         # scripts the book's font lacks are named (<Thai>), as in the static figure
                         "lab": [f"#{c}: {_short(font_safe(s), 48)}" for c, s in zip(t["cluster"], t["tokens"])],
                         "psi": _round(t["psi"].to_numpy(), 3)})
    params = [_layer_param(alt, layers, layer),
              alt.param(name="head", value=head, bind=alt.binding_range(min=0, max=H - 1, step=1, name="ヘッド ")),
              alt.param(name="top", value=n, bind=alt.binding_range(min=min(3, top), max=top, step=1, name="上位 "))]
    sel = (alt.Chart().transform_filter("datum.l == layer && datum.h == head")
           .transform_flatten(["r", "c", "typ", "lab", "psi"]).transform_filter("datum.r <= top"))
    present = [t for t in ALL_TYPE_ORDER if any(t in r["typ"] for r in rows)]
    bars = sel.mark_bar().encode(
        y=alt.Y("lab:N", sort=alt.SortField("r"), title=None, axis=alt.Axis(labelLimit=280, labelFontSize=11)),
        x=alt.X("psi:Q", title=_psi_title(normalized)),
        color=alt.Color("typ:N", title="クラスタの種類", scale=alt.Scale(domain=present, range=[TYPE_COLORS[t] for t in present]),
                        legend=alt.Legend(orient="top", columns=4)),
        tooltip=[alt.Tooltip("c:Q", title="クラスタ"), alt.Tooltip("typ:N", title="種類"), alt.Tooltip("lab:N", title="トークン"),
                 alt.Tooltip("psi:Q", title="ψ", format=".3f")]).properties(width=280)
    label = _state_line(sel.transform_filter("datum.r == 1"),
                        "'層 ' + layer + '・ヘッド ' + head + '：ψ が最大のクラスタ #' + datum.c + '（' + datum.typ"
                        " + '、' + format(datum.psi, '.3f') + '）'")
    return Figure(alt.vconcat(label, bars, spacing=6, data=_rows_data())
                  .add_params(*params)
                  .properties(usermeta={"mixbook": {"kind": "head"}},
                              title=alt.Title("ヘッドが伸ばすクラスタ", subtitle=f"モデル: {model_label(enc)}")), rows=rows)


def head_state(chart: Any, *, layer: int, head: int) -> dict[str, Any]:
    """What :func:`head_chart` draws for one head: clusters, types, labels and psi, by rank."""
    (rows,) = chart_datasets(chart).values()
    (row,) = [r for r in rows if r["l"] == layer and r["h"] == head]
    return {k: row[k] for k in ("c", "typ", "lab", "psi")}


#: Tokens :func:`token_chart` offers by default (those in the vocabulary): the chapter's feature sets and everyday words.
TOKEN_CHOICES = ("january", "february", "july", "december", "monday", "friday", "1990", "2010", "1", "2", "ten", "hundred",
                 "the", "of", "and", "in", "is", "was", "it", "he", "she", "they", ",", ".", "(", "\"", "'", "-",
                 "[CLS]", "[SEP]", "[MASK]", "dog", "cat", "city", "water", "music", "love", "run", "running", "ran",
                 "good", "better", "best", "paris", "japan", "tokyo", "##s", "##ing", "##ed", "##ly")


def token_chart(stretch: Any, clusters: Any, enc: Any, *, tokens: Sequence[str] | None = None, token: str | None = None,
                normalized: bool | None = None) -> Figure:
    """Choose a token from a list; see its cluster and its psi_qkv in every head (a layer x head map).

    The kernel-free form of :func:`mixlib.widgets.token_explorer` (which takes
    any typed token and needs a kernel): psi for every layer and head of each
    token in ``tokens`` (default :data:`TOKEN_CHOICES`, those in the
    vocabulary; the initial ``token`` is added first when it is not among
    them), 3 decimals, drawn as :func:`mixlib.plots.plot_token_psi` with the
    values written in the cells.

    Returns
    -------
    Figure
        One dataset; rows ``t`` (token), ``c``, ``typ`` (its cluster and type)
        and ``psi`` (list over layer-major (layer, head), length L*H).
    """
    alt = _alt()
    from .plots import model_label

    vocab = enc.tokenizer.get_vocab()
    tokens = [t for t in (TOKEN_CHOICES if tokens is None else tokens) if t in vocab]
    if not tokens:
        raise ValueError("none of the tokens is one vocabulary entry; give entries such as 'january' or '##ing'.")
    token = tokens[0] if token is None else token
    if token not in tokens:
        if token not in vocab:
            raise ValueError(f"token={token!r} is not one vocabulary entry of {getattr(enc, 'name', 'the model')}; "
                             "give an entry such as 'january' or '##ing'.")
        tokens = [token, *tokens]  # the initial token is always offered
    psi_all = np.asarray(stretch.psi_qkv)  # (L, H, V)
    L, H, _ = psi_all.shape
    layers = [int(x) for x in getattr(stretch, "layers", range(L))]
    normalized = bool(getattr(stretch, "normalized", False)) if normalized is None else normalized
    rows = []
    for t in tokens:
        tid = int(vocab[t])
        c = int(clusters.labels[tid])
        psi = psi_all[:, :, tid].ravel()
        # the cells' text as Python writes it (the static figure's .2f of the full value): formatting the 3-decimal
        # value again in the browser would round twice (0.7149 -> 0.715 -> "0.72")
        rows.append({"t": t, "c": c, "typ": str(clusters.cluster_types[c]), "psi": _round(psi, 3), "lab": [f"{v:.2f}" for v in psi]})
    # one colour scale for every token offered, so colours compare between tokens; it ends at the 99th percentile
    # (larger values show its top colour) so that one extreme token does not darken every other
    offered = psi_all[:, :, [int(vocab[t]) for t in tokens]]
    lo, hi = float(offered.min()), float(np.percentile(offered, 99))
    params = [alt.param(name="token", value=token, bind=alt.binding_select(options=tokens, name="トークン "))]
    cells = (alt.Chart().transform_filter("datum.t == token")
             .transform_calculate(idx=f"sequence(0, {L * H})")
             .transform_flatten(["psi", "lab", "idx"])
             .transform_calculate(layer=f"{json.dumps(layers)}[floor(datum.idx / {H})]", head=f"datum.idx % {H}"))
    heat = cells.mark_rect().encode(
        x=alt.X("head:O", title="ヘッド", axis=alt.Axis(labelAngle=0)), y=alt.Y("layer:O", title="層", axis=alt.Axis(titleAngle=0, titleAlign="right", titleBaseline="bottom", titleX=-6, titleY=-4)),
        color=alt.Color("psi:Q", scale=alt.Scale(scheme="viridis", domain=[round(lo, 3), round(hi, 3)], clamp=True),
                        title=("正規化した " if normalized else "") + "ψ_qkv", legend=alt.Legend(orient="bottom")),  # under the map: beside it the chart runs out of the column
        tooltip=[alt.Tooltip("layer:O", title="層"), alt.Tooltip("head:O", title="ヘッド"), alt.Tooltip("psi:Q", title="ψ", format=".3f")])
    # dark text on the light (high) end of viridis, white on the dark end
    text = cells.mark_text(fontSize=LABEL_PX).encode(
        x="head:O", y="layer:O", text="lab:N",
        color=alt.condition(f"datum.psi > {lo + 0.6 * (hi - lo)!r}", alt.value("#222222"), alt.value("#ffffff")))
    top = (cells.transform_window(rank="row_number()", sort=[{"field": "psi", "order": "descending"}, {"field": "idx"}])
           .transform_filter("datum.rank == 1"))
    label = _state_line(top, "'トークン「' + datum.t + '」（クラスタ #' + datum.c + '・' + datum.typ + '）：ψ が最大のヘッドは 層 '"
                             " + datum.layer + '・ヘッド ' + datum.head + '（' + format(datum.psi, '.3f') + '）'")
    return Figure(alt.vconcat(label, alt.layer(heat, text).properties(width=alt.Step(32), height=alt.Step(26)), spacing=6,
                              data=_rows_data())
                  .add_params(*params)
                  .properties(usermeta={"mixbook": {"kind": "token", "layers": layers, "heads": H}},
                              title=alt.Title("トークンのノルム伸縮率（層 × ヘッド）", subtitle=f"モデル: {model_label(enc)}")), rows=rows)


def token_state(chart: Any, *, token: str) -> dict[str, Any]:
    """What :func:`token_chart` draws for one token: cluster, type and psi as an (L, H) array."""
    spec = chart if isinstance(chart, dict) else chart.to_dict()
    (rows,) = chart_datasets(spec).values()
    (row,) = [r for r in rows if r["t"] == token]
    meta = spec["usermeta"]["mixbook"]
    return {"c": row["c"], "typ": row["typ"], "layers": meta["layers"],
            "psi": np.array(row["psi"], dtype=float).reshape(len(meta["layers"]), meta["heads"])}


# ---------------------------------------------------------------------------
# chapter 8: fill in the blank
# ---------------------------------------------------------------------------


def fill_mask_chart(fillers: Any, texts: Sequence[str], *, text: str | None = None, k: int = 5, k_max: int = 10) -> Figure:
    """Choose a sentence with ``[MASK]`` from a list; see each model's top-k fill-ins of its first blank.

    The kernel-free form of :func:`mixlib.widgets.fill_mask_explorer` (which
    takes any typed sentence and needs a kernel): for every text, the top
    ``k_max`` candidates of every model (``fill(text, k)`` returning one
    DataFrame per ``[MASK]`` with ``rank``, ``token``, ``prob``), probabilities
    with 4 decimals; a dropdown picks the text, a slider how many candidates to
    show; one panel per model.

    Returns
    -------
    Figure
        One dataset; rows ``s`` (text index), ``m`` (model name) and the lists
        ``r``, ``tok``, ``p`` for the first ``[MASK]``.
    """
    alt = _alt()

    if not fillers:
        raise ValueError("fillers is empty; give at least one model name -> fill(text, k) function.")
    texts = [str(t) for t in texts]
    if not texts:
        raise ValueError("texts is empty; give at least one sentence with [MASK].")
    for t in texts:
        if "[MASK]" not in t:
            raise ValueError(f"{t!r} has no [MASK]; every text needs one (e.g. 'the queen loves [MASK] crown').")
    text = texts[0] if text is None else str(text)
    if text not in texts:
        texts = [text, *texts]
        if "[MASK]" not in text:
            raise ValueError(f"{text!r} has no [MASK].")
    k_max = _count("k_max", k_max, 100)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= k_max:
        raise ValueError(f"k={k!r}; give an int between 1 and {k_max}.")
    rows = []
    for s, t in enumerate(texts):
        for name, fill in fillers.items():
            first = fill(t, k_max)[0]
            rows.append({"s": s, "m": str(name), "r": [int(r) for r in first["rank"]], "tok": [str(x) for x in first["token"]],
                         "p": _round(first["prob"].to_numpy(), 4)})
    models = [str(m) for m in fillers]
    params = [alt.param(name="sentence", value=texts.index(text),
                        bind=alt.binding_select(options=list(range(len(texts))), labels=texts, name="文 ")),
              alt.param(name="k", value=int(k), bind=alt.binding_range(min=1, max=k_max, step=1, name="候補の数 "))]
    sel = (alt.Chart().transform_filter("datum.s == sentence")
           .transform_flatten(["r", "tok", "p"]).transform_filter("datum.r <= k"))
    bars = sel.mark_bar(color="#2ca02c").encode(  # the colour of minibert.plot_fill_mask
        y=alt.Y("tok:N", sort=alt.SortField("r"), title=None, axis=alt.Axis(labelFontSize=11)),
        x=alt.X("p:Q", title="確率", scale=alt.Scale(domain=[0, 1])),
        tooltip=[alt.Tooltip("r:Q", title="順位"), alt.Tooltip("tok:N", title="トークン"), alt.Tooltip("p:Q", title="確率", format=".3f")])
    panels = [bars.transform_filter(f"datum.m == {json.dumps(m)}").properties(width=300, title=alt.Title(m, anchor="start", fontSize=11))
              for m in models]
    label = _state_line(sel.transform_filter(f"datum.r == 1 && datum.m == {json.dumps(models[0])}"),
                        f"'{models[0]} の 1 位：' + datum.tok + '（' + format(datum.p, '.3f') + '）'")
    return Figure(alt.vconcat(label, alt.hconcat(*panels, spacing=30), spacing=6, data=_rows_data())
                  .add_params(*params)
                  .properties(usermeta={"mixbook": {"kind": "fill_mask", "texts": texts, "models": models}},
                              title=alt.Title("[MASK] の穴埋め（最初の [MASK] の上位の候補）")), rows=rows)


def fill_mask_state(chart: Any, *, sentence: int) -> dict[str, dict[str, Any]]:
    """What :func:`fill_mask_chart` draws for one text: per model, ranks, tokens and probabilities."""
    (rows,) = chart_datasets(chart).values()
    return {r["m"]: {"r": r["r"], "tok": r["tok"], "p": r["p"]} for r in rows if r["s"] == sentence}


# -- chapter 1: two vectors, their dot product, cosine, projection and parallelogram ------------------------------

def vector_pair_state(*, angle_x: float, len_x: float, angle_y: float, len_y: float) -> dict[str, float]:
    """The numbers :func:`vector_pair_chart` shows for two 2-D vectors given by angle (degrees) and length.

    ``dot`` = x·y, ``norms`` = |x||y|, ``cos`` = cos θ, ``a`` = x·y / |x|² (the coefficient of y's
    projection on x) and ``area`` = the parallelogram's area |det[x; y]|.
    """
    if len_x <= 0 or len_y <= 0:
        raise ValueError(f"lengths must be positive (got |x| = {len_x}, |y| = {len_y}).")
    x = len_x * np.array([np.cos(np.radians(angle_x)), np.sin(np.radians(angle_x))])
    y = len_y * np.array([np.cos(np.radians(angle_y)), np.sin(np.radians(angle_y))])
    dot = float(x @ y)
    return {"dot": dot, "norms": float(np.linalg.norm(x) * np.linalg.norm(y)),
            "cos": dot / float(np.linalg.norm(x) * np.linalg.norm(y)), "a": dot / float(x @ x),
            "area": abs(float(np.linalg.det(np.stack([x, y]))))}


def vector_pair_chart(*, angle_x: float = 0.0, len_x: float = 2.0, angle_y: float = 40.0, len_y: float = 1.5,
                      size: int = 340) -> Figure:
    """Two vectors x and y set by sliders (angle in degrees, length): the parallelogram they span (its
    area |det|), the rectangle of side |x| and height y's signed projection on x (its signed area is x·y),
    the projection a·x, and a line with x·y, |x||y|, cos θ, a and the area.

    Nothing is precomputed: the chart computes every shape and number from the four sliders, so every
    state is there; :func:`vector_pair_state` computes the same numbers in Python (the site check compares).
    """
    alt = _alt()
    for name, v, lo, hi in (("angle_x", angle_x, -180, 180), ("angle_y", angle_y, -180, 180),
                            ("len_x", len_x, 0.2, 3.0), ("len_y", len_y, 0.2, 3.0)):
        if not lo <= float(v) <= hi:
            raise ValueError(f"{name} = {v} is outside the slider's range [{lo}, {hi}].")
    params = [alt.param(name="angle_x", value=float(angle_x), bind=alt.binding_range(min=-180, max=180, step=5, name="x の角度 ")),
              alt.param(name="len_x", value=float(len_x), bind=alt.binding_range(min=0.2, max=3.0, step=0.1, name="|x| ")),
              alt.param(name="angle_y", value=float(angle_y), bind=alt.binding_range(min=-180, max=180, step=5, name="y の角度 ")),
              alt.param(name="len_y", value=float(len_y), bind=alt.binding_range(min=0.2, max=3.0, step=0.1, name="|y| "))]
    # the vectors and the derived points, as Vega expressions of the four parameters
    X = ("len_x * cos(angle_x * PI / 180)", "len_x * sin(angle_x * PI / 180)")
    Y = ("len_y * cos(angle_y * PI / 180)", "len_y * sin(angle_y * PI / 180)")
    dot = f"(({X[0]}) * ({Y[0]}) + ({X[1]}) * ({Y[1]}))"
    h = f"({dot} / len_x)"  # y's signed projection on x's direction
    N = (f"(-({X[1]}) / len_x)", f"(({X[0]}) / len_x)")  # unit normal to x
    P = (f"({dot} / (len_x * len_x) * ({X[0]}))", f"({dot} / (len_x * len_x) * ({X[1]}))")  # projection a·x
    pts = {"o": ("0", "0"), "x": X, "y": Y, "xy": (f"{X[0]} + {Y[0]}", f"{X[1]} + {Y[1]}"),
           "xh": (f"{X[0]} + {h} * {N[0]}", f"{X[1]} + {h} * {N[1]}"), "h": (f"{h} * {N[0]}", f"{h} * {N[1]}"), "p": P}
    # a half-width that holds every point, the same on both axes (equal aspect)
    far = " , ".join(f"abs({c})" for xy in pts.values() for c in xy)
    params.append(alt.param(name="R", expr=f"1.15 * max(1, {far})"))
    scale = {"domain": {"expr": "[-R, R]"}, "nice": False}
    # the names x and y sit just past each tip, x to its left and y to its right: they never overlap, even on one line
    for name, (a, b), n, side in (("xl", X, "len_x", 1), ("yl", Y, "len_y", -1)):
        pts[name] = (f"({a}) * (1 + 0.07 * R / {n}) - {side} * 0.05 * R * ({b}) / {n}",
                     f"({b}) * (1 + 0.07 * R / {n}) + {side} * 0.05 * R * ({a}) / {n}")

    def shape(name: str, corners: Sequence[str]) -> list[dict[str, Any]]:
        return [{"s": name, "k": k, "pt": c} for k, c in enumerate(corners)]

    rows = (shape("平行四辺形", ["o", "x", "xy", "y", "o"]) + shape("長方形", ["o", "x", "xh", "h", "o"])
            + shape("x", ["o", "x"]) + shape("y", ["o", "y"]) + shape("射影", ["o", "p"]) + shape("垂線", ["y", "p"])
            + [{"s": "名前", "k": 0, "pt": "xl", "t": "x"}, {"s": "名前", "k": 1, "pt": "yl", "t": "y"}])
    case_x = " : ".join(f"datum.pt == '{k}' ? ({v[0]})" for k, v in pts.items()) + " : 0"
    case_y = " : ".join(f"datum.pt == '{k}' ? ({v[1]})" for k, v in pts.items()) + " : 0"
    base = alt.Chart().transform_calculate(px=case_x, py=case_y)
    enc = {"x": alt.X("px:Q", scale=scale, title=None), "y": alt.Y("py:Q", scale=scale, title=None), "order": alt.Order("k:Q")}
    fills = [base.transform_filter(f"datum.s == '{s}'").mark_line(fill=c, fillOpacity=0.25, stroke=c, strokeWidth=0.5).encode(**enc)
             for s, c in (("平行四辺形", "#dd8452"), ("長方形", "#55a868"))]
    lines = [base.transform_filter(f"datum.s == '{s}'").mark_line(color=c, strokeWidth=w, strokeDash=d).encode(**enc)
             for s, c, w, d in (("x", "#4c72b0", 2.5, [1, 0]), ("y", "#c44e52", 2.5, [1, 0]),
                                ("射影", "#222222", 2.5, [6, 3]), ("垂線", "#444444", 1, [2, 2]))]
    tips = (base.transform_filter("datum.s == '名前'")
            .mark_text(fontSize=14, fontWeight="bold", align="center", baseline="middle").encode(
                x=enc["x"], y=enc["y"], text="t:N",
                color=alt.Color("t:N", scale=alt.Scale(domain=["x", "y"], range=["#4c72b0", "#c44e52"]), legend=None)))
    axes = alt.Chart(alt.Data(values=[{"z": 0}]))
    zero = [axes.mark_rule(color="#aaaaaa", strokeWidth=0.5).encode(x=alt.X("z:Q", scale=scale)),
            axes.mark_rule(color="#aaaaaa", strokeWidth=0.5).encode(y=alt.Y("z:Q", scale=scale))]
    norm = "len_x * len_y"
    numbers = _state_line(axes, f"'x·y = ' + format({dot}, '.3f') + '　|x||y| = ' + format({norm}, '.3f')"
                                f" + '　cos θ = ' + format({dot} / ({norm}), '.3f') + '　a = ' + format({dot} / (len_x * len_x), '.3f')"
                                f" + '　平行四辺形 = ' + format(abs(({X[0]}) * ({Y[1]}) - ({X[1]}) * ({Y[0]})), '.3f')")
    legend = (alt.Chart(alt.Data(values=[{"s": "平行四辺形（面積 = |det|）"}, {"s": "長方形（符号つき面積 = x·y）"},
                                          {"s": "y の射影 a·x（破線）"}]))
              .mark_point(shape="square", filled=True, size=120, opacity=0.6)
              .encode(y=alt.Y("s:N", sort=None, title=None, axis=alt.Axis(orient="right", domain=False, ticks=False, labelFontSize=11,
                                                                labelLimit=260)),
                      color=alt.Color("s:N", legend=None, sort=None, scale=alt.Scale(range=["#dd8452", "#55a868", "#222222"])))
              .properties(width=12, height=70))
    plot = alt.layer(*zero, *fills, *lines, tips, data=alt.Data(values=rows)).properties(width=size, height=size)
    return Figure(alt.vconcat(numbers, alt.hconcat(plot, legend, spacing=8).resolve_scale(color="independent"), spacing=6)
                  .add_params(*params)
                  .properties(usermeta={"mixbook": {"kind": "vector_pair"}},
                              title=alt.Title("二つのベクトル：内積・コサイン・射影・平行四辺形")))


# -- chapters 0 and 9: the nearest items of a chosen word or sentence ----------------------------------------------

def ranking_chart(rankings: Mapping[str, Sequence[tuple[str, float]]], enc: Any, *, title: str, choice_name: str,
                  choice: int = 0, value_title: str = "コサイン類似度",
                  k: int | None = None, k_max: int | None = None, groups: Mapping[str, str] | None = None,
                  colors: Mapping[str, Any] | None = None, group_name: str = "グループ", width: int = 300) -> Figure:
    """The items nearest to a chosen key, as bars: a dropdown picks the key, an optional slider how many bars.

    ``rankings`` maps each choice (its label in the dropdown) to ``(item, value)`` pairs, largest value
    first (e.g. ``word_vectors.nearest(word, 15)``); ``groups`` colours the bars by each item's group
    (``colors``: a matplotlib colour per group). ``k`` / ``k_max``: a slider for how many items show
    (every ranking must hold ``k_max`` items). Lines above the bars name the choice (shortened to
    40 characters), its group (when ``groups`` is given; ``group_name`` names the groups on that line)
    and the first item with its value; the group legend sits under the bars.
    """
    alt = _alt()
    from matplotlib.colors import to_hex

    from .plots import model_label

    keys = list(rankings)
    if not keys:
        raise ValueError("rankings is empty: give at least one choice and its (item, value) pairs.")
    choice = _check_index("choice", choice, len(keys))
    if k_max is not None:
        k_max = _count("k_max", k_max, min(len(rankings[c]) for c in keys))
        k = _count("k", k if k is not None else k_max, k_max)
    elif k is not None:
        raise ValueError(f"k={k!r} needs k_max (the slider's largest value); without it every item shows.")
    rows = []
    for c, key in enumerate(keys):
        pairs = [(str(item), float(v)) for item, v in rankings[key]]
        if any(a[1] < b[1] for a, b in zip(pairs, pairs[1:])):
            raise ValueError(f"rankings[{key!r}] is not in decreasing order of value: sort it, largest first.")
        shown = [_short(item, 60) for item, _ in pairs]
        if len(set(shown)) < len(shown):  # the bars are keyed by their label: two equal labels would draw one bar
            raise ValueError(f"rankings[{key!r}] has items whose first 60 characters are the same: make them differ there.")
        for r, (item, v) in enumerate(pairs, start=1):
            row = {"c": c, "r": r, "item": shown[r - 1], "v": round(v, 4)}
            if r == 1:  # the line above the bars names the choice (and its group) and the first item
                row["cl"], row["ci"] = _short(key, 40), _short(item, 40)
                row["cg"] = groups.get(key, "") if groups is not None else ""
            if groups is not None:
                row["g"] = groups.get(item, "その他")
            rows.append(row)
    params = [alt.param(name="choice", value=choice, bind=alt.binding_select(
        options=list(range(len(keys))), labels=[_short(key, 70) for key in keys], name=f"{choice_name} "))]
    which = "datum.c == choice"
    if k_max is not None:
        params.append(alt.param(name="k", value=k, bind=alt.binding_range(min=min(3, k_max), max=k_max, step=1, name="語数 ")))
        which += " && datum.r <= k"
    lo = min(0.0, np.floor(min(r["v"] for r in rows) * 10) / 10)
    if groups is not None:
        present = list(dict.fromkeys(r["g"] for r in rows))
        color = alt.Color("g:N", title=None, legend=alt.Legend(orient="bottom", columns=1, labelLimit=300),
                          scale=alt.Scale(domain=present, range=[to_hex(colors[p]) if colors and p in colors else "#7f7f7f"
                                                                 for p in present]))
    else:
        color = alt.value("#4c72b0")
    sel = alt.Chart().transform_filter(which)
    bars = sel.mark_bar().encode(
        y=alt.Y("item:N", sort=alt.SortField("r"), title=None, axis=alt.Axis(labelLimit=290, labelFontSize=12)),
        x=alt.X("v:Q", title=value_title, scale=alt.Scale(domain=[lo, 1]), axis=alt.Axis(labelFontSize=11, titleFontSize=12)),
        color=color,
        tooltip=[alt.Tooltip("r:Q", title="順位"), alt.Tooltip("item:N", title="項目"), alt.Tooltip("v:Q", title=value_title, format=".3f")],
    ).properties(width=width, height=alt.Step(21))
    first = sel.transform_filter("datum.r == 1")
    shown_k = " + '（上位 ' + k + ' 件）'" if k_max is not None else ""  # the slider's value, said on the line
    lines = [_state_line(first, f"'選んだ{choice_name}：「' + datum.cl + '」'{shown_k}")]
    if groups is not None:  # the choice's own group on a line of its own (one line would run out of the column)
        lines.append(_state_line(first, f"datum.cg ? '{group_name}：' + datum.cg : ''"))
    lines.append(_state_line(first, "'1 位：' + datum.ci + '（' + format(datum.v, '.3f') + '）'"))
    return Figure(alt.vconcat(*lines, bars, spacing=2, data=_rows_data())
                  .add_params(*params)
                  .properties(usermeta={"mixbook": {"kind": "ranking", "group_name": group_name}},
                              title=alt.Title(title, subtitle=f"モデル: {model_label(enc)}")), rows=rows)


def ranking_state(chart: Any, *, choice: int) -> dict[str, Any]:
    """What :func:`ranking_chart` draws for one choice: its label and group, and the items and values by rank."""
    (rows,) = chart_datasets(chart).values()
    mine = sorted((r for r in rows if r["c"] == choice), key=lambda r: r["r"])
    return {"label": mine[0]["cl"], "group": mine[0]["cg"], "first": mine[0]["ci"],
            "items": [r["item"] for r in mine], "values": [r["v"] for r in mine]}
