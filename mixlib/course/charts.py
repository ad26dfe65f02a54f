"""Kernel-free figures for Parts I-IV: the chapters' explorers as Vega-Lite charts that move on the static site.

The same machinery as :mod:`mixlib.interactive` (a :class:`~mixlib.interactive.Figure`
that displays in Jupyter, in Colab and on the site, its controls bound to chart
parameters): each builder embeds what the chapter computed, or lets the chart
compute it from a formula, and each has a ``*_state`` function that computes, in
Python and independently of the chart, the numbers the chart must show in a
given state (the unit tests and the site's browser check compare the two).

* :func:`neighbour_chart` -- chapter 2: a word's nearest words in count
  vectors, for each word, context window and weighting, coloured by kind.
* :func:`bottleneck_chart` -- chapter 4: for each input length, one example
  squeezed through the fixed-size vector c, and the accuracy at that length.
* :func:`alignment_chart` -- chapter 5: the attention weights of a trained
  model, for each input length and example.
* :func:`softmax_scale_chart` -- chapter 6: softmax of the same scores with and
  without division by sqrt(d_k), for each d_k.
* :func:`pe_dot_chart` -- chapter 6: the dot products of sinusoidal position
  encodings depend only on the positions' difference.
* :func:`pe_position_chart` -- chapter 6: one position's vector and one
  dimension's wave in the position encoding.
* :func:`errors_chart` -- chapter 7: the lower phrases a model generated
  wrong, right characters in blue and wrong ones in red, for every epoch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.special import softmax

from ..interactive import Figure, _alt, _rows_data, _check_index, _round, _state_line, chart_datasets

__all__ = [
    "neighbour_chart",
    "neighbour_state",
    "bottleneck_chart",
    "bottleneck_state",
    "alignment_chart",
    "alignment_state",
    "softmax_scale_chart",
    "softmax_scale_state",
    "pe_dot_chart",
    "pe_dot_state",
    "pe_position_chart",
    "pe_position_state",
    "errors_chart",
    "errors_state",
]


def _right_at(target: str, output: str) -> list[bool]:
    """For each character of ``output``: is it the character of ``target`` at the same position (the book's
    per-position comparison, as :func:`mixlib.course.hyakunin.render_errors` marks it)."""
    return [i < len(target) and target[i] == ch for i, ch in enumerate(output)]


# -- chapter 2: nearest words by window and weighting ----------------------------------------------------------------

def neighbour_chart(neighbours: Mapping[tuple[str, int, str], Sequence[tuple[str, float]]], kinds: Mapping[str, str], *,
                    word: str, window: int, weighting: str, shares: Mapping[tuple[int, str], float] | None = None,
                    colors: Mapping[str, Any] | None = None, width: int = 420) -> Figure:
    """A word's nearest words as bars coloured by their kind, for a word, a context window and a weighting on controls.

    ``neighbours[(word, window, weighting)]`` holds ``(item, cosine)`` pairs, largest first (the same
    number for every key; e.g. ``WordVectors.nearest(word, k)`` of each space); ``kinds`` maps a word to
    its kind (others are "その他"), ``colors`` a kind to a matplotlib colour; ``shares[(window, weighting)]``
    (optional) is a summary of that setting, shown in the line above the bars.
    """
    alt = _alt()
    from matplotlib.colors import to_hex

    if not neighbours:
        raise ValueError("neighbours is empty: give (item, cosine) pairs for each (word, window, weighting).")
    words = sorted({k[0] for k in neighbours})
    windows = sorted({int(k[1]) for k in neighbours})
    weightings = list(dict.fromkeys(k[2] for k in neighbours))
    missing = [(w, n, t) for w in words for n in windows for t in weightings if (w, n, t) not in neighbours]
    if missing:
        raise ValueError(f"neighbours lacks {len(missing)} of the (word, window, weighting) combinations, e.g. {missing[0]}.")
    if len({len(v) for v in neighbours.values()}) != 1:
        raise ValueError("every (word, window, weighting) needs the same number of neighbours.")
    for name, value, options in (("word", word, words), ("window", window, windows), ("weighting", weighting, weightings)):
        if value not in options:
            raise ValueError(f"{name}={value!r} is not one of the given {name}s {options[:8]}{'...' if len(options) > 8 else ''}.")
    if shares is not None and any((n, t) not in shares for n in windows for t in weightings):
        raise ValueError("shares needs a value for every (window, weighting).")
    rows: list[dict[str, Any]] = []
    for (w, n, t), pairs in neighbours.items():
        for r, (item, v) in enumerate(pairs, start=1):
            rows.append({"w": words.index(w), "n": int(n), "t": t, "r": r, "item": str(item), "v": round(float(v), 4),
                         "g": kinds.get(item, "その他")})
    for n in windows:
        for t in weightings:
            rows.append({"w": -1, "n": n, "t": t, "share": None if shares is None else round(float(shares[(n, t)]), 4)})
    params = [alt.param(name="word", value=words.index(word), bind=alt.binding_select(options=list(range(len(words))), labels=words,
                                                                                      name="語 ")),
              alt.param(name="win", value=int(window), bind=alt.binding_range(min=windows[0], max=windows[-1], step=1, name="窓の幅 ")),
              alt.param(name="weighting", value=weighting, bind=alt.binding_select(options=weightings, name="重み付け "))]
    present = list(dict.fromkeys(r["g"] for r in rows if "g" in r))
    word_kinds = [kinds.get(w, "その他") for w in words]
    color = alt.Color("g:N", title="語の種類", legend=alt.Legend(orient="right"),
                      scale=alt.Scale(domain=present, range=[to_hex(colors[p]) if colors and p in colors else "#7f7f7f" for p in present]))
    sel = alt.Chart().transform_filter("datum.w == word && datum.n == win && datum.t == weighting")
    bars = sel.mark_bar().encode(
        y=alt.Y("item:N", sort=alt.SortField("r"), title=None),
        x=alt.X("v:Q", title="コサイン類似度", scale=alt.Scale(domain=[min(0.0, min(r["v"] for r in rows if "v" in r)), 1])),
        color=color,
        tooltip=[alt.Tooltip("r:Q", title="順位"), alt.Tooltip("item:N", title="語"), alt.Tooltip("g:N", title="種類"),
                 alt.Tooltip("v:Q", title="コサイン類似度", format=".3f")],
    ).properties(width=width, height=alt.Step(18))
    first = _state_line(
        sel.transform_filter("datum.r == 1").transform_lookup(lookup="w", from_=alt.LookupData(
            alt.Data(values=[{"w": i, "word": w, "kind": k} for i, (w, k) in enumerate(zip(words, word_kinds))]), "w", ["word", "kind"])),
        "'「' + datum.word + '」（' + datum.kind + '）に近い語（窓 ' + win + '、' + weighting + '）：1 位 ' + datum.item"
        " + '（' + format(datum.v, '.3f') + '）'")
    lines = [first]
    if shares is not None:
        lines.append(_state_line(alt.Chart().transform_filter("datum.w == -1 && datum.n == win && datum.t == weighting"),
                                 "'この設定での同じ種類の割合（全内容語の平均）：' + format(datum.share, '.3f')", color="#555555"))
    return Figure(alt.vconcat(*lines, bars, spacing=4, data=_rows_data())
                  .add_params(*params)
                  .properties(usermeta={"mixbook": {"kind": "neighbour", "words": words, "word_kinds": word_kinds}},
                              title=alt.Title("近い語（コサイン類似度の大きい順、色は語の種類）")), rows=rows)


def neighbour_state(chart: Any, *, word: int, window: int, weighting: str) -> dict[str, Any]:
    """What :func:`neighbour_chart` draws for a setting (``word``: its index in the dropdown): items, values, kinds, share."""
    spec = chart if isinstance(chart, dict) else chart.to_dict()
    (rows,) = chart_datasets(spec).values()
    mine = sorted((r for r in rows if r["w"] == word and r["n"] == window and r["t"] == weighting), key=lambda r: r["r"])
    (share,) = [r["share"] for r in rows if r["w"] == -1 and r["n"] == window and r["t"] == weighting]
    meta = spec["usermeta"]["mixbook"]
    return {"word": meta["words"][word], "word_kind": meta["word_kinds"][word], "items": [r["item"] for r in mine], "values": [r["v"] for r in mine],
            "kinds": [r["g"] for r in mine], "share": share}


# -- chapter 4: the fixed-size bottleneck of an encoder-decoder ------------------------------------------------------

def bottleneck_chart(accuracy: Any, examples: Mapping[int, tuple[str, str]], *, hidden: int, length: int | None = None,
                     chance: float | None = None, width: int = 560) -> Figure:
    """For an input length on a slider: one example's characters all funnelled into c, and the accuracy at that length.

    ``accuracy``: a table with columns ``length``, ``accuracy`` (exact match) and ``char_accuracy``
    (e.g. :func:`mixlib.course.seq2seq.accuracy_by_length`); ``examples`` maps each length to
    ``(source, output)``: an input of that length and what the model decoded from it. The upper panel
    draws the input characters, the one vector c of ``hidden`` dimensions they all pass through, and the
    output with each character blue where it is right and red where it is wrong; the lower panel both
    accuracies against length, the chosen length marked (``chance``: a dotted line).
    """
    alt = _alt()
    table = {int(r.length): (float(r.accuracy), float(r.char_accuracy)) for r in accuracy.itertuples()}
    lengths = sorted(table)
    if not lengths:
        raise ValueError("accuracy is empty: give a row per length (columns length, accuracy, char_accuracy).")
    missing = [L for L in lengths if L not in examples]
    if missing:
        raise ValueError(f"examples has no (source, output) for the lengths {missing}: give one example per length.")
    for L in lengths:
        if len(examples[L][0]) != L:
            raise ValueError(f"examples[{L}] has a source of {len(examples[L][0])} characters, not {L}.")
    length = lengths[len(lengths) // 2] if length is None else _check_index("length", length, max(lengths) + 1)
    if length not in table:
        raise ValueError(f"length={length} is not one of the measured lengths {lengths[0]}..{lengths[-1]}.")
    span = max(lengths) + 1  # the widest output: L characters and <eos> (drawn as the end of the row)
    rows: list[dict[str, Any]] = []
    for L in lengths:
        source, output = examples[L]
        target = source[::-1]
        rows.append({"kind": "acc", "L": L, "acc": round(table[L][0], 4), "char": round(table[L][1], 4),
                     "src": source, "out": output, "exact": output == target, "right": sum(_right_at(target, output))})
        rows += [{"kind": "in", "L": L, "i": i, "ch": ch} for i, ch in enumerate(source)]
        rows += [{"kind": "out", "L": L, "i": i, "ch": ch, "ok": ok} for i, (ch, ok) in enumerate(zip(output, _right_at(target, output)))]
    param = alt.param(name="length", value=length,
                      bind=alt.binding_range(min=lengths[0], max=lengths[-1], step=1, name="入力の長さ "))
    x = alt.X("x:Q", scale=alt.Scale(domain=[-2.2, span]), axis=None)
    y = alt.Y("y:Q", scale=alt.Scale(domain=[-0.6, 2.6]), axis=None)
    cells = (alt.Chart().transform_filter("datum.L == length && (datum.kind == 'in' || datum.kind == 'out')")
             .transform_calculate(x=f"datum.i + ({span} - length) / 2", y="datum.kind == 'in' ? 2 : 0"))
    color = alt.condition("datum.kind == 'in' || datum.ok", alt.value("#4c72b0"), alt.value("#c44e52"))
    boxes = cells.mark_square(size=170, filled=False, strokeWidth=1).encode(x=x, y=y, color=color)
    chars = cells.mark_text(fontSize=11, fontWeight="bold").encode(x=x, y=y, text="ch:N", color=color)
    c_x = (span - 1) / 2
    funnel = cells.transform_calculate(x2=str(c_x), y2="1").mark_rule(color="#bbbbbb", strokeWidth=0.7).encode(
        x=x, y=alt.Y("y1:Q", scale=alt.Scale(domain=[-0.6, 2.6]), axis=None), x2="x2:Q", y2="y2:Q"
    ).transform_calculate(y1="datum.kind == 'in' ? 1.8 : 0.2")
    c_box = alt.Chart(alt.Data(values=[{"x": c_x, "y": 1, "t": f"c（{hidden} 次元）"}]))
    c_marks = [c_box.mark_point(shape="square", size=1400, filled=True, color="#8a2f86", opacity=0.9).encode(x=x, y=y),
               c_box.mark_text(color="white", fontSize=10, fontWeight="bold").encode(x=x, y=y, text=alt.value("c")),
               c_box.mark_text(align="left", dx=26, fontSize=11, color="#8a2f86").encode(x=x, y=y, text="t:N")]
    side = alt.Chart(alt.Data(values=[{"x": -2.2, "y": 2, "t": "入力"}, {"x": -2.2, "y": 0, "t": "出力"}])).mark_text(
        align="left", fontSize=11, color="#555555").encode(x=x, y=y, text="t:N")
    diagram = alt.layer(funnel, boxes, chars, *c_marks, side).properties(width=width, height=130)
    curve = alt.Chart().transform_filter("datum.kind == 'acc'").transform_fold(["acc", "char"], as_=["m", "v"]).transform_calculate(
        name="datum.m == 'acc' ? '完全一致' : '文字ごと'")
    lines = curve.mark_line(point=alt.OverlayMarkDef(size=18)).encode(
        x=alt.X("L:Q", title="入力の長さ", scale=alt.Scale(domain=[lengths[0], lengths[-1]], nice=False)),
        y=alt.Y("v:Q", title="正解率", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("name:N", title=None, scale=alt.Scale(domain=["完全一致", "文字ごと"], range=["#4c72b0", "#dd8452"]),
                        legend=alt.Legend(orient="bottom", direction="horizontal")),
        tooltip=[alt.Tooltip("L:Q", title="長さ"), alt.Tooltip("name:N", title="指標"), alt.Tooltip("v:Q", title="正解率", format=".2f")])
    here = curve.transform_filter("datum.L == length").mark_point(size=150, filled=False, strokeWidth=2.5, color="#222222").encode(
        x="L:Q", y="v:Q")
    layers = [lines, here]
    if chance is not None:
        layers.append(alt.Chart().mark_rule(color="#888888", strokeDash=[2, 2]).encode(y=alt.datum(float(chance))))
    plot = alt.layer(*layers).properties(width=width, height=150)
    line = _state_line(alt.Chart().transform_filter("datum.kind == 'acc' && datum.L == length"),
                       f"'長さ ' + length + '：完全一致 ' + format(datum.acc, '.2f') + '、文字ごと ' + format(datum.char, '.2f')"
                       f" + '（c は長さによらず {hidden} 次元）。この例：' + (datum.exact ? '正解' : '不正解')"
                       " + '（正しい文字 ' + datum.right + ' / ' + datum.L + '）'")
    return Figure(alt.vconcat(line, diagram, plot, spacing=6, data=_rows_data())
                  .add_params(param)
                  .properties(usermeta={"mixbook": {"kind": "bottleneck", "hidden": int(hidden)}},
                              title=alt.Title("長さを変えても、デコーダに渡るのは同じ大きさの c だけ",
                                              subtitle="上：一つの例（出力の青は正しい文字、赤は誤り）　下：長さごとの正解率（黒い輪：選んだ長さ"
                                                       + ("、点線：偶然の値）" if chance is not None else "）"))), rows=rows)


def bottleneck_state(chart: Any, *, length: int) -> dict[str, Any]:
    """What :func:`bottleneck_chart` shows for ``length``: both accuracies, the example, whether it is right and how
    many of its characters are."""
    (rows,) = chart_datasets(chart).values()
    (acc,) = [r for r in rows if r["kind"] == "acc" and r["L"] == length]
    target = acc["src"][::-1]
    return {"accuracy": acc["acc"], "char_accuracy": acc["char"], "source": acc["src"], "output": acc["out"],
            "exact": acc["out"] == target, "right": sum(_right_at(target, acc["out"]))}


# -- chapter 5: what the decoder attends to ---------------------------------------------------------------------------

def _key(i: str, text: str) -> str:
    """Vega expression: an ordered axis key "<2-digit index>|<text>" (the axis shows only the text)."""
    return f"(({i}) < 10 ? '0' : '') + ({i}) + '|' + ({text})"


def alignment_chart(examples: Mapping[int, Sequence[tuple[str, str, Any]]], *, length: int | None = None, example: int = 0,
                    size: int | None = None) -> Figure:
    """The attention weights a(t, s) of a decoder, as a heatmap, for an input length and an example on sliders.

    ``examples`` maps each input length to a list (the same number for every length) of
    ``(source, output, weights)``: an input, the model's output and its weights, shape
    ``(len(output) + 1, len(source))`` (a row per output character and one for ``<eos>``; fewer rows if
    decoding stopped early). The line above names, over the output steps t < L, how often the largest
    weight is on the corresponding input position S - t (0-based: L - 1 - t) and how often one to its
    right; :func:`alignment_state` computes the same from the embedded weights.
    """
    alt = _alt()
    lengths = sorted(int(L) for L in examples)
    if not lengths:
        raise ValueError("examples is empty: give, per input length, a list of (source, output, weights).")
    n_ex = {len(examples[L]) for L in lengths}
    if len(n_ex) != 1 or min(n_ex) < 1:
        raise ValueError("every length needs the same number (at least 1) of examples.")
    n_ex = min(n_ex)
    length = lengths[-1] if length is None else int(length)
    if length not in lengths:
        raise ValueError(f"length={length} is not one of the given lengths {lengths}.")
    example = _check_index("example", example, n_ex)
    rows: list[dict[str, Any]] = []
    for L in lengths:
        for e, (source, output, weights) in enumerate(examples[L]):
            w = np.asarray(weights, dtype=float)
            if len(source) != L or w.ndim != 2 or w.shape[1] != L or not 1 <= w.shape[0] <= len(output) + 1:
                raise ValueError(f"examples[{L}][{e}]: the source has {len(source)} characters and the weights shape "
                                 f"{w.shape}; want a source of {L} characters and weights of shape (<= {len(output) + 1}, {L}).")
            rows.append({"kind": "ex", "L": L, "e": e, "src": source, "out": output, "exact": output == source[::-1]})
            ys = list(output) + ["<eos>"]
            rows += [{"kind": "w", "L": L, "e": e, "t": t, "y": ys[t], "src": source, "w": _round(w[t], 3)} for t in range(w.shape[0])]
    size = size or min(420, 16 * (lengths[-1] + 1))
    params = [alt.param(name="length", value=length, bind=alt.binding_range(min=lengths[0], max=lengths[-1], step=1, name="長さ ")),
              alt.param(name="example", value=example + 1, bind=alt.binding_range(min=1, max=n_ex, step=1, name="例 "))]
    here = "datum.L == length && datum.e == example - 1"  # the slider counts examples from 1
    cells = (alt.Chart().transform_filter(f"datum.kind == 'w' && {here}")
             .transform_flatten(["w"], as_=["a"])
             .transform_window(n="row_number()", groupby=["t"])
             .transform_calculate(s="datum.n - 1")
             .transform_calculate(xk=_key("datum.s", "substring(datum.src, datum.s, datum.s + 1)"), yk=_key("datum.t", "datum.y")))
    label = "slice(datum.value, 3)"
    heat = cells.mark_rect().encode(
        x=alt.X("xk:O", title="入力", axis=alt.Axis(labelExpr=label, labelAngle=0, orient="top")),
        y=alt.Y("yk:O", title="出力", axis=alt.Axis(labelExpr=label)),
        color=alt.Color("a:Q", scale=alt.Scale(scheme="viridis", domain=[0, 1]), title="重み", legend=alt.Legend(gradientLength=120)),
        tooltip=[alt.Tooltip("y:N", title="出力"), alt.Tooltip("s:Q", title="入力の位置（0 始まり）"), alt.Tooltip("a:Q", title="重み", format=".3f")],
    ).properties(width=size, height=size)  # the same size for every length: the sliders below stay where they are
    tops = (cells.transform_filter("datum.t < datum.L").transform_joinaggregate(top="max(a)", groupby=["t"])
            .transform_filter("datum.a == datum.top")
            .transform_calculate(on="datum.s == datum.L - 1 - datum.t ? 1 : 0", right="datum.s == datum.L - datum.t ? 1 : 0")
            .transform_aggregate(on="max(on)", right="max(right)", groupby=["t"])
            .transform_aggregate(on="sum(on)", right="sum(right)", steps="count()"))
    line = _state_line(tops, f"'長さ ' + length + '・例 ' + example + '/{n_ex}：重みが最大の入力は、' + datum.steps + ' ステップ中 対応する位置に '"
                             " + datum.on + '、一つ右に ' + datum.right")
    verdict = _state_line(alt.Chart().transform_filter(f"datum.kind == 'ex' && {here}"),
                          "'入力 ' + datum.src + ' → 出力 ' + datum.out + '（' + (datum.exact ? '正解' : '誤り') + '）'", color="#555555")
    return Figure(alt.vconcat(line, verdict, heat, spacing=4, data=_rows_data())
                  .add_params(*params)
                  .properties(usermeta={"mixbook": {"kind": "alignment", "n_examples": n_ex}},
                              title=alt.Title("注意の重み a(t, s)：縦が出力、横が入力（明るいほど大きい）")), rows=rows)


def alignment_state(chart: Any, *, length: int, example: int) -> dict[str, Any]:
    """What :func:`alignment_chart` shows for (length, example), computed with NumPy from the embedded weights.

    ``on`` / ``right``: over the output steps t < L, how many have their largest weight (ties count) on
    the corresponding input position L - 1 - t / one to its right.
    """
    (rows,) = chart_datasets(chart).values()
    (ex,) = [r for r in rows if r["kind"] == "ex" and r["L"] == length and r["e"] == example]
    w = np.array([r["w"] for r in sorted((r for r in rows if r["kind"] == "w" and r["L"] == length and r["e"] == example),
                                          key=lambda r: r["t"])])
    steps = w[:length]
    top = steps.max(axis=1)
    t = np.arange(len(steps))
    on = steps[t, length - 1 - t] == top
    right = np.array([length - t_ < length and steps[t_, length - t_] == top[t_] for t_ in t])
    return {"weights": w, "source": ex["src"], "output": ex["out"], "exact": ex["exact"], "steps": len(steps),
            "on": int(on.sum()), "right": int(right.sum())}


# -- chapter 6: why the scores are divided by sqrt(d_k) -------------------------------------------------------------

def softmax_scale_chart(scores: Mapping[int, Sequence[float]], *, d_k: int | None = None,
                        mean_max: Mapping[int, tuple[float, float]] | None = None, n_mean: int | None = None,
                        width: int = 255) -> Figure:
    """Softmax weights of one query's scores against its keys, as they are and divided by sqrt(d_k).

    ``scores`` maps each d_k to the raw dot products q·k_j of one query with its keys (e.g. q and k
    drawn from a standard normal in d_k dimensions); a dropdown picks d_k. The chart computes both
    softmaxes itself (max-subtracted exponentials over the embedded scores), draws them side by side
    with the uniform weight as a dotted line, and names each panel's largest weight;
    :func:`softmax_scale_state` computes the same weights with NumPy. One example varies from draw to
    draw, so ``mean_max`` (optional) gives, per d_k, the largest weight averaged over ``n_mean`` draws
    (unscaled, scaled), shown in a second line.
    """
    alt = _alt()
    dks = [int(d) for d in scores]
    if not dks or any(d < 1 for d in dks):
        raise ValueError(f"scores must map positive d_k values to scores, got keys {list(scores)!r}.")
    n_keys = {len(scores[d]) for d in scores}
    if len(n_keys) != 1 or min(n_keys) < 2:
        raise ValueError("every d_k needs the same number (at least 2) of scores, one per key.")
    d_k = dks[-1] if d_k is None else int(d_k)
    if d_k not in dks:
        raise ValueError(f"d_k={d_k} is not one of the given d_k values {dks}.")
    if mean_max is not None and (n_mean is None or any(d not in mean_max for d in dks)):
        raise ValueError("mean_max needs a pair (unscaled, scaled) for every d_k, and n_mean the number of draws it averages.")
    rows = [{"d": d, "key": j, "s": s} for d in dks for j, s in enumerate(_round(scores[d], 5))]
    if mean_max is not None:
        rows += [{"d": d, "key": -1, "m0": round(float(mean_max[d][0]), 4), "m1": round(float(mean_max[d][1]), 4)} for d in dks]
    param = alt.param(name="dk", value=d_k, bind=alt.binding_select(options=dks, name="dₖ "))
    base = (alt.Chart().transform_filter("datum.d == dk && datum.key >= 0")
            .transform_calculate(z1="datum.s / sqrt(datum.d)")
            .transform_joinaggregate(m0="max(s)", m1="max(z1)")
            .transform_calculate(e0="exp(datum.s - datum.m0)", e1="exp(datum.z1 - datum.m1)")
            .transform_joinaggregate(S0="sum(e0)", S1="sum(e1)")
            .transform_calculate(p0="datum.e0 / datum.S0", p1="datum.e1 / datum.S1"))
    uniform = alt.Chart().mark_rule(color="#888888", strokeDash=[2, 2]).encode(y=alt.datum(1 / min(n_keys)))
    panels = []
    for field, name in (("p0", "割らない"), ("p1", "√dₖ で割る")):
        bars = base.mark_bar(color="#4c72b0").encode(
            x=alt.X("key:O", title="キー", axis=alt.Axis(labelAngle=0)),
            y=alt.Y(f"{field}:Q", title="softmax の重み", scale=alt.Scale(domain=[0, 1.05])),
            tooltip=[alt.Tooltip("key:O", title="キー"), alt.Tooltip(f"{field}:Q", title="重み", format=".3f")])
        panels.append(alt.layer(bars, uniform).properties(width=width, height=150, title=alt.Title(name, fontSize=12)))
    lines = [_state_line(base.transform_aggregate(P0="max(p0)", P1="max(p1)"),
                         "'dₖ = ' + dk + '：この例の最大の重みは、割らないと ' + format(datum.P0, '.2f')"
                         " + '、√dₖ で割ると ' + format(datum.P1, '.2f')")]
    if mean_max is not None:
        lines.append(_state_line(alt.Chart().transform_filter("datum.d == dk && datum.key < 0"),
                                 f"'（{n_mean} 例の平均では ' + format(datum.m0, '.2f') + ' と ' + format(datum.m1, '.2f')"
                                 f" + '。一つの例は平均からずれる）'", color="#555555"))
    return Figure(alt.vconcat(*lines, alt.hconcat(*panels, spacing=20), spacing=4, data=_rows_data())
                  .add_params(param)
                  .properties(usermeta={"mixbook": {"kind": "softmax_scale", "n_mean": n_mean}},
                              title=alt.Title("同じクエリとキーの、スケールだけが違う二つの softmax（点線は一様な重み）")), rows=rows)


def softmax_scale_state(chart: Any, *, d_k: int) -> dict[str, Any]:
    """The weights :func:`softmax_scale_chart` draws for ``d_k``, computed with NumPy from the embedded scores."""
    (rows,) = chart_datasets(chart).values()
    s = np.array([r["s"] for r in sorted((r for r in rows if r["d"] == d_k and r["key"] >= 0), key=lambda r: r["key"])])
    if not len(s):
        raise ValueError(f"the chart holds no scores for d_k={d_k}.")
    raw, scaled = softmax(s), softmax(s / np.sqrt(d_k))
    mean = [(r["m0"], r["m1"]) for r in rows if r["d"] == d_k and r["key"] < 0]
    return {"raw": raw, "scaled": scaled, "max_raw": float(raw.max()), "max_scaled": float(scaled.max()),
            "mean_max": mean[0] if mean else None}


# -- chapter 6: the sinusoidal position encoding, computed by the chart from its formula ----------------------------

def _check_pe(n_positions: int, d_model: int) -> None:
    if not isinstance(n_positions, (int, np.integer)) or n_positions < 2:
        raise ValueError(f"n_positions must be an int >= 2, got {n_positions!r}.")
    if not isinstance(d_model, (int, np.integer)) or d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be a positive even int (sines and cosines come in pairs), got {d_model!r}.")


def _pe_value(pos: str, dim: str, d_model: int, base: float) -> str:
    """Vega expression: PE[pos, dim] (sin for an even dimension, cos for an odd one, as the paper)."""
    angle = f"({pos}) * pow({base}, -(({dim}) - ({dim}) % 2) / {d_model})"
    return f"(({dim}) % 2 == 0 ? sin({angle}) : cos({angle}))"


def _pe(n_positions: int, d_model: int, base: float) -> np.ndarray:
    from .transformer import sinusoidal_positions

    return sinusoidal_positions(int(n_positions), int(d_model), base=base).double().numpy()


def pe_dot_chart(n_positions: int, d_model: int, *, delta: int = 5, base: float = 10000.0, width: int = 250) -> Figure:
    """The dot products PE[pos]·PE[pos+δ] of the sinusoidal position encoding, for a difference δ on a slider.

    Three panels: PE[0]·PE[δ'] against every difference δ' (the chosen δ marked), PE[pos]·PE[pos+δ]
    for every pos (a flat line: it does not depend on pos), and the contribution of each dimension
    pair i to PE[0]·PE[δ] (sin·sin + cos·cos of pair i, which is cos(ω_i δ)). The chart embeds no
    data: it computes every PE value from the formula and every dot product as a sum over dimension
    pairs; :func:`pe_dot_state` computes the same from :func:`mixlib.course.transformer.sinusoidal_positions`.
    """
    alt = _alt()
    _check_pe(n_positions, d_model)
    delta = _check_index("delta", delta, n_positions)
    half = d_model // 2
    param = alt.param(name="delta", value=delta, bind=alt.binding_range(min=0, max=n_positions - 1, step=1, name="差 δ "))
    # one row per (a, b, i): the two positions' pair-i term sin(aω)sin(bω) + cos(aω)cos(bω)
    w = f"pow({base}, -2 * datum.i / {d_model})"
    term = f"sin(datum.a * {w}) * sin(datum.b * {w}) + cos(datum.a * {w}) * cos(datum.b * {w})"

    def pairs(a: str, b: str, keep: str = "true") -> Any:
        return (alt.Chart(alt.sequence(0, n_positions, as_="p"))
                .transform_calculate(a=a, b=b).transform_filter(keep)
                .transform_calculate(i=f"sequence(0, {half})").transform_flatten(["i"])
                .transform_calculate(t=term))

    by_diff = pairs("0", "datum.p").transform_aggregate(dot="sum(t)", groupby=["p"])
    curve = by_diff.mark_line(color="#4c72b0").encode(x=alt.X("p:Q", title="位置の差 δ'"), y=alt.Y("dot:Q", title="内積"))
    mark = by_diff.transform_filter("datum.p == delta").mark_point(color="#d62728", filled=True, size=70).encode(x="p:Q", y="dot:Q")
    left = alt.layer(curve, mark).properties(width=width, height=140, title=alt.Title("PE[0]·PE[δ']（選んだ δ は赤）", fontSize=12))
    along = pairs("datum.p", "datum.p + delta", f"datum.p + delta < {n_positions}").transform_aggregate(dot="sum(t)", groupby=["p"])
    mid = (along.mark_line(color="#d62728", point=alt.OverlayMarkDef(size=30, filled=True)).encode(
        x=alt.X("p:Q", title="pos", scale=alt.Scale(domain=[0, n_positions - 1])),
        y=alt.Y("dot:Q", title="内積", scale=alt.Scale(domain=[-half, half + 1])))
        .properties(width=width, height=140, title=alt.Title("選んだ δ での PE[pos]·PE[pos+δ]", fontSize=12)))
    contrib = pairs("0", "delta", "datum.p == 0")
    right = (contrib.mark_bar(color="#55a868").encode(
        x=alt.X("i:O", title="次元の組 i", axis=alt.Axis(labelExpr=f"datum.value % {max(1, half // 8)} == 0 ? datum.value : ''",
                                                         labelAngle=0)),
        y=alt.Y("t:Q", title="寄与", scale=alt.Scale(domain=[-1.1, 1.1])),
        tooltip=[alt.Tooltip("i:O", title="組 i"), alt.Tooltip("t:Q", title="寄与", format=".3f")])
        .properties(width=2 * width + 60, height=110, title=alt.Title("組 i ごとの寄与（PE[0]·PE[δ] の次元 2i, 2i+1 の 2 項の和）", fontSize=12)))
    summary = along.transform_aggregate(lo="min(dot)", hi="max(dot)", n="count()")
    line = _state_line(summary, "'δ = ' + delta + '：' + (datum.n > 1 ? '差が δ の ' + datum.n + ' 組の内積 PE[pos]·PE[pos+δ] は、最小 '"
                                " + format(datum.lo, '.3f') + '、最大 ' + format(datum.hi, '.3f')"
                                " : '差が δ の組は 1 組だけ：PE[0]·PE[δ] = ' + format(datum.lo, '.3f'))")
    total = _state_line(contrib.transform_aggregate(s="sum(t)"), "'組ごとの寄与の和 ' + format(datum.s, '.3f') + '（= PE[0]·PE[δ]）'",
                        color="#2f6b3a")
    return Figure(alt.vconcat(line, alt.hconcat(left, mid, spacing=24), total, right, spacing=6)
                  .add_params(param)
                  .properties(usermeta={"mixbook": {"kind": "pe_dot", "n_positions": int(n_positions), "d_model": int(d_model),
                                                    "base": float(base)}},
                              title=alt.Title(f"位置符号化の内積は位置の差 δ だけで決まる（{n_positions} 位置 × {d_model} 次元）")))


def pe_dot_state(n_positions: int, d_model: int, *, delta: int, base: float = 10000.0) -> dict[str, Any]:
    """What :func:`pe_dot_chart` shows for ``delta``, from the library's position encoding."""
    _check_pe(n_positions, d_model)
    pe = _pe(n_positions, d_model, base)
    along = np.einsum("pd,pd->p", pe[: n_positions - delta], pe[delta:])
    pair = pe[0, 0::2] * pe[delta, 0::2] + pe[0, 1::2] * pe[delta, 1::2]
    return {"by_diff": pe[0] @ pe.T, "along": along, "pair": pair, "lo": float(along.min()), "hi": float(along.max()),
            "n": len(along), "sum": float(pair.sum())}


def pe_position_chart(n_positions: int, d_model: int, *, pos: int = 10, dim: int = 6, base: float = 10000.0) -> Figure:
    """The position encoding as a heatmap, with one position's vector PE[pos] and one dimension's wave PE[:, dim].

    Two sliders choose the position (green) and the dimension (orange); the line above names the
    dimension's function (sin / cos), its wavelength and the value PE[pos, dim]. The chart computes
    every value from the formula; :func:`pe_position_state` reads them from the library's encoding.
    """
    alt = _alt()
    _check_pe(n_positions, d_model)
    pos = _check_index("pos", pos, n_positions)
    dim = _check_index("dim", dim, d_model)
    params = [alt.param(name="pos", value=pos, bind=alt.binding_range(min=0, max=n_positions - 1, step=1, name="位置 ")),
              alt.param(name="dim", value=dim, bind=alt.binding_range(min=0, max=d_model - 1, step=1, name="次元 "))]
    value = _pe_value("datum.p", "datum.j", d_model, base)
    grid = (alt.Chart(alt.sequence(0, n_positions, as_="p"))
            .transform_calculate(j=f"sequence(0, {d_model})").transform_flatten(["j"]).transform_calculate(v=value))
    cell = max(1, min(4, 256 // max(n_positions, d_model)))
    heat = grid.mark_rect().encode(
        x=alt.X("j:O", title="次元", axis=alt.Axis(values=list(range(0, d_model, max(1, d_model // 4))), labelAngle=0, ticks=False)),
        y=alt.Y("p:O", title="位置", axis=alt.Axis(values=list(range(0, n_positions, max(1, n_positions // 4))), ticks=False)),
        color=alt.Color("v:Q", scale=alt.Scale(scheme="redblue", domain=[1, -1]), legend=None))
    rules = alt.Chart(alt.Data(values=[{}]))
    heat = alt.layer(heat, rules.mark_rule(color="#2ca02c", strokeWidth=2).encode(y=alt.datum(alt.ExprRef("pos"), type="ordinal")),
                     rules.mark_rule(color="#ff7f0e", strokeWidth=2).encode(x=alt.datum(alt.ExprRef("dim"), type="ordinal"))
                     ).properties(width=alt.Step(cell), height=alt.Step(cell),
                                  title=alt.Title("PE（緑：位置、橙：次元）", fontSize=12, subtitle="赤 +1、白 0、青 −1"))
    every = max(1, d_model // 8)
    vec = grid.transform_filter("datum.p == pos").mark_bar().encode(
        x=alt.X("j:O", title="次元", axis=alt.Axis(labelExpr=f"datum.value % {every} == 0 ? datum.value : ''", labelAngle=0, ticks=False)),
        y=alt.Y("v:Q", title="値", scale=alt.Scale(domain=[-1.1, 1.1])),
        color=alt.condition("datum.j == dim", alt.value("#ff7f0e"), alt.value("#2ca02c")),
        tooltip=[alt.Tooltip("j:O", title="次元"), alt.Tooltip("v:Q", title="値", format=".3f")],
    ).properties(width=270, height=100, title=alt.Title("選んだ位置のベクトル PE[pos]", fontSize=12))
    wave_rows = grid.transform_filter("datum.j == dim")
    # the formula's curve between the positions (a line through the integer positions alone zigzags for the
    # short wavelengths), and the values the encoding takes, at the positions, as dots on it
    curve = (alt.Chart(alt.sequence(0, (n_positions - 1) * 10 + 1, as_="k"))
             .transform_calculate(p="datum.k / 10").transform_calculate(v=_pe_value("datum.p", "dim", d_model, base)))
    wave = alt.layer(
        curve.mark_line(color="#ff7f0e", strokeWidth=1, opacity=0.55).encode(
            x=alt.X("p:Q", title="位置", scale=alt.Scale(domain=[0, n_positions - 1])), y=alt.Y("v:Q", title="値", scale=alt.Scale(domain=[-1.1, 1.1]))),
        wave_rows.mark_point(color="#ff7f0e", filled=True, size=12, opacity=1).encode(x="p:Q", y="v:Q"),
        wave_rows.transform_filter("datum.p == pos").mark_point(color="#2ca02c", filled=True, size=70).encode(x="p:Q", y="v:Q"),
    ).properties(width=270, height=100, title=alt.Title("選んだ次元の波 PE[:, dim]（点が位置での値）", fontSize=12))
    line = _state_line(grid.transform_filter("datum.p == pos && datum.j == dim"),
                       f"'位置 ' + pos + '・次元 ' + dim + '（' + (dim % 2 == 0 ? 'sin' : 'cos') + '、波長 '"
                       f" + format(2 * PI * pow({base}, (dim - dim % 2) / {d_model}), '.1f') + '）：値 ' + format(datum.v, '.3f')")
    return Figure(alt.vconcat(line, alt.hconcat(heat, alt.vconcat(vec, wave, spacing=10), spacing=24), spacing=6)
                  .add_params(*params)
                  .properties(usermeta={"mixbook": {"kind": "pe_position", "n_positions": int(n_positions), "d_model": int(d_model),
                                                    "base": float(base)}},
                              title=alt.Title(f"位置符号化 PE（{n_positions} 位置 × {d_model} 次元）：位置のベクトルと次元の波")))


def pe_position_state(n_positions: int, d_model: int, *, pos: int, dim: int, base: float = 10000.0) -> dict[str, Any]:
    """What :func:`pe_position_chart` shows for (pos, dim), from the library's position encoding."""
    _check_pe(n_positions, d_model)
    pe = _pe(n_positions, d_model, base)
    return {"vector": pe[pos], "wave": pe[:, dim], "value": float(pe[pos, dim]), "kind": "sin" if dim % 2 == 0 else "cos",
            "wavelength": float(2 * np.pi * base ** ((dim - dim % 2) / d_model))}


# -- chapter 7: which generated lower phrases are wrong, epoch by epoch ----------------------------------------------

def errors_chart(generations: Any, *, epoch: int, max_rows: int = 12, max_chars: int = 36, char_step: int = 14) -> Figure:
    """The wrongly generated texts of an epoch on a slider: per row its label, the right text and the generated one.

    ``generations``: a table with columns ``epoch``, ``number`` (a label per text), ``gold`` and ``pred``
    (e.g. ``run.generations["train"]`` of :func:`mixlib.course.hyakunin.train`). The first ``max_rows``
    wrong rows of the chosen epoch are drawn as two lines of characters on one grid: the right text in
    grey and the generated one with each character blue where it equals the right text at that position
    and red where it does not (missing characters at the end as a red ＿), as
    :func:`mixlib.course.hyakunin.render_errors` marks them; at most ``max_chars`` characters a line. The chart
    compares the characters itself; :func:`errors_state` counts the red ones in Python.
    """
    alt = _alt()
    need = {"epoch", "number", "gold", "pred"}
    if not need <= set(generations.columns):
        raise ValueError(f"generations needs the columns {sorted(need)}; it has {list(generations.columns)}.")
    epochs = sorted(int(e) for e in generations.epoch.unique())
    if not epochs:
        raise ValueError("generations is empty: give the generations of at least one epoch.")
    if int(epoch) not in epochs:
        raise ValueError(f"epoch={epoch} has no generations; the table has epochs {epochs[0]}..{epochs[-1]}.")
    rows: list[dict[str, Any]] = []
    for ep in epochs:
        g = generations[generations.epoch == ep]
        wrong = g[g.pred != g.gold]
        rows.append({"kind": "ep", "ep": ep, "n": len(g), "wrong": len(wrong)})
        rows += [{"kind": "row", "ep": ep, "r": r, "num": str(num), "gold": str(gold), "pred": str(pred)}
                 for r, (num, gold, pred) in enumerate(zip(wrong.number, wrong.gold, wrong.pred)) if r < max_rows]
    param = alt.param(name="epoch", value=int(epoch), bind=alt.binding_range(min=epochs[0], max=epochs[-1], step=1, name="エポック "))
    here = alt.Chart().transform_filter("datum.kind == 'row' && datum.ep == epoch")
    x0 = 48  # the grid of characters starts right of the label

    def chars(text: str, line: int) -> Any:
        return (here.transform_calculate(ch=f"split({text}, '')").transform_flatten(["ch"])
                .transform_window(i="row_number()", groupby=["r"]).transform_calculate(i="datum.i - 1", line=str(line))
                .transform_filter(f"datum.i < {max_chars}")
                .transform_calculate(x=f"{x0} + datum.i * {char_step}", y="datum.r * 3 + datum.line"))

    # three slots per text: its two lines and a gap (an empty mark) before the next; the first text on top. Only
    # the epoch's slots are in the domain, so an epoch with few wrong texts draws a short chart
    y = alt.Y("y:O", axis=None, scale=alt.Scale(type="point", padding=0.5))
    x = alt.X("x:Q", axis=None, scale=alt.Scale(domain=[0, x0 + max_chars * char_step]))
    gold = chars("datum.gold", 0).mark_text(align="left", fontSize=12, color="#777777").encode(x=x, y=y, text="ch:N")
    pred = (chars("pad(datum.pred, length(datum.gold), '＿', 'right')", 1)
            .transform_calculate(ok="datum.i < length(datum.pred) && substring(datum.gold, datum.i, datum.i + 1) == datum.ch"))
    pred_marks = pred.mark_text(align="left", fontSize=12, fontWeight="bold").encode(
        x=x, y=y, text="ch:N", color=alt.condition("datum.ok", alt.value("#1f5fbf"), alt.value("#c62828")))
    label = (here.transform_calculate(x="0", y="datum.r * 3", t="'#' + datum.num")
             .mark_text(align="left", fontSize=11, color="#333333").encode(x=x, y=y, text="t:N"))
    tag = (here.transform_calculate(x="0", y="datum.r * 3 + 1", t="'生成'")
           .mark_text(align="left", fontSize=10, color="#888888").encode(x=x, y=y, text="t:N"))
    gap = here.transform_calculate(x="0", y="datum.r * 3 + 2", t="''").mark_text().encode(x=x, y=y, text="t:N")
    grid = alt.layer(label, tag, gap, gold, pred_marks).properties(width=x0 + max_chars * char_step, height=alt.Step(15),
                                                              view={"stroke": None})
    head = _state_line(alt.Chart().transform_filter("datum.kind == 'ep' && datum.ep == epoch"),
                       f"'エポック ' + epoch + '：' + datum.n + ' 首中 ' + datum.wrong + ' 首で誤り'"
                       f" + (datum.wrong > {max_rows} ? '（上から {max_rows} 首を表示）' : datum.wrong == 0 ? '（すべて完全一致）' : '')")
    red = _state_line(pred.transform_filter("!datum.ok").transform_aggregate(k="count()"),
                      "'灰色の行が正解、その下の行が生成。赤（誤り・足りない文字）は ' + datum.k + ' 字'", color="#555555")
    return Figure(alt.vconcat(head, red, grid, spacing=4, data=_rows_data())
                  .add_params(param)
                  .properties(usermeta={"mixbook": {"kind": "errors", "max_rows": int(max_rows), "max_chars": int(max_chars)}},
                              title=alt.Title("生成した下の句の誤り（正しい文字は青、誤りは赤）")), rows=rows)


def errors_state(chart: Any, *, epoch: int) -> dict[str, Any]:
    """What :func:`errors_chart` shows for ``epoch``: its counts, and the red characters counted in Python."""
    spec = chart if isinstance(chart, dict) else chart.to_dict()
    meta = spec["usermeta"]["mixbook"]
    (rows,) = chart_datasets(spec).values()
    (ep,) = [r for r in rows if r["kind"] == "ep" and r["ep"] == epoch]
    shown = [r for r in rows if r["kind"] == "row" and r["ep"] == epoch]
    red = 0
    for r in shown:
        gold, pred = r["gold"], r["pred"]
        marks = _right_at(gold, pred) + [False] * max(0, len(gold) - len(pred))  # missing characters are red
        red += marks[: meta["max_chars"]].count(False)
    return {"n": ep["n"], "wrong": ep["wrong"], "shown": len(shown), "red": red}
