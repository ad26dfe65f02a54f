"""Static word vectors: counts and PPMI, word2vec (skip-gram with negative sampling, CBOW), and analogies.

The chapters on distributional vectors and word2vec build word vectors in two
ways from the same corpus and compare them with the same tools:

* count-based: :func:`cooccurrence_matrix` -> :func:`ppmi` -> truncated SVD
  (scikit-learn) -> :class:`WordVectors`;
* predictive: :func:`train_word2vec` trains :class:`SkipGramNS` or
  :class:`CBOWNS` in PyTorch -> :class:`WordVectors`.

:class:`WordVectors` holds a ``(V, D)`` matrix with its words and answers
:meth:`~WordVectors.nearest` and :meth:`~WordVectors.analogy` (3CosAdd, the
query words excluded). :meth:`WordVectors.from_encoder` does the same for the
input embedding matrix of a pretrained encoder.

Shapes: ``V`` vocabulary, ``D`` vector size, ``B`` batch, ``K`` negatives,
``C`` context slots (``2 * window``).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

__all__ = [
    "accuracy_cells",
    "Vocab",
    "build_vocab",
    "encode_sentences",
    "cooccurrence_matrix",
    "ppmi",
    "skipgram_pairs",
    "cbow_examples",
    "noise_distribution",
    "SkipGramNS",
    "CBOWNS",
    "Word2VecResult",
    "train_word2vec",
    "WordVectors",
    "torch_threads",
    "ANALOGY_SET_RELATIONS",
    "load_analogy_set",
    "accuracy_by_relation",
    "offset_vs_baseline",
]


@contextlib.contextmanager
def torch_threads(n: int | None):
    """Run the block with ``torch.set_num_threads(n)``, then restore the previous setting.

    The chapters' models are tiny: splitting their matrix products over
    threads costs more than it saves, and on a shared CPU it can be ten times
    slower. ``None`` leaves torch's setting alone.
    """
    if n is None:
        yield
        return
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"num_threads must be a positive integer or None; got {n!r}.")
    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------------------
# vocabulary and counts
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Vocab:
    """Words sorted by frequency (ties alphabetically) and their counts.

    Attributes
    ----------
    words : tuple of str
        ``words[i]`` is the word with id ``i``.
    counts : numpy.ndarray
        ``(V,)`` corpus frequency of each word.
    """

    words: tuple[str, ...]
    counts: np.ndarray
    _index: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._index.update({w: i for i, w in enumerate(self.words)})

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self._index

    def index(self, word: str) -> int:
        """Id of ``word``; a ``KeyError`` that names the word if it is not in the vocabulary."""
        try:
            return self._index[word]
        except KeyError:
            raise KeyError(f"{word!r} is not in the vocabulary ({len(self)} words).") from None


def build_vocab(sentences: Iterable[Sequence[str]], *, min_count: int = 1) -> Vocab:
    """Vocabulary of the words that occur at least ``min_count`` times."""
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1; got {min_count}.")
    counter = Counter(w for s in sentences for w in s)
    items = sorted(((w, c) for w, c in counter.items() if c >= min_count), key=lambda t: (-t[1], t[0]))
    if not items:
        raise ValueError("no word occurs min_count times: the corpus is empty or min_count is too high.")
    words, counts = zip(*items)
    return Vocab(words=tuple(words), counts=np.array(counts, dtype=np.int64))


def encode_sentences(sentences: Iterable[Sequence[str]], vocab: Vocab) -> list[np.ndarray]:
    """Each sentence as an array of word ids; words not in ``vocab`` are dropped."""
    idx = vocab._index
    return [np.array([idx[w] for w in s if w in idx], dtype=np.int64) for s in sentences]


def _flat(ids: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """All ids concatenated, ``(T,)``, and the sentence number of each token, ``(T,)``."""
    tokens = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    sent = np.repeat(np.arange(len(ids)), [len(s) for s in ids])
    return tokens, sent


def _check_window(window: int) -> int:
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise ValueError(f"window must be an integer >= 1; got {window!r}.")
    return int(window)


def cooccurrence_matrix(sentences: Iterable[Sequence[str]], vocab: Vocab, *, window: int = 2) -> np.ndarray:
    """Symmetric co-occurrence counts within ``window`` words, inside each sentence.

    Returns
    -------
    numpy.ndarray
        ``(V, V)`` float64; entry ``[i, j]`` counts the times word ``j``
        appears at most ``window`` positions away from word ``i``.
    """
    window = _check_window(window)
    tokens, sent = _flat(encode_sentences(sentences, vocab))
    V = len(vocab)
    C = np.zeros((V, V), dtype=np.float64)
    for k in range(1, window + 1):
        same = sent[:-k] == sent[k:]
        a, b = tokens[:-k][same], tokens[k:][same]
        np.add.at(C, (a, b), 1.0)
        np.add.at(C, (b, a), 1.0)
    return C


def ppmi(counts: np.ndarray, *, alpha: float = 1.0, shift: float = 0.0) -> np.ndarray:
    r"""Positive pointwise mutual information of a co-occurrence matrix.

    .. math::
        \mathrm{PMI}(w, c) = \log \frac{P(w, c)}{P(w)\,P_\alpha(c)}, \qquad
        \mathrm{PPMI} = \max(\mathrm{PMI} - \mathrm{shift}, 0)

    with :math:`P_\alpha(c) \propto \#(c)^\alpha` (``alpha=0.75`` is the
    smoothing of Levy, Goldberg & Dagan 2015). ``shift = log k`` gives the
    shifted PPMI that skip-gram with ``k`` negatives implicitly factorises
    (Levy & Goldberg 2014). Cells with zero count get 0.

    Parameters
    ----------
    counts : numpy.ndarray
        ``(V, C)`` non-negative counts with at least one positive entry.
    alpha : float, default 1.0
    shift : float, default 0.0

    Returns
    -------
    numpy.ndarray
        ``(V, C)`` float64, all entries >= 0.
    """
    N = np.asarray(counts, dtype=np.float64)
    if N.ndim != 2 or (N < 0).any() or N.sum() <= 0:
        raise ValueError("counts must be a 2-D array of non-negative numbers with a positive total.")
    total = N.sum()
    p_wc = N / total
    p_w = N.sum(axis=1, keepdims=True) / total
    ctx = N.sum(axis=0, keepdims=True) ** alpha
    p_c = ctx / ctx.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log(p_wc / (p_w * p_c))
    pmi[~np.isfinite(pmi)] = 0.0
    pmi[N == 0] = 0.0
    return np.maximum(pmi - shift, 0.0)


# ---------------------------------------------------------------------------
# training examples
# ---------------------------------------------------------------------------


def skipgram_pairs(ids: list[np.ndarray], *, window: int = 2) -> np.ndarray:
    """All (center, context) pairs within ``window`` positions inside each sentence.

    Returns
    -------
    numpy.ndarray
        ``(P, 2)`` int64: column 0 the center word, column 1 a context word.
    """
    window = _check_window(window)
    tokens, sent = _flat(ids)
    out = []
    for k in range(1, window + 1):
        same = sent[:-k] == sent[k:]
        left, right = tokens[:-k][same], tokens[k:][same]
        out.append(np.stack([left, right], axis=1))
        out.append(np.stack([right, left], axis=1))
    return np.concatenate(out) if out else np.zeros((0, 2), dtype=np.int64)


def cbow_examples(ids: list[np.ndarray], *, window: int = 2, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """CBOW examples: the context window of each token, and the token.

    Returns
    -------
    contexts : numpy.ndarray
        ``(T, C)`` int64 with ``C = 2 * window``; slots outside the sentence hold ``pad``.
    centers : numpy.ndarray
        ``(T,)`` int64.
    """
    window = _check_window(window)
    tokens, sent = _flat(ids)
    T = len(tokens)
    offsets = [o for o in range(-window, window + 1) if o != 0]
    ctx = np.full((T, len(offsets)), pad, dtype=np.int64)
    pos = np.arange(T)
    for j, o in enumerate(offsets):
        q = pos + o
        ok = (q >= 0) & (q < T)
        ok[ok] &= sent[q[ok]] == sent[pos[ok]]
        ctx[ok, j] = tokens[q[ok]]
    has_ctx = (ctx != pad).any(axis=1)
    return ctx[has_ctx], tokens[has_ctx]


def noise_distribution(counts: np.ndarray, power: float = 0.75) -> np.ndarray:
    """Negative-sampling distribution ``P_n(w) ∝ count(w) ** power`` (word2vec uses 3/4)."""
    p = np.asarray(counts, dtype=np.float64) ** power
    if p.ndim != 1 or not np.isfinite(p).all() or p.sum() <= 0:
        raise ValueError("counts must be a 1-D array of non-negative numbers with a positive total.")
    return p / p.sum()


# ---------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------


class SkipGramNS(nn.Module):
    r"""Skip-gram with negative sampling (Mikolov et al. 2013b).

    Two tables: ``inp`` (the word vectors :math:`v_w` that are kept) and
    ``out`` (context vectors :math:`u_c`). For a pair (w, c) and K noise words
    :math:`n_k \sim P_n`, the loss is

    .. math::
        -\log\sigma(u_c^\top v_w) - \sum_{k=1}^{K} \log\sigma(-u_{n_k}^\top v_w).
    """

    def __init__(self, vocab_size: int, dim: int):
        super().__init__()
        self.inp = nn.Embedding(vocab_size, dim)
        self.out = nn.Embedding(vocab_size, dim)
        nn.init.uniform_(self.inp.weight, -0.5 / dim, 0.5 / dim)  # as in the word2vec C code
        nn.init.zeros_(self.out.weight)

    def forward(self, center: torch.Tensor, context: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        """Mean loss over the batch: ``center (B,)``, ``context (B,)``, ``negatives (B, K)``."""
        v = self.inp(center)  # (B, D)
        pos = (self.out(context) * v).sum(-1)  # (B,)
        neg = torch.einsum("bkd,bd->bk", self.out(negatives), v)  # (B, K)
        loss = -nn.functional.logsigmoid(pos) - nn.functional.logsigmoid(-neg).sum(-1)
        return loss.mean()

    def word_vectors(self) -> np.ndarray:
        """``(V, D)`` input vectors as numpy."""
        return self.inp.weight.detach().cpu().numpy().copy()


class CBOWNS(nn.Module):
    r"""Continuous bag-of-words with negative sampling.

    The mean of the context vectors :math:`h = \frac{1}{|C|}\sum_{c\in C} v_c`
    predicts the center word: the loss is
    :math:`-\log\sigma(u_w^\top h) - \sum_k \log\sigma(-u_{n_k}^\top h)`.
    Index ``vocab_size`` is the padding slot (a zero vector that is never trained).
    """

    def __init__(self, vocab_size: int, dim: int):
        super().__init__()
        self.pad = vocab_size
        self.inp = nn.Embedding(vocab_size + 1, dim, padding_idx=vocab_size)
        self.out = nn.Embedding(vocab_size, dim)
        with torch.no_grad():
            self.inp.weight.uniform_(-0.5 / dim, 0.5 / dim)
            self.inp.weight[vocab_size].zero_()
        nn.init.zeros_(self.out.weight)

    def forward(self, contexts: torch.Tensor, center: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        """Mean loss: ``contexts (B, C)`` (padded with ``pad``), ``center (B,)``, ``negatives (B, K)``."""
        mask = (contexts != self.pad).float()  # (B, C)
        h = (self.inp(contexts) * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp_min(1.0)  # (B, D)
        pos = (self.out(center) * h).sum(-1)  # (B,)
        neg = torch.einsum("bkd,bd->bk", self.out(negatives), h)  # (B, K)
        loss = -nn.functional.logsigmoid(pos) - nn.functional.logsigmoid(-neg).sum(-1)
        return loss.mean()

    def word_vectors(self) -> np.ndarray:
        """``(V, D)`` input vectors (the padding row dropped) as numpy."""
        return self.inp.weight[: self.pad].detach().cpu().numpy().copy()


# ---------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Word2VecResult:
    """What :func:`train_word2vec` returns.

    Attributes
    ----------
    vectors : WordVectors
        The trained input vectors.
    losses : numpy.ndarray
        ``(steps,)`` training loss of every minibatch.
    epoch_losses : numpy.ndarray
        ``(epochs,)`` mean loss of each epoch.
    model : SkipGramNS or CBOWNS
    kind : {"sgns", "cbow"}
    n_examples : int
        Training examples per epoch (pairs for sgns, windows for cbow).
    seconds : float
        Wall-clock training time.
    """

    vectors: "WordVectors"
    losses: np.ndarray
    epoch_losses: np.ndarray
    model: nn.Module
    kind: str
    n_examples: int
    seconds: float


def train_word2vec(
    sentences: Sequence[Sequence[str]],
    *,
    kind: str = "sgns",
    dim: int = 30,
    window: int = 2,
    negatives: int = 5,
    epochs: int = 3,
    batch_size: int = 512,
    lr: float = 0.01,
    min_count: int = 1,
    seed: int = 0,
    vocab: Vocab | None = None,
    num_threads: int | None = 1,
) -> Word2VecResult:
    """Train skip-gram (``kind="sgns"``) or CBOW (``kind="cbow"``) with negative sampling.

    Minibatches of shuffled examples, ``negatives`` noise words per example drawn
    from :func:`noise_distribution`, Adam with a learning rate that decays
    linearly to 10 % (word2vec decays plain SGD linearly; Adam converges in far
    fewer epochs on a small corpus). Everything is seeded, so the same
    arguments give the same vectors on the same machine.

    Parameters
    ----------
    sentences : sequence of sequence of str
    kind : {"sgns", "cbow"}, default "sgns"
    dim : int, default 30
        Vector size D.
    window : int, default 2
        Context words on each side.
    negatives : int, default 5
        Noise words K per example.
    epochs : int, default 3
    batch_size : int, default 512
    lr : float, default 0.01
    min_count : int, default 1
        Ignored when ``vocab`` is given.
    seed : int, default 0
    vocab : Vocab, optional
        Use this vocabulary (e.g. to compare with a count-based model on the same rows).
    num_threads : int or None, default 1
        Torch threads while training (see :func:`torch_threads`).

    Returns
    -------
    Word2VecResult

    Raises
    ------
    ValueError
        Unknown ``kind`` or non-positive sizes.
    """
    if kind not in ("sgns", "cbow"):
        raise ValueError(f"kind must be 'sgns' (skip-gram) or 'cbow'; got {kind!r}.")
    for name, v in (("dim", dim), ("negatives", negatives), ("epochs", epochs), ("batch_size", batch_size)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive integer; got {v!r}.")
    if not lr > 0:
        raise ValueError(f"lr must be positive; got {lr!r}.")
    vocab = vocab if vocab is not None else build_vocab(sentences, min_count=min_count)
    ids = encode_sentences(sentences, vocab)
    V = len(vocab)

    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    if kind == "sgns":
        model: nn.Module = SkipGramNS(V, dim)
        data = [torch.from_numpy(skipgram_pairs(ids, window=window))]  # (P, 2)
        data = [data[0][:, 0], data[0][:, 1]]
    else:
        model = CBOWNS(V, dim)
        ctx, center = cbow_examples(ids, window=window, pad=V)
        data = [torch.from_numpy(ctx), torch.from_numpy(center)]
    n = len(data[0])
    if n == 0:
        raise ValueError("the corpus gives no training examples (every sentence has a single word?).")
    noise = torch.from_numpy(noise_distribution(vocab.counts)).float()

    steps_per_epoch = -(-n // batch_size)
    total = steps_per_epoch * epochs
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 - 0.9 * step / max(total, 1))
    losses = np.zeros(total, dtype=np.float64)
    t0 = time.perf_counter()
    step = 0
    model.train()
    with torch_threads(num_threads):
        for _ in range(epochs):
            perm = torch.randperm(n, generator=gen)
            for s in range(steps_per_epoch):
                b = perm[s * batch_size : (s + 1) * batch_size]
                neg = torch.multinomial(noise, len(b) * negatives, replacement=True, generator=gen).view(len(b), negatives)
                loss = model(data[0][b], data[1][b], neg)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                losses[step] = float(loss.detach())
                step += 1
    model.eval()
    seconds = time.perf_counter() - t0
    epoch_losses = losses.reshape(epochs, steps_per_epoch).mean(axis=1)
    wv = WordVectors(words=vocab.words, matrix=model.word_vectors())
    return Word2VecResult(wv, losses, epoch_losses, model, kind, n, seconds)


# ---------------------------------------------------------------------------
# using the vectors
# ---------------------------------------------------------------------------

_WORDPIECE_WORD = re.compile(r"[a-z]+")
_BPE_WORD = re.compile(r"Ġ([a-z]+)")


@dataclass(frozen=True, eq=False)
class WordVectors:
    """A ``(V, D)`` matrix of word vectors with its words.

    Attributes
    ----------
    words : tuple of str
        ``words[i]`` labels row ``i``; words must be unique.
    matrix : numpy.ndarray
        ``(V, D)`` float32 vectors.
    rows : numpy.ndarray or None
        When built from an encoder, ``rows[i]`` is the id of ``words[i]`` in
        the encoder's vocabulary (``(V,)``); else None.
    """

    words: tuple[str, ...]
    matrix: np.ndarray
    rows: np.ndarray | None = None
    _index: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        m = np.asarray(self.matrix, dtype=np.float32)
        if m.ndim != 2 or m.shape[0] != len(self.words):
            raise ValueError(f"matrix must be (len(words), D) = ({len(self.words)}, D); got {m.shape}.")
        object.__setattr__(self, "matrix", m)
        self._index.update({w: i for i, w in enumerate(self.words)})
        if len(self._index) != len(self.words):
            raise ValueError("words must be unique.")

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self._index

    def __repr__(self) -> str:
        return f"WordVectors(V={len(self)}, D={self.matrix.shape[1]})"

    def index(self, word: str) -> int:
        try:
            return self._index[word]
        except KeyError:
            raise KeyError(f"{word!r} is not among the {len(self)} words of these vectors.") from None

    def vector(self, word: str) -> np.ndarray:
        """``(D,)`` vector of ``word``."""
        return self.matrix[self.index(word)]

    def unit(self) -> np.ndarray:
        """``(V, D)`` rows scaled to length 1 (zero rows stay zero)."""
        norms = np.linalg.norm(self.matrix, axis=1, keepdims=True)
        return self.matrix / np.where(norms > 0, norms, 1.0)

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of two words."""
        u = self.unit()
        return float(u[self.index(a)] @ u[self.index(b)])

    def similarity_matrix(self, words: Sequence[str]) -> pd.DataFrame:
        """Cosine similarities among ``words`` as a labelled ``(n, n)`` table."""
        u = self.unit()[[self.index(w) for w in words]]
        return pd.DataFrame(u @ u.T, index=list(words), columns=list(words))

    def _rank(self, target: np.ndarray, k: int, exclude: Iterable[str]) -> list[tuple[str, float]]:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be a positive integer; got {k!r}.")
        t = np.asarray(target, dtype=np.float32)
        norm = np.linalg.norm(t)
        scores = self.unit() @ (t / norm if norm > 0 else t)  # (V,)
        for w in exclude:
            scores[self.index(w)] = -np.inf
        k = min(k, int(np.isfinite(scores).sum()))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = top[np.lexsort((top, -scores[top]))]  # by score, ties by row
        return [(self.words[i], float(scores[i])) for i in top[:k]]

    def nearest(self, word: str, k: int = 5, *, exclude_self: bool = True) -> list[tuple[str, float]]:
        """The ``k`` words with the highest cosine similarity to ``word``.

        Returns
        -------
        list of (word, cosine), best first.
        """
        return self._rank(self.vector(word), k, [word] if exclude_self else [])

    def analogy(self, a: str, b: str, c: str, k: int = 1, *, exclude_query: bool = True) -> list[tuple[str, float]]:
        r"""3CosAdd: the words ``d`` closest to ``b - a + c`` for ``a : b :: c : d``.

        With unit vectors :math:`\hat{x}`, the answer maximises
        :math:`\cos(d,\ \hat{b} - \hat{a} + \hat{c})`; since the norm of the
        target does not depend on ``d`` this is the same ranking as
        :math:`\cos(d,b) - \cos(d,a) + \cos(d,c)` (Levy & Goldberg 2014).

        Parameters
        ----------
        a, b, c : str
            E.g. ``"man", "king", "woman"`` for man : king :: woman : ?.
        k : int, default 1
        exclude_query : bool, default True
            Remove ``a``, ``b`` and ``c`` from the candidates, as Mikolov et al.
            did; without it the answer is very often ``b`` or ``c`` itself.

        Returns
        -------
        list of (word, cosine with the target), best first.
        """
        u = self.unit()
        target = u[self.index(b)] - u[self.index(a)] + u[self.index(c)]
        return self._rank(target, k, (a, b, c) if exclude_query else ())

    def evaluate(
        self, questions: Iterable[Any], *, exclude_query: bool = True, method: str = "3cosadd", block: int = 256
    ) -> pd.DataFrame:
        r"""Answer analogy questions (objects with ``a, b, c, d, relation``) all at once.

        Parameters
        ----------
        questions : iterable
            E.g. :func:`mixlib.course.corpus.analogy_questions` or :func:`load_analogy_set`.
        exclude_query : bool, default True
            Remove ``a``, ``b`` and ``c`` from the candidates (see :meth:`analogy`).
        method : {"3cosadd", "nearest_c"}, default "3cosadd"
            ``"3cosadd"`` ranks by :math:`\cos(d,\ \hat{b} - \hat{a} + \hat{c})`, as
            :meth:`analogy`; ``"nearest_c"`` is the baseline that ignores ``a`` and
            ``b`` and answers the nearest neighbour of ``c`` (Linzen 2016): how much
            of 3CosAdd's accuracy the offset ``b - a`` adds. ``"nearest_c"`` always
            excludes the query words (else ``c`` would answer itself).
        block : int, default 256
            Questions scored per matrix product (memory: ``block * V`` floats).

        Returns
        -------
        pandas.DataFrame
            Columns ``a, b, c, d`` (expected), ``predicted``, ``correct``, ``relation``
            and ``rank`` (1 = first: the position of ``d`` among the candidates);
            questions with a word outside the vocabulary are skipped.
        """
        if method not in ("3cosadd", "nearest_c"):
            raise ValueError(f"method must be '3cosadd' or 'nearest_c'; got {method!r}.")
        if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
            raise ValueError(f"block must be a positive integer; got {block!r}.")
        cols = ["a", "b", "c", "d", "predicted", "correct", "relation", "rank"]
        qs = [q for q in questions if all(w in self for w in (q.a, q.b, q.c, q.d))]
        if not qs:
            return pd.DataFrame(columns=cols)
        U = self.unit()  # (V, D)
        ia, ib, ic, id_ = (np.array([self._index[getattr(q, f)] for q in qs]) for f in "abcd")  # (Q,) each
        # cos(d, b) - cos(d, a) + cos(d, c) ranks the candidates d exactly as cos(d, b - a + c) does
        # (the target's norm does not depend on d), so one product over the distinct query words serves all questions.
        uniq, inv = np.unique(np.concatenate([ia, ib, ic]), return_inverse=True)
        pa, pb, pc = inv.reshape(3, -1)  # (Q,) rows of G
        G = U[uniq] @ U.T  # (W, V) cosine of every query word with every word
        exclude = exclude_query or method == "nearest_c"
        pred = np.empty(len(qs), dtype=np.int64)
        rank = np.empty(len(qs), dtype=np.int64)
        for s in range(0, len(qs), int(block)):
            sl = slice(s, s + int(block))
            S = G[pc[sl]].copy() if method == "nearest_c" else G[pb[sl]] - G[pa[sl]] + G[pc[sl]]  # (q, V)
            r = np.arange(S.shape[0])
            if exclude:
                for cols_ in (ia[sl], ib[sl], ic[sl]):
                    S[r, cols_] = -np.inf
            pred[sl] = S.argmax(axis=1)  # ties: the lower row, as in analogy()
            target = S[r, id_[sl]]
            rank[sl] = 1 + (S > target[:, None]).sum(axis=1)
        out = pd.DataFrame(
            {
                "a": [q.a for q in qs],
                "b": [q.b for q in qs],
                "c": [q.c for q in qs],
                "d": [q.d for q in qs],
                "predicted": [self.words[i] for i in pred],
                "correct": pred == id_,
                "relation": [q.relation for q in qs],
                "rank": rank,
            }
        )
        return out[cols]

    def subset(self, words: Sequence[str]) -> "WordVectors":
        """The same vectors restricted to ``words`` (in that order)."""
        idx = [self.index(w) for w in words]
        rows = self.rows[idx] if self.rows is not None else None
        return WordVectors(tuple(words), self.matrix[idx], rows)

    @classmethod
    def from_encoder(cls, enc: Any, *, whole_words: bool = True) -> "WordVectors":
        """The input (word-piece) embedding matrix of an encoder as static word vectors.

        Parameters
        ----------
        enc : mixlib.Encoder
        whole_words : bool, default True
            Keep only tokens that are whole lower-case alphabetic words: for a
            WordPiece vocabulary (BERT) tokens matching ``[a-z]+`` (so no
            ``##`` continuations, no ``[unused]`` or special tokens); for a
            byte-level BPE vocabulary (RoBERTa) tokens ``Ġ[a-z]+``, with the
            ``Ġ`` removed. Analogies should be answered with whole words only.

        Returns
        -------
        WordVectors
            ``rows`` holds each word's id in ``enc.tokenizer``.
        """
        E = enc.word_embeddings().numpy()  # (V, D)
        vocab = enc.tokenizer.get_vocab()
        words, rows, seen = [], [], set()
        for tok, i in sorted(vocab.items(), key=lambda t: t[1]):
            if i >= E.shape[0]:
                continue
            if whole_words:
                m = _WORDPIECE_WORD.fullmatch(tok) or _BPE_WORD.fullmatch(tok)
                if m is None:
                    continue
                tok = m.group(1) if m.re is _BPE_WORD else tok
            if tok in seen:  # e.g. "Ġcat" and "cat" in a BPE vocabulary: keep the first (lower id)
                continue
            seen.add(tok)
            words.append(tok)
            rows.append(i)
        rows_a = np.array(rows, dtype=np.int64)
        return cls(tuple(words), E[rows_a], rows_a)


# ---------------------------------------------------------------------------
# analogy question sets and their accuracy
# ---------------------------------------------------------------------------

#: Relations of ``data/analogy_en.tsv``, with their Japanese names for tables.
ANALOGY_SET_RELATIONS = {"capital": "国と首都", "gender": "性別", "past": "過去形"}


def load_analogy_set(name: str = "analogy_en.tsv", relations: Sequence[str] | None = None) -> list:
    """The analogy questions of a pair file in ``data/`` (all ordered pairs of its rows per relation).

    The file is tab-separated with the header ``relation, a, b``: one related
    pair per row (``france  paris``). Every two different rows of one
    relation make a question ``a : b :: c : d``, so ``n`` rows give
    ``n * (n - 1)`` questions.

    Parameters
    ----------
    name : str, default "analogy_en.tsv"
        A file in ``data/`` (see ``data/README.md``), or a path to one.
    relations : sequence of str, optional
        Keep only these relations (default: all in the file).

    Returns
    -------
    list of mixlib.course.corpus.Analogy

    Raises
    ------
    ValueError
        A malformed file: wrong header, an empty field, a pair whose two words
        are equal, a pair listed twice, or a relation that is not in the file.
    """
    import csv
    from pathlib import Path

    from mixlib.course.corpus import questions_from_pairs
    from mixlib.paths import data_path

    path = Path(name) if Path(name).is_file() else data_path(name)
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or [c.strip() for c in rows[0]] != ["relation", "a", "b"]:
        raise ValueError(f"{path}: the first line must be the header 'relation<TAB>a<TAB>b'.")
    pairs: dict[str, list[tuple[str, str]]] = {}
    for n, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != 3 or not all(x.strip() for x in row):
            raise ValueError(f"{path} line {n}: expected three non-empty tab-separated fields; got {row!r}.")
        rel, a, b = (x.strip() for x in row)
        if a == b:
            raise ValueError(f"{path} line {n}: the two words of a pair must differ; got {a!r} twice.")
        if (a, b) in pairs.get(rel, []):
            raise ValueError(f"{path} line {n}: the pair ({a}, {b}) is listed twice under {rel!r}.")
        pairs.setdefault(rel, []).append((a, b))
    wanted = list(pairs) if relations is None else list(relations)
    unknown = [r for r in wanted if r not in pairs]
    if unknown:
        raise ValueError(f"{path} has no relation {unknown!r}; it has {list(pairs)}.")
    out: list = []
    for rel in wanted:
        out += questions_from_pairs(pairs[rel], rel)
    return out


def accuracy_by_relation(ev: pd.DataFrame, *, n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Accuracy per relation with a bootstrap interval that resamples the *pairs*, not the questions.

    The questions of a relation share their pairs (``n`` pairs make ``n(n-1)``
    questions), so they are not independent: a binomial interval over the
    questions would be far too narrow. Each bootstrap replicate draws the
    pairs with replacement and weighs every question ``(i, j)`` by how often
    pairs ``i`` and ``j`` were drawn.

    Parameters
    ----------
    ev : pandas.DataFrame
        The output of :meth:`WordVectors.evaluate`.
    n_boot : int, default 2000
    level : float, default 0.95
    seed : int, default 0

    Returns
    -------
    pandas.DataFrame
        One row per relation: ``questions``, ``pairs``, ``accuracy``, ``low``, ``high``.
    """
    _check_boot(n_boot, level)
    rng = np.random.default_rng(seed)
    rows = []
    for rel, g in ev.groupby("relation", sort=False):
        correct = g["correct"].to_numpy(dtype=float)
        n_pairs, w = _pair_bootstrap_weights(g, n_boot, rng)
        lo, hi = _weighted_quantiles(w, correct, level)
        rows.append({"relation": rel, "questions": len(g), "pairs": n_pairs, "accuracy": correct.mean(), "low": lo, "high": hi})
    return pd.DataFrame(rows, columns=["relation", "questions", "pairs", "accuracy", "low", "high"])


def accuracy_cells(acc: pd.DataFrame, keys: Sequence[str], relations: dict[str, str]) -> pd.DataFrame:
    """An accuracy table to read: one row per value of ``keys``, one column per relation, ``accuracy（low〜high）`` in each cell.

    Parameters
    ----------
    acc : pandas.DataFrame
        Rows of :func:`accuracy_by_relation` (``relation``, ``questions``, ``pairs``, ``accuracy``, ``low``,
        ``high``) with the columns ``keys`` added (e.g. the method and the vectors each row was measured with).
    keys : sequence of str
        The columns that make a row of the table.
    relations : dict of str to str
        Relation code -> its name, in the order of the columns (relations not in ``acc`` are left out).

    Returns
    -------
    pandas.DataFrame
        Text cells; intervals as :func:`mixlib.plots.interval` writes them (rounded outward). Each column is headed
        with its relation's name and its numbers of questions and pairs, which must be the same in every row.
    """
    from ..plots import interval

    counts = acc.groupby("relation")[["questions", "pairs"]].nunique()
    if (counts > 1).any(axis=None):
        raise ValueError("accuracy_cells: a relation has different numbers of questions or pairs in different rows; "
                         "one column cannot name them. Compare results measured on the same questions.")
    size = acc.drop_duplicates("relation").set_index("relation")
    cells = acc.assign(cell=[f"{a:.2f}（{interval(lo, hi)}）" for a, lo, hi in zip(acc["accuracy"], acc["low"], acc["high"])])
    present = [r for r in relations if r in size.index]
    wide = cells.pivot(index=list(keys), columns="relation", values="cell")[present]
    return wide.rename(columns=lambda r: f"{relations[r]}（{size.loc[r, 'questions']} 問・{size.loc[r, 'pairs']} 組）").rename_axis(
        columns="関係")


def _check_boot(n_boot, level) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1; got {level!r}.")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer; got {n_boot!r}.")


def _pair_bootstrap_weights(g: pd.DataFrame, n_boot: int, rng: np.random.Generator) -> tuple[int, np.ndarray]:
    """The pairs of one relation's questions and ``(n_boot, Q)`` weights: how often pairs (a, b) and (c, d) were both drawn."""
    keys = list(dict.fromkeys(list(zip(g["a"], g["b"])) + list(zip(g["c"], g["d"]))))
    pos = {k: i for i, k in enumerate(keys)}
    i = np.array([pos[k] for k in zip(g["a"], g["b"])])
    j = np.array([pos[k] for k in zip(g["c"], g["d"])])
    W = rng.multinomial(len(keys), np.full(len(keys), 1 / len(keys)), size=n_boot).astype(float)  # (n_boot, n)
    return len(keys), W[:, i] * W[:, j]


def _weighted_quantiles(w: np.ndarray, values: np.ndarray, level: float) -> tuple[float, float]:
    den = w.sum(axis=1)
    boot = (w @ values)[den > 0] / den[den > 0]
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def offset_vs_baseline(
    wv: "WordVectors", questions: Iterable[Any], *, n_boot: int = 2000, level: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Does the offset ``b - a`` add anything? 3CosAdd against the nearest neighbour of ``c``, per relation.

    Both methods answer the same questions (:meth:`WordVectors.evaluate`,
    query words excluded), so the difference is paired: per question,
    ``correct(3CosAdd) - correct(nearest c)``. Its interval comes from the same
    bootstrap over *pairs* as :func:`accuracy_by_relation`, because questions
    that share a pair are not independent (Linzen 2016 for the baseline).

    Returns
    -------
    pandas.DataFrame
        One row per relation: ``questions``, ``pairs``, ``accuracy`` (3CosAdd),
        ``baseline`` (nearest ``c``), ``difference`` and its ``low``/``high``
        bound. The offset is shown to help where ``low > 0``.
    """
    _check_boot(n_boot, level)
    questions = list(questions)
    add = wv.evaluate(questions)
    base = wv.evaluate(questions, method="nearest_c")
    rng = np.random.default_rng(seed)
    rows = []
    for rel, g in add.groupby("relation", sort=False):
        ok_add = g["correct"].to_numpy(dtype=float)
        ok_base = base.loc[g.index, "correct"].to_numpy(dtype=float)  # the same questions, in the same order
        n_pairs, w = _pair_bootstrap_weights(g, n_boot, rng)
        lo, hi = _weighted_quantiles(w, ok_add - ok_base, level)
        rows.append({"relation": rel, "questions": len(g), "pairs": n_pairs, "accuracy": ok_add.mean(), "baseline": ok_base.mean(),
                     "difference": ok_add.mean() - ok_base.mean(), "low": lo, "high": hi})
    return pd.DataFrame(rows, columns=["relation", "questions", "pairs", "accuracy", "baseline", "difference", "low", "high"])
