"""The references of Part V's exercises (chapters 10-13), computed out of the student's sight.

Each function takes the chapter's variables by name (the check cell passes
them) and computes the expected answer by its own route, independent of the
solution shown in the chapter's dropdown where a second route exists.
``tests/test_exercises.py`` runs every solution through these checks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mixlib.exercise import Part, reference

# torch is imported inside the checks that need it: importing mixlib.exercise stays light for chapters 0-9.


def _given_array(answer: Any, shape: tuple[int, ...]) -> Any:
    """The answer as a float64 array, or NaNs of ``shape`` when it has another shape (a wrong answer, not an error)."""
    if answer is None:
        return None
    import torch

    try:
        a = np.asarray(torch.as_tensor(answer).detach().cpu(), dtype=np.float64)
    except (TypeError, ValueError, RuntimeError):
        return np.full(shape, np.nan)
    return a if a.shape == shape else np.full(shape, np.nan)


# ---------------------------------------------------------------- chapter 10


@reference("ex-10-1", Part(hint="形は (n, d)。分母 r は和から一度だけ、二乗の平均（d で割る）+ ε の平方根で計算し、平均は引かない", atol=1e-5),
           judge=True)
def _ex_10_1(answers):
    import torch

    rms_shares = answers[""]
    g = torch.Generator().manual_seed(1)
    zs = torch.randn(4, 16, generator=g, dtype=torch.float64) * 3
    gamma = torch.rand(16, generator=g, dtype=torch.float64) + 0.5
    out = rms_shares(zs, gamma, 1e-12)
    shares = _given_array(out, (4, 16))
    total = zs.sum(0)
    # each share, not only their sum: [RMSNorm(Σz), 0, 0, 0] sums right but is no split
    expected = zs / torch.sqrt((total**2).mean() + 1e-12) * gamma
    return {"": (shares, expected.numpy())}


@reference("ex-10-2", Part(hint="形 (L, B, N) の m.norm_mix と m.norm_keep だけで書ける（層正規化の前の量）", atol=1e-5), judge=True)
def _ex_10_2(answers, m):
    real = m.real.numpy()
    given = _given_array(answers[""], tuple(m.attnres_n.shape))
    return {"": (None if given is None else given[:, real], m.attnres_n.numpy()[:, real])}


@reference("ex-10-3", Part(hint="中央の層 enc.n_layers // 2 で、パディングを除いた実トークンだけの割合（0〜1）を求める"))
def _ex_10_3(m, enc):
    row = m.row(enc.n_layers // 2)
    real = m.real.numpy()
    w, r = m.attn_w[row].numpy()[real], m.ratio[row].numpy()[real]
    return float(np.count_nonzero((w > 0.9) & (r < 0.3)) / w.size)


@reference(
    "ex-10-4",
    Part("層", hint="差は「入れない − 入れる」の向き。差の絶対値がもっとも大きい層"),
    Part("差", hint="その層の差（符号つき、ポイント）。mixing_table の「全体」の列どうしの差", atol=1e-3),
)
def _ex_10_4(m_plain, table):
    from mixlib.mixing import mixing_table

    diff = mixing_table(m_plain)["全体"] - table["全体"]
    i = int(np.argmax(np.abs(diff.to_numpy())))
    return {"層": int(diff.index[i]), "差": float(diff.iloc[i])}


@reference("ex-10-5", Part(hint="W_O はヘッド h の列 [h*dh:(h+1)*dh] を使う。alpha[h, j, i] はクエリ j が行。s は y_j 全体から計算する", atol=1e-4))
def _ex_10_5(enc, text, layer):
    from mixlib.mixing import decompose

    one = decompose(enc, [text], layers=layer, vectors=True)
    return one.mix[0, 0][one.real[0]]


@reference("ex-10-6", Part(hint="mix と keep_attn + keep_res を、それぞれ成分ごとに γ で割ってからノルムを取る（実トークンだけ）", atol=1e-5))
def _ex_10_6(one, gamma):
    real = np.asarray(one.real[0], dtype=bool)
    g = np.asarray(gamma, dtype=np.float64)
    mix = np.asarray(one.mix[0, 0], dtype=np.float64)[real] / g
    keep = np.asarray(one.keep_attn[0, 0] + one.keep_res[0, 0], dtype=np.float64)[real] / g
    n_mix, n_keep = np.linalg.norm(mix, axis=-1), np.linalg.norm(keep, axis=-1)
    return n_mix / (n_mix + n_keep)


# ---------------------------------------------------------------- chapter 11

_P_EX_11_1 = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])


def _psi_3d(x: Any) -> float:
    x = np.asarray(x, dtype=float).reshape(-1)
    if x.shape != (3,) or not np.all(np.isfinite(x)) or not np.any(x):
        return float("nan")
    return float(np.sqrt((_P_EX_11_1 @ x) @ (_P_EX_11_1 @ x) / 2) / np.sqrt(x @ x / 3))


@reference(
    "ex-11-1",
    Part("ψ", hint="‖Px‖/√2 と ‖x‖/√3 をそれぞれ求めて割る"),
    Part("x", hint="P が取り出す第 1・第 3 座標に大きさを集め、第 2 座標を小さくする（3 次元、0 でないベクトル）"),
    judge=True,
)
def _ex_11_1(answers):
    x = answers["x"]
    try:
        x_ok = None if x is None else bool(_psi_3d(x) > 1)
    except (TypeError, ValueError):
        x_ok = False
    return {"ψ": (answers["ψ"], _psi_3d([1.0, 2.0, 2.0])), "x": (x_ok, True)}


@reference(
    "ex-11-2",
    Part("割合", hint="stretch.psi_q[0, 0] の最大値を bounds.psi_max[0, 0, 0] で割る", rtol=1e-4),
    Part("コサイン", hint="u は単位ベクトル。埋め込みのノルムで割り、絶対値を取る", rtol=1e-4),
)
def _ex_11_2(stretch, bounds, E):
    psi_q = np.asarray(stretch.psi_q[0, 0], dtype=np.float64)
    i = int(np.nanargmax(psi_q))
    e, u = np.asarray(E[i], dtype=np.float64), np.asarray(bounds.top_vector("q", 0, 0), dtype=np.float64)
    return {"割合": float(psi_q[i] / bounds.psi_max[0, 0, 0]), "コサイン": float(abs(e @ u) / np.sqrt((e @ e) * (u @ u)))}


@reference(
    "ex-11-3",
    Part("ヘッド", hint="np.unravel_index(np.argmax(score), score.shape) の層の番号は stretch.layers で読み替える"),
    Part("パーセンタイル", hint="feature_null に nstretch・my_ids・n_draws=N_DRAWS・seed=SEED・relative=True・pool=POOL を渡す"),
    judge=True,
)
def _ex_11_3(answers, my_ids, stretch, nstretch, n_draws, seed, pool):
    from mixlib.clusters import feature_null, feature_scores

    if my_ids is None or len(my_ids) < 3:
        raise ValueError("ex-11-3: my_ids にトークン id を 3 個以上入れてから、このセルを実行し直す。")
    ids = [int(i) for i in my_ids]
    score = feature_scores(nstretch, ids, relative=True)
    flat = int(np.nanargmax(score))
    head = (int(stretch.layers[flat // score.shape[1]]), flat % score.shape[1])
    given_head = answers["ヘッド"]
    if given_head is not None:
        try:
            given_head = tuple(int(v) for v in given_head)
        except (TypeError, ValueError):
            given_head = ("?",)
    pct = answers["パーセンタイル"]
    expected_pct = None if pct is None else feature_null(nstretch, ids, n_draws=n_draws, seed=seed, relative=True, pool=pool).percentile
    return {"ヘッド": (given_head, head), "パーセンタイル": (pct, expected_pct)}


@reference(
    "ex-11-4",
    Part(hint="形 (d,)（d = enc.d_model）の単位ベクトルで、P00 @ x がほぼ 0 になるもの（SVD の右特異ベクトルの最後の行）"),
    judge=True,
)
def _ex_11_4(answers, enc):
    from mixlib.stretch import norm_stretch

    x = _given_array(answers[""], (enc.d_model,))
    if x is None:
        return {"": (None, True)}
    unit = bool(np.all(np.isfinite(x)) and abs(np.linalg.norm(x) - 1) < 1e-3)
    ok = unit and float(norm_stretch(enc, X=x[None].astype(np.float32), layers=0).psi_q[0, 0, 0]) < 1e-3
    return {"": (ok, True)}


@reference("ex-11-5", Part(hint="自己チェックのセルの weekday_ids を使い、n_draws・seed・relative・pool を本文と同じにする"))
def _ex_11_5(nstretch, ids, n_draws, seed, pool):
    from mixlib.clusters import feature_null

    return feature_null(nstretch, list(ids), n_draws=n_draws, seed=seed, relative=True, pool=pool).percentile


# ---------------------------------------------------------------- chapter 12


@reference("ex-12-1", Part(hint="d = 8 次元の標準正規ベクトルを 2 組（200,000 組）作り、行ごとのコサインの絶対値を平均する", rtol=0.005))
def _ex_12_1(d):
    from mixlib.positional import random_abs_cos  # E|cos| of two independent uniform directions in R^d, exact

    return random_abs_cos(int(d))


@reference(
    "ex-12-2",
    Part("トークン", hint="中心化した単位ベクトル（Ec_n, Pc_n）で、位置 0 と全単語の内積を取り、[CLS] と [SEP] を除いて最大のものを選ぶ（文字列で答える）"),
    Part("位置", hint="中心化した単位ベクトルで、[MASK] と全位置の内積を取り、最大の位置"),
)
def _ex_12_2(E, Pe, tokenizer):
    """Centred, as the chapter's [CLS] section compares (each set minus its own mean, over every row)."""
    E, Pe = np.asarray(E, dtype=np.float64), np.asarray(Pe, dtype=np.float64)
    E, Pe = E - E.mean(0), Pe - Pe.mean(0)
    mask_id = tokenizer.mask_token_id
    to_p0 = (E @ Pe[0]) / (np.linalg.norm(E, axis=1) * np.linalg.norm(Pe[0]))
    to_mask = (Pe @ E[mask_id]) / (np.linalg.norm(Pe, axis=1) * np.linalg.norm(E[mask_id]))
    to_p0[[tokenizer.cls_token_id, tokenizer.sep_token_id]] = -np.inf
    return {"トークン": tokenizer.convert_ids_to_tokens(int(np.argmax(to_p0))), "位置": int(np.argmax(to_mask))}


@reference("ex-12-4", Part(hint="相対位置 +1 は地図の対角線のすぐ右上（キー = クエリ + 1）。A_ln を使う"))
def _ex_12_4(A_ln):
    A = np.asarray(A_ln, dtype=np.float64)  # (H, n, n): query rows, key columns
    n = A.shape[1]
    above = A[:, np.arange(n - 1), np.arange(1, n)]  # key = query + 1
    return int(np.argmax(above.mean(axis=1)))


@reference("ex-12-5", Part(hint="セグメントは token_type_embeddings のインデックス 1 の行（文 B）。ヘッドごとのスピアマン相関を長さ H の配列に", atol=1e-3))
def _ex_12_5(enc, E, Pe, ids, psi_word):
    import torch
    from scipy.stats import spearmanr

    from mixlib.stretch import norm_stretch

    seg_b = enc.embedding_module("token_type_embeddings").weight.detach().cpu()[1]
    x = torch.from_numpy(np.asarray(E)[ids]) + torch.from_numpy(np.asarray(Pe)[10]) + seg_b
    with torch.no_grad():
        x = enc.embedding_module("embedding_norm")(x.to(enc.device)).cpu()
    psi_b = norm_stretch(enc, X=x, layers=0).psi_qkv[0]
    return np.array([spearmanr(psi_word[h], psi_b[h]).statistic for h in range(enc.n_heads)])


@reference(
    "ex-12-3",
    Part("a", hint="E @ Pe.T の全要素の平均（float64 で）。E と Pe の行の平均どうしの内積と同じ値", rtol=1e-4),
    Part("b", hint="中心化した位置ベクトルを、中心化した単語の上位 3 主成分に射影し、二乗和を全体の二乗和で割る"),
)
def _ex_12_3(E, Pe):
    E, Pe = np.asarray(E, dtype=np.float64), np.asarray(Pe, dtype=np.float64)
    mw, mp = E.mean(0), Pe.mean(0)
    Pc = Pe - mp
    U3 = np.linalg.eigh(np.cov(E, rowvar=False))[1][:, -3:]  # the words' top three principal directions (D, 3)
    return {"a": float(mw @ mp), "b": float(((Pc @ U3) ** 2).sum() / (Pc**2).sum())}


# ---------------------------------------------------------------- chapter 13


@reference(
    "ex-13-1",
    Part("1 文字", hint="語彙の全トークンのうち、文字列の長さがちょうど 1 のもの（## つきは 3 文字以上なので入らない）の割合（0〜1）"),
    Part("トークン数", hint="上の句と下の句を別々に ja.tokenizer.tokenize で区切り、トークン数を足して歌について平均する"),
)
def _ex_13_1(tokenizer, poems):
    if tokenizer is None:
        raise ValueError("この演習には日本語のモデル（ja）が要る。")
    vocab = tokenizer.get_vocab()  # token -> id: another route than convert_ids_to_tokens
    single = sum(1 for t in vocab if len(t) == 1) / len(vocab)
    # a pair as the model reads it, [CLS] a [SEP] b [SEP], less its three special tokens
    counts = [len(tokenizer(a, b)["input_ids"]) - 3 for a, b in poems]
    return {"1 文字": single, "トークン数": float(np.mean(counts))}


@reference("ex-13-2", Part(hint="mixlib.mixing_table(m_ja) の最終層の行で、句読点の列から全体の列を引く（ポイント）"))
def _ex_13_2(m):
    if m is None:
        raise ValueError("この演習には日本語のモデルの分解（m_ja）が要る。")
    ratio = m.ratio[-1].double().numpy()  # (B, N): the last layer
    real = m.real.numpy()
    punct = (m.categories == "句読点") & real

    def mean_of(sel):  # within each sequence over sel, then over the sequences that have any
        n = sel.sum(axis=1)
        per_seq = np.where(sel, ratio, 0.0).sum(axis=1)[n > 0] / n[n > 0]
        return per_seq.mean()

    return 100 * (mean_of(punct) - mean_of(real))


@reference(
    "ex-13-3",
    Part("ヘッド", hint="1 文字のトークン（## なし、特殊トークンを除く）の id で mixlib.feature_null を呼び、best_head（層の位置, ヘッド）を (層, ヘッド) に直す"),
    Part("超えたか", hint="feature_null の結果の passes(LEVEL)：ランダムな集合の LEVEL% 点を超えたか（True / False）"),
)
def _ex_13_3(nst, tokenizer, n_draws, seed, level):
    from mixlib.clusters import feature_null, trained_pool

    special = set(tokenizer.all_special_ids)
    vocab = tokenizer.get_vocab()  # token -> id
    ids = sorted(i for t, i in vocab.items() if len(t) == 1 and i not in special)
    ids = [i for i in ids if np.isfinite(nst.psi_qkv[:, :, i]).all()]
    fn = feature_null(nst, ids, n_draws=n_draws, seed=seed, relative=True, pool=trained_pool(tokenizer))
    return {"ヘッド": (int(nst.layers[fn.best_head[0]]), int(fn.best_head[1])), "超えたか": bool(fn.passes(level))}


@reference("ex-13-4", Part(hint="m.real.sum(axis=1) が文対ごとの実トークン数（[CLS]・[SEP] を含む）。その平均を、ひらがなと元の現代文とで割る"))
def _ex_13_4(m_kana, m_modern):
    if m_kana is None:
        raise ValueError("この演習には日本語のモデルの分解（m_kana）が要る。")
    count = lambda m: float(np.asarray(m.real, dtype=bool).sum(axis=1).mean())  # noqa: E731
    return count(m_kana) / count(m_modern)
