"""The references of Part IV's exercises (chapter 8), computed out of the student's sight.

Each function takes the chapter's variables by name (the check cell passes
them) and computes the expected answer by its own route.
``tests/test_exercises.py`` runs every solution through these checks.
"""

from __future__ import annotations

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
    Part("正答率", hint="1 位の候補（k=1）が答えと一致した問いの数 ÷ 問いの数"),
    Part("偶然の水準", hint="最も多い答えの数 ÷ 問いの数"),
)
def _ex_08_5(final, probes):
    rel = "代名詞（手がかりは右）"
    answers = probes.loc[probes["relation"] == rel, "answer"]
    return {"正答率": float(final.loc[final["relation"] == rel, "correct"].mean()),
            "偶然の水準": max(Counter(answers).values()) / len(answers)}


@reference(
    "ex-08-6",
    Part("(a) BPE", hint="組の頻度は、その組を含む単語の頻度の和"),
    Part("(b) WordPiece", hint="組の頻度を、二つの単位それぞれの頻度の積で割る"),
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

    return {"(a) BPE": (_joined(answers["(a) BPE"]), " ".join(bpe)), "(b) WordPiece": (_joined(answers["(b) WordPiece"]), " ".join(wp))}
