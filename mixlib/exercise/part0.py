"""The references of the opening chapter's exercises (chapter 0), computed out of the student's sight."""

from __future__ import annotations

import numpy as np

from mixlib.exercise import Part, reference


def _rows(E, ids) -> np.ndarray:
    E = E.detach().cpu().numpy() if hasattr(E, "detach") else np.asarray(E)
    return E[np.asarray(ids)].astype(np.float64)


@reference("ex-00-1", Part(hint="E[ids] の各行の長さ（ノルム）を比べ、最大の行の単語を WORDS から選ぶ"))
def _ex_00_1(E, ids, words):
    X = _rows(E, ids)
    return words[int(np.argmax(np.einsum("wd,wd->w", X, X)))]


@reference(
    "ex-00-2",
    Part("コサイン", hint="内積を二つのノルムの積で割る"),
    Part("内積", hint="成分ごとの積の和（正規化しない）"),
)
def _ex_00_2(E, tokenizer):
    a, b = _rows(E, tokenizer.convert_tokens_to_ids(["king", "queen"]))
    return {"コサイン": float(a @ b / np.sqrt((a @ a) * (b @ b))), "内積": float(a @ b)}


@reference("ex-00-3", Part(hint="king との類似度が queen より大きい語の数に 1 を足す（king 自身は数えない）"))
def _ex_00_3(word_vectors):
    names = [w for w, _ in word_vectors.nearest("king", len(word_vectors) - 1)]  # every word but king, nearest first
    return names.index("queen") + 1
