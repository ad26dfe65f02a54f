"""Tests for the Part V figures in mixlib.plots: each figure draws exactly the numbers it is given.

Every check reads the numbers back from the drawn artists (bar heights, line
data, image arrays, patch colours) and compares them with an independent
computation from the input, and every figure is rendered to make sure no
glyph is missing from the Japanese font.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex

from mixlib import plots

MODEL = "test-model（2層・4ヘッド・64次元）"


@pytest.fixture(autouse=True)
def _setup_and_close():
    plots.setup()
    yield
    plt.close("all")


def _render(fig):
    """Draw the figure; fail on any missing-glyph warning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    missing = [str(w.message) for w in caught if "missing from font" in str(w.message)]
    assert not missing, missing
    return fig


def _caption_text(fig) -> str:
    return " ".join(t.get_text() for t in fig.texts)


def _category_table(layers=3, seed=0, nan_cols=()):
    rng = np.random.default_rng(seed)
    cols = ["全体", *plots.CATEGORY_ORDER]
    df = pd.DataFrame(rng.uniform(5, 40, size=(layers, len(cols))), columns=cols, index=pd.Index(range(layers), name="layer"))
    for c in nan_cols:
        df[c] = np.nan
    df.columns.name = "category"
    return df


# -- chapter 10 ---------------------------------------------------------------------------------


def test_plot_mixing_by_layer_draws_each_column_with_its_colour():
    ours, ref = _category_table(3, 0), _category_table(12, 1, nan_cols=("句読点", "その他"))
    fig = _render(plots.plot_mixing_by_layer(ours, MODEL, reference=ref))
    ax_ours, ax_ref = fig.axes
    lines = {ln.get_label(): ln for ln in ax_ours.get_lines()}
    assert set(lines) == set(ours.columns)
    for col, ln in lines.items():
        np.testing.assert_allclose(ln.get_ydata(), ours[col].to_numpy())
        np.testing.assert_allclose(ln.get_xdata(), ours.index.to_numpy())
        assert to_hex(ln.get_color()) == to_hex(plots.CATEGORY_COLORS[col])
    # the reference panel skips the all-NaN columns
    assert {ln.get_label() for ln in ax_ref.get_lines()} == {"全体", "[CLS]", "[SEP]", "[MASK]"}
    assert MODEL in _caption_text(fig)


def test_plot_mixing_by_layer_single_panel_without_reference():
    fig = _render(plots.plot_mixing_by_layer(_category_table(4), MODEL))
    assert len(fig.axes) == 1


def test_plot_norm_heatmaps_share_one_colour_scale():
    a, b = _category_table(3, 2), _category_table(3, 3) * 3
    fig = _render(plots.plot_norm_heatmaps({"A": a, "B": b}, MODEL))
    from matplotlib.collections import QuadMesh

    meshes = [c for ax in fig.axes for c in ax.collections if isinstance(c, QuadMesh)]  # the colour bar has one more
    meshes = meshes[:2]
    top = max(a.to_numpy().max(), b.to_numpy().max())
    for mesh, tab in zip(meshes, (a, b)):
        assert mesh.norm.vmin == 0.0 and mesh.norm.vmax == pytest.approx(top)
        np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(tab.shape), tab.to_numpy())
    with pytest.raises(ValueError, match="empty"):
        plots.plot_norm_heatmaps({}, MODEL)


def test_plot_token_mixing_bars_are_the_decomposition(tiny_enc):
    import mixlib

    m = mixlib.decompose(tiny_enc, ["The cat sat on the mat.", "A dog, a bird."], vectors=False)
    fig = _render(plots.plot_token_mixing(m, tiny_enc, layer=1, seq=1))
    ax, ax2 = fig.axes
    toks = m.tokens(1)
    n = len(toks)
    assert [t.get_text() for t in ax.get_xticklabels()] == toks
    # token labels are coloured by category
    for lab, cat in zip(ax.get_xticklabels(), m.categories[1][:n]):
        assert to_hex(lab.get_color()) == to_hex(plots.CATEGORY_COLORS[str(cat)])
    heights = np.array([p.get_height() for p in ax.patches]).reshape(3, n)  # stacked: res, attn, mix
    np.testing.assert_allclose(heights[0], m.norm_res_ln[1, 1, :n].numpy(), rtol=1e-6)
    np.testing.assert_allclose(heights[1], m.norm_keep_attn_ln[1, 1, :n].numpy(), rtol=1e-6)
    np.testing.assert_allclose(heights[2], m.norm_mix_ln[1, 1, :n].numpy(), rtol=1e-6)
    np.testing.assert_allclose(ax2.get_lines()[0].get_ydata(), 100 * m.ratio[1, 1, :n].numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="not analysed"):
        plots.plot_token_mixing(m, tiny_enc, layer=5)


def test_draw_layer_diagram_renders():
    fig = _render(plots.draw_layer_diagram())
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    for word in ("注意機構", "残差結合", "層正規化", "FFN"):
        assert word in texts


# -- chapter 11 ---------------------------------------------------------------------------------


def test_draw_subspace_projection_labels_psi():
    P = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    vecs = {"a": [1.0, 1.0, 1.0], "c": [0.0, 0.2, 2.0]}
    fig = _render(plots.draw_subspace_projection(vecs, P))
    texts = [t.get_text() for t in fig.axes[0].texts]
    # (1,1,1) -> (1,1): psi = (sqrt2/sqrt2)/(sqrt3/sqrt3) = 1
    assert any("a" in t and "1.00" in t for t in texts)
    psi_c = (0.2 / np.sqrt(2)) / (np.linalg.norm([0, 0.2, 2.0]) / np.sqrt(3))
    assert any(f"{psi_c:.2f}" in t for t in texts)
    with pytest.raises(ValueError, match="shape"):
        plots.draw_subspace_projection(vecs, np.eye(3))


def test_plot_psi_curves_are_sorted_cluster_means():
    rng = np.random.default_rng(0)
    cs = rng.gamma(2.0, size=(5, 3, 40)).astype(np.float32)
    cs[0, 0, 3] = np.nan  # NaN clusters are left out of the curve
    fig = _render(plots.plot_psi_curves(cs, MODEL, ncols=3))
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 5
    for li, ax in enumerate(visible):
        lines = ax.get_lines()[:3]
        for h, ln in enumerate(lines):
            v = cs[li, h]
            np.testing.assert_allclose(ln.get_ydata(), np.sort(v[np.isfinite(v)])[::-1], rtol=1e-6)
    with pytest.raises(ValueError, match="shape"):
        plots.plot_psi_curves(cs[0], MODEL)


def test_normalized_labels_on_psi_plots():
    fig = _render(plots.plot_token_psi(np.ones((2, 3)), MODEL, token="the", normalized=True))
    assert "正規化" in fig.axes[0].get_title()
    assert "正規化" not in _render(plots.plot_token_psi(np.ones((2, 3)), MODEL, token="the")).axes[0].get_title()
    fig = _render(plots.plot_top_clusters(_top_table(), MODEL, layer=0, head=1, normalized=True))
    assert "正規化" in fig.axes[0].get_xlabel()


def test_plot_psi_curves_reference_line_and_null_band():
    rng = np.random.default_rng(1)
    cs = rng.gamma(2.0, size=(2, 3, 20))
    raw = _render(plots.plot_psi_curves(cs, MODEL))
    # raw psi has no common chance level: no horizontal line at 1
    assert not any(np.allclose(ln.get_ydata(), 1.0) for ax in raw.axes for ln in ax.get_lines()[3:])
    low, high = cs * 0.5, cs * 0.8
    fig = _render(plots.plot_psi_curves(cs, MODEL, normalized=True, null=(low, high)))
    ax = [a for a in fig.axes if a.get_visible()][0]
    assert any(len(ln.get_ydata()) == 2 and np.allclose(ln.get_ydata(), 1.0) for ln in ax.get_lines())
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx(low[0].min(axis=0).min()) and band.max() == pytest.approx(high[0].max(axis=0).max())
    assert "正規化" in ax.get_ylabel()
    assert _render(plots.plot_psi_curves(cs, MODEL, ylabel="中央値との比")).axes[0].get_ylabel() == "中央値との比"
    with pytest.raises(ValueError, match="null must match"):
        plots.plot_psi_curves(cs, MODEL, null=(low[:1], high[:1]))


def _top_table():
    return pd.DataFrame({"cluster": [7, 3, 9], "type": ["Numbers", "Words", "Symbols"], "size": [10, 20, 5],
                         "tokens": ["1990, 1991", "january, march", "!, ?"], "psi": [3.1, 2.2, 1.5]})


def test_plot_top_clusters_bars_and_type_colours():
    t = _top_table()
    fig = _render(plots.plot_top_clusters(t, MODEL, layer=2, head=1))
    ax = fig.axes[0]
    bars = ax.patches
    np.testing.assert_allclose([b.get_width() for b in bars], t["psi"])
    assert [to_hex(b.get_facecolor()) for b in bars] == [to_hex(plots.TYPE_COLORS[x]) for x in t["type"]]
    assert "層 2" in ax.get_title() and "ヘッド 1" in ax.get_title()


def test_font_safe_replaces_only_what_the_font_lacks():
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    path = font_manager.findfont(font_manager.FontProperties(family=matplotlib.rcParams["font.family"]))
    charmap = FT2Font(path).get_charmap()
    exotic = "\u057f\u0915"  # Armenian tiwn, Devanagari ka: not in IPAexGothic
    assert not any(ord(c) in charmap for c in exotic), "pick characters the font lacks"
    out = plots.font_safe(f"##ing 日本 {exotic}")
    assert out == "##ing 日本 <Armenian><Devanagari>"  # each script named, so the reader knows what is missing
    assert all(ord(c) in charmap or c.isspace() for c in out)
    thai = "\u0e01\u0e02"  # two Thai letters: one run, one name
    assert not any(ord(c) in charmap for c in thai), "pick characters the font lacks"
    assert plots.font_safe(f"##{thai} a{thai}") == "##<Thai> a<Thai>"
    assert 0x10FFFD not in charmap
    assert plots.font_safe("\U0010fffdx") in ("□x", "?x")  # a private-use character has no name: a box


def test_plot_top_clusters_with_exotic_tokens_draws_without_glyph_warnings():
    t = _top_table()
    t.loc[0, "tokens"] = "\u057f, \u0915\u093e, \u0e01, abc"
    fig = _render(plots.plot_top_clusters(t, MODEL, layer=0, head=0))  # _render fails on a glyph warning
    assert "abc" in fig.axes[0].get_yticklabels()[0].get_text()


def test_plot_token_psi_heatmap_values():
    psi = np.arange(12, dtype=float).reshape(3, 4) / 4
    fig = _render(plots.plot_token_psi(psi, MODEL, token="january", cluster=5, cluster_type="Words"))
    mesh = fig.axes[0].collections[0]  # the heatmap's QuadMesh
    np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(3, 4), psi)
    assert "january" in fig.axes[0].get_title()
    with pytest.raises(ValueError):
        plots.plot_token_psi(psi[0], MODEL, token="x")


def _type_map():
    cells = [[("Words", "Words", "Numbers"), ("Symbols", "Tags", "Words")],
             [("Subwords", "Words", "Words"), ("Numbers", "Numbers", "Numbers")]]
    df = pd.DataFrame(np.empty((2, 2), dtype=object), index=pd.RangeIndex(2, name="layer"), columns=pd.RangeIndex(2, name="head"))
    for i in range(2):
        for j in range(2):
            df.iat[i, j] = cells[i][j]
    return df


def test_plot_type_map_colours_every_slot():
    tm = _type_map()
    fig = _render(plots.plot_type_map(tm, MODEL))
    filled = [p for p in fig.axes[0].patches if p.get_fill()]
    assert len(filled) == 4 * 3
    got = pd.Series([to_hex(p.get_facecolor()) for p in filled]).value_counts()
    want = pd.Series([to_hex(plots.TYPE_COLORS[t]) for c in tm.to_numpy().ravel() for t in c]).value_counts()
    pd.testing.assert_series_equal(got.sort_index(), want.sort_index(), check_names=False)


def test_plot_type_shares_rows_sum_to_one():
    fig = _render(plots.plot_type_shares(_type_map(), MODEL))
    ax = fig.axes[0]
    per_row: dict[float, float] = {}
    for b in ax.patches:
        per_row[round(b.get_y() + b.get_height() / 2, 6)] = per_row.get(round(b.get_y() + b.get_height() / 2, 6), 0) + b.get_width()
    np.testing.assert_allclose(sorted(per_row.values()), [1.0, 1.0])
    # Numbers: 1 of the 6 slots of layer 0, 3 of the 6 slots of layer 1
    numbers = [b for b in ax.patches if to_hex(b.get_facecolor()) == to_hex(plots.TYPE_COLORS["Numbers"])]
    assert sorted(round(b.get_width(), 6) for b in numbers) == [round(1 / 6, 6), round(3 / 6, 6)]


def test_plot_upper_clusters_bars_are_type_shares():
    table = pd.DataFrame({"Words": [5, 0], "Subwords": [1, 0], "Symbols": [0, 3], "Numbers": [0, 0], "Special": [0, 1],
                          "Tags": [0, 0]})
    table["n_clusters"] = table.sum(axis=1)
    table["n_tokens"] = [120, 40]
    table["main_type"] = ["Words", "Symbols"]
    fig = _render(plots.plot_upper_clusters(table, MODEL))
    ax = fig.axes[0]
    got = {}
    for b in ax.patches:
        row = int(round(b.get_y() + b.get_height() / 2))
        got[(row, to_hex(b.get_facecolor()))] = b.get_width()
    for row in range(2):
        for t in plots.TYPE_ORDER:
            want = table.loc[row, t] / table.loc[row, "n_clusters"]
            assert got.get((row, to_hex(plots.TYPE_COLORS[t])), 0.0) == pytest.approx(want)
    assert "6 クラスタ" in ax.get_yticklabels()[0].get_text() and "120 語" in ax.get_yticklabels()[0].get_text()


# -- chapter 12 ---------------------------------------------------------------------------------


def _fake_positional():
    rng = np.random.default_rng(0)
    edges = np.linspace(-1, 1, 21)
    hist = rng.integers(1, 1000, size=20)
    return SimpleNamespace(
        word_coords=rng.normal(size=(300, 3)).astype(np.float32),
        pos_coords=rng.normal(size=(40, 3)).astype(np.float32),
        explained_variance_ratio=np.array([0.05, 0.03, 0.02]),
        bin_edges=edges, hist=hist, n_pairs=int(hist.sum()), mean_abs_cos=0.04, random_mean_abs_cos=0.041,
        cls_pos0_cos=0.38, top_k=4, angles_deg=np.array([80.0, 85.0, 88.0, 90.0]),
        random_angles_deg=np.array([70.0, 75.0, 80.0, 89.0]), d_model=8,
    )


def test_plot_positional_pca_draws_every_position():
    pos = _fake_positional()
    fig = _render(plots.plot_positional_pca(pos, MODEL, max_words=100))
    ax = fig.axes[0]
    words, positions = ax.collections[:2]
    assert len(words.get_offsets()) == 100
    np.testing.assert_allclose(positions.get_offsets(), pos.pos_coords[:, [0, 1]])


def test_plot_cos_hist_bars_and_cls_line():
    pos = _fake_positional()
    fig = _render(plots.plot_cos_hist(pos, MODEL))
    ax = fig.axes[0]
    bars = [b for b in ax.patches if np.isclose(b.get_width(), 0.1)]  # the histogram bins (width 0.1)
    np.testing.assert_array_equal([b.get_height() for b in bars], pos.hist)
    xs = [ln.get_xdata()[0] for ln in ax.get_lines()]
    assert pos.cls_pos0_cos in xs


def test_random_cos_counts_against_the_density():
    """Against numerical integration of the density of the cosine of two random directions in R^d,
    (1 - c^2)^((d - 3)/2) up to its constant, and against a simulation."""
    from math import gamma, pi, sqrt

    from scipy.integrate import quad

    d, edges = 8, np.linspace(-1, 1, 11)
    const = gamma(d / 2) / (sqrt(pi) * gamma((d - 1) / 2))
    want = [1000 * quad(lambda c: const * (1 - c * c) ** ((d - 3) / 2), a, b)[0] for a, b in zip(edges[:-1], edges[1:])]
    np.testing.assert_allclose(plots.random_cos_counts(edges, d, 1000), want, rtol=1e-9)
    rng = np.random.default_rng(0)
    u, v = rng.standard_normal((2, 200_000, 384))
    cos = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    e = np.linspace(-0.2, 0.2, 9)
    np.testing.assert_allclose(np.histogram(cos, e)[0], plots.random_cos_counts(e, 384, 200_000), rtol=0.03)
    fig = _render(plots.plot_cos_hist(_fake_positional(), MODEL))  # the curve is drawn where it counts half a pair or more
    curve = [ln for ln in fig.axes[0].get_lines() if len(ln.get_xdata()) > 1][0]
    assert (curve.get_ydata() >= 0.5).all()


def test_attention_by_offset_matches_a_naive_loop():
    rng = np.random.default_rng(0)
    A = rng.random((3, 9, 9))
    A /= A.sum(-1, keepdims=True)
    prof = plots.attention_by_offset(A, 4)
    assert list(prof.index) == list(range(-4, 5)) and list(prof.columns) == [0, 1, 2]
    for h in range(3):
        for o in range(-4, 5):
            vals = [A[h, i, i + o] for i in range(9) if 0 <= i + o < 9]
            assert prof.loc[o, h] == pytest.approx(np.mean(vals))
    single = plots.attention_by_offset(A[1], 2)
    np.testing.assert_allclose(single["weight"].to_numpy(), prof.loc[-2:2, 1].to_numpy())
    with pytest.raises(ValueError, match="max_offset"):
        plots.attention_by_offset(A, 9)
    with pytest.raises(ValueError, match="shape"):
        plots.attention_by_offset(np.ones((3, 4)), 1)


def test_plot_position_attention_one_image_per_head():
    rng = np.random.default_rng(1)
    A = rng.random((5, 8, 8))
    fig = _render(plots.plot_position_attention(A, MODEL, ncols=3))
    images = [ax.images[0] for ax in fig.axes if ax.get_visible() and ax.images]
    assert len(images) == 5
    for h, im in enumerate(images):
        np.testing.assert_allclose(im.get_array(), A[h])
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible() and ax.images]
    assert titles == [f"ヘッド {h}（一様の {A[h].max() * 8:.1f} 倍）" for h in range(5)]  # each panel's own scale, read


def test_plot_position_head_profile_bars():
    rng = np.random.default_rng(2)
    A = rng.random((10, 10))
    A /= A.sum(1, keepdims=True)
    fig = _render(plots.plot_position_head(A, MODEL, layer=0, head=3, max_offset=3))
    bars = fig.axes[1].patches  # axes: map, profile, colour bar
    prof = plots.attention_by_offset(A, 3)["weight"]
    np.testing.assert_allclose([b.get_height() for b in bars], prof.to_numpy())


def test_caption_sits_below_the_axes_labels_without_tight_layout():
    """The caption must not overlap tick labels or the x label, even when the caller forgot tight_layout."""
    fig, ax = plt.subplots(figsize=(4, 2))
    ax.plot([0, 1])
    ax.set_xlabel("層（0 始まり）")
    plots.caption(fig, "テストモデル")
    renderer = fig.canvas.get_renderer()
    assert fig.texts[-1].get_window_extent(renderer).y1 <= ax.get_tightbbox(renderer).y0
    plt.close(fig)


def test_interval_is_rounded_outward_and_never_prints_a_narrow_interval_as_one_number_twice():
    assert plots.interval(0.2, 0.45) == "0.20〜0.45"
    assert plots.interval(0.9512, 0.9538) == "0.95〜0.96"  # 0.95〜0.95 would read as no uncertainty
    assert plots.interval(0.29, 0.57) == "0.29〜0.57"  # exact values stay (0.29 * 100 is 28.999… in floating point)
    assert plots.interval(0.5, 0.5) == "0.50〜0.50"  # a true zero-width interval stays as it is
    assert plots.interval(-0.52, 0.25, 1, sign=True) == "-0.6〜+0.3"
    assert plots.interval(-0.0001, 0.0, 1) == "-0.1〜0.0"  # no "-0.0"
    rng = np.random.default_rng(0)
    for lo, hi in np.sort(rng.uniform(-1, 1, (500, 2)), axis=1):
        a, b = (float(x) for x in plots.interval(lo, hi).split("〜"))
        assert a <= lo + 1e-12 and hi <= b + 1e-12 and b - a <= hi - lo + 0.02 + 1e-12  # holds it, at most one step wider
        assert a < b or hi == lo
    with pytest.raises(ValueError, match="low <= high"):
        plots.interval(0.6, 0.4)


def test_with_intervals_puts_each_estimate_and_its_interval_in_one_cell():
    cols = pd.MultiIndex.from_product([["全体", "[CLS]"], ["estimate", "low", "high"]])
    df = pd.DataFrame([[23.44, 21.06, 25.96, 40.0, 38.5, 41.23]], index=pd.Index([0], name="layer"), columns=cols)
    out = plots.with_intervals(df)
    assert list(out.columns) == ["全体", "[CLS]"] and out.index.name == "layer"
    assert out.loc[0, "全体"] == "23.4 (21.1〜26.0)" and out.loc[0, "[CLS]"] == "40.0 (38.5〜41.2)"
    assert plots.with_intervals(df, digits=2).loc[0, "全体"] == "23.44 (21.06〜25.96)"
    with pytest.raises(ValueError, match="high"):
        plots.with_intervals(df.drop(columns=[("全体", "high"), ("[CLS]", "high")]))
    with pytest.raises(ValueError, match="two-level"):  # one level: no quantity to group by
        plots.with_intervals(pd.DataFrame({"estimate": [1.0], "low": [0.5], "high": [1.5]}))


def test_ja_labels_renames_headers_only_and_keeps_the_data():
    cols = pd.MultiIndex.from_tuples([("全体", "estimate"), ("全体", "low"), ("全体", "high"), (7, "kept")],
                                     names=["category", None])
    df = pd.DataFrame(np.arange(12.0).reshape(3, 4), index=pd.Index([0, 1, 2], name="layer"), columns=cols)
    out = plots.ja_labels(df)
    assert out.index.name == "層" and list(out.columns.names) == ["カテゴリ", None]
    assert list(out.columns) == [("全体", "推定値"), ("全体", "区間の下端"), ("全体", "区間の上端"), (7, "kept")]
    np.testing.assert_array_equal(out.to_numpy(), df.to_numpy())
    assert df.index.name == "layer" and df.columns[0] == ("全体", "estimate")  # the code's frame is untouched
    rows = plots.ja_labels(pd.DataFrame({"r": [0.5]}, index=pd.Index(["mean"], name="statistic")))
    assert list(rows.index) == ["平均"] and rows.index.name == "統計量" and list(rows.columns) == ["相関 r"]
    # booleans show ○/×; a float column holding 1.0 and 0.0 is not a boolean and keeps its numbers
    marks = plots.ja_labels(pd.DataFrame({"survives": [True, False], "r": [1.0, 0.0]}))
    assert marks["置換の最大を超える"].tolist() == ["○", "×"] and marks["相関 r"].tolist() == [1.0, 0.0]
    mixed = plots.ja_labels(pd.DataFrame({"x": ["a", np.True_, False, 1, 0]}))  # 1 and 0 are numbers, not marks
    assert mixed["x"].tolist() == ["a", "○", "×", 1, 0]
    # every Japanese header is distinct, so two English names never collapse into one column
    assert len(set(plots.JA_LABELS.values())) == len(plots.JA_LABELS)


def test_sci_writes_small_and_large_numbers_as_powers_of_ten_for_prose():
    # an independent reading: the mantissa and the exponent recovered from the text give the number back
    for x in (2.9e-07, -3.14e12, 6.02e23, 1.0e-4, 99999.0):
        text = plots.sci(x)
        mantissa, power = text.split(" × 10")
        exponent = int(power.translate(str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")))
        assert "e" not in text and abs(float(mantissa) * 10.0 ** exponent - x) <= 0.05 * abs(x), (x, text)
    assert [plots.sci(x) for x in (0.25, 1234.5, 0.0, 0.001, -0.5)] == ["0.25", "1200", "0", "0.001", "-0.5"]
    assert plots.sci(2.94e-07, digits=2) == "2.94 × 10⁻⁷"
    with pytest.raises(ValueError, match="finite"):
        plots.sci(float("nan"))


def test_plain_ticks_labels_a_log_axis_with_plain_numbers():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([1, 1000], [0.3, 2.0])
    ax.set(xscale="log", yscale="log")
    plots.plain_ticks(ax.xaxis)
    plots.plain_ticks(ax.yaxis, minor=True)
    fig.canvas.draw()
    major = {t.get_text() for t in ax.get_xticklabels() if t.get_text()}
    assert {"1", "10", "100", "1000"} <= major and not any("^" in t or "10^" in t for t in major)
    minor = [t.get_text() for t in ax.get_yticklabels(minor=True) if t.get_text()]
    assert "0.6" in minor and not any("times" in t for t in minor)  # 6×10⁻¹ would be mathtext
    plt.close(fig)


def test_shown_text_sizes_scale_a_wide_image_down_to_the_column():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3), dpi=110)
    ax.set_title("見出し", fontsize=10)
    ax.set_xlabel("")  # empty texts are not texts a reader sees
    ax.yaxis.set_visible(False)  # nor are the texts of a hidden axis
    ax.set_xticks([0.5])
    ax.tick_params(labelsize=8)
    fig.canvas.draw()
    narrow = dict((t, px) for px, t in plots.shown_text_sizes(fig, 440))
    assert narrow["見出し"] == pytest.approx(10 * 110 / 72)  # 440 px fits the column: shown as rendered
    assert narrow["0.5"] == pytest.approx(8 * 110 / 72)
    assert set(narrow) == {"見出し", "0.5"}
    wide = dict((t, px) for px, t in plots.shown_text_sizes(fig, 1265))
    assert wide["見出し"] == pytest.approx(10 * 110 / 72 * 688 / 1265)  # 8.3 px: shrunk with its image
    plt.close(fig)


def test_watch_text_sizes_warns_when_a_rendered_figure_shows_small_text(monkeypatch):
    import io

    import matplotlib.pyplot as plt
    from matplotlib.backend_bases import FigureCanvasBase

    monkeypatch.setattr(FigureCanvasBase, "print_figure", FigureCanvasBase.print_figure)  # restored afterwards
    plots.watch_text_sizes(9)
    plots.watch_text_sizes(9)  # idempotent: one wrapper, one warning per render

    def render(width_in, fontsize):
        fig, ax = plt.subplots(figsize=(width_in, 3), dpi=110)
        ax.set_title("小さすぎる見出し", fontsize=fontsize)
        buf = io.BytesIO()
        fig.canvas.print_figure(buf, format="png", dpi=110, bbox_inches="tight")
        plt.close(fig)

    with pytest.warns(UserWarning, match=plots.SMALL_TEXT_WARNING) as caught:
        render(12, 8)  # ~1100 px wide (tight), shown at 688: the 8 pt title is 7.7 px
    assert len([w for w in caught if plots.SMALL_TEXT_WARNING in str(w.message)]) == 1
    assert "小さすぎる見出し" in str(caught[0].message)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        render(5, 8)  # under 688 px wide: shown as rendered, 12 px


def test_caption_grows_on_a_figure_wider_than_the_column():
    import io

    import matplotlib.pyplot as plt

    for width_in in (5, 9, 14):
        fig, ax = plt.subplots(figsize=(width_in, 3), dpi=110)
        ax.plot([0, 1], [0, 1])
        plots.caption(fig, "テストのモデル")
        buf = io.BytesIO()
        fig.canvas.print_figure(buf, format="png", dpi=110, bbox_inches="tight")
        shown = dict((t, px) for px, t in plots.shown_text_sizes(fig, plots._png_width(buf.getvalue())))
        assert shown["モデル: テストのモデル"] >= plots.MIN_TEXT_PX, (width_in, shown)
        if width_in == 5:  # within the column: the usual 9 pt
            assert fig.texts[-1].get_fontsize() == 9.0
        plt.close(fig)


def test_wrap_to_width_breaks_japanese_anywhere_and_keeps_latin_words_whole():
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    plots.setup()
    renderer = RendererAgg(1000, 100, 110)
    text = ("モデル: all-MiniLM-L6-v2（6層・12ヘッド・384次元）。k = 64、帯：メンバーをシャッフルした同じ大きさの"
            "クラスタ（20 回、各層のヘッドそれぞれの 2.5〜97.5% を合わせた外枠）")
    wrapped = plots.wrap_to_width(text, 300, fontsize=10, renderer=renderer)
    lines = wrapped.split("\n")
    assert len(lines) >= 3
    prop = FontProperties(size=10)
    for line in lines:  # each line fits, measured independently of the wrapping
        assert renderer.get_text_width_height_descent(line, prop, ismath=False)[0] <= 300
        assert not line.startswith(("、", "。", "）"))  # no line opens with closing punctuation
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")  # nothing lost or reordered
    assert any("all-MiniLM-L6-v2" in line for line in lines)  # a Latin word is not cut
    assert plots.wrap_to_width("短い", 300, fontsize=10, renderer=renderer) == "短い"
    assert plots.wrap_to_width("一行目\n二行目", 300, fontsize=10, renderer=renderer) == "一行目\n二行目"


def test_make_book_checks_text_with_the_library_s_own_minimum_and_warning():
    import re
    from pathlib import Path

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text(encoding="utf-8")
    assert float(re.search(r"^MIN_TEXT_PX := (\S+)$", makefile, re.M).group(1)) == plots.MIN_TEXT_PX
    assert re.search(r"^SMALL_TEXT := (.+)$", makefile, re.M).group(1).strip() == plots.SMALL_TEXT_WARNING
    assert "MIXLIB_MIN_TEXT_PX=$(MIN_TEXT_PX)" in makefile and plots.TEXT_CHECK_ENV == "MIXLIB_MIN_TEXT_PX"


def test_note_below_wraps_a_long_note_to_the_figure():
    import io

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3), dpi=110)
    ax.plot([0, 1], [0, 1])
    text = plots.note_below(fig, "長い注記。" * 40)
    assert "\n" in text.get_text() and text.get_text().replace("\n", "") == "長い注記。" * 40
    buf = io.BytesIO()
    fig.canvas.print_figure(buf, format="png", dpi=110, bbox_inches="tight")
    assert plots._png_width(buf.getvalue()) <= 5 * 110  # the note did not widen the image
    plt.close(fig)


def test_label_points_keeps_close_labels_apart_where_there_is_room():
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    # pairs of points a few pixels apart (beijing / tokyo in chapter 3), spread over the axes
    centres = rng.uniform(0.1, 0.9, (6, 2)) * [1, 1]
    xy = np.concatenate([centres, centres + [0.03, -0.005]])
    texts = [f"word{i:02d}" for i in range(len(xy))]

    def boxes(labels, renderer):
        return [t.get_window_extent(renderer) for t in labels]

    def n_overlaps(bs):
        return sum(a.overlaps(b) for i, a in enumerate(bs) for b in bs[i + 1:])

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(*xy.T)
    ax.set(xlim=(0, 1), ylim=(0, 1))
    r = fig.canvas.get_renderer()
    naive = [ax.annotate(t, p, xytext=(5, 0), textcoords="offset points", va="center", fontsize=10) for t, p in zip(texts, xy)]
    assert n_overlaps(boxes(naive, r)) > 0  # all to the right: the pairs collide
    for t in naive:
        t.remove()
    placed = plots.label_points(ax, xy, texts, fontsize=10)
    assert [t.get_text() for t in placed] == texts and len(ax.texts) == len(texts)  # one label each, the rest removed
    bs = boxes(placed, r)
    assert n_overlaps(bs) == 0
    frame = ax.get_window_extent(r)
    assert all(frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1 for b in bs)
    # each label stays next to its own point (within a label's size)
    pts = ax.transData.transform(xy)
    assert all(abs((b.x0 + b.x1) / 2 - x) < b.width and abs((b.y0 + b.y1) / 2 - y) < 2 * b.height for b, (x, y) in zip(bs, pts))
    plt.close(fig)



def test_heat_cells_colour_as_background_gradient_with_text_of_wcag_contrast():
    """heat_cells: pandas' background colours, and text of at least 4.5:1 on each (pandas' own text reached 2.05:1)."""
    import re

    import numpy as np
    import pandas as pd

    def lum(hex6):
        return plots._luminance([c / 255 for c in bytes.fromhex(hex6)])

    def ratio(bg, fg):
        a, b = sorted((lum(bg), lum(fg)), reverse=True)
        return (a + 0.05) / (b + 0.05)

    def cells(html):
        """row -> (background, text) of column 0, from the Styler's CSS (pandas groups equal rules)."""
        out = {}
        for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", html.split("</style>")[0]):
            bg = re.search(r"background-color: #([0-9a-f]{6})", body)
            fg = re.search(r"(?<!-)color: #([0-9a-f]{6})", body)
            for row in re.findall(r"_row(\d+)_col0\b", selectors):
                out[int(row)] = (bg.group(1), fg.group(1) if fg else None)
        return out

    frame = pd.DataFrame({"x": np.linspace(-20, 20, 201), "label": ["a"] * 201})
    frame.loc[3, "x"] = np.nan
    worst_ours, worst_pandas = [], []
    for cmap in ("RdBu_r", "Blues", "Greens", "RdYlGn", "viridis"):
        ours = cells(plots.heat_cells(frame.style, cmap, -15, 15).to_html())
        theirs = cells(frame[["x"]].style.background_gradient(cmap=cmap, vmin=-15, vmax=15).to_html())
        assert sorted(ours) == [r for r in range(201) if r != 3]  # every number but the NaN; not the label column
        assert all(theirs[r][0] == bg for r, (bg, _) in ours.items())  # the same colours as pandas
        worst_ours.append(min(ratio(bg, fg) for bg, fg in ours.values()))
        worst_pandas.append(min(ratio(bg, fg) for bg, fg in theirs.values()))
    assert min(worst_ours) >= 4.5
    assert min(worst_pandas) < 4.5  # what heat_cells is for
