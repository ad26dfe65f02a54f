"""Tests for mixlib.interactive (kernel-free charts) and mixlib._mystnb (how the site shows them).

The numbers a chart moves through are the ones mixlib computed: for several
states of each chart, the embedded data (what the browser receives) is
compared with an independent reading of the analysis result. The browser side
(controls move, the drawn values follow) is checked on the built site by
``.ci/check_charts.py`` (``make site-check``).
"""

from __future__ import annotations

import json
from importlib.metadata import entry_points

import numpy as np
import pytest

import mixlib
from mixlib import _mystnb, interactive, plots

TEXTS = [("the cat sat on the mat .", "it was warm , and the dog slept ."),
         ("a bank lends money to people who need it .", "rivers have banks too , but they lend nothing ."),
         ("one short sentence !", "and a second .")]


@pytest.fixture(scope="module")
def mixings(tiny_enc):
    masked = mixlib.decompose(tiny_enc, mixlib.mask_tokens(tiny_enc, TEXTS, rate=0.3, seed=1), vectors=False, progress=False)
    plain = mixlib.decompose(tiny_enc, TEXTS, vectors=False, progress=False)
    return masked, plain


@pytest.fixture(scope="module")
def maps(tiny_enc):
    return mixlib.context_maps(tiny_enc, mixlib.mask_tokens(tiny_enc, TEXTS, rate=0.3, seed=1))


def test_token_key_round_trip():
    for pos, cat, tok in [(0, "[CLS]", "[CLS]"), (12, "句読点", "|"), (3, "その他", "a|b")]:
        assert interactive.split_token_key(interactive.token_key(pos, cat, tok)) == (pos, cat, tok)
    # string order is token order (Vega sorts a layered chart's ordinal domain as strings)
    keys = [interactive.token_key(p, "その他", "w") for p in (0, 1, 2, 9, 10, 11, 100, 511)]
    assert sorted(keys) == keys
    with pytest.raises(ValueError, match="outside 0..9999"):
        interactive.token_key(10_000, "その他", "w")


def test_mixing_chart_embeds_what_decompose_computed(tiny_enc, mixings):
    m, plain = mixings
    chart = interactive.mixing_chart(m, tiny_enc, plain=plain, examples=3, rate=0.3)
    spec = chart.to_dict()
    assert {p["name"] for p in spec["params"]} == {"example", "layer", "masked"}
    for e, layer, masked in [(0, 0, True), (1, 1, True), (2, 1, False), (1, 0, False)]:
        res = m if masked else plain
        state = interactive.mixing_state(chart, example=e, layer=layer, masked=masked)
        real = np.nonzero(res.real[e].numpy())[0]
        r = res.row(layer)
        assert state["token"] == list(res.tokens(e))
        # embedded with 2 decimals (norms) and 1 decimal (ratio in percent)
        np.testing.assert_allclose(state["ratio"], 100 * res.ratio[r, e].numpy()[real], atol=0.051)
        np.testing.assert_allclose(state["mix"], res.norm_mix_ln[r, e].numpy()[real], atol=0.0051)
        np.testing.assert_allclose(state["attn"], res.norm_keep_attn_ln[r, e].numpy()[real], atol=0.0051)
        np.testing.assert_allclose(state["res"], res.norm_res_ln[r, e].numpy()[real], atol=0.0051)
    # the masked and the plain run differ somewhere (the checkbox changes what is drawn)
    a = interactive.mixing_state(chart, example=0, layer=1, masked=True)["token"]
    b = interactive.mixing_state(chart, example=0, layer=1, masked=False)["token"]
    assert "[MASK]" in a and "[MASK]" not in b


def test_mixing_chart_without_plain_has_no_checkbox_and_checks_its_arguments(tiny_enc, mixings):
    m, plain = mixings
    chart = interactive.mixing_chart(m, tiny_enc, examples=2, layer=0, example=1)
    params = {p["name"]: p for p in chart.to_dict()["params"]}
    assert set(params) == {"example", "layer"} and params["example"]["value"] == 1 and params["layer"]["value"] == 0
    assert len(params["example"]["bind"]["options"]) == 2
    with pytest.raises(ValueError, match="out of range"):
        interactive.mixing_chart(m, tiny_enc, examples=2, example=2)
    with pytest.raises(ValueError, match="was not analysed"):
        interactive.mixing_chart(m, tiny_enc, layer=7)
    with pytest.raises(ValueError, match="positive int"):
        interactive.mixing_chart(m, tiny_enc, examples=0)
    short = mixlib.decompose(tiny_enc, TEXTS[:1], layers=[0], vectors=False, progress=False)
    with pytest.raises(ValueError, match="same texts with the same layers"):
        interactive.mixing_chart(m, tiny_enc, plain=short)
    # the example labels: the texts when given (too few is an error that says so), else the tokens
    with pytest.raises(ValueError, match="texts has 1 entries; the chart offers 2 examples"):
        interactive.mixing_chart(m, tiny_enc, examples=2, texts=TEXTS[:1])
    labels = interactive.mixing_chart(m, tiny_enc, examples=2, texts=TEXTS).to_dict()["params"][0]["bind"]["labels"]
    assert labels[1].startswith("1: a bank lends money to people who need it . / rivers")  # a pair is shown as "A / B"
    # without a masking rate, the checkbox says only that [MASK] is inserted
    (box,) = [p for p in interactive.mixing_chart(m, tiny_enc, plain=plain, examples=2).to_dict()["params"] if p["name"] == "masked"]
    assert box["bind"]["name"].strip() == "[MASK] を入れる"


def test_context_chart_embeds_each_maps_row_as_shares(tiny_enc, maps):
    chart = interactive.context_chart(maps, tiny_enc, examples=3, token=2)
    names = list(interactive.CONTEXT_MEASURES)
    for e, layer, token in [(0, 0, 0), (1, 1, 5), (2, 1, 3), (2, 0, 200)]:
        state = interactive.context_state(chart, example=e, layer=layer, token=token)
        n = len(maps.token_strings[e])
        assert state["j"] == min(token, n - 1)  # past the end: the last token
        assert state["token"] == list(maps.token_strings[e])
        for name in names:
            row = maps.map(name, layer, e)[state["j"]].astype(float)
            np.testing.assert_allclose(state["shares"][name], row / row.sum(), atol=5.1e-4)
    spec = chart.to_dict()
    slider = next(p for p in spec["params"] if p["name"] == "token")
    assert slider["bind"]["max"] == max(len(t) for t in maps.token_strings) - 1
    with pytest.raises(ValueError, match="not in these maps"):
        interactive.context_chart(maps, tiny_enc, measures=["nope"])


def test_position_head_chart_embeds_position_attention(tiny_enc):
    from mixlib.plots import attention_by_offset
    from mixlib.positional import position_attention

    chart = interactive.position_head_chart(tiny_enc, n=12, max_offset=3, layer=1, head=2)
    params = {p["name"]: p["value"] for p in chart.to_dict()["params"]}
    assert params == {"layer": 1, "head": 2, "layernorm": True}
    for layer, head, ln in [(0, 0, True), (1, 3, False), (1, 2, True)]:
        state = interactive.position_head_state(chart, layer=layer, head=head, layernorm=ln)
        A = position_attention(tiny_enc, layer=layer, n=12, layernorm=ln)[head]
        np.testing.assert_allclose(state["map"], A, atol=5.1e-4)
        prof = attention_by_offset(A, 3)["weight"]
        assert state["offsets"] == list(prof.index)
        np.testing.assert_allclose(state["profile"], prof.to_numpy(), atol=5.1e-4)
    # the red "heaviest" bar is the same test as the line's: a flat profile (all bars tie) has none
    assert f"datum.p == datum.pmax && datum.pmax >= {interactive.FLAT_PROFILE / 12!r}" in json.dumps(chart.to_dict())
    assert f"datum.p < {interactive.FLAT_PROFILE / 12!r}" in json.dumps(chart.to_dict())
    for bad in ({"n": 1}, {"max_offset": 12}, {"layer": 5}, {"head": 9}):
        with pytest.raises(ValueError):
            interactive.position_head_chart(tiny_enc, **{"n": 12, "max_offset": 3, **bad})


def test_head_chart_embeds_top_clusters_of_every_head(tiny_enc, stretch_and_clusters):
    st, cl, cs = stretch_and_clusters
    chart = interactive.head_chart(cs, cl, tiny_enc, layers=st.layers, top=5, layer=1, head=2, n=4)
    params = {p["name"]: p["value"] for p in chart.to_dict()["params"]}
    assert params == {"layer": 1, "head": 2, "top": 4}
    for layer, head in [(0, 0), (1, 2), (1, 3)]:
        state = interactive.head_state(chart, layer=layer, head=head)
        t = mixlib.top_clusters(cs, cl, st.layers.index(layer), head, n=5)
        assert state["c"] == t["cluster"].tolist() and state["typ"] == t["type"].tolist()
        np.testing.assert_allclose(state["psi"], t["psi"], atol=5.1e-4)
        assert all(lab.startswith(f"#{c}: ") for lab, c in zip(state["lab"], state["c"]))
        assert state["lab"][0][len(f"#{state['c'][0]}: "):].rstrip("…") in mixlib.plots.font_safe(t["tokens"].iloc[0])
    with pytest.raises(ValueError, match=r"\(L, H, K\)"):
        interactive.head_chart(cs[0], cl, tiny_enc)
    with pytest.raises(ValueError, match="not among the analysed layers"):
        interactive.head_chart(cs, cl, tiny_enc, layer=4)


def test_token_chart_embeds_each_tokens_psi(tiny_enc, stretch_and_clusters):
    st, cl, _ = stretch_and_clusters
    chart = interactive.token_chart(st, cl, tiny_enc, tokens=["january", "the", "notaword123", "##ing"], token="the")
    spec = chart.to_dict()
    (param,) = spec["params"]
    assert param["value"] == "the" and param["bind"]["options"] == ["january", "the", "##ing"]  # not in the vocabulary: left out
    for tok in ("january", "##ing"):
        state = interactive.token_state(chart, token=tok)
        tid = tiny_enc.tokenizer.convert_tokens_to_ids(tok)
        assert state["c"] == int(cl.labels[tid]) and state["typ"] == str(cl.cluster_types[state["c"]])
        np.testing.assert_allclose(state["psi"], st.psi_qkv[:, :, tid], atol=5.1e-4)
        # the cells' text is Python's own .2f of the full value (as the static figure), not a second rounding in the browser
        (row,) = [r for rows in interactive.chart_datasets(spec).values() for r in rows if r["t"] == tok]
        assert row["lab"] == [f"{v:.2f}" for v in np.asarray(st.psi_qkv)[:, :, tid].ravel()]
    # one colour scale for every token offered (colours compare between tokens), up to the 99th percentile
    ids = [tiny_enc.tokenizer.convert_tokens_to_ids(t) for t in ("january", "the", "##ing")]
    (scale,) = [layer["encoding"]["color"]["scale"] for layer in spec["vconcat"][1]["layer"]
                if "scale" in layer["encoding"].get("color", {})]
    offered = np.asarray(st.psi_qkv)[:, :, ids]
    assert scale["domain"] == pytest.approx([offered.min(), np.percentile(offered, 99)], abs=5.1e-4) and scale["clamp"]
    first = interactive.token_chart(st, cl, tiny_enc, tokens=["the"], token="january").to_dict()["params"][0]
    assert first["value"] == "january" and first["bind"]["options"] == ["january", "the"]
    with pytest.raises(ValueError, match="not one vocabulary entry"):
        interactive.token_chart(st, cl, tiny_enc, tokens=["the"], token="notaword123")
    with pytest.raises(ValueError, match="none of the tokens"):
        interactive.token_chart(st, cl, tiny_enc, tokens=["notaword123"])


def test_fill_mask_chart_embeds_every_models_top_k():
    import pandas as pd

    def fake(scale):  # a deterministic "model": candidates depend on the text
        def fill(text, k):
            toks = [f"{w}{scale}" for w in text.split()][:k]
            p = np.linspace(0.5, 0.1, len(toks)) / scale
            return [pd.DataFrame({"rank": range(1, len(toks) + 1), "token": toks, "prob": p})]
        return fill

    texts = ["the [MASK] sat on a mat with a hat", "a b [MASK] d e f g h i j k"]
    chart = interactive.fill_mask_chart({"A": fake(1), "B": fake(2)}, texts, text="x [MASK] y", k=3, k_max=4)
    spec = chart.to_dict()
    assert spec["usermeta"]["mixbook"]["texts"] == ["x [MASK] y", *texts]  # the initial text is offered first
    for s, t in enumerate(spec["usermeta"]["mixbook"]["texts"]):
        state = interactive.fill_mask_state(chart, sentence=s)
        for name, scale in (("A", 1), ("B", 2)):
            want = fake(scale)(t, 4)[0]
            assert state[name]["tok"] == want["token"].tolist() and state[name]["r"] == want["rank"].tolist()
            np.testing.assert_allclose(state[name]["p"], want["prob"], atol=5.1e-5)
    with pytest.raises(ValueError, match="has no \\[MASK\\]"):
        interactive.fill_mask_chart({"A": fake(1)}, ["no blank here"])
    with pytest.raises(ValueError, match="between 1 and 4"):
        interactive.fill_mask_chart({"A": fake(1)}, texts, k=5, k_max=4)
    with pytest.raises(ValueError, match="fillers is empty"):
        interactive.fill_mask_chart({}, texts)


def test_figure_displays_for_jupyter_and_for_the_site(tiny_enc, mixings):
    fig = interactive.mixing_chart(mixings[0], tiny_enc, examples=1)
    data, _ = fig._repr_mimebundle_()
    # Altair's own display (Jupyter, Colab) and the specification the site's build draws
    assert "text/html" in data and "vega" in data["text/html"]
    (mime,) = [k for k in data if _mystnb.VEGALITE_MIME.match(k)]
    assert mime == interactive.Figure.mime_type() and data[mime] == fig.to_dict()
    assert "params=['example', 'layer']" in repr(fig)
    # laid out again for every state (a longer sentence must not be cut off at the first state's width)
    assert fig.to_dict()["autosize"] == {"type": "pad", "resize": True}


def test_figure_rows_join_the_spec_only_when_written_and_the_chart_keeps_them(tiny_enc, mixings):
    import altair as alt

    fig = interactive.mixing_chart(mixings[0], tiny_enc, examples=1)
    spec = fig.to_dict()
    # the charts name the dataset; the rows are at the top, in the spec's JSON
    assert spec["data"] == {"name": interactive.ROWS} and spec["datasets"][interactive.ROWS]
    rows = spec["datasets"][interactive.ROWS]
    assert interactive.chart_datasets(fig) == {interactive.ROWS: rows}
    # the Altair object a reader asks for carries the same rows: a chart made from it draws the same thing
    assert interactive.Figure(fig.chart).to_dict() == spec
    assert fig.chart.to_dict()["datasets"][interactive.ROWS] == rows
    # numpy numbers become JSON's; what JSON cannot hold is an error at once, not when the page is shown
    base = alt.Chart(interactive._rows_data()).mark_point().encode(x="a:Q")
    made = interactive.Figure(base, rows=[{"a": np.int64(3), "b": np.float32(0.5), "c": np.arange(2)}])
    assert made.to_dict()["datasets"][interactive.ROWS] == [{"a": 3, "b": 0.5, "c": [0, 1]}]
    assert json.loads(json.dumps(made.to_dict()))["datasets"][interactive.ROWS][0]["a"] == 3
    with pytest.raises(TypeError, match="a chart's rows hold a set"):
        interactive.Figure(base, rows=[{"a": {1}}])
    # no rows: the chart is the one given
    assert interactive.Figure(base).chart.to_dict()["data"] == {"name": interactive.ROWS}


def test_token_axes_fit_the_text_column_for_every_sequence_length():
    for n in (1, 10, 46, 47, 60, 93, 200, 512):
        step = interactive._token_step(n)
        assert interactive.MIN_STEP <= step <= interactive.STEP
        # the longest sequence fits the column, unless even the narrowest readable column cannot hold it
        assert step * n <= interactive.TOKEN_AXIS_WIDTH or step == interactive.MIN_STEP
        # its labels stand upright side by side: no smaller than the book's text minimum, no taller than a column
        size = interactive._token_axis(interactive._alt(), step=step).to_dict()["labelFontSize"]
        assert plots.MIN_TEXT_PX <= size <= step + 1
    assert interactive._token_step(46) == interactive.STEP and interactive._token_step(62) == interactive.MIN_STEP
    assert interactive._token_step(93) == interactive.MIN_STEP


def test_chart_text_minimum_is_the_figures_minimum():
    # charts carry their own copy so that they need no matplotlib; both must say the same
    assert interactive.LABEL_PX == plots.MIN_TEXT_PX


def test_vector_pair_chart_computes_what_numpy_computes():
    # the Python side of the chapter-1 chart (the browser check compares the chart's own text with it)
    for ax, lx, ay, ly in [(0, 2.0, 40, 1.5), (30, 1.0, 120, 2.5), (-90, 0.2, 90, 3.0), (180, 3.0, -45, 0.5)]:
        x = lx * np.array([np.cos(np.deg2rad(ax)), np.sin(np.deg2rad(ax))])
        y = ly * np.array([np.cos(np.deg2rad(ay)), np.sin(np.deg2rad(ay))])
        s = interactive.vector_pair_state(angle_x=ax, len_x=lx, angle_y=ay, len_y=ly)
        assert s["dot"] == pytest.approx(float(np.dot(x, y)), abs=1e-12)
        assert s["cos"] == pytest.approx(np.cos(np.deg2rad(ay - ax)), abs=1e-12)  # the angle between them
        assert s["a"] * np.linalg.norm(x) ** 2 == pytest.approx(s["dot"], abs=1e-12)
        assert s["area"] == pytest.approx(lx * ly * abs(np.sin(np.deg2rad(ay - ax))), abs=1e-12)
    with pytest.raises(ValueError, match="lengths must be positive"):
        interactive.vector_pair_state(angle_x=0, len_x=0, angle_y=0, len_y=1)
    spec = interactive.vector_pair_chart(angle_y=90).to_dict()
    bound = {p["name"]: p for p in spec["params"] if "bind" in p}
    assert set(bound) == {"angle_x", "len_x", "angle_y", "len_y"} and bound["angle_y"]["value"] == 90
    assert spec["usermeta"]["mixbook"]["kind"] == "vector_pair"
    with pytest.raises(ValueError, match="outside the slider's range"):
        interactive.vector_pair_chart(len_x=5)


def test_ranking_chart_embeds_each_choices_ranking(tiny_enc):
    rankings = {"king": [("queen", 0.71), ("prince", 0.6), ("lord", 0.6), ("monarch", 0.5)],
                "a long sentence that the dropdown shortens, but the data keeps whole enough": [("x", 0.3), ("y", -0.2), ("z", -0.25), ("w", -0.3)]}
    groups = {"queen": "王族", "prince": "王族", "x": "その他の場面", "king": "王族"}
    chart = interactive.ranking_chart(rankings, tiny_enc, title="t", choice_name="単語", k=2, k_max=4, groups=groups,
                                      colors={"王族": (0.1, 0.2, 0.3)}, choice=1)
    spec = chart.to_dict()
    for c, (key, pairs) in enumerate(rankings.items()):
        s = interactive.ranking_state(spec, choice=c)
        assert s["items"] == [p[0] for p in pairs] and s["values"] == [p[1] for p in pairs]
        assert key.startswith(s["label"].rstrip("…")) and len(s["label"]) <= 40 and pairs[0][0].startswith(s["first"].rstrip("…"))
        assert s["group"] == groups.get(key, "")  # the chosen key's own group, named on the line
    bound = {p["name"]: p for p in spec["params"] if "bind" in p}
    assert bound["choice"]["value"] == 1 and bound["k"]["value"] == 2 and bound["k"]["bind"]["max"] == 4
    (rows,) = interactive.chart_datasets(spec).values()
    assert {r["g"] for r in rows} == {"王族", "その他の場面", "その他"}  # items without a group are その他
    assert spec["vconcat"][-1]["encoding"]["x"]["scale"]["domain"] == [-0.3, 1]  # negative values are shown
    with pytest.raises(ValueError, match="not in decreasing order"):
        interactive.ranking_chart({"a": [("b", 0.1), ("c", 0.5)]}, tiny_enc, title="t", choice_name="c")
    with pytest.raises(ValueError, match="out of range"):
        interactive.ranking_chart(rankings, tiny_enc, title="t", choice_name="c", choice=2)
    with pytest.raises(ValueError, match="needs k_max"):
        interactive.ranking_chart(rankings, tiny_enc, title="t", choice_name="c", k=2)
    with pytest.raises(ValueError, match="first 60 characters are the same"):
        interactive.ranking_chart({"a": [("x" * 70 + "1", 0.5), ("x" * 70 + "2", 0.4)]}, tiny_enc, title="t", choice_name="c")
    with pytest.raises(ValueError, match="rankings is empty"):
        interactive.ranking_chart({}, tiny_enc, title="t", choice_name="c")


# -- the site -------------------------------------------------------------------------------------


class _Renderer:
    def __init__(self):
        self.js = {}

    def add_js_file(self, key, uri, kwargs):
        self.js[key] = (uri, kwargs)


class _Data:
    def __init__(self, mime_type, content, tags=()):
        self.mime_type, self.content = mime_type, content
        self.cell_metadata = {"tags": list(tags)}

    @property
    def string(self):
        return self.content if isinstance(self.content, str) else json.dumps(self.content)


def test_site_plugin_is_registered_for_myst_nb():
    (ep,) = [ep for ep in entry_points(group="myst_nb.mime_renderers") if ep.name == "mixbook"]
    assert ep.load() is _mystnb.VegaLiteMime
    assert ("html", "application/vnd.vegalite.v6+json", 5) in _mystnb.VegaLiteMime.mime_priority_overrides


def test_site_plugin_writes_the_spec_and_loads_the_local_vega(tiny_enc, mixings):
    spec = interactive.mixing_chart(mixings[0], tiny_enc, examples=1).to_dict()
    r = _Renderer()
    (node,) = _mystnb.VegaLiteMime.handle_mime(r, _Data("application/vnd.vegalite.v6+json", spec), False)
    html = node.astext()
    assert html.startswith('<div class="mixbook-vega">')
    body = html.split('class="mixbook-vega-spec">', 1)[1].rsplit("</script>", 1)[0]
    assert json.loads(body.replace("<\\/", "</")) == spec
    assert "</script>" not in body
    assert [u for u, _ in r.js.values()] == list(_mystnb.VEGA_SCRIPTS)
    assert not any(u.startswith("http") for u in _mystnb.VEGA_SCRIPTS)
    # a JSON string is read too (nbformat may keep the output as text)
    (node2,) = _mystnb.VegaLiteMime.handle_mime(_Renderer(), _Data("application/vnd.vegalite.v5+json", json.dumps(spec)), False)
    assert node2.astext() == html


def test_site_plugin_replaces_only_tagged_widgets_and_leaves_the_rest():
    view = {"version_major": 2, "version_minor": 0, "model_id": "abc"}
    (note,) = _mystnb.VegaLiteMime.handle_mime(_Renderer(), _Data(_mystnb.WIDGET_VIEW_MIME, view, [interactive.NEEDS_KERNEL_TAG]), False)
    assert "mixbook-needs-kernel" in note.astext() and "Colab" in note.astext()
    assert _mystnb.VegaLiteMime.handle_mime(_Renderer(), _Data(_mystnb.WIDGET_VIEW_MIME, view), False) is None
    assert _mystnb.VegaLiteMime.handle_mime(_Renderer(), _Data("text/plain", "x"), False) is None
    assert _mystnb.VegaLiteMime.handle_mime(_Renderer(), _Data("application/vnd.vegalite.v6+json", {}), True) is None
