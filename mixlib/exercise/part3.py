"""The references of Part III's exercises (chapters 6-7), computed out of the student's sight."""

from __future__ import annotations

import math

import numpy as np

from mixlib.exercise import Part, reference

# ---------------------------------------------------------------- chapter 6


@reference(
    "ex-06-1",
    Part("重み", hint="内積を √2 で割ってから指数をとり、和で割る", rtol=0, atol=2e-3),
    Part("出力", hint="重みでバリューを平均する", rtol=0, atol=2e-3),
)
def _ex_06_1():
    q = np.array([1.0, 0.0])
    K = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    V = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    e = np.exp(K @ q / math.sqrt(2))
    a = e / e.sum()
    return {"重み": a, "出力": a @ V}


@reference(
    "ex-06-2",
    Part("分散", hint="独立な d_k 個の項 q_l k_l の和。各項の分散は E[q_l²] E[k_l²]", rtol=0.05),
    Part("割った後", hint="定数 c で割ると分散は 1/c² 倍", rtol=0.05),
    Part("割る数", hint="分散を 1 に戻すには、標準偏差で割る", rtol=0.05),
)
def _ex_06_2():
    # components of variance sigma^2 = 2: Var(q·k) = d_k sigma^4 = 64 * 4; divided by sqrt(d_k) = 8: 256 / 64;
    # the divisor that gives variance 1 is the standard deviation sqrt(d_k) sigma^2
    d_k, var = 64, 2.0
    return {"分散": d_k * var**2, "割った後": d_k * var**2 / d_k, "割る数": math.sqrt(d_k) * var}


@reference(
    "ex-06-3",
    Part("d_model=768", hint="4 枚の d_model×d_model の行列と、4 本の d_model 次元のバイアス", rtol=0, atol=0),
    Part("d_model=1024", hint="同じ式に 1024 を入れる", rtol=0, atol=0),
)
def _ex_06_3():
    import torch

    def count(d, h):  # PyTorch's own multi-head attention (with biases), on the meta device: no memory
        return sum(p.numel() for p in torch.nn.MultiheadAttention(d, h, device="meta").parameters())

    return {"d_model=768": count(768, 12), "d_model=1024": count(1024, 16)}


def _pe(n: int, d: int) -> np.ndarray:
    """Sinusoidal positions built here from the formula, not from the chapter's code (the dot product ignores column order)."""
    pos = np.arange(n)[:, None]
    omega = 10000.0 ** (-np.arange(0, d, 2) / d)
    return np.concatenate([np.sin(pos * omega), np.cos(pos * omega)], axis=1)


@reference(
    "ex-06-4",
    Part("pe_dot", hint="組 i ごとに cos(ω_i δ) を足す。ω_i = 10000^(-2i/d)", rtol=0, atol=1e-5),
    Part("半分を下回る δ", hint="δ = 1, 2, 3, ... と pe_dot(δ, 512) を計算し、512/4 = 128 を初めて下回る δ", rtol=0, atol=0),
    judge=True,
)
def _ex_06_4(answers):
    pe_dot, first = answers["pe_dot"], answers["半分を下回る δ"]
    out: dict = {"pe_dot": (None, None), "半分を下回る δ": (first, None)}
    if pe_dot is not None and pe_dot(0, 8) is not None:
        d, n = 16, 40
        P = _pe(n, d)
        pairs = [(0, 0), (3, 10), (25, 7), (39, 0)]
        out["pe_dot"] = ([pe_dot(p - q, d) for p, q in pairs], [float(P[p] @ P[q]) for p, q in pairs])
    if first is not None:
        P = _pe(200, 512)
        dots = P[1:] @ P[0]  # PE_0 · PE_δ for δ = 1..199
        out["半分を下回る δ"] = (first, int(np.flatnonzero(dots < 512 / 4)[0]) + 1)
    return out


@reference("ex-06-5", Part(hint="layer(x)[:, perm] と layer(x[:, perm]) の差の絶対値の最大を float で返す", rtol=1e-3, atol=1e-5),
           judge=True)
def _ex_06_5(answers):
    import torch

    from mixlib.course import transformer as tf

    gap = answers[""]
    g = torch.Generator().manual_seed(0)
    with torch.random.fork_rng():  # the layer's random initial weights, without touching the chapter's random state
        torch.manual_seed(0)
        layer = tf.EncoderLayer(16, 4, 64, dropout=0.0).eval()
    x = torch.randn(1, 6, 16, generator=g)
    perm = torch.randperm(6, generator=g)
    pe = torch.as_tensor(_pe(6, 16), dtype=torch.float32)

    def with_positions(z):  # the same layer, with sinusoidal positions added to its input: no longer equivariant
        return layer(z + pe)

    with torch.no_grad():
        if gap(layer, x, perm) is None:
            return {"": (None, None)}
        given = [float(gap(m, x, perm)) for m in (layer, with_positions)]
        expected = [float((m(x)[:, perm] - m(x[:, perm])).abs().max()) for m in (layer, with_positions)]
    return {"": (given, expected)}


# ---------------------------------------------------------------- chapter 7


@reference(
    "ex-07-1",
    Part("文字正解率", hint="分母は長い方の文字数", rtol=0, atol=1e-3),
    Part("完全一致", hint="一字一句同じときだけ完全一致"),
)
def _ex_07_1():
    gold, pred = "からくれなゐにみづくくるとは", "からくれないにみづくくるとはは"
    same = sum(a == b for a, b in zip(pred, gold))
    return {"文字正解率": same / max(len(pred), len(gold)), "完全一致": pred == gold}


#: competitive karuta counts sounds: these kana are read as the second one (ex-07-2)
SAME_SOUND = str.maketrans({"を": "お", "ゐ": "い", "ゑ": "え"})


@reference("ex-07-2", Part(hint="を・ゐ・ゑ を お・い・え に置き換えてから、他のどの上の句もその接頭辞で始まらなくなる最短の長さ", rtol=0, atol=0), judge=True)
def _ex_07_2(answers, kami):
    kimariji = answers[""]
    got = kimariji([k.replace(" ", "") for k in kami])
    kami = [k.replace(" ", "").translate(SAME_SOUND) for k in kami]
    if got is None:
        return {"": (None, None)}
    # sorted, a poem's decisive prefix is one character past its longest common prefix with a neighbour
    order = sorted(range(len(kami)), key=lambda i: kami[i])

    def common(a, b):
        return next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))

    ref = [0] * len(kami)
    for k, i in enumerate(order):
        neighbours = [kami[order[p]] for p in (k - 1, k + 1) if 0 <= p < len(order)]
        ref[i] = max(common(kami[i], o) for o in neighbours) + 1
    return {"": (list(got), ref)}


def _copy_rate(run, poems, shift):
    import torch

    from mixlib.course import hyakunin as hy

    d = hy.encode_pairs(run.vocab, list(poems.kami), list(poems.shimo), shift=shift)
    with torch.no_grad():
        pred = run.model(d["src"], d["dec_in"]).argmax(-1)
    real = (d["target"] != run.vocab.pad_id).numpy()
    return float((pred == d["dec_in"]).numpy()[real].mean())


@reference(
    "ex-07-3",
    Part("ずらさない", hint="予測を dec_in と比べ、パディングの位置は除く", rtol=0, atol=1e-3),
    Part("ずらす", hint="こちらは shift=True で作ったテンソルを使う", rtol=0, atol=1e-3),
)
def _ex_07_3(run_leak, run, poems):
    return {"ずらさない": _copy_rate(run_leak, poems, False), "ずらす": _copy_rate(run, poems, True)}


@reference("ex-07-4", Part(hint="上の句の先頭から決まり字の長さだけ除いた残りを encode_pairs に渡す", rtol=0, atol=1e-6))
def _ex_07_4(run, poems):
    from mixlib.course import hyakunin as hy
    from mixlib.course import transformer as tf

    lens = hy.kimariji_lengths(list(poems.kami))
    d = hy.encode_pairs(run.vocab, [k[n:] for k, n in zip(poems.kami, lens)], list(poems.shimo))
    out = tf.greedy_decode(run.model, d["src"], bos_id=run.vocab.bos_id, eos_id=run.vocab.eos_id)
    return float(hy.score_generations([run.vocab.decode(o) for o in out.tolist()], list(poems.shimo))["exact"])


_LEV_CASES = [("", ""), ("あいう", ""), ("かきくけこ", "かくけこ"), ("かきくけこ", "かきくけここ"),
              ("からくれなゐ", "からくれない"), ("ながながし", "しがながな"), ("あいうえお", "おえういあ")]
_LEV_DISTANCES = [0, 3, 1, 1, 1, 2, 4]  # worked by hand


@reference("ex-07-5", Part(hint="挿入・削除・置換の三つの最小を表で埋める（距離は対称）", rtol=0, atol=0), judge=True)
def _ex_07_5(answers):
    levenshtein = answers[""]
    if levenshtein("あ", "い") is None:
        return {"": (None, None)}
    got = [levenshtein(a, b) for a, b in _LEV_CASES] + [levenshtein(b, a) for a, b in _LEV_CASES]
    return {"": (got, _LEV_DISTANCES + _LEV_DISTANCES)}
