"""The kernel-free charts of Parts I-IV (mixlib.course.charts): what they embed, and their Python states.

The browser check (.ci/check_charts.py) compares what each chart draws with the
``*_state`` functions; here those functions are checked against independent
computations (closed forms, NumPy), and the builders' arguments are checked.
"""

from __future__ import annotations

import numpy as np
import pytest

from mixlib.course import charts
from mixlib.interactive import chart_datasets


def test_softmax_scale_chart_embeds_the_scores_and_its_state_is_the_two_softmaxes():
    g = np.random.default_rng(0)
    scores = {d: g.normal(size=10) * np.sqrt(d) for d in (1, 16, 256)}
    chart = charts.softmax_scale_chart(scores, d_k=16)
    spec = chart.to_dict()
    assert spec["usermeta"]["mixbook"]["kind"] == "softmax_scale"
    assert [p["value"] for p in spec["params"]] == [16]
    (rows,) = chart_datasets(spec).values()
    assert len(rows) == 30
    for d, s in scores.items():
        st = charts.softmax_scale_state(spec, d_k=d)
        for got, z in ((st["raw"], s), (st["scaled"], s / np.sqrt(d))):
            want = np.exp(z) / np.exp(z).sum()
            np.testing.assert_allclose(got, want, atol=1e-4)
        assert st["max_raw"] == pytest.approx(st["raw"].max())
    # a larger d_k sharpens the unscaled softmax; scaling keeps it spread (this seed)
    assert charts.softmax_scale_state(spec, d_k=256)["max_raw"] > charts.softmax_scale_state(spec, d_k=256)["max_scaled"]


def test_softmax_scale_chart_carries_the_mean_over_many_draws():
    scores = {4: [1.0, 2.0, 0.5], 16: [3.0, -1.0, 0.0]}
    spec = charts.softmax_scale_chart(scores, mean_max={4: (0.5, 0.4), 16: (0.8, 0.45)}, n_mean=100).to_dict()
    assert spec["usermeta"]["mixbook"]["n_mean"] == 100
    assert charts.softmax_scale_state(spec, d_k=16)["mean_max"] == (0.8, 0.45)
    np.testing.assert_allclose(charts.softmax_scale_state(spec, d_k=16)["raw"], np.exp([3.0, -1.0, 0.0]) / np.exp([3.0, -1.0, 0.0]).sum())
    assert charts.softmax_scale_state(charts.softmax_scale_chart(scores).to_dict(), d_k=4)["mean_max"] is None
    with pytest.raises(ValueError, match="n_mean"):
        charts.softmax_scale_chart(scores, mean_max={4: (0.5, 0.4), 16: (0.8, 0.45)})
    with pytest.raises(ValueError, match="every d_k"):
        charts.softmax_scale_chart(scores, mean_max={4: (0.5, 0.4)}, n_mean=10)


def test_softmax_scale_chart_checks_its_arguments():
    with pytest.raises(ValueError, match="not one of"):
        charts.softmax_scale_chart({4: [1.0, 2.0]}, d_k=8)
    with pytest.raises(ValueError, match="same number"):
        charts.softmax_scale_chart({4: [1.0, 2.0], 8: [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match="positive d_k"):
        charts.softmax_scale_chart({})
    with pytest.raises(ValueError, match="no scores"):
        charts.softmax_scale_state(charts.softmax_scale_chart({4: [1.0, 2.0]}).to_dict(), d_k=5)


@pytest.mark.parametrize("n, d", [(16, 8), (64, 64)])
def test_pe_dot_state_is_the_closed_form(n, d):
    omega = 10000.0 ** (-np.arange(0, d, 2) / d)  # (d/2,)
    for delta in (0, 3, n - 1):
        s = charts.pe_dot_state(n, d, delta=delta)
        np.testing.assert_allclose(s["pair"], np.cos(omega * delta), atol=1e-6)
        np.testing.assert_allclose(s["along"], np.cos(omega * delta).sum(), atol=1e-5)  # the same for every pos
        assert s["n"] == n - delta and s["sum"] == pytest.approx(s["along"][0])
        np.testing.assert_allclose(s["by_diff"], np.cos(np.outer(np.arange(n), omega)).sum(axis=1), atol=1e-5)


def test_pe_position_state_is_the_formula():
    n, d = 32, 16
    for pos, dim in ((0, 0), (10, 6), (31, 15), (5, 1)):
        s = charts.pe_position_state(n, d, pos=pos, dim=dim)
        angle = pos / 10000.0 ** ((dim - dim % 2) / d)
        assert s["value"] == pytest.approx(np.sin(angle) if dim % 2 == 0 else np.cos(angle), abs=1e-6)
        assert s["kind"] == ("sin" if dim % 2 == 0 else "cos")
        assert s["wavelength"] == pytest.approx(2 * np.pi * 10000.0 ** ((dim - dim % 2) / d))
        assert s["vector"].shape == (d,) and s["wave"].shape == (n,)


def test_pe_charts_embed_no_data_and_carry_their_sizes():
    for fig in (charts.pe_dot_chart(32, 16, delta=4), charts.pe_position_chart(32, 16, pos=3, dim=5)):
        spec = fig.to_dict()
        assert not chart_datasets(spec)  # every value is computed by the chart from the formula
        meta = spec["usermeta"]["mixbook"]
        assert (meta["n_positions"], meta["d_model"], meta["base"]) == (32, 16, 10000.0)
    with pytest.raises(ValueError, match="even"):
        charts.pe_dot_chart(32, 15)
    with pytest.raises(ValueError, match="delta=32"):
        charts.pe_dot_chart(32, 16, delta=32)
    with pytest.raises(ValueError, match="dim=16"):
        charts.pe_position_chart(32, 16, dim=16)
    with pytest.raises(ValueError, match="n_positions"):
        charts.pe_position_state(1, 16, pos=0, dim=0)


def _accuracy_table(lengths):
    import pandas as pd

    return pd.DataFrame({"length": lengths, "accuracy": np.linspace(1, 0, len(lengths)),
                         "char_accuracy": np.linspace(1, 0.3, len(lengths))})


def test_bottleneck_chart_embeds_each_lengths_example_and_accuracy():
    lengths = [3, 4, 5]
    examples = {3: ("abc", "cba"), 4: ("abcd", "dcxa"), 5: ("abcde", "edc")}
    spec = charts.bottleneck_chart(_accuracy_table(lengths), examples, hidden=16, length=4, chance=0.1).to_dict()
    assert spec["usermeta"]["mixbook"] == {"kind": "bottleneck", "hidden": 16}
    (rows,) = chart_datasets(spec).values()
    for L, (source, output) in examples.items():
        s = charts.bottleneck_state(spec, length=L)
        assert (s["source"], s["output"], s["exact"]) == (source, output, output == source[::-1])
        assert s["right"] == {3: 3, 4: 3, 5: 3}[L]  # "dcxa" against "dcba": all but x; "edc": three right, two missing
        outs = sorted((r for r in rows if r["kind"] == "out" and r["L"] == L), key=lambda r: r["i"])
        # a character is right where it equals the reversed source at its position
        assert [r["ok"] for r in outs] == [i < L and source[::-1][i] == ch for i, ch in enumerate(output)]
        assert "".join(r["ch"] for r in rows if r["kind"] == "in" and r["L"] == L) == source
    assert charts.bottleneck_state(spec, length=5)["accuracy"] == 0.0


def test_bottleneck_chart_checks_its_arguments():
    acc = _accuracy_table([3, 4])
    with pytest.raises(ValueError, match=r"no \(source, output\) for the lengths \[4\]"):
        charts.bottleneck_chart(acc, {3: ("abc", "cba")}, hidden=8)
    with pytest.raises(ValueError, match="not 4"):
        charts.bottleneck_chart(acc, {3: ("abc", "cba"), 4: ("abc", "cba")}, hidden=8)
    with pytest.raises(ValueError, match="not one of the measured lengths"):
        charts.bottleneck_chart(acc, {3: ("abc", "cba"), 4: ("abcd", "dcba")}, hidden=8, length=2)


def _alignment_examples(lengths, n_ex=2, seed=0):
    g = np.random.default_rng(seed)
    out = {}
    for L in lengths:
        out[L] = []
        for e in range(n_ex):
            src = "".join(g.choice(list("abcd"), L))
            dec = src[::-1] if e == 0 else src[::-1][:-1]  # example 1 stops one character early
            w = g.dirichlet(np.ones(L), size=len(dec) + 1)  # (output characters and <eos>, S), rows sum to 1
            if e == 0:  # the corresponding position wins at every step
                w[np.arange(L), L - 1 - np.arange(L)] += 2.0
            out[L].append((src, dec, w / w.sum(1, keepdims=True)))
    return out


def test_alignment_chart_embeds_the_weights_and_its_state_counts_the_maxima():
    examples = _alignment_examples([3, 5])
    spec = charts.alignment_chart(examples, length=5, example=1).to_dict()
    assert spec["usermeta"]["mixbook"] == {"kind": "alignment", "n_examples": 2}
    assert [p["value"] for p in spec["params"]] == [5, 2]  # the example slider counts from 1
    for L, exs in examples.items():
        for e, (src, out, w) in enumerate(exs):
            s = charts.alignment_state(spec, length=L, example=e)
            np.testing.assert_allclose(s["weights"], w, atol=5e-4)
            assert (s["source"], s["output"], s["exact"], s["steps"]) == (src, out, e == 0, L)
            top = s["weights"][:L].argmax(1)
            assert s["on"] == int((top == L - 1 - np.arange(L)).sum())  # no ties in random weights
            assert s["right"] == int((top == L - np.arange(L)).sum())
    assert charts.alignment_state(spec, length=5, example=0)["on"] == 5


def test_alignment_state_counts_ties_for_both_positions():
    # (T, S): step 0 ties on s = 1, 2 (its own position is 2; no position right of it); step 1 ties on its own
    # position 1 and the one to its right, 2; step 2 is on its own position 0
    w = np.array([[0.0, 0.5, 0.5], [0.0, 0.5, 0.5], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    spec = charts.alignment_chart({3: [("abc", "cba", w)]}).to_dict()
    s = charts.alignment_state(spec, length=3, example=0)
    assert (s["on"], s["right"], s["steps"]) == (3, 1, 3)


def _generations():
    import pandas as pd

    rows = [(1, 1, "ながながし", "ながなかし"), (1, 2, "わかころも", "わか"), (1, 3, "しろたへ", "しろたへへへ"),
            (2, 1, "ながながし", "ながながし"), (2, 2, "わかころも", "わかころも"), (2, 3, "しろたへ", "しろたへ")]
    return pd.DataFrame(rows, columns=["epoch", "number", "gold", "pred"])


def test_errors_chart_embeds_each_epochs_wrong_texts_and_counts_the_red_characters():
    gens = _generations()
    spec = charts.errors_chart(gens, epoch=1, max_rows=2).to_dict()
    assert spec["usermeta"]["mixbook"] == {"kind": "errors", "max_rows": 2, "max_chars": 36}
    s = charts.errors_state(spec, epoch=1)
    # the first two wrong rows: one wrong character; two right and three missing
    assert (s["n"], s["wrong"], s["shown"], s["red"]) == (3, 3, 2, 1 + 3)
    assert charts.errors_state(spec, epoch=2) == {"n": 3, "wrong": 0, "shown": 0, "red": 0}
    s = charts.errors_state(charts.errors_chart(gens, epoch=1).to_dict(), epoch=1)
    assert (s["shown"], s["red"]) == (3, 1 + 3 + 2)  # the third row's two extra characters are red
    s = charts.errors_state(charts.errors_chart(gens, epoch=1, max_chars=5).to_dict(), epoch=1)
    assert s["red"] == 1 + 3 + 1  # only the first 5 characters of a line are drawn: one of the two extra ones


def test_errors_chart_checks_its_arguments():
    with pytest.raises(ValueError, match="columns"):
        charts.errors_chart(_generations().drop(columns="pred"), epoch=1)
    with pytest.raises(ValueError, match="epoch=7 has no generations"):
        charts.errors_chart(_generations(), epoch=7)


def _neighbours():
    words = ["dog", "cat", "king"]
    kinds = {"dog": "動物", "cat": "動物", "king": "人"}
    nb = {(w, n, t): [(x, 0.9 - 0.1 * i - 0.01 * n) for i, x in enumerate(y for y in words if y != w)]
          for w in words for n in (1, 2) for t in ("PPMI", "回数")}
    return nb, kinds


def test_neighbour_chart_embeds_every_setting():
    nb, kinds = _neighbours()
    shares = {(n, t): 0.1 * n + (t == "PPMI") for n in (1, 2) for t in ("PPMI", "回数")}
    spec = charts.neighbour_chart(nb, kinds, word="king", window=2, weighting="回数", shares=shares).to_dict()
    meta = spec["usermeta"]["mixbook"]
    assert meta["words"] == ["cat", "dog", "king"] and meta["word_kinds"] == ["動物", "動物", "人"]
    assert [p["value"] for p in spec["params"]] == [2, 2, "回数"]
    for (w, n, t), pairs in nb.items():
        s = charts.neighbour_state(spec, word=meta["words"].index(w), window=n, weighting=t)
        assert s["items"] == [x for x, _ in pairs] and s["values"] == pytest.approx([v for _, v in pairs], abs=1e-4)
        assert s["kinds"] == [kinds[x] for x, _ in pairs] and s["share"] == pytest.approx(shares[(n, t)])
    # without shares: no share line, and the state says so
    spec = charts.neighbour_chart(nb, kinds, word="dog", window=1, weighting="PPMI").to_dict()
    assert len(spec["vconcat"]) == 2 and charts.neighbour_state(spec, word=1, window=1, weighting="PPMI")["share"] is None


def test_neighbour_chart_checks_its_arguments():
    nb, kinds = _neighbours()
    with pytest.raises(ValueError, match="lacks 1"):
        charts.neighbour_chart({k: v for k, v in nb.items() if k != ("dog", 2, "PPMI")}, kinds, word="dog", window=1, weighting="PPMI")
    with pytest.raises(ValueError, match="window=3 is not one of"):
        charts.neighbour_chart(nb, kinds, word="dog", window=3, weighting="PPMI")
    with pytest.raises(ValueError, match="shares needs"):
        charts.neighbour_chart(nb, kinds, word="dog", window=1, weighting="PPMI", shares={(1, "PPMI"): 0.5})
