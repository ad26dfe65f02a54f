"""The 百人一首 data and the chapter-7 helpers (mixlib.course.hyakunin)."""

from __future__ import annotations

import csv

import pandas as pd
import pytest
import torch

from mixlib import data_path
from mixlib.course import hyakunin as hy

# ---------------------------------------------------------------------------
# the data file, read with the csv module (independently of load_poems)
# ---------------------------------------------------------------------------


def _raw_rows():
    with open(data_path("hyakunin_isshu.tsv"), encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_file_structure():
    rows = _raw_rows()
    assert list(rows[0].keys()) == ["number", "poet", "kami_no_ku", "shimo_no_ku"]
    assert len(rows) == 100
    assert [int(r["number"]) for r in rows] == list(range(1, 101))
    poems = {(r["kami_no_ku"], r["shimo_no_ku"]) for r in rows}
    assert len(poems) == 100
    assert len({r["kami_no_ku"] for r in rows}) == 100
    assert len({r["shimo_no_ku"] for r in rows}) == 100
    hiragana = {chr(c) for c in range(ord("あ"), ord("ゖ") + 1)} - set("ぁぃぅぇぉっゃゅょゎゕゖ")
    for r in rows:
        assert r["poet"].strip(), r
        kami, shimo = r["kami_no_ku"].split(" "), r["shimo_no_ku"].split(" ")
        assert [len(p) for p in kami][0] in (5, 6) and len(kami) == 3, r
        assert 5 <= len(kami[2]) <= 6 and 6 <= len(kami[1]) <= 8, r
        assert len(shimo) == 2 and all(6 <= len(p) <= 8 for p in shimo), r
        assert set("".join(kami + shimo)) <= hiragana, r
        assert 16 <= len("".join(kami)) <= 20 and 14 <= len("".join(shimo)) <= 16, r


def test_known_poems_and_historical_kana():
    rows = {int(r["number"]): r for r in _raw_rows()}
    assert rows[1]["poet"] == "天智天皇"
    assert rows[1]["kami_no_ku"] == "あきのたの かりほのいほの とまをあらみ"
    assert rows[1]["shimo_no_ku"] == "わがころもでは つゆにぬれつつ"
    assert rows[17]["poet"] == "在原業平朝臣"
    assert rows[17]["kami_no_ku"].replace(" ", "") == "ちはやぶるかみよもきかずたつたがは"
    assert rows[17]["shimo_no_ku"].replace(" ", "") == "からくれなゐにみづくくるとは"
    assert rows[100]["poet"] == "順徳院"
    text = "".join(r["kami_no_ku"] + r["shimo_no_ku"] for r in rows.values())
    # historical kana are kept (ゐ in くれなゐ, ゐなの, くもゐ; ゑ in こゑ, ゆゑ, すゑ, ゑじ ...)
    assert text.count("ゐ") == 3 and text.count("ゑ") >= 8
    # and modern spellings are not used where the historical one differs
    assert "くれない" not in text and "こえきく" not in text


def test_load_poems_and_validation():
    poems = hy.load_poems()
    assert len(poems) == 100 and poems["kami"].str.contains(" ").sum() == 0
    assert (poems["kami"].str.len() == poems["kami_no_ku"].str.len() - 2).all()
    bad = poems.copy()
    bad.loc[3, "kami_no_ku"] = "たごのうらに うちいでてみれば しろたえの ＡＢ"
    bad = pd.concat([bad, bad.iloc[[0]]], ignore_index=True)
    with pytest.raises(ValueError) as err:
        hy.validate_poems(bad)
    msg = str(err.value)
    assert "101 rows" in msg and "poem 4" in msg and "duplicated" in msg


# ---------------------------------------------------------------------------
# vocabulary, tensors, scores
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def poems():
    return hy.load_poems()


def test_vocab_round_trip(poems):
    vocab = hy.CharVocab.from_texts(list(poems.kami) + list(poems.shimo))
    assert vocab.itos[:4] == (hy.PAD, hy.BOS, hy.EOS, hy.UNK)
    assert {"ゐ", "ゑ"} <= set(vocab.itos)
    for text in poems.shimo:
        assert vocab.decode(vocab.encode(text, bos=True, eos=True)) == text
    assert vocab.decode(vocab.encode("あＸい")) == "あ？い"
    assert vocab.decode([vocab.stoi["あ"], vocab.eos_id, vocab.stoi["い"]]) == "あ"


def test_encode_pairs_shift_and_leaky(poems):
    vocab = hy.CharVocab.from_texts(list(poems.kami) + list(poems.shimo))
    kami, shimo = list(poems.kami[:5]), list(poems.shimo[:5])
    d = hy.encode_pairs(vocab, kami, shimo, shift=True)
    t, x = d["target"], d["dec_in"]
    assert (x[:, 0] == vocab.bos_id).all()
    assert torch.equal(x[:, 1:], t[:, :-1])  # the decoder reads the target one step late
    for i, s in enumerate(shimo):
        assert vocab.decode(t[i]) == s and int(t[i, len(s)]) == vocab.eos_id
        assert vocab.decode(d["src"][i]) == kami[i]
    leaky = hy.encode_pairs(vocab, kami, shimo, shift=False)
    assert torch.equal(leaky["dec_in"], leaky["target"])  # the lecture's setting: input == target
    with pytest.raises(ValueError, match="max_len"):
        hy.encode_pairs(vocab, kami, shimo, max_len=10)


def test_char_accuracy_and_scores():
    assert hy.char_accuracy("あいう", "あいう") == 1.0
    assert hy.char_accuracy("あかう", "あいう") == pytest.approx(2 / 3)
    assert hy.char_accuracy("あい", "あいう") == pytest.approx(2 / 3)  # missing counts as wrong
    assert hy.char_accuracy("あいうえ", "あいう") == pytest.approx(3 / 4)  # extra counts as wrong
    assert hy.char_accuracy("", "") == 1.0
    s = hy.score_generations(["あい", "かき"], ["あい", "かく"])
    assert s == {"exact": 0.5, "char": pytest.approx(0.75)}


def test_split_is_a_partition():
    tr, ho = hy.split_poems(100, 10, seed=3)
    assert len(tr) == 90 and len(ho) == 10 and set(tr).isdisjoint(ho) and set(tr) | set(ho) == set(range(100))
    assert list(hy.split_poems(100, 10, seed=3)[1]) == list(ho)
    with pytest.raises(ValueError):
        hy.split_poems(100, 100)


def test_render_errors_marks_exactly_the_wrong_characters():
    out = hy.render_errors(["あいうえ", "かきく"], ["あかうえお", "かきく"], labels=["1", "2"])
    assert out.count(f"color:{hy.WRONG_COLOR}") == 2  # か (wrong) and お (extra)
    assert out.count(f"color:{hy.RIGHT_COLOR}") == 3  # あ う え
    assert "かきく" not in out.split("</tr>", 1)[1] or out.count("<tr>") == 2  # the exact row is left out
    short = hy.render_errors(["あいう"], ["あ"], fmt="ansi")
    assert "\x1b[34mあ" in short and "＿＿" in short
    with pytest.raises(ValueError, match="fmt"):
        hy.render_errors(["あ"], ["あ"], fmt="latex")


def test_char_frequency(poems):
    freq = hy.char_frequency(poems.kami_no_ku)
    assert " " not in freq.index and int(freq.sum()) == int(poems.kami.str.len().sum())
    assert freq.is_monotonic_decreasing


# ---------------------------------------------------------------------------
# training: the leaky setting copies, generation exposes it
# ---------------------------------------------------------------------------


def test_train_small_run_history_and_generation_lengths(poems):
    cfg = hy.ChihayaConfig(d_model=16, n_heads=2, d_ff=32, epochs=2, batch_size=10, held_out=3, seed=1)
    run = hy.train_chihaya(poems.iloc[:12].reset_index(drop=True), cfg)
    h = run.history
    assert list(h.columns) == ["epoch", "split", "loss", "tf_char", "tf_poem", "gen_exact", "gen_char"]
    assert len(h) == 4 and set(h.split) == {"train", "heldout"}
    g = run.final("heldout")
    assert len(g) == 3 and (g.pred.str.len() <= cfg.max_len).all()
    assert set(g.number) == set(poems.number.iloc[run.heldout_idx])


def test_leaky_setting_scores_high_under_teacher_forcing_but_cannot_generate(poems):
    small = poems.iloc[:10].reset_index(drop=True)
    cfg = hy.ChihayaConfig(d_model=16, n_heads=2, d_ff=32, epochs=30, batch_size=5, lr=1e-2, shift=False, warmup=5)
    last = hy.train_chihaya(small, cfg).history.iloc[-1]
    assert last.tf_char > 0.9  # it copies the character it is shown
    assert last.gen_exact == 0.0 and last.gen_char < 0.2  # at generation time there is nothing to copy


# ---------------------------------------------------------------------------
# the lecture's framing, whole-poem teacher-forced accuracy, k-fold, kimari-ji
# ---------------------------------------------------------------------------


def test_lecture_framing_puts_bos_in_both_input_and_target(poems):
    vocab = hy.CharVocab.from_texts(list(poems.kami) + list(poems.shimo))
    d = hy.encode_pairs(vocab, ["あい"], ["うえ"], shift=False, bos_in_target=True)
    want = [vocab.bos_id, vocab.stoi["う"], vocab.stoi["え"], vocab.eos_id]
    assert d["target"][0].tolist() == want and d["dec_in"][0].tolist() == want
    with pytest.raises(ValueError, match="shift=False"):
        hy.encode_pairs(vocab, ["あい"], ["うえ"], shift=True, bos_in_target=True)
    cfg = hy.lecture_config()
    assert (cfg.batch_size, cfg.lr, cfg.d_ff, cfg.schedule, cfg.shift, cfg.bos_in_target) == (1, 1e-3, 32, "constant", False, True)
    with pytest.raises(ValueError, match="schedule"):
        hy.ChihayaConfig(schedule="linear")


def test_tf_poem_counts_whole_poems_and_tf_pred_is_aligned(poems):
    small = poems.iloc[:6].reset_index(drop=True)
    cfg = hy.ChihayaConfig(d_model=16, n_heads=2, d_ff=32, epochs=2, batch_size=3, eval_every=2)
    run = hy.train_chihaya(small, cfg)
    g = run.generations["train"]
    assert (g.tf_pred.str.len() == g.gold.str.len()).all()
    assert (g[g.epoch == 1].pred == "").all()  # epoch 1 skipped by eval_every
    assert run.history.gen_exact.isna().tolist() == [True, False]
    # whole-poem accuracy, recomputed independently from the model's teacher-forced argmax
    d = hy.encode_pairs(run.vocab, list(small.kami), list(small.shimo))
    with torch.no_grad():
        pred = run.model(d["src"], d["dec_in"]).argmax(-1)
    real = d["target"] != run.vocab.pad_id
    want = sum(bool((pred[i][real[i]] == d["target"][i][real[i]]).all()) for i in range(len(small))) / len(small)
    assert run.history.iloc[-1].tf_poem == pytest.approx(want)
    # tf_pred matches the argmax at the character positions
    chars = d["target"] > run.vocab.eos_id
    aligned = ["".join(run.vocab.itos[j] if j > 3 else "？" for j in p[c].tolist()) for p, c in zip(pred, chars)]
    assert g[g.epoch == 2].tf_pred.tolist() == aligned


def test_kfold_holds_out_every_poem_exactly_once(poems):
    small = poems.iloc[:9].reset_index(drop=True)
    cfg = hy.ChihayaConfig(d_model=16, n_heads=2, d_ff=32, epochs=1, batch_size=4)
    out = hy.kfold_heldout(small, cfg, k=3)
    assert sorted(out.number.tolist()) == small.number.tolist()
    assert out.groupby("fold").size().tolist() == [3, 3, 3]
    with pytest.raises(ValueError, match="k must"):
        hy.kfold_heldout(small, cfg, k=1)
    with pytest.raises(ValueError, match="heldout_idx"):
        hy.train_chihaya(small, cfg, heldout_idx=[0, 0])


def test_kimariji_lengths_against_brute_force(poems):
    kami = list(poems.kami)
    got = hy.kimariji_lengths(kami)
    for i, k in enumerate(kami):  # brute force: the shortest prefix no other phrase starts with
        n = next(n for n in range(1, len(k) + 1) if sum(o.startswith(k[:n]) for o in kami) == 1)
        assert got[i] == n
    assert hy.kimariji_lengths(["あいう", "あえお", "か"]) == [2, 2, 1]
    with pytest.raises(ValueError, match="prefix"):
        hy.kimariji_lengths(["あい", "あいう"])


def test_prefix_generations_locked_means_correct_from_here_on(poems):
    small = poems.iloc[:5].reset_index(drop=True)
    cfg = hy.ChihayaConfig(d_model=16, n_heads=2, d_ff=32, epochs=1, batch_size=5)
    run = hy.train_chihaya(small, cfg)
    df = hy.prefix_generations(run.model, run.vocab, list(small.kami), list(small.shimo))
    assert df.groupby("poem").n.max().tolist() == small.kami.str.len().tolist()
    for _, g in df.groupby("poem"):
        c = g.correct.to_numpy()
        assert g.locked.tolist() == [bool(c[i:].all()) for i in range(len(c))]
