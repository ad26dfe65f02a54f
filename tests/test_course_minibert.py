"""BERT's pre-training pieces (mixlib.course.minibert): MLM masking, NSP pairs, the miniature BERT, fill-mask."""

from __future__ import annotations

import pytest
import torch

from mixlib.course import minibert as mb


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from mixlib.models import packaged_model_dir

    return AutoTokenizer.from_pretrained(str(packaged_model_dir()), local_files_only=True)


# ---------------------------------------------------------------------------
# masking
# ---------------------------------------------------------------------------

CLS, SEP, PAD, MASK = 101, 102, 0, 103


def _batch(b=400, n=512, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, 2000, (b, n), generator=g)
    ids[:, 0], ids[:, -1] = CLS, SEP
    ids[::3, -40:] = PAD  # some padding
    return ids


def test_mlm_statistics_80_10_10_on_many_tokens():
    ids = _batch()
    m = mb.mlm_mask(ids, mask_id=MASK, special_ids=[CLS, SEP, PAD], random_ids=torch.arange(1000, 2000),
                    generator=torch.Generator().manual_seed(1))
    s = mb.masking_stats(m)
    assert s["n_eligible"] > 190_000 and s["n_chosen"] > 25_000
    assert abs(s["chosen_rate"] - 0.15) < 0.005
    assert abs(s["mask"] - 0.8) < 0.01 and abs(s["random"] - 0.1) < 0.01 and abs(s["kept"] - 0.1) < 0.01
    assert s["special_chosen"] == 0


def test_mlm_special_tokens_never_masked_and_labels_right():
    ids = _batch(b=50, n=64)
    m = mb.mlm_mask(ids, mask_id=MASK, special_ids=[CLS, SEP, PAD], random_ids=torch.arange(1000, 2000), rate=0.5,
                    generator=torch.Generator().manual_seed(2))
    special = (ids == CLS) | (ids == SEP) | (ids == PAD)
    assert not m.chosen[special].any()
    assert torch.equal(m.input_ids[special], ids[special])
    assert torch.equal(m.labels[m.chosen], ids[m.chosen]) and (m.labels[~m.chosen] == -100).all()
    assert torch.equal(m.input_ids[~m.chosen], ids[~m.chosen])  # untouched where not chosen
    assert (m.input_ids[m.action == mb.MASKED] == MASK).all()
    assert torch.equal(m.input_ids[m.action == mb.KEPT], ids[m.action == mb.KEPT])
    rnd = m.input_ids[m.action == mb.RANDOM]
    assert ((rnd >= 1000) & (rnd < 2000)).all()
    assert torch.equal(m.chosen, m.action != mb.NONE)


def test_mlm_other_rates_and_determinism():
    ids = _batch(b=200, n=256)
    kw = dict(mask_id=MASK, special_ids=[CLS, SEP, PAD], random_ids=torch.arange(1000, 2000))
    only_mask = mb.masking_stats(mb.mlm_mask(ids, p_mask=1.0, p_random=0.0, **kw))
    assert only_mask["mask"] == 1.0 and only_mask["random"] == 0.0
    a = mb.mlm_mask(ids, generator=torch.Generator().manual_seed(5), **kw)
    b = mb.mlm_mask(ids, generator=torch.Generator().manual_seed(5), **kw)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)


@pytest.mark.parametrize("kw, msg", [
    (dict(p_mask=0.9, p_random=0.2), "exceeds 1"),
    (dict(rate=1.5), "probability"),
    (dict(random_ids=[]), "random_ids is empty"),
])
def test_mlm_bad_input(kw, msg):
    args = dict(mask_id=MASK, special_ids=[CLS], random_ids=[1000, 1001]) | kw
    with pytest.raises(ValueError, match=msg):
        mb.mlm_mask(_batch(b=2, n=8), **args)


# ---------------------------------------------------------------------------
# next sentence prediction
# ---------------------------------------------------------------------------


def test_nsp_examples():
    pairs = [(f"first {i}", f"second {i}") for i in range(400)]
    df = mb.nsp_examples(pairs, seed=0)
    assert len(df) == 400 and set(df.label) == {"IsNext", "NotNext"}
    assert abs((df.label == "IsNext").mean() - 0.5) < 0.08
    is_next = df[df.label == "IsNext"]
    assert all(b == f"second {i}" for i, b in zip(is_next.index, is_next.sentence_b))
    not_next = df[df.label == "NotNext"]
    assert all(b != f"second {i}" and b == f"second {s}" for i, b, s in zip(not_next.index, not_next.sentence_b, not_next.source))
    with pytest.raises(ValueError):
        mb.nsp_examples(pairs[:1])


# ---------------------------------------------------------------------------
# the miniature BERT and fill-mask
# ---------------------------------------------------------------------------


def test_compact_vocab_round_trip(tokenizer):
    seqs = tokenizer(["the sky is blue", "unbelievable tokenization"])["input_ids"]
    v = mb.CompactVocab.from_token_ids(tokenizer, seqs)
    assert v.ids[:5] == (tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id)
    for s in seqs:
        c = v.to_compact(torch.tensor(s))
        assert [v.ids[i] for i in c.tolist()] == s
    unseen = tokenizer("zebra")["input_ids"][1]
    assert int(v.to_compact(torch.tensor([unseen]))[0]) == v.unk


def test_minibert_learns_a_tiny_corpus(tokenizer):
    # one fixed sentence: every masked word is determined by its position and neighbours
    words = "one two three four five six seven eight".split()
    m = mb.train_minibert([" ".join(words)] * 100, tokenizer, d_model=32, n_layers=1, n_heads=2, d_ff=64, steps=80,
                          batch_size=16, lr=5e-3, warmup=10, rate=0.3, seed=0)
    assert len(m.losses) > 60 and sum(m.losses[-10:]) / 10 < sum(m.losses[:10]) / 10 / 5
    for i, word in enumerate(words):
        blank = " ".join(words[:i] + ["[MASK]"] + words[i + 1 :])
        top = m.fill_mask(blank, k=3)[0]
        assert list(top["rank"]) == [1, 2, 3] and top["prob"].is_monotonic_decreasing and top["prob"].sum() <= 1 + 1e-6
        assert top["token"].iloc[0] == word, (blank, top)


def test_fill_mask_full_vocabulary_model_matches_its_logits(tokenizer):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=32)).eval()
    text = "paris is the [MASK] of [MASK] ."
    tables = mb.fill_mask(model, tokenizer, text, k=4)
    assert len(tables) == 2
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    pos = (ids[0] == tokenizer.mask_token_id).nonzero().flatten()
    with torch.no_grad():
        p = torch.softmax(model(input_ids=ids).logits[0, pos[1]], -1)
    best = int(p.argmax())
    assert tables[1]["token"].iloc[0] == tokenizer.convert_ids_to_tokens(best)
    assert abs(float(tables[1]["prob"].iloc[0]) - float(p[best])) < 1e-6
    with pytest.raises(ValueError, match="MASK"):
        mb.fill_mask(model, tokenizer, "no blank here")


# ---------------------------------------------------------------------------
# whole-set cloze probes, accuracy, probe history, the MLM head behind an encoder
# ---------------------------------------------------------------------------


def test_cloze_probes_are_the_corpus_grammar():
    from mixlib.course.corpus import check_sentence

    pr = mb.cloze_probes()
    counts = pr.relation.value_counts().to_dict()
    assert counts == {"時制（時は左、動詞は右）": 240, "代名詞（手がかりは左）": 48, "代名詞（手がかりは右）": 48, "人物（手がかりは右）": 48, "国と首都": 8}
    assert list(dict.fromkeys(pr.relation)) != [] and set(pr.relation) == set(mb.CLOZE_RELATIONS)
    assert (pr.text.str.count(r"\[MASK\]") == 1).all() and not pr.text.duplicated().any()
    for r in pr.itertuples():
        filled = r.text.replace("[MASK]", r.answer)
        assert check_sentence(filled).agrees, filled
    # a wrong answer breaks agreement (the probe really tests the clue)
    swap = {"his": "her", "her": "his", "he": "she", "she": "he"}
    for r in pr[pr.relation.str.startswith("代名詞")].itertuples():
        assert not check_sentence(r.text.replace("[MASK]", swap[r.answer])).agrees


def test_cloze_accuracy_matches_one_by_one_fill_mask(tokenizer):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(1)
    model = BertForMaskedLM(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=32)).eval()
    pr = mb.cloze_probes().groupby("relation").head(5)
    acc = mb.cloze_accuracy(model, tokenizer, pr, batch_size=7)  # batches with padding
    for r in acc.itertuples():
        top = mb.fill_mask(model, tokenizer, r.text, k=1)[0].token.iloc[0]
        assert r.predicted == top
        assert r.correct == (top == r.answer)
    # chance = share of the most frequent answer within the relation
    for rel, grp in acc.groupby("relation"):
        assert grp.chance.nunique() == 1
        assert grp.chance.iloc[0] == pytest.approx(grp.answer.value_counts().max() / len(grp))


def test_cloze_accuracy_on_a_trained_model_and_its_null(tokenizer):
    pr = mb.cloze_probes()
    sents = [t.replace("[MASK]", a) for t, a in zip(pr.text, pr.answer)]
    m = mb.train_minibert(sents * 3, tokenizer, d_model=32, n_layers=1, n_heads=2, d_ff=64, steps=60, batch_size=32,
                          lr=5e-3, warmup=10, seed=0, probes=pr, probe_every=25)
    assert list(m.probe_history.step) == [0, 25, 50, 60]
    assert set(m.probe_history.columns) == {"step", *mb.CLOZE_RELATIONS}
    last = mb.cloze_accuracy(m.model, tokenizer, pr, vocab=m.vocab).groupby("relation").correct.mean()
    assert last.to_dict() == pytest.approx(m.probe_history.iloc[-1].drop("step").to_dict())
    # probing does not change training: same seed without probes gives the same losses
    m2 = mb.train_minibert(sents * 3, tokenizer, d_model=32, n_layers=1, n_heads=2, d_ff=64, steps=60, batch_size=32,
                           lr=5e-3, warmup=10, seed=0)
    assert m2.losses == m.losses and m2.probe_history.empty


def test_cloze_accuracy_bad_input(tokenizer):
    from transformers import BertConfig, BertForMaskedLM

    model = BertForMaskedLM(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=8, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=16)).eval()
    bad = {"no mask": ("the king loves his crown", "his"), "two masks": ("[MASK] loves [MASK] crown", "his"),
           "multi-piece answer": ("the [MASK] is here", "unaffable")}
    for text, answer in bad.values():
        df = __import__("pandas").DataFrame({"relation": ["x"], "text": [text], "answer": [answer]})
        with pytest.raises(ValueError):
            mb.cloze_accuracy(model, tokenizer, df)
    with pytest.raises(ValueError, match="probe_every"):
        mb.train_minibert(["a b"], tokenizer, steps=1, probe_every=0)


def test_load_mlm_head_only_where_the_checkpoint_has_one(tmp_path, tokenizer):
    import mixlib
    from transformers import BertConfig, BertForMaskedLM, BertModel

    assert mb.load_mlm_head(mixlib.load_encoder("all-MiniLM-L6-v2")) is None  # packaged: no MLM head
    cfg = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32)
    torch.manual_seed(0)
    with_head = BertForMaskedLM(cfg).eval()
    with_head.save_pretrained(tmp_path / "with_head")
    BertModel(cfg).save_pretrained(tmp_path / "no_head")
    for d in ("with_head", "no_head"):
        tokenizer.save_pretrained(tmp_path / d)
    head = mb.load_mlm_head(mixlib.load_encoder(str(tmp_path / "with_head")))
    assert head is not None and not head.training
    text = "paris is the [MASK] of france ."
    assert mb.fill_mask(head, tokenizer, text, k=3)[0].equals(mb.fill_mask(with_head, tokenizer, text, k=3)[0])
    assert mb.load_mlm_head(mixlib.load_encoder(str(tmp_path / "no_head"))) is None


def test_plot_fill_mask_one_panel_per_model(tokenizer):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from mixlib import plots

    plots.setup()
    t = pd.DataFrame({"rank": [1, 2], "token": ["his", "her"], "prob": [0.7, 0.2]})
    fig = mb.plot_fill_mask({"a": t, "b": t.iloc[:1]}, "the king loves [MASK] crown")
    assert [ax.get_title() for ax in fig.axes] == ["a", "b"]
    assert [len(ax.patches) for ax in fig.axes] == [2, 1]
    plt.close(fig)
    with pytest.raises(ValueError):
        mb.plot_fill_mask({}, "x")


def test_compare_to_corpus_says_what_agrees_and_what_does_not():
    import pandas as pd
    from scipy.stats import binom

    def p_two_sided(x, n):  # an independent route to the exact test: sum the null's point masses no likelier than x
        pmf = binom.pmf(range(n + 1), n, 0.5)
        return float(pmf[pmf <= pmf[x] * (1 + 1e-7)].sum())

    counts = pd.Series({"puppy": 81, "kitten": 80, "rabbit": 55})  # the chapter's corpus, n = 216
    model = pd.Series({"kitten": 0.35, "rabbit": 0.34, "puppy": 0.30})
    said = mb.compare_to_corpus(counts, model)
    assert "顔ぶれはコーパスと同じ" in said and "確率の和 0.99" in said and "最大 0.09（rabbit）" in said
    p = sorted([p_two_sided(81, 136), p_two_sided(80, 135), p_two_sided(81, 161)])
    assert p[0] < 0.05 and p[0] > 0.05 / 3  # significant alone, not once the three pairs are judged together (Holm)
    assert f"最小の p = {p[0]:.3f}" in said and "順は読まない" in said and "逆" not in said
    # counts that fix an order even for the three pairs together: Holm by hand
    big = pd.Series({"puppy": 800, "kitten": 790, "rabbit": 410})
    q = sorted([(p_two_sided(800, 1210), "puppy", "rabbit"), (p_two_sided(790, 1200), "kitten", "rabbit"),
                (p_two_sided(800, 1590), "puppy", "kitten")])
    holm = [t for i, t in enumerate(q) if all(q[j][0] < 0.05 / (3 - j) for j in range(i + 1))]
    assert [(a, b) for _, a, b in holm] == [("puppy", "rabbit"), ("kitten", "rabbit")]
    said = mb.compare_to_corpus(big, pd.Series({"kitten": 0.5, "rabbit": 0.3, "puppy": 0.2}))
    assert "puppy > rabbit" in said and "kitten > rabbit" in said and "puppy > kitten" not in said
    assert "モデルは puppy と rabbit の順を逆にしている（ほかの組の順は保っている）" in said
    said = mb.compare_to_corpus(big, pd.Series({"kitten": 0.40, "puppy": 0.33, "rabbit": 0.15}))
    assert "どれの順も保っている" in said  # kitten above puppy is not read: the corpus does not fix it
    # a word the corpus never puts there
    said = mb.compare_to_corpus(counts, pd.Series({"puppy": 0.5, "grape": 0.3, "kitten": 0.1, "rabbit": 0.05}))
    assert "2 個だけ" in said and "確率の和 0.60" in said and "一致しない" in said


@pytest.mark.parametrize("counts, model", [({}, {"a": 1.0}), ({"a": 5, "b": 5}, {"a": 1.0}), ({"a": 0.5}, {"a": 1.0}),
                                           ({"a": 0}, {"a": 1.0})])
def test_compare_to_corpus_bad_input(counts, model):
    import pandas as pd

    with pytest.raises(ValueError):
        mb.compare_to_corpus(pd.Series(counts, dtype=float), pd.Series(model, dtype=float))


def test_diff_yardstick_is_the_spread_of_a_difference_of_two_independent_scores():
    import numpy as np

    rng = np.random.default_rng(0)
    for score, n in ((84.2, 9815), (95.4, 5942), (86.7, 408)):
        p = score / 100
        sim = (rng.binomial(n, p, 400_000) - rng.binomial(n, p, 400_000)) / n * 100
        half = (np.quantile(sim, 0.975) - np.quantile(sim, 0.025)) / 2
        assert mb.diff_yardstick(score, n) == pytest.approx(half, rel=0.03)
    # one score's half-width times sqrt(2), elementwise on a Series
    import pandas as pd

    got = mb.diff_yardstick(pd.Series({"a": 50.0, "b": 90.0}), pd.Series({"a": 100, "b": 400}))
    assert got["a"] == pytest.approx(1.96 * np.sqrt(2) * 5.0) and got["b"] == pytest.approx(1.96 * np.sqrt(2) * 1.5)
    for score, n in ((101, 10), (50, 0)):
        with pytest.raises(ValueError):
            mb.diff_yardstick(score, n)


def test_compare_settings_first_and_previous():
    import pandas as pd

    t = pd.DataFrame({"A": [80.0, 79.0, 70.0], "B": [90.0, 90.5, 91.0]}, index=["base", "x", "y"])
    first = mb.compare_settings(t, {"A": 1000}, against="first").set_index(["setting", "task"])
    assert first.loc[("y", "A"), "diff"] == -10 and first.loc[("y", "A"), "baseline"] == "base"
    assert first.loc[("x", "A"), "yardstick"] == pytest.approx(mb.diff_yardstick(80.0, 1000))
    assert not first.loc[("x", "A"), "beyond"] and first.loc[("y", "A"), "beyond"]
    assert pd.isna(first.loc[("x", "B"), "yardstick"]) and not first.loc[("x", "B"), "beyond"]  # no dev size: no verdict
    prev = mb.compare_settings(t, {"A": 1000, "B": 1000}, against="previous").set_index(["setting", "task"])
    assert prev.loc[("y", "A"), "diff"] == -9 and prev.loc[("y", "A"), "baseline"] == "x"
    assert prev.loc[("y", "B"), "yardstick"] == pytest.approx(mb.diff_yardstick(90.5, 1000))
    assert prev.loc[("y", "A"), "times"] == pytest.approx(9 / mb.diff_yardstick(79.0, 1000))
    # the Bonferroni widening for m comparisons with a yardstick: 2 here (A's), 4 in prev
    from scipy.stats import norm

    widen = norm.ppf(1 - 0.05 / 4) / 1.96
    assert first.loc[("y", "A"), "beyond_all"] == (10 > widen * first.loc[("y", "A"), "yardstick"])
    assert not first.loc[("x", "B"), "beyond_all"]
    with pytest.raises(ValueError):
        mb.compare_settings(t, {}, against="last")
    with pytest.raises(ValueError):
        mb.compare_settings(t.iloc[:1], {})


def test_describe_verdicts_names_clear_marginal_and_inside_tasks():
    import pandas as pd

    rows = pd.DataFrame({"task": ["A", "B", "C", "D"], "diff": [-3.0, -1.1, 0.2, 1.0],
                         "yardstick": [1.0, 1.0, 1.0, float("nan")],
                         "beyond": [True, True, False, False], "beyond_all": [True, False, False, False]})
    said = mb.describe_verdicts(rows)
    assert said == ("表の比較をまとめて見ても物差しを超えるのは A（-3.0）、物差しをわずかに超えるだけなのは B（-1.1）、"
                    "物差しの内側にあるのは C、物差しの無いのは D")
    said = mb.describe_verdicts(rows.iloc[2:3])
    assert said == "物差しを超える差は無く、物差しの内側にあるのは C"


def test_tense_minimal_pairs_see_which_cue_a_model_reads():
    from mixlib.course.corpus import VERBS

    probes = mb.cloze_probes()
    tense = probes.relation == list(mb.CLOZE_RELATIONS)[3]
    present = {past: pres for pres, past, _ in VERBS}

    def scored(predict):
        out = probes.copy()
        out["predicted"] = [predict(t, a) if is_t else a for t, a, is_t in zip(out.text, out.answer, tense)]
        return out

    by_time, by_object = mb.tense_minimal_pairs(scored(lambda t, a: a))  # reads both cues
    assert (len(by_time), len(by_object)) == (40, 24) and by_time.all() and by_object.all()
    # ignores the time word: the right verb, always in the present
    by_time, by_object = mb.tense_minimal_pairs(scored(lambda t, a: present.get(a, a)))
    assert not by_time.any() and by_object.all()
    # ignores the object: the right tense, always the first verb
    first_present, first_past, _ = VERBS[0]
    by_time, by_object = mb.tense_minimal_pairs(scored(lambda t, a: first_past if a in present else first_present))
    assert by_time.all() and not by_object.any()
    with pytest.raises(ValueError):
        mb.tense_minimal_pairs(scored(lambda t, a: a)[~tense])
