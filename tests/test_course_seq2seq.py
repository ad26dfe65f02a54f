"""Recurrent models: the language model, the bottleneck and the attention decoder."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from mixlib.course import corpus
from mixlib.course import seq2seq as s2s

VOCAB = s2s.CharVocab("abcdef")


def small(attention: bool, seed: int = 0) -> s2s.Seq2Seq:
    return s2s.Seq2Seq(VOCAB, attention=attention, emb=8, hidden=12, dec_hidden=16, seed=seed)


def batch(B=4, S=7, seed=0):
    return s2s.sample_batch(VOCAB, B, S, torch.Generator().manual_seed(seed))


# -- data --------------------------------------------------------------------


def test_char_vocab_round_trip_and_targets():
    src, tgt_in, tgt_out = VOCAB.tensors(["abc", "fed"])
    assert src.tolist() == [[2, 3, 4], [7, 6, 5]]
    assert tgt_in[:, 0].eq(VOCAB.BOS).all() and tgt_out[:, -1].eq(VOCAB.EOS).all()
    assert [VOCAB.decode(r) for r in tgt_out.tolist()] == ["cba", "def"]
    assert torch.equal(tgt_in[:, 1:], tgt_out[:, :-1])
    assert VOCAB.decode([2, 3, VOCAB.EOS, 4]) == "ab"
    with pytest.raises(ValueError, match="not in the alphabet"):
        VOCAB.encode("abz")
    with pytest.raises(ValueError, match="one length"):
        VOCAB.tensors(["ab", "abc"])
    with pytest.raises(ValueError, match="repeated"):
        s2s.CharVocab("aa")


def test_sample_batch_is_the_reversal_task_and_deterministic():
    src, tgt_in, tgt_out = batch(B=16, S=9, seed=3)
    assert src.shape == (16, 9) and tgt_in.shape == tgt_out.shape == (16, 10)
    assert torch.equal(tgt_out[:, :-1], src.flip(1))
    assert src.min() >= 2 and src.max() < len(VOCAB)
    assert torch.equal(src, batch(B=16, S=9, seed=3)[0])
    assert not torch.equal(src, batch(B=16, S=9, seed=4)[0])


# -- model -------------------------------------------------------------------


@pytest.mark.parametrize("attention", [False, True])
def test_shapes(attention):
    m = small(attention)
    src, tgt_in, _ = batch(B=3, S=5)
    logits, w = m(src, tgt_in)
    assert logits.shape == (3, 6, len(VOCAB))
    if attention:
        assert w.shape == (3, 6, 5)
    else:
        assert w is None
    mem = m.encoder(src)
    assert mem.states.shape == (3, 5, 24) and mem.summary.shape == (3, 16)


def test_summary_is_made_of_the_two_final_states_only():
    m = small(False)
    src, _, _ = batch(B=3, S=6)
    mem = m.encoder(src)
    H = 12
    final = torch.cat([mem.states[:, -1, :H], mem.states[:, 0, H:]], -1)  # forward after x_S, backward after x_1
    torch.testing.assert_close(mem.summary, torch.tanh(m.encoder.bridge(final)))


def test_bottleneck_decoder_reads_no_encoder_state_but_the_summary():
    src, tgt_in, _ = batch(B=3, S=6)
    for attention in (False, True):
        m = small(attention)
        mem = m.encoder(src)
        poisoned = s2s.EncoderOutput(states=torch.full_like(mem.states, float("nan")), summary=mem.summary)
        ref, _ = m.decoder(tgt_in, mem)
        got, _ = m.decoder(tgt_in, poisoned)
        if attention:
            assert torch.isnan(got).all()  # attention reads every state
        else:
            torch.testing.assert_close(got, ref)  # the states are never read
            # ... and the same holds step by step, as in greedy decoding
            s = m.decoder.init_state(poisoned)
            lo, s, w = m.decoder.step(tgt_in[:, 0], s, poisoned)
            assert w is None and torch.isfinite(lo).all()


def test_bottleneck_output_depends_on_the_source_only_through_the_summary():
    m = small(False)
    src, tgt_in, _ = batch(B=2, S=8)
    other = src.clone()
    other[:, 3] = 2 + (other[:, 3] - 1) % (len(VOCAB) - 2)  # change one middle character
    mem_a, mem_b = m.encoder(src), m.encoder(other)
    mixed = s2s.EncoderOutput(states=mem_b.states, summary=mem_a.summary)
    torch.testing.assert_close(m.decoder(tgt_in, mixed)[0], m.decoder(tgt_in, mem_a)[0])
    assert not torch.allclose(m.decoder(tgt_in, mem_b)[0], m.decoder(tgt_in, mem_a)[0])


def test_additive_attention_matches_naive_numpy():
    m = small(True)
    dec = m.decoder
    src, _, _ = batch(B=2, S=5)
    mem = m.encoder(src)
    s_prev = torch.randn(2, 16, generator=torch.Generator().manual_seed(1))
    a, c = dec.attend(s_prev, dec.U(mem.states), mem.states)
    W, U, Ub, v = (x.detach().double().numpy() for x in (dec.W.weight, dec.U.weight, dec.U.bias, dec.v.weight))
    H, S = mem.states.detach().double().numpy(), s_prev.double().numpy()
    for b in range(2):
        e = np.array([v[0] @ np.tanh(W @ S[b] + U @ H[b, s] + Ub) for s in range(5)])
        alpha = np.exp(e - e.max()) / np.exp(e - e.max()).sum()
        np.testing.assert_allclose(a[b].detach().numpy(), alpha, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(c[b].detach().numpy(), alpha @ H[b], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("attention", [False, True])
def test_teacher_forcing_equals_step_by_step(attention):
    m = small(attention)
    src, tgt_in, _ = batch(B=3, S=6)
    mem = m.encoder(src)
    logits, weights = m.decoder(tgt_in, mem)
    s = m.decoder.init_state(mem)
    for t in range(tgt_in.shape[1]):
        lo, s, a = m.decoder.step(tgt_in[:, t], s, mem)
        torch.testing.assert_close(lo, logits[:, t], rtol=1e-5, atol=1e-6)
        if attention:
            torch.testing.assert_close(a, weights[:, t], rtol=1e-5, atol=1e-6)


def test_attention_weights_are_distributions():
    m = small(True)
    src, tgt_in, _ = batch(B=4, S=9)
    _, w = m(src, tgt_in)
    assert (w >= 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(4, 10))
    dec = s2s.greedy_decode(m, ["abcdefabc", "fedcbafed"])
    assert dec.weights.shape == (2, 9 + 1 + 2, 9)
    torch.testing.assert_close(dec.weights.sum(-1), torch.ones(2, 12))


@pytest.mark.parametrize("attention", [False, True])
def test_gradients_reach_every_parameter_and_are_finite(attention):
    m = small(attention)
    src, tgt_in, tgt_out = batch(B=4, S=6)
    logits, _ = m(src, tgt_in)
    torch.nn.functional.cross_entropy(logits.reshape(-1, len(VOCAB)), tgt_out.reshape(-1)).backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_gradient_matches_finite_differences():
    m = small(True).double()
    src, tgt_in, tgt_out = batch(B=2, S=4)

    def loss():
        logits, _ = m(src, tgt_in)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, len(VOCAB)), tgt_out.reshape(-1))

    m.zero_grad()
    loss().backward()
    p = m.decoder.W.weight
    g = p.grad.clone()
    eps = 1e-6
    for idx in [(0, 0), (3, 5), (7, 15)]:
        with torch.no_grad():
            p[idx] += eps
            up = loss().item()
            p[idx] -= 2 * eps
            down = loss().item()
            p[idx] += eps
        assert (up - down) / (2 * eps) == pytest.approx(g[idx].item(), rel=1e-4, abs=1e-8)


@pytest.mark.parametrize("attention", [False, True])
def test_loss_decreases_on_a_tiny_run_and_training_is_deterministic(attention):
    kw = dict(steps=40, batch_size=16, min_len=3, max_len=5, lr=1e-2, seed=0)
    a, b = small(attention), small(attention)
    ra = s2s.train_seq2seq(a, **kw)
    rb = s2s.train_seq2seq(b, **kw)
    assert ra.losses[-10:].mean() < 0.8 * ra.losses[:5].mean()
    assert ra.losses[0] == pytest.approx(math.log(len(VOCAB)), rel=0.1)  # near uniform at the start
    np.testing.assert_array_equal(ra.losses, rb.losses)


def test_train_more_continues_with_fresh_batches_and_is_reproducible():
    kw = dict(batch_size=8, min_len=3, max_len=5, seed=3)
    a, b = small(False), small(False)
    s2s.train_seq2seq(a, steps=10, **kw)
    s2s.train_seq2seq(b, steps=10, **kw)
    rounds = list(s2s.train_more(a, 3, steps=10, **kw))
    assert [k for k, _ in rounds] == [2, 3]
    # round k is one more train_seq2seq run, with seed + 100 k (batches unlike the first run's)
    for k, run in rounds:
        ref = s2s.train_seq2seq(b, steps=10, **{**kw, "seed": kw["seed"] + 100 * k})
        np.testing.assert_array_equal(run.losses, ref.losses)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    assert list(s2s.train_more(a, 1, steps=10, **kw)) == []  # 1x: nothing more
    with pytest.raises(ValueError, match="factor"):
        list(s2s.train_more(a, 0, steps=10, **kw))


def test_cached_training_gives_the_trained_model_without_training_again(tmp_path, monkeypatch):
    monkeypatch.setenv("MIXLIB_CACHE", str(tmp_path))
    kw = dict(steps=12, batch_size=8, min_len=3, max_len=5, seed=4)
    plain = small(True)
    ref = s2s.train_seq2seq(plain, **kw)  # without the cache: the reference
    first = small(True)
    run1 = s2s.train_seq2seq(first, **kw, cache=True)
    assert not run1.cached and len(list(tmp_path.glob("seq2seq-train-*.npz"))) == 1
    np.testing.assert_array_equal(run1.losses, ref.losses)
    # the same call again (a fresh model, as chapter 5 makes it) reads the file and never trains
    calls = []
    real = s2s.sample_batch
    monkeypatch.setattr(s2s, "sample_batch", lambda *a, **k: calls.append(1) or real(*a, **k))
    second = small(True)
    run2 = s2s.train_seq2seq(second, **kw, cache=True)
    assert run2.cached and calls == [] and not second.training
    np.testing.assert_array_equal(run2.losses, ref.losses)
    assert run2.seconds == pytest.approx(run1.seconds)
    for p, q in zip(plain.state_dict().values(), second.state_dict().values()):
        assert torch.equal(p, q)
    # another seed, or other starting weights, is another run: trained, stored beside the first
    s2s.train_seq2seq(small(True), **{**kw, "seed": 5}, cache=True)
    other_start = small(True, seed=99)  # same sizes, other starting weights
    assert not s2s.train_seq2seq(other_start, **kw, cache=True).cached
    assert calls and len(list(tmp_path.glob("seq2seq-train-*.npz"))) == 3
    # train_more passes cache= on, so chapter 5's longer training of chapter 4's model is read too
    a, b = small(False), small(False)
    s2s.train_seq2seq(a, **kw, cache=True)
    s2s.train_seq2seq(b, **kw, cache=True)
    ra = [run for _, run in s2s.train_more(a, 3, **kw, cache=True)]
    rb = [run for _, run in s2s.train_more(b, 3, **kw, cache=True)]
    assert [r.cached for r in ra] == [False, False] and [r.cached for r in rb] == [True, True]
    for p, q in zip(a.state_dict().values(), b.state_dict().values()):
        assert torch.equal(p, q)


@pytest.mark.parametrize("attention", [False, True])
def test_dec_hidden_within_is_the_largest_size_that_fits(attention):
    target = s2s.Seq2Seq(VOCAB, attention=False, emb=8, hidden=12, dec_hidden=16).n_parameters()

    def count(dh):
        return s2s.Seq2Seq(VOCAB, attention=attention, emb=8, hidden=12, dec_hidden=dh).n_parameters()

    dh = s2s.dec_hidden_within(VOCAB, target, attention=attention, emb=8, hidden=12)
    assert count(dh) <= target < count(dh + 1)
    if not attention:
        assert dh == 16  # the bottleneck model fits its own count exactly
    # brute force over every size
    assert dh == max(d for d in range(1, 40) if count(d) <= target)
    with pytest.raises(ValueError, match="dec_hidden=1"):
        s2s.dec_hidden_within(VOCAB, 10, attention=attention, emb=8, hidden=12)


def test_greedy_decode_first_step_is_the_argmax_of_the_forward_pass():
    m = small(True)
    srcs = ["abcab", "ffeed", "acefb"]
    src, tgt_in, _ = VOCAB.tensors(srcs)
    logits, _ = m(src, tgt_in)
    dec = s2s.greedy_decode(m, srcs)
    assert torch.equal(dec.ids[:, 0], logits[:, 0].argmax(-1))
    assert len(dec.texts) == 3


def test_accuracy_by_length_counts_exact_matches(monkeypatch):
    m = small(False)

    def half_right(model, sources, **kw):
        texts = [s[::-1] if i % 2 == 0 else s[::-1] + "a" for i, s in enumerate(sources)]
        return s2s.Decoded(ids=torch.zeros(1), texts=texts, weights=None)

    monkeypatch.setattr(s2s, "greedy_decode", half_right)
    df = s2s.accuracy_by_length(m, [3, 6], n_per_length=10)
    assert list(df["length"]) == [3, 6]
    np.testing.assert_allclose(df["accuracy"], 0.5)
    np.testing.assert_allclose(df["char_accuracy"], 1.0)  # the extra character is beyond the target


def test_seq2seq_rejects_bad_sizes():
    with pytest.raises(ValueError, match="hidden"):
        s2s.Seq2Seq(VOCAB, attention=True, hidden=0)
    with pytest.raises(ValueError, match="steps"):
        s2s.train_seq2seq(small(False), steps=0)
    with pytest.raises(ValueError, match="min_len"):
        s2s.train_seq2seq(small(False), steps=1, min_len=5, max_len=4)


# -- language model ----------------------------------------------------------


@pytest.fixture(scope="module")
def lm_data():
    sents = corpus.grammar_corpus(800, seed=0)
    words = sorted({w for s in sents for w in s})
    return sents, words


def test_language_model_perplexity_matches_a_word_by_word_loop(lm_data):
    sents, words = lm_data
    lm = s2s.WordLM(words, emb=8, hidden=16, seed=1)
    some = sents[:5]
    nll, n = 0.0, 0
    for s in some:
        h = None
        prev = lm.BOS
        for w in [*lm.encode(s), lm.EOS]:
            logits, h = lm(torch.tensor([[prev]]), h)
            nll -= torch.log_softmax(logits[0, -1].double(), -1)[w].item()
            n += 1
            prev = w
    assert s2s.perplexity(lm, some) == pytest.approx(math.exp(nll / n), rel=1e-5)


def test_language_model_learns_and_samples_from_the_vocabulary(lm_data):
    sents, words = lm_data
    lm = s2s.WordLM(words, emb=16, hidden=32, seed=0)
    before = s2s.perplexity(lm, sents[:200])
    r = s2s.train_language_model(lm, sents, steps=60, batch_size=32, lr=1e-2)
    after = s2s.perplexity(lm, sents[:200])
    assert before > 0.5 * len(lm.itos) and after < 0.3 * before
    assert r.losses[-10:].mean() < r.losses[:5].mean()
    samples = s2s.sample_sentences(lm, 20, seed=0)
    assert samples == s2s.sample_sentences(lm, 20, seed=0)
    assert all(len(s) <= 20 for s in samples) and sum(map(len, samples)) > 20
    assert all(w in set(words) for s in samples for w in s)
    with pytest.raises(ValueError, match="not in the language model"):
        lm.encode(["zzz"])
