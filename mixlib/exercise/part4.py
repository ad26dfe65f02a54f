"""The references of Part IV's exercises (chapters 8-9), computed out of the student's sight.

Each function takes the chapter's variables by name (the check cell passes
them) and computes the expected answer by its own route.
``tests/test_exercises.py`` runs every solution through these checks.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from mixlib.exercise import Part, reference

_RATE_COLUMNS = ("mnli_finetune", "ner_finetune", "ner_feature_based")


def _longest_match(word: str, vocab: Any) -> list[str]:
    """Greedy longest-match-first WordPiece split (``[UNK]`` for the whole word when a rest cannot be split)."""
    out, rest, prefix = [], word, ""
    while rest:
        piece = next((prefix + rest[:k] for k in range(len(rest), 0, -1) if prefix + rest[:k] in vocab), None)
        if piece is None:
            return ["[UNK]"]
        out.append(piece)
        rest, prefix = rest[len(piece) - len(prefix):], "##"
    return out


def _joined(answer: Any) -> Any:
    """A split as one string ("un ##aff ##able"), whether given as a list of pieces or as that string."""
    if answer is None or isinstance(answer, str):
        return None if answer is None else " ".join(answer.split())
    try:
        return " ".join(str(x) for x in answer)
    except TypeError:
        return repr(answer)


@reference(
    "ex-08-1",
    Part("小さな語彙", hint="先頭から語彙にある最も長い部分語を取り、残りには ## を付けて同じことを繰り返す"),
    Part("BERT の語彙", hint="wordpiece 関数に tok.vocab を渡す"),
    judge=True,
)
def _ex_08_1(answers, toy_vocab, tokenizer):
    return {
        "小さな語彙": (_joined(answers["小さな語彙"]), " ".join(_longest_match("unaffable", set(toy_vocab)))),
        "BERT の語彙": (_joined(answers["BERT の語彙"]), " ".join(tokenizer.tokenize("unaffable"))),
    }


@reference(
    "ex-08-2",
    *(Part(name, hint="まず 15% で対象を選び、その中を 80/10/10 に分ける") for name in ("対象", "[MASK]", "ランダム", "そのまま")),
    Part("元と同じ単語", hint="ランダムに置き換える数 × 同じ単語を引く確率", rtol=1e-2),
)
def _ex_08_2(n_tokens, vocab_size):
    chosen = n_tokens * 15 / 100
    return {"対象": chosen, "[MASK]": chosen * 8 / 10, "ランダム": chosen / 10, "そのまま": chosen / 10,
            "元と同じ単語": chosen / 10 / vocab_size}


def _by_column(answer: Any, width: int) -> Any:
    """A dict column → value as rows in _RATE_COLUMNS order (NaN rows for missing columns)."""
    if answer is None:
        return None
    if not hasattr(answer, "get"):
        return np.full((len(_RATE_COLUMNS), width), np.nan)
    rows = []
    for c in _RATE_COLUMNS:
        v = answer.get(c)
        try:
            row = np.asarray(v, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            row = np.full(width, np.nan)
        rows.append(row if row.shape == (width,) else np.full(width, np.nan))
    return np.stack(rows)


@reference(
    "ex-08-3",
    Part("(a)", hint="列ごとに idxmin で最小の行を取り、(mask, same, rnd) のタプルにする"),
    Part("(b)", hint="列の最大値から 80/10/10 の行の値を引く"),
    judge=True,
)
def _ex_08_3(answers):
    import pandas as pd

    from mixlib.paths import data_path

    r = pd.read_csv(data_path("bert_masking_rates.tsv"), sep="\t")
    setting = r[["mask", "same", "rnd"]].to_numpy()
    base = r[(setting == (80, 10, 10)).all(axis=1)]
    worst = np.stack([setting[np.argmin(r[c].to_numpy())] for c in _RATE_COLUMNS]).astype(float)
    gap = np.array([[r[c].to_numpy().max() - base[c].to_numpy()[0]] for c in _RATE_COLUMNS])
    return {"(a)": (_by_column(answers["(a)"], 3), worst), "(b)": (_by_column(answers["(b)"], 1), gap)}


@reference("ex-08-4", Part(hint="三つの表（トークン・位置・セグメント）と、層正規化の γ と β を数える", rtol=0, atol=0.5))
def _ex_08_4(enc):
    return sum(int(np.prod(p.shape)) for p in enc.model.embeddings.parameters())


@reference(
    "ex-08-5",
    Part("正解率", hint="1 位の候補（k=1）が答えと一致した問いの数 ÷ 問いの数"),
    Part("偶然の水準", hint="最も多い答えの数 ÷ 問いの数"),
)
def _ex_08_5(final, probes):
    rel = "代名詞（手がかりは右）"
    gold = probes.loc[probes["relation"] == rel, "answer"]
    return {"正解率": float(final.loc[final["relation"] == rel, "correct"].mean()),
            "偶然の水準": max(Counter(gold).values()) / len(gold)}


@reference(
    "ex-08-6",
    Part("(a) BPE", hint="組の頻度は、その組を含む単語の頻度の和"),
    Part("(b) WordPiece", hint="組の頻度を、二つの単位それぞれの頻度の積で割る"),
    Part("(c) 尤度", hint="連結した後の単位の頻度で Σ c(u) log(c(u)/N) を計算し直し、連結する前との差が最大の組"),
    judge=True,
)
def _ex_08_6(answers, counts):
    units: Counter = Counter()
    pairs: Counter = Counter()
    for word, n in counts.items():
        u = [word[0], *("##" + ch for ch in word[1:])]
        units.update({x: n * u.count(x) for x in set(u)})
        for a, b in zip(u, u[1:]):
            pairs[a, b] += n
    ranked = sorted(pairs, key=lambda p: (-pairs[p], p))  # ties broken the same way for everyone: alphabetically
    bpe = ranked[0]
    wp = sorted(pairs, key=lambda p: (-pairs[p] / (units[p[0]] * units[p[1]]), p))[0]

    def log_likelihood(c: Counter) -> float:  # a unigram model whose unit probabilities are the units' shares
        total = sum(c.values())
        return sum(v * math.log(v / total) for v in c.values() if v > 0)

    def gain(p):
        after = units.copy()
        after[p[0]] -= pairs[p]
        after[p[1]] -= pairs[p]
        after[p[0] + p[1].removeprefix("##")] += pairs[p]
        return log_likelihood(after) - log_likelihood(units)

    ml = sorted(pairs, key=lambda p: (-gain(p), p))[0]
    return {"(a) BPE": (_joined(answers["(a) BPE"]), " ".join(bpe)), "(b) WordPiece": (_joined(answers["(b) WordPiece"]), " ".join(wp)),
            "(c) 尤度": (_joined(answers["(c) 尤度"]), " ".join(ml))}


# ---------------------------------------------------------------- chapter 9


@reference("ex-09-1", Part(hint="注意マスクが 0 の位置（パディング）を除いて、last_hidden_state を平均する", atol=1e-4, rtol=1e-3))
def _ex_09_1(enc, sentence):
    import torch

    # the sentence alone, so no padding at all: the student's padded batch must give the same mean
    batch = enc.tokenizer([sentence], return_tensors="pt").to(enc.device)
    with torch.no_grad():
        h = enc.model(**batch).last_hidden_state[0].double()
    return h.mean(0).cpu().numpy()


@reference(
    "ex-09-2",
    *(Part(name, hint="コサインの行列の対角（自分自身）を -inf にしてから、各行の argmax のグループを比べる", atol=1e-9)
      for name in ("平均プーリング", "単語ベクトルの平均", "ランダムなベクトル")),
    judge=True,
    one_answer=True,
)
def _ex_09_2(answers, enc, texts, X, groups):
    from mixlib.course import sentences as sv

    nn_accuracy = answers["平均プーリング"]
    cases = {"平均プーリング": np.asarray(X), "単語ベクトルの平均": sv.sentence_vectors(enc, texts, pooling="static"),
             "ランダムなベクトル": np.random.default_rng(0).normal(size=(len(groups), 8))}
    out = {}
    for name, V in cases.items():
        got = nn_accuracy(V, groups)
        out[name] = (got, None if got is None else sv.group_scores(V, groups)["nn_accuracy"])
    return out


@reference(
    "ex-09-3",
    Part("(a) のコサイン", hint="sv.sentence_vectors で 2 文のベクトルを作り、sv.cosine_matrix の [0, 1]"),
    Part("(b) のコサイン", hint="(a) と同じ手順を (b) の 2 文で"),
    judge=True,
)
def _ex_09_3(answers, enc, pair_a, pair_b):
    from mixlib.course import sentences as sv

    out = {}
    for part, pair in (("(a) のコサイン", pair_a), ("(b) のコサイン", pair_b)):
        given = answers[part]
        if given is not None and (pair is None or len(pair) != 2 or not all(isinstance(s, str) and s.strip() for s in pair)):
            raise ValueError(f"ex-09-3: {part[:3]} の 2 文を (文1, 文2) の形で入れてから、このセルを実行し直す。")
        out[part] = (given, None if given is None else float(sv.cosine_matrix(sv.sentence_vectors(enc, list(pair)))[0, 1]))
    return out


@reference("ex-09-4", Part("自分の場面", hint="4 文以上の英文のリスト（空の文は入れない）"), judge=True)
def _ex_09_4(answers, enc, texts):
    """Not right or wrong: reports, for each of the student's sentences, whether its nearest neighbour is one of theirs."""
    from mixlib.course import sentences as sv

    mine = answers["自分の場面"]
    if mine is None:
        return {"自分の場面": (None, None)}
    mine = list(mine)
    if len(mine) < 4 or not all(isinstance(s, str) and s.strip() for s in mine):
        return {"自分の場面": (False, True)}
    every = list(texts) + mine
    S = sv.cosine_matrix(sv.sentence_vectors(enc, every))
    np.fill_diagonal(S, -np.inf)
    hits = [int(S[i].argmax()) >= len(texts) for i in range(len(texts), len(every))]
    print(f"自分の文 {len(mine)} 個のうち、最近傍が自分のグループにあったもの: {sum(hits)} 個")
    for i, hit in zip(range(len(texts), len(every)), hits):
        if not hit:
            print("  最近傍が別の場面:", every[i][:60], "→", every[int(S[i].argmax())][:60])
    return {"自分の場面": (True, True)}


@reference(
    "ex-09-5",
    Part(hint="u と v を本文と逆にする。行ごとの softmax は exp(s_ij) / Σ_j exp(s_ij)。対角の対数確率の平均に負号"),
)
def _ex_09_5(X, batches, scale):
    from mixlib.course import sentences as sv

    # the reverse direction of the chapter's: u from the second sentence of each pair
    return sv.in_batch_contrastive(np.asarray(X)[batches[0][1]], np.asarray(X)[batches[0][0]], scale=scale)["loss"]
