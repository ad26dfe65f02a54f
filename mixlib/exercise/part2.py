"""The references of Part II's exercises (chapters 4-5), computed out of the student's sight."""

from __future__ import annotations

import numpy as np

from mixlib.exercise import Part, reference

# ---------------------------------------------------------------- chapter 4


@reference("ex-04-1", Part(hint="1 方向あたり 3 組の (H×E + H×H + 2H)、双方向でその 2 倍", rtol=0, atol=0))
def _ex_04_1(gru):
    return sum(int(np.prod(p.shape)) for p in gru.parameters())


@reference("ex-04-2", Part(hint="<pad> の位置を除き、<eos> の予測は含めて、対数確率の平均の符号を変えて exp をとる"))
def _ex_04_2(lm, sentences):
    from mixlib.course import seq2seq as s2s

    return s2s.perplexity(lm, sentences)


@reference("ex-04-4", Part(hint="教師強制：model(src, tgt_in) のロジットの argmax を tgt_out と比べ、最後の文字の位置（<eos> の一つ前）で平均する", rtol=0, atol=1e-9))
def _ex_04_4(model, sources):
    import torch

    src, tgt_in, tgt_out = model.vocab.tensors(sources)
    with torch.no_grad():
        logits, _ = model(src, tgt_in)  # (N, S + 1, V), teacher forced
    last = len(sources[0]) - 1  # the last character; position S is <eos>
    return float((logits.argmax(-1)[:, last] == tgt_out[:, last]).double().mean())


@reference(
    "ex-04-3",
    Part("τ=0.5", hint="ロジットを τ で割ってからソフトマックス", rtol=1e-3),
    Part("τ=1.5", hint="エントロピーは自然対数で、-Σ p log p", rtol=1e-3),
)
def _ex_04_3(lm):
    import torch

    with torch.no_grad():
        z = lm(torch.tensor([[lm.BOS]]))[0][0, -1].double().numpy()

    def entropy(tau):
        logp = z / tau - np.logaddexp.reduce(z / tau)
        return float(-(np.exp(logp) * logp).sum())

    return {"τ=0.5": entropy(0.5), "τ=1.5": entropy(1.5)}


@reference("ex-04-5", Part(hint="行の順は r, z, n。n の中で r は (W_hn h + b_hn) 全体に掛かる", rtol=0, atol=1e-5), judge=True)
def _ex_04_5(answers, gru):
    import torch

    my_gru_step = answers[""]
    E, H = gru.input_size, gru.hidden_size
    g = torch.Generator().manual_seed(5)
    x, h = torch.randn(E, generator=g), torch.randn(H, generator=g)
    got = my_gru_step(x.numpy(), h.numpy())
    if got is None:
        return {"": (None, None)}
    with torch.no_grad():  # one forward step of nn.GRU itself (the backward direction gets a zero state)
        h0 = torch.zeros(2 if gru.bidirectional else 1, 1, H)
        h0[0, 0] = h
        ref = gru(x[None, None, :], h0)[1][0, 0]
    return {"": (np.asarray(got, dtype=float), ref.numpy())}


# ---------------------------------------------------------------- chapter 5


@reference(
    "ex-05-1",
    Part("重み a", hint="tanh の中は W s + U h_s + b、最後に v との内積、softmax は入力位置の方向", rtol=0, atol=1e-5),
    Part("文脈ベクトル c", hint="重みで H の行を平均する（a @ H）", rtol=0, atol=1e-5),
    judge=True,
    one_answer=True,
)
def _ex_05_1(answers, model, vocab, alphabet):
    import torch

    from mixlib.course import corpus

    my_attend = answers["重み a"]
    src = corpus.reversal_pairs(0, lengths=[9], alphabet=alphabet, seed=5).sources
    with torch.no_grad():
        mem = model.encoder(vocab.tensors(src)[0])
        s0 = model.decoder.init_state(mem)
        a_ref, c_ref = model.decoder.attend(s0, model.decoder.U(mem.states), mem.states)
    got = my_attend(s0[0].numpy(), mem.states[0].numpy())
    a, c = (None, None) if got is None else got
    return {"重み a": (a, a_ref[0].numpy()), "文脈ベクトル c": (c, c_ref[0].numpy())}


@reference("ex-05-2", Part(hint="行ごとに -Σ a log a、最初の L ステップだけを平均する", rtol=0, atol=1e-3))
def _ex_05_2(model, max_len, n_test, alphabet):
    from mixlib.course import corpus
    from mixlib.course import seq2seq as s2s

    L = min(20, max_len)
    W = s2s.greedy_decode(model, corpus.reversal_pairs(0, lengths=[L] * n_test, alphabet=alphabet, seed=31).sources)
    a = W.weights[:, :L].double().numpy()
    return float(-(a * np.log(a + 1e-12)).sum(-1).mean())


@reference("ex-05-3", Part(hint="seed=1234 + L で作った N_TEST 個を貪欲復号し、出力全体が正解と同じものを数える", rtol=0, atol=1e-9))
def _ex_05_3(model, max_len, n_test):
    from mixlib.course import seq2seq as s2s

    return float(s2s.accuracy_by_length(model, [max_len + 5], n_per_length=n_test)["accuracy"].iloc[0])


def attention_mults(S: int, T: int, A: int, D: int, H2: int) -> int:
    """Multiplications to decode one sentence with additive attention (chapter 5, ex-05-4)."""
    return S * A * H2 + T * A * D + T * S * (A + H2)


@reference(
    "ex-05-4",
    Part("回数", hint="U h_s は文ごとに 1 回、残りはステップごと", rtol=0.02),
    Part("倍率", hint="4 倍になるのは S·T に比例する項だけ", rtol=0.02),
)
def _ex_05_4(A, D, H2):
    n30 = attention_mults(30, 30, A, D, H2)
    return {"回数": n30, "倍率": attention_mults(60, 60, A, D, H2) / n30}
