"""The references of Part I's exercises (chapters 1-3), computed out of the student's sight."""

from __future__ import annotations

import math

import numpy as np

from mixlib.exercise import Part, reference

_X_01_2 = np.array([2.0, 4.0, 6.0, 8.0])
_Y_01_2 = np.array([5.0, 3.0, 4.0, 1.0])


@reference(
    "ex-01-1",
    Part("値", hint="分子は成分ごとの積の和、分母は二つのノルムの積", rtol=1e-9),
    Part("零ベクトル", hint="ノルムが 0 のときは raise ValueError(...) とする"),
    judge=True,
    one_answer=True,
)
def _ex_01_1(answers):
    my_cosine = answers["値"]
    t = np.random.default_rng(1).normal(size=(20, 5))
    pairs = [(list(a), list(b)) for a, b in zip(t[:10], t[10:])]
    if my_cosine([1.0, 0.0], [0.0, 1.0]) is None:
        return {"値": (None, None), "零ベクトル": (None, None)}
    refs = [float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b))) for a, b in pairs]
    def raises(x, y):
        try:
            my_cosine(x, y)
        except ValueError:
            return True
        return False

    raised = raises([0.0, 0.0], [1.0, 2.0]) and raises([1.0, 2.0], [0.0, 0.0])  # a zero vector on either side
    return {"値": ([my_cosine(a, b) for a, b in pairs], refs), "零ベクトル": (raised, True)}


@reference(
    "ex-01-2",
    Part("(a) 生のコサイン", hint="平均を引く前のベクトルで cosine を計算する"),
    Part("(b) 相関係数", hint="両方のベクトルから、それぞれの平均を引いてから cosine を計算する"),
)
def _ex_01_2():
    x, y = _X_01_2, _Y_01_2
    return {"(a) 生のコサイン": float(x @ y / math.sqrt((x @ x) * (y @ y))), "(b) 相関係数": float(np.corrcoef(x, y)[0, 1])}


@reference(
    "ex-01-3",
    Part("(a)", hint="6cosθ = 6|sinθ| を 0〜180 度で解く", atol=0.2, rtol=0),
    Part("(b)", hint="その角度での 6cosθ", atol=1e-2, rtol=0),
)
def _ex_01_3():
    # scan 0-180 degrees in 0.1-degree steps for the angle where the dot product equals the parallelogram's area
    t = np.radians(np.linspace(0, 180, 1801))
    x = np.array([2.0, 0.0])
    y = 3.0 * np.stack([np.cos(t), np.sin(t)], axis=1)
    dot, area = y @ x, np.abs(x[0] * y[:, 1] - x[1] * y[:, 0])
    i = int(np.argmin(np.abs(dot - area)))
    return {"(a)": float(np.degrees(t[i])), "(b)": float(dot[i])}


@reference("ex-01-4", Part("a", hint="中心化した x_obs, y_obs に proj_coef を使う"), Part("b", hint="b = ȳ − a x̄"))
def _ex_01_4(x_obs, y_obs):
    a, b = np.polyfit(np.asarray(x_obs, dtype=float), np.asarray(y_obs, dtype=float), 1)  # least squares, independently
    return {"a": float(a), "b": float(b)}


# ---------------------------------------------------------------- chapter 2

_LECTURE = np.array([[21.0, 9.0, 0.0], [8.0, 1.0, 32.0], [43.0, 19.0, 0.0]])  # banana, puppy, fruit × sweet, green, furry
_COOC_02_2 = np.array([[8.0, 20.0, 0.0], [0.0, 30.0, 10.0], [0.0, 40.0, 0.0]])  # cat, dog, car × purr, the, bark


@reference("ex-02-1", Part(hint="各行を自分のノルムで割ってから、行どうしの差のノルムをとる（3×3 の行列にする）", atol=1e-4))
def _ex_02_1():
    # from the identity |x̂ − ŷ|² = 2 − 2 cos θ (the normalised differences are not computed)
    n = np.sqrt((_LECTURE**2).sum(1))
    cos = (_LECTURE @ _LECTURE.T) / np.outer(n, n)
    return np.sqrt(np.clip(2 - 2 * cos, 0, None))


@reference("ex-02-2", Part(hint="P(cat, purr) / (P(cat) P(purr)) の自然対数。P(cat) は cat の行の和 ÷ 総数"))
def _ex_02_2():
    t = _COOC_02_2
    return float(math.log(t[0, 0] * t.sum() / (t[0].sum() * t[:, 0].sum())))


@reference(
    "ex-02-3",
    Part("(a)", hint="残した 30 個より後ろの特異値の二乗和 ÷ 全特異値の二乗和 の平方根"),
    Part("(b)", hint="‖P − X_k‖_F / ‖P‖_F。X_k = U[:, :k] * s[:k] @ Vt[:k]"),
)
def _ex_02_3(P):
    # ‖X − X_k‖²_F = ‖X‖²_F − ‖X_k‖²_F, with ‖X_k‖²_F from the top-k eigenvalues of XᵀX
    X = np.asarray(P, dtype=np.float64)
    top = np.linalg.eigvalsh(X.T @ X)[::-1][:30]
    total = (X**2).sum()
    rel = float(math.sqrt(max(total - top.sum(), 0.0) / total))
    return {"(a)": rel, "(b)": rel}


@reference(
    "ex-02-4",
    Part("窓 1", hint="動詞ごとに現在形と過去形のコサイン類似度を求め、10 個で平均する", rtol=1e-4),
    Part("窓 WINDOW", hint="動詞ごとに現在形と過去形のコサイン類似度を求め、10 個で平均する", rtol=1e-4),
    judge=True,
)
def _ex_02_4(answers, sents, vocab, window):
    from mixlib.course import corpus
    from mixlib.course import word2vec as w2v

    def mean_cos(win):
        X = w2v.ppmi(w2v.cooccurrence_matrix(sents, vocab, window=win))
        Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
        return float(np.mean([Xn[vocab.index(p)] @ Xn[vocab.index(q)] for p, q, _ in corpus.VERBS]))

    out = {}
    for part, win in (("窓 1", 1), ("窓 WINDOW", window)):
        given = answers[part]
        out[part] = (given, None if given is None else mean_cos(win))
    return out


# ---------------------------------------------------------------- chapter 3


@reference(
    "ex-03-1",
    Part(hint="正例の項は −(1 − σ(u_o·v)) u_o、負例の項は σ(u_n·v) u_n の和。符号と σ の引数を確かめる", rtol=1e-6, atol=1e-9),
    judge=True,
)
def _ex_03_1(answers):
    import torch

    my_grad = answers[""]
    rng = np.random.default_rng(0)
    cases = [(rng.normal(size=4), rng.normal(size=4), rng.normal(size=(3, 4))) for _ in range(5)]
    if my_grad(*cases[0]) is None:
        return {"": (None, None)}

    def by_autograd(v, u_o, U_neg):  # the same loss differentiated by PyTorch (no formula used)
        vt = torch.tensor(v, requires_grad=True)
        F = torch.nn.functional
        loss = -F.logsigmoid(torch.tensor(u_o) @ vt) - F.logsigmoid(-torch.tensor(U_neg) @ vt).sum()
        loss.backward()
        return vt.grad.numpy()

    return {"": (np.stack([np.asarray(my_grad(*c), dtype=float) for c in cases]), np.stack([by_autograd(*c) for c in cases]))}


def _cos_mul(wv, a, b, c, eps=1e-3):
    U = np.asarray(wv.unit(), dtype=np.float64)
    cos = {w: (U @ U[wv.index(w)] + 1) / 2 for w in (a, b, c)}
    score = cos[b] * cos[c] / (cos[a] + eps)
    score[[wv.index(w) for w in (a, b, c)]] = -np.inf
    return wv.words[int(np.argmax(score))]


@reference(
    "ex-03-2",
    Part("cos_mul", hint="三つの cos' を全語について計算し、問いの 3 語を候補から外してから argmax をとる"),
    Part("正解率", hint="[::16] で取り出した問いのうち、cos_mul の答えが q.d に一致した割合"),
    judge=True,
)
def _ex_03_2(answers, wv):
    from mixlib.course import word2vec as w2v

    out = {}
    f = answers["cos_mul"]
    probe = [("man", "king", "woman"), ("france", "paris", "japan")]
    if f is None or f(wv, *probe[0]) is None:
        out["cos_mul"] = (None, None)
    else:
        out["cos_mul"] = ([f(wv, *q) for q in probe], [_cos_mul(wv, *q) for q in probe])
    acc = answers["正解率"]
    if acc is None:
        out["正解率"] = (None, None)
    else:
        qs = w2v.load_analogy_set(relations=["capital"])[::16]
        out["正解率"] = (acc, float(np.mean([_cos_mul(wv, q.a, q.b, q.c) == q.d for q in qs])))
    return out


def _accuracy_by_relation(result, questions) -> list[float]:
    acc = result.vectors.evaluate(questions).groupby("relation")["correct"].mean()
    return [float(acc["gender"]), float(acc["capital"]), float(acc["past"])]


@reference("ex-03-3", Part(hint="common の negatives だけを 1 に変えて学習し、evaluate(questions) を関係ごとに平均する", atol=1e-9))
def _ex_03_3(sents, common, questions):
    from mixlib.course import word2vec as w2v

    return _accuracy_by_relation(w2v.train_word2vec(sents, kind="sgns", **{**common, "negatives": 1}), questions)


@reference("ex-03-4", Part(hint="window=3 だけを変え、vocab=ja_vocab を渡して学習し、ja_questions で評価する", atol=1e-9))
def _ex_03_4(sents, questions, settings):
    from mixlib.course import word2vec as w2v

    return _accuracy_by_relation(w2v.train_word2vec(sents, kind="sgns", **{**settings, "window": 3}), questions)
