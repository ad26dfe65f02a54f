"""k-means clusters of the vocabulary and the norm stretch of each cluster (Maeda et al., 3.2 and 4).

The word embeddings of all tokens are clustered with scikit-learn's
:class:`~sklearn.cluster.KMeans` (:func:`cluster_vocab`, cached on disk); each
token gets a *type* by fixed string rules (:func:`token_type`) and each cluster
the majority type of its members. :func:`cluster_stretch` averages psi_qkv over
each cluster in every head; :func:`top_clusters` and :func:`type_map` give the
paper's Table 2 and Fig. 3, :func:`cluster_summary` its Table 3 and
:func:`recluster_centroids` its upper-level clustering (appendix A).

Token types are decided by rules, not by hand as in the paper, so counts differ
from the paper's Table 3 (which labels whole clusters manually).

Null baselines: :func:`cluster_permutation_null` compares the sorted cluster
curves (Fig. 2) with clusters of the same sizes whose members are shuffled;
:func:`feature_null` compares the best head for a token set with the best
head for random sets of the same size; :func:`cluster_stability` measures how
much the clustering moves between k-means runs (adjusted Rand index, type
counts, overlap of the clusters that hold chosen tokens).

Shapes: ``V`` vocabulary, ``D`` model dimension, ``K`` clusters, ``L`` layers,
``H`` heads. Arrays are numpy, on the CPU.
"""

from __future__ import annotations

import re
import time
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

__all__ = [
    "TYPES",
    "VocabClusters",
    "UpperClusters",
    "token_type",
    "type_names",
    "cluster_vocab",
    "find_cluster",
    "cluster_summary",
    "recluster_centroids",
    "cluster_stretch",
    "top_clusters",
    "type_map",
    "ClusterNull",
    "cluster_permutation_null",
    "feature_scores",
    "FeatureNull",
    "feature_null",
    "trained_pool",
    "best_head_support",
    "head_label",
    "feature_sets",
    "ClusterStability",
    "cluster_stability",
]

#: Token types, in the order used for codes, tables and tie-breaking.
TYPES: tuple[str, ...] = ("Words", "Subwords", "Symbols", "Numbers", "Special", "Tags")

#: KMeans settings used by :func:`cluster_vocab` (part of the cache key).
KMEANS_N_INIT = 1
KMEANS_MAX_ITER = 300
KMEANS_ALGORITHM = "lloyd"
KMEANS_THREADS = 1

_UNUSED = re.compile(r"^\[unused\d+\]$")


def _special_sets(tokenizer: Any) -> tuple[set[str], set[str]]:
    """(tags, special) token strings of a tokenizer."""
    tags: set[str] = set()
    special: set[str] = set()
    if tokenizer is not None:
        for attr in ("cls_token", "sep_token", "mask_token", "unk_token", "bos_token", "eos_token"):
            t = getattr(tokenizer, attr, None)
            if isinstance(t, str) and t:
                tags.add(t)
        pad = getattr(tokenizer, "pad_token", None)
        if isinstance(pad, str) and pad:
            special.add(pad)
    else:
        tags = {"[CLS]", "[SEP]", "[MASK]", "[UNK]"}
        special = {"[PAD]"}
    special -= tags
    return tags, special


def token_type(token: str, tokenizer: Any = None) -> str:
    """The type of one token string, by these rules, applied in order (first match wins):

    1. **Tags** – the tokenizer's sentence/mask/unknown markers: its ``cls``,
       ``sep``, ``mask``, ``unk`` (and ``bos``/``eos`` when it has them) tokens;
       for BERT ``[CLS]``, ``[SEP]``, ``[MASK]``, ``[UNK]``. Without a tokenizer,
       exactly those four strings.
    2. **Special** – the padding token (``[PAD]``) and placeholders matching
       ``[unused<digits>]`` exactly (``[unused0]`` ... ``[unused993]``).
    3. **Subwords** – a WordPiece continuation: ``"##"`` followed by at least
       one character, whatever those characters are (``##ing``, ``##9``,
       ``##°``). The bare string ``"##"`` is not a subword (rule 5 applies).
    4. **Numbers** – every character is a Unicode number (general category
       ``Nd``, ``Nl`` or ``No``): ``1990``, ``7``, ``²``, ``½``. A digit mixed
       with letters is not a number: ``1st``, ``1990s``, ``3d`` are Words.
       CJK numerals such as ``三`` are letters (category ``Lo``) -> Words.
    5. **Symbols** – every character is Unicode punctuation or a symbol
       (categories ``P*`` or ``S*``): ``!``, ``##`` (two ``#``), ``$``, ``©``,
       ``°``, ``→``.
    6. **Words** – everything else (letters in any script, letter/digit mixes).

    The empty string (and ``None``) is Special. The rules assume a WordPiece
    vocabulary (BERT, ELECTRA); for byte-level BPE (RoBERTa) they are applied
    to the raw token strings and the Subwords rule never fires.

    A Japanese tokenizer (``BertJapaneseTokenizer``: tohoku-nlp/bert-base-japanese-v3 ...) gets the
    Japanese types instead -- 漢字, ひらがな, カタカナ, 混在, ラテン文字, サブワード, 数字, 記号 ... -- by the rules
    of :func:`mixlib.japanese.token_type`; :func:`type_names` gives the list for a tokenizer.

    Parameters
    ----------
    token : str
        One vocabulary entry as the tokenizer spells it (``"##ing"``, ``"[CLS]"``).
    tokenizer : tokenizer, optional
        The tokenizer whose tags and padding token rules 1 and 2 use, and which decides between the English and
        the Japanese types. Default: BERT's ``[CLS]``, ``[SEP]``, ``[MASK]``, ``[UNK]`` and ``[PAD]``.

    Returns
    -------
    str
        One of :data:`TYPES` (or of :data:`mixlib.japanese.TYPES` for a Japanese tokenizer).

    Examples
    --------
    >>> [mixlib.token_type(t) for t in ["the", "##ing", "##9", "1990", "1st", "!", "[PAD]", "[unused7]", "[CLS]"]]
    ['Words', 'Subwords', 'Subwords', 'Numbers', 'Words', 'Symbols', 'Special', 'Special', 'Tags']
    >>> mixlib.token_type("[SEP]", enc.tokenizer)
    'Tags'
    """
    return _rule(tokenizer)(token, *_special_sets(tokenizer))


def _rule(tokenizer: Any) -> Any:
    """The typing rule of a tokenizer's vocabulary: :func:`_type_with`, or :func:`mixlib.japanese.token_type`."""
    if _is_japanese(tokenizer):
        from .japanese import token_type as ja_type

        return ja_type
    return _type_with


def _is_japanese(tokenizer: Any) -> bool:
    from .japanese import is_japanese

    return tokenizer is not None and is_japanese(tokenizer)


def type_names(tokenizer: Any = None) -> tuple[str, ...]:
    """The token types of a tokenizer's vocabulary, in table order: :data:`TYPES`, or for a Japanese
    tokenizer :data:`mixlib.japanese.TYPES`."""
    if _is_japanese(tokenizer):
        from .japanese import TYPES as JA_TYPES

        return JA_TYPES
    return TYPES


def _type_with(token: str | None, tags: set[str], special: set[str]) -> str:
    if not token:
        return "Special"
    if token in tags:
        return "Tags"
    if token in special or _UNUSED.match(token):
        return "Special"
    if token.startswith("##") and len(token) > 2:
        return "Subwords"
    cats = [unicodedata.category(c) for c in token]
    if all(c[0] == "N" for c in cats):
        return "Numbers"
    if all(c[0] in "PS" for c in cats):
        return "Symbols"
    return "Words"


@dataclass(frozen=True, eq=False)
class VocabClusters:
    """k-means clusters of a model's word embeddings, with token and cluster types.

    Attributes
    ----------
    model : str
        Name of the encoder.
    k, seed : int
        Number of clusters and the KMeans ``random_state``.
    labels : numpy.ndarray, int64, shape (V,)
        Cluster of every token.
    centroids : numpy.ndarray, float32, shape (K, D)
    tokens : tuple of str, length V
    token_types : numpy.ndarray of str, shape (V,)
        Type of every token (:func:`token_type`).
    cluster_types : numpy.ndarray of str, shape (K,)
        Majority type of each cluster's members; ties go to the type listed
        first in :data:`TYPES`.
    sizes : numpy.ndarray, int64, shape (K,)
        Members per cluster.
    norms : numpy.ndarray, float32, shape (V,)
        Euclidean norm of every word embedding.
    distances : numpy.ndarray, float32, shape (V,)
        Euclidean distance of every embedding to its cluster's centroid.
    inertia : float
        KMeans inertia (sum of squared distances).
    n_iter : int
        KMeans iterations run.
    seconds : float
        Time the k-means itself took when it was computed (0.0 when loaded
        from the cache is reflected by :attr:`from_cache`).
    from_cache : bool
        True when loaded from the disk cache.
    types : tuple of str
        The type list of this vocabulary, in table order: :data:`TYPES`, or
        :data:`mixlib.japanese.TYPES` for a Japanese tokenizer (:func:`type_names`).
    """

    model: str
    k: int
    seed: int
    labels: np.ndarray = field(repr=False)
    centroids: np.ndarray = field(repr=False)
    tokens: tuple[str, ...] = field(repr=False)
    token_types: np.ndarray = field(repr=False)
    cluster_types: np.ndarray = field(repr=False)
    sizes: np.ndarray = field(repr=False)
    norms: np.ndarray = field(repr=False)
    distances: np.ndarray = field(repr=False)
    inertia: float = 0.0
    n_iter: int = 0
    seconds: float = 0.0
    from_cache: bool = False
    types: tuple[str, ...] = TYPES

    def check_cluster(self, cluster: int) -> int:
        if not isinstance(cluster, (int, np.integer)) or isinstance(cluster, bool) or not 0 <= int(cluster) < self.k:
            raise ValueError(f"cluster={cluster!r} is out of range: there are clusters 0..{self.k - 1}.")
        return int(cluster)

    def members(self, cluster: int) -> np.ndarray:
        """Token ids of one cluster, nearest to the centroid first."""
        c = self.check_cluster(cluster)
        ids = np.flatnonzero(self.labels == c)
        return ids[np.argsort(self.distances[ids], kind="stable")]

    def samples(self, cluster: int, n: int | None = 8) -> list[str]:
        """Up to ``n`` member tokens of one cluster (all with ``None``), nearest to the centroid first."""
        ids = self.members(cluster)
        if n is not None:
            ids = ids[: int(n)]
        return [self.tokens[i] for i in ids]

    def find(self, token: str) -> int:
        """The cluster that holds ``token`` (see :func:`find_cluster`)."""
        return find_cluster(self, token)

    def table(self, clusters: Sequence[int], n: int = 8):
        """A DataFrame (cluster, type, size, tokens) of the given clusters, like the paper's Table 1."""
        import pandas as pd

        rows = []
        for c in clusters:
            c = self.check_cluster(c)
            rows.append({"cluster": c, "type": str(self.cluster_types[c]), "size": int(self.sizes[c]),
                         "tokens": ", ".join(self.samples(c, n)) + (", ..." if self.sizes[c] > n else "")})
        return pd.DataFrame(rows, columns=["cluster", "type", "size", "tokens"])


def find_cluster(clusters: VocabClusters, token: str) -> int:
    """The id of the cluster that holds the vocabulary entry ``token`` (exact string, e.g. ``"january"``, ``"##ing"``).

    Parameters
    ----------
    clusters : VocabClusters
        From :func:`cluster_vocab`.
    token : str
        A vocabulary entry, spelt exactly (case-sensitive WordPiece string).

    Returns
    -------
    int
        The cluster id, ``0 .. K-1``.

    Raises
    ------
    KeyError
        ``token`` is not in the vocabulary.

    Examples
    --------
    >>> c = mixlib.cluster_vocab(enc, k=8, max_iter=5, cache=False)  # small and uncached for the example
    >>> mixlib.find_cluster(c, "1990") == mixlib.find_cluster(c, "1991")
    True
    >>> mixlib.find_cluster(c, "January")  # entries are case-sensitive: BERT-uncased has "january"
    Traceback (most recent call last):
    ...
    KeyError: "'January' is not in the vocabulary of all-MiniLM-L6-v2 ..."
    """
    index = _token_index(clusters.tokens)
    if token not in index:
        raise KeyError(f"{token!r} is not in the vocabulary of {clusters.model} (vocabulary entries are case-sensitive "
                       f"WordPiece strings, e.g. 'january', '##ing').")
    return int(clusters.labels[index[token]])


_INDEX_CACHE: dict[int, tuple[tuple[str, ...], dict[str, int]]] = {}


def _token_index(tokens: tuple[str, ...]) -> dict[str, int]:
    hit = _INDEX_CACHE.get(id(tokens))
    if hit is not None and hit[0] is tokens:
        return hit[1]
    index: dict[str, int] = {}
    for i, t in enumerate(tokens):
        index.setdefault(t, i)
    _INDEX_CACHE.clear()
    _INDEX_CACHE[id(tokens)] = (tokens, index)
    return index


def _type_codes(tokens: Sequence[str], tokenizer: Any) -> np.ndarray:
    """Index of every token's type in :func:`type_names` (tokenizer)."""
    tags, special = _special_sets(tokenizer)
    names, rule = type_names(tokenizer), _rule(tokenizer)
    return np.array([names.index(rule(t, tags, special)) for t in tokens], dtype=np.int64)


def _majority(labels: np.ndarray, codes: np.ndarray, k: int, n_types: int = len(TYPES)) -> np.ndarray:
    """Majority type code per cluster; ties -> the smallest code (first in the type list)."""
    counts = np.bincount(labels * n_types + codes, minlength=k * n_types).reshape(k, n_types)  # (K, T)
    return counts.argmax(axis=1)  # argmax returns the first maximum


def _kmeans_key(enc_name: str, E: np.ndarray, k: int, seed: int, n_init: int, max_iter: int, threads: int | None,
                init: str = "k-means++") -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    from .cache import array_digest

    try:
        skl = version("scikit-learn")  # no import of sklearn itself: a cached reload stays fast in a fresh kernel
    except PackageNotFoundError:  # pragma: no cover - e.g. a vendored build
        import sklearn

        skl = sklearn.__version__

    key = {
        "what": "mixlib.cluster_vocab",
        "format": 1,
        "model": enc_name,
        "embeddings_sha256": array_digest(E),
        "k": int(k),
        "seed": int(seed),
        "n_init": int(n_init),
        "max_iter": int(max_iter),
        "algorithm": KMEANS_ALGORITHM,
        "threads": None if threads is None else int(threads),
        "sklearn": skl,
    }
    if init != "k-means++":  # only then: keys (and cached files) of the default runs stay as they were
        key["init"] = init
    return key


def cluster_vocab(
    enc: Any,
    k: int = 1000,
    seed: int = 0,
    *,
    cache: bool = True,
    n_init: int = KMEANS_N_INIT,
    max_iter: int = KMEANS_MAX_ITER,
    threads: int | None = KMEANS_THREADS,
    init: str = "k-means++",
    verbose: bool = False,
) -> VocabClusters:
    """k-means clustering of every word embedding of ``enc`` (the paper uses ``k=1000``).

    Parameters
    ----------
    enc : Encoder
        From :func:`mixlib.load_encoder`; its word-embedding matrix ``(V, D)`` is clustered.
    k : int, default 1000
        Number of clusters, ``1 <= k <= V``.
    seed : int, default 0
        ``random_state`` of :class:`sklearn.cluster.KMeans`.
    cache : bool, default True
        Read/write the result in mixlib's disk cache (:mod:`mixlib.cache`;
        directory ``$MIXLIB_CACHE`` or the user cache dir). The key is the
        model name, a SHA-256 of the embedding matrix, ``k``, ``seed``, the
        KMeans settings and the scikit-learn version, so changed weights or
        settings never reuse a stale result. A corrupted or foreign file is
        reported with a warning and recomputed.
    n_init : int, default 1
        KMeans initialisations (the best inertia is kept); see Notes.
    max_iter : int, default 300
        KMeans iteration limit per initialisation (scikit-learn's default).
    threads : int or None, default 1
        OpenMP/BLAS threads for the k-means (via ``threadpoolctl``); ``None``
        leaves scikit-learn's default (all cores). See Notes for why 1.
    init : {"k-means++", "random"}, default "k-means++"
        KMeans initialisation. ``"random"`` picks ``k`` embeddings at random as
        the first centres: far cheaper than the greedy k-means++ seeding (which
        is about half the time of a full run at ``k=1000``), but the run then
        needs more iterations to reach the same inertia. Meant for cheap extra
        seeds in a stability check (:func:`cluster_stability`), together with a
        small ``max_iter``; say so wherever such runs are reported.
    verbose : bool, default False
        Print one line with the k-means time (or that the cache was used).

    Returns
    -------
    VocabClusters
        Labels ``(V,)``, centroids ``(K, D)``, the type of every token and the majority type of every cluster.

    Raises
    ------
    ValueError
        ``k`` is not an integer in ``1..V``, or ``seed``, ``n_init``, ``max_iter``,
        ``threads`` are not (positive) integers, or ``init`` is neither ``"k-means++"`` nor ``"random"``.

    Notes
    -----
    KMeans settings: ``algorithm="lloyd"``, ``n_init=1``, ``max_iter=300``,
    ``random_state=seed`` (greedy k-means++ initialisation), one thread.

    * ``n_init=1``: one run over 30,522 x D vectors with 1,000 centres is about
      a teraflop of work (k-means++ seeding plus some 45 Lloyd iterations for
      the packaged model), a minute or two on two CPU cores; restarts would
      multiply that for a change of inertia that does not matter here.
    * ``algorithm="lloyd"``: ``"elkan"`` was several times slower on these
      384-dimensional vectors.
    * ``threads=1``: on a two-core machine shared with other work, scikit-learn's
      default (OpenMP and OpenBLAS threads on every core) was 9x *slower* than
      one thread (k=1000, four iterations: 587 s vs. 67 s), because the
      threads spin-wait for each other whenever one is descheduled. One
      thread also makes the floating-point summation order, hence the
      labels, independent of the machine's core count. Pass ``threads=None``
      on an idle many-core machine.

    The result is deterministic for a given seed (tests check this). A cached
    reload takes well under a second (``benchmarks/bench_clusters.py``).

    Examples
    --------
    >>> c = mixlib.cluster_vocab(enc, k=8, max_iter=5, cache=False)  # the paper: k=1000 (cached)
    >>> c.labels.shape, c.centroids.shape  # (V,), (K, D)
    ((30522,), (8, 384))
    >>> int(c.sizes.sum())
    30522
    >>> c.token_types[:3].tolist()  # [PAD], [unused0], [unused1]
    ['Special', 'Special', 'Special']
    """
    V = enc.vocab_size
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
        raise ValueError(f"k={k!r} must be an integer number of clusters in 1..{V}.")
    if not 1 <= int(k) <= V:
        raise ValueError(f"k={k} is out of range: {enc.name} has {V} word embeddings, so k must be in 1..{V}.")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise ValueError(f"seed={seed!r} must be an integer.")
    for name, val in (("n_init", n_init), ("max_iter", max_iter), ("threads", 1 if threads is None else threads)):
        if not isinstance(val, (int, np.integer)) or isinstance(val, bool) or val < 1:
            raise ValueError(f"{name}={val!r} must be a positive integer" + (" or None." if name == "threads" else "."))
    if init not in ("k-means++", "random"):
        raise ValueError(f"init={init!r}; expected 'k-means++' (the default) or 'random'.")
    k, seed, n_init, max_iter = int(k), int(seed), int(n_init), int(max_iter)
    E = np.ascontiguousarray(enc.word_embeddings().numpy(), dtype=np.float32)  # (V, D)
    D = E.shape[1]
    tokens = tuple(enc.token_strings(V))

    from . import cache as _cache

    key = _kmeans_key(enc.name, E, k, seed, n_init, max_iter, threads, init)
    with _cache.entry_lock("clusters", key, enabled=cache):  # one process computes, others wait and read
        stored = None
        if cache:
            stored = _cache.read_arrays(
                "clusters",
                key,
                {"labels": ((V,), "iu"), "centroids": ((k, D), "f"), "inertia": ((), "f"), "n_iter": ((), "iu"), "seconds": ((), "f")},
                check=lambda a: None if a["labels"].size == 0 or (a["labels"].min() >= 0 and a["labels"].max() < k)
                else "labels outside 0..k-1",
            )
        if stored is not None:
            labels = stored["labels"].astype(np.int64)
            centroids = stored["centroids"].astype(np.float32)
            inertia, n_iter, seconds, hit = float(stored["inertia"]), int(stored["n_iter"]), float(stored["seconds"]), True
            if verbose:
                print(f"[mixlib] clusters of {enc.name} (k={k}, seed={seed}) loaded from {_cache.cache_path('clusters', key)}")
        else:
            from sklearn.cluster import KMeans
            from threadpoolctl import threadpool_limits

            t0 = time.perf_counter()
            km = KMeans(n_clusters=k, init=init, n_init=n_init, max_iter=max_iter, algorithm=KMEANS_ALGORITHM, random_state=seed)
            with threadpool_limits(limits=None if threads is None else int(threads)):
                km.fit(E)
            seconds = time.perf_counter() - t0
            labels = km.labels_.astype(np.int64)
            centroids = km.cluster_centers_.astype(np.float32)
            inertia, n_iter, hit = float(km.inertia_), int(km.n_iter_), False
            if verbose:
                print(f"[mixlib] k-means of {V} embeddings of {enc.name} into k={k} clusters: {seconds:.1f} s, {n_iter} iterations")
            if cache:
                _cache.write_arrays(
                    "clusters",
                    key,
                    {"labels": labels, "centroids": centroids, "inertia": np.float64(inertia), "n_iter": np.int64(n_iter),
                     "seconds": np.float64(seconds)},
                )
    return _assemble(enc, E, tokens, labels, centroids, k=k, seed=seed, inertia=inertia, n_iter=n_iter, seconds=seconds, hit=hit)




def _assemble(enc, E, tokens, labels, centroids, *, k, seed, inertia, n_iter, seconds, hit) -> VocabClusters:
    names = type_names(enc.tokenizer)
    codes = _type_codes(tokens, enc.tokenizer)  # (V,)
    types = np.array(names)
    maj = _majority(labels, codes, k, len(names))  # (K,)
    norms = np.linalg.norm(E, axis=1).astype(np.float32)  # (V,)
    dist = np.linalg.norm(E - centroids[labels], axis=1).astype(np.float32)  # (V,)
    return VocabClusters(
        model=enc.name,
        k=k,
        seed=seed,
        labels=labels,
        centroids=centroids,
        tokens=tokens,
        token_types=types[codes],
        cluster_types=types[maj],
        sizes=np.bincount(labels, minlength=k).astype(np.int64),
        norms=norms,
        distances=dist,
        inertia=inertia,
        n_iter=n_iter,
        seconds=seconds,
        from_cache=hit,
        types=tuple(names),
    )


def cluster_summary(clusters: VocabClusters):
    """The paper's Table 3: clusters and tokens per cluster type, with a Total row.

    Every token is counted under the type of its *cluster* (majority type), as
    in the paper, where whole clusters were labelled.

    Parameters
    ----------
    clusters : VocabClusters
        From :func:`cluster_vocab`.

    Returns
    -------
    pandas.DataFrame
        Columns ``type``, ``n_clusters``, ``n_tokens``, ``tokens_per_cluster``,
        ``mean_norm`` (mean Euclidean norm of the member embeddings) and
        ``mean_dist`` (mean Euclidean distance of the members to their own
        centroid); one row per type in :attr:`VocabClusters.types` order (types with no
        cluster are kept with zeros/NaN) and a final ``Total`` row.

    Examples
    --------
    >>> c = mixlib.cluster_vocab(enc, k=8, max_iter=5, cache=False)  # small and uncached for the example
    >>> t = mixlib.cluster_summary(c)
    >>> t["type"].tolist()
    ['Words', 'Subwords', 'Symbols', 'Numbers', 'Special', 'Tags', 'Total']
    >>> t.columns.tolist()
    ['type', 'n_clusters', 'n_tokens', 'tokens_per_cluster', 'mean_norm', 'mean_dist']
    >>> int(t["n_tokens"].iloc[-1]), int(t["n_clusters"].iloc[-1])
    (30522, 8)
    """
    import pandas as pd

    tok_cluster_type = clusters.cluster_types[clusters.labels]  # (V,)
    rows = []
    for t in clusters.types:
        sel = tok_cluster_type == t
        nc = int((clusters.cluster_types == t).sum())
        nt = int(sel.sum())
        rows.append({
            "type": t,
            "n_clusters": nc,
            "n_tokens": nt,
            "tokens_per_cluster": nt / nc if nc else float("nan"),
            "mean_norm": float(clusters.norms[sel].mean()) if nt else float("nan"),
            "mean_dist": float(clusters.distances[sel].mean()) if nt else float("nan"),
        })
    V = len(clusters.labels)
    rows.append({
        "type": "Total",
        "n_clusters": clusters.k,
        "n_tokens": V,
        "tokens_per_cluster": V / clusters.k,
        "mean_norm": float(clusters.norms.mean()),
        "mean_dist": float(clusters.distances.mean()),
    })
    return pd.DataFrame(rows)


@dataclass(frozen=True, eq=False)
class UpperClusters:
    """Upper-level k-means of the cluster centroids (paper appendix A).

    Attributes
    ----------
    labels : numpy.ndarray, int64, shape (K,)
        Upper cluster of every (lower) cluster.
    centroids : numpy.ndarray, float32, shape (k, D)
    table : pandas.DataFrame
        Rows = upper clusters, columns = the clusters' types (:attr:`VocabClusters.types`): how many lower clusters
        of each majority type every upper cluster holds, plus ``n_clusters``,
        ``n_tokens`` and ``main_type`` (its most frequent type).
    """

    labels: np.ndarray = field(repr=False)
    centroids: np.ndarray = field(repr=False)
    table: Any = field(repr=False)
    k: int = 7
    seed: int = 0


def recluster_centroids(clusters: VocabClusters, k: int = 7, seed: int = 0) -> UpperClusters:
    """Cluster the ``K`` centroids again into ``k`` upper clusters (KMeans, ``n_init=10``).

    Parameters
    ----------
    clusters : VocabClusters
        From :func:`cluster_vocab`; its ``(K, D)`` centroids are clustered.
    k : int, default 7
        Number of upper clusters, ``1 <= k <= K`` (the paper's appendix A uses 7).
    seed : int, default 0
        ``random_state`` of :class:`sklearn.cluster.KMeans`.

    Returns
    -------
    UpperClusters
        The upper cluster of every cluster (``labels``, ``(K,)``), the ``(k, D)`` centroids and ``table``:
        per upper cluster, how many clusters of each type it holds, ``n_clusters``, ``n_tokens`` and
        ``main_type``.

    Raises
    ------
    ValueError
        ``k`` is not an integer in ``1..K``.

    Examples
    --------
    >>> c = mixlib.cluster_vocab(enc, k=8, max_iter=5, cache=False)  # small and uncached for the example
    >>> u = mixlib.recluster_centroids(c, k=3)
    >>> u.labels.shape, u.centroids.shape
    ((8,), (3, 384))
    >>> u.table.columns.tolist()[-3:]
    ['n_clusters', 'n_tokens', 'main_type']
    >>> int(u.table["n_tokens"].sum())
    30522
    """
    import pandas as pd
    from sklearn.cluster import KMeans

    K = clusters.k
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or not 1 <= int(k) <= K:
        raise ValueError(f"k={k!r} is out of range: there are {K} centroids to cluster, so k must be an integer in 1..{K}.")
    km = KMeans(n_clusters=int(k), n_init=10, random_state=int(seed)).fit(clusters.centroids)
    up = km.labels_.astype(np.int64)  # (K,)
    names = clusters.types
    codes = np.array([names.index(t) for t in clusters.cluster_types], dtype=np.int64)
    counts = np.bincount(up * len(names) + codes, minlength=int(k) * len(names)).reshape(int(k), len(names))
    table = pd.DataFrame(counts, columns=list(names))
    table.index.name = "upper"
    table["n_clusters"] = counts.sum(axis=1)
    table["n_tokens"] = np.bincount(up, weights=clusters.sizes, minlength=int(k)).astype(np.int64)
    table["main_type"] = [names[i] for i in counts.argmax(axis=1)]
    return UpperClusters(labels=up, centroids=km.cluster_centers_.astype(np.float32), table=table, k=int(k), seed=int(seed))


def cluster_stretch(stretch: Any, clusters: VocabClusters, *, which: str = "qkv") -> np.ndarray:
    """Mean psi of each cluster in every head: ``(L, H, K)`` float32.

    Parameters
    ----------
    stretch : Stretch
        From :func:`mixlib.norm_stretch` on the word embeddings (its last axis
        must be the vocabulary the clusters were made from). An ``(L, H, V)`` array is accepted too.
    clusters : VocabClusters
        From :func:`cluster_vocab` on the same model.
    which : {"qkv", "q", "k", "v"}, default "qkv"
        Which psi to average (the paper uses psi_qkv).

    Returns
    -------
    numpy.ndarray, shape (L, H, K)
        ``out[l, h, c]`` = mean of psi over the tokens of cluster ``c``; axis 0
        follows ``stretch.layers``. NaN psi values (zero vectors) are left out
        of the mean; a cluster with no finite value gets NaN.

    Raises
    ------
    ValueError
        psi is not ``(L, H, V)``, its ``V`` is not the clusters' vocabulary size, or ``which`` is unknown.

    Examples
    --------
    >>> c = mixlib.cluster_vocab(enc, k=8, max_iter=5, cache=False)  # small and uncached for the example
    >>> cs = mixlib.cluster_stretch(mixlib.norm_stretch(enc, layers=[0]), c)
    >>> cs.shape  # (L, H, K)
    (1, 12, 8)
    """
    import torch

    psi = np.asarray(stretch.get(which) if hasattr(stretch, "get") else stretch)
    if psi.ndim != 3:
        raise ValueError(f"expected psi of shape (L, H, V), got {psi.shape}.")
    L, H, V = psi.shape
    if V != len(clusters.labels):
        raise ValueError(f"stretch has {V} vectors but the clusters cover {len(clusters.labels)} tokens; "
                         "compute norm_stretch on the word embeddings of the same model.")
    t = torch.from_numpy(np.ascontiguousarray(psi, dtype=np.float32)).reshape(L * H, V)  # (L*H, V)
    finite = torch.isfinite(t)
    vals = torch.where(finite, t, torch.zeros((), dtype=t.dtype)).double()
    lab = torch.from_numpy(clusters.labels.astype(np.int64))
    sums = torch.zeros(L * H, clusters.k, dtype=torch.float64).index_add_(1, lab, vals)  # (L*H, K)
    cnts = torch.zeros(L * H, clusters.k, dtype=torch.float64).index_add_(1, lab, finite.double())  # (L*H, K)
    mean = torch.where(cnts > 0, sums / cnts.clamp_min(1), torch.full_like(sums, float("nan")))
    return mean.float().reshape(L, H, clusters.k).numpy()


def _check_lh(cs: np.ndarray, layer: int, head: int) -> tuple[int, int]:
    L, H, _ = cs.shape
    if not isinstance(layer, (int, np.integer)) or isinstance(layer, bool) or not 0 <= int(layer) < L:
        raise ValueError(f"layer={layer!r} is out of range: the cluster stretch has layers 0..{L - 1} (0-based).")
    if not isinstance(head, (int, np.integer)) or isinstance(head, bool) or not 0 <= int(head) < H:
        raise ValueError(f"head={head!r} is out of range: the cluster stretch has heads 0..{H - 1} (0-based).")
    return int(layer), int(head)


def _as_cs(cs: Any, clusters: VocabClusters) -> np.ndarray:
    arr = np.asarray(cs.detach().cpu().numpy() if hasattr(cs, "detach") else cs)
    if arr.ndim != 3 or arr.shape[2] != clusters.k:
        raise ValueError(f"expected a cluster stretch of shape (L, H, {clusters.k}) from cluster_stretch(), got {arr.shape}.")
    return arr


def _rank(row: np.ndarray) -> np.ndarray:
    """Indices sorted by value, largest first, NaN last, ties by index."""
    return np.argsort(np.where(np.isnan(row), np.inf, -row), kind="stable")


def top_clusters(cs: Any, clusters: VocabClusters, layer: int, head: int, n: int = 5, *, samples: int = 6):
    """The ``n`` clusters with the largest mean psi in one head (the paper's Table 2).

    Parameters
    ----------
    cs : numpy.ndarray, shape (L, H, K)
        From :func:`cluster_stretch`.
    clusters : VocabClusters
        The clusters ``cs`` was computed on.
    layer, head : int
        0-based indices into ``cs`` (for a Stretch computed on a subset of
        layers, the position in ``stretch.layers``).
    n : int, default 5
        Number of clusters to list, largest mean psi first.
    samples : int, default 6
        Member tokens shown per cluster (nearest to the centroid first).

    Returns
    -------
    pandas.DataFrame
        Columns ``cluster``, ``type``, ``size``, ``tokens`` (comma-separated
        samples, ``...`` when there are more), ``psi``.

    Raises
    ------
    ValueError
        ``cs`` is not ``(L, H, K)`` for these clusters, ``layer`` or ``head`` is out of range, or ``n`` is not
        a positive integer.

    Examples
    --------
    >>> c = mixlib.cluster_vocab(enc, k=8, max_iter=5, cache=False)  # small and uncached for the example
    >>> cs = mixlib.cluster_stretch(mixlib.norm_stretch(enc, layers=[0]), c)
    >>> t = mixlib.top_clusters(cs, c, layer=0, head=0, n=2, samples=3)
    >>> t.columns.tolist()
    ['cluster', 'type', 'size', 'tokens', 'psi']
    >>> len(t), bool(t["psi"].is_monotonic_decreasing)
    (2, True)
    """
    import pandas as pd

    arr = _as_cs(cs, clusters)
    l, h = _check_lh(arr, layer, head)
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n={n!r}; expected a positive integer.")
    order = _rank(arr[l, h])[: int(n)]
    return pd.DataFrame({
        "cluster": order.astype(np.int64),
        "type": [str(clusters.cluster_types[c]) for c in order],
        "size": clusters.sizes[order],
        "tokens": [", ".join(clusters.samples(c, samples)) + (", ..." if clusters.sizes[c] > samples else "") for c in order],
        "psi": arr[l, h, order].astype(np.float64),
    })


def type_map(cs: Any, clusters: VocabClusters, top: int = 3):
    """Types of the ``top`` clusters with the largest mean psi, for every head (the paper's Fig. 3).

    Parameters
    ----------
    cs : numpy.ndarray, shape (L, H, K)
        From :func:`cluster_stretch`.
    clusters : VocabClusters
        The clusters ``cs`` was computed on.
    top : int, default 3
        Clusters per head, ``1 <= top <= K``.

    Returns
    -------
    pandas.DataFrame
        Index ``layer`` (0-based), columns ``head`` (0-based); each cell is a
        tuple of ``top`` type names, largest psi first.

    Raises
    ------
    ValueError
        ``cs`` is not ``(L, H, K)`` for these clusters, or ``top`` is not an integer in ``1..K``.

    Examples
    --------
    >>> c = mixlib.cluster_vocab(enc, k=8, max_iter=5, cache=False)  # small and uncached for the example
    >>> cs = mixlib.cluster_stretch(mixlib.norm_stretch(enc, layers=[0]), c)
    >>> m = mixlib.type_map(cs, c, top=2)
    >>> m.shape  # (L, H)
    (1, 12)
    >>> len(m.loc[0, 0]), set(m.loc[0, 0]) <= set(mixlib.TYPES)
    (2, True)
    """
    import pandas as pd

    arr = _as_cs(cs, clusters)
    if not isinstance(top, (int, np.integer)) or isinstance(top, bool) or not 1 <= top <= clusters.k:
        raise ValueError(f"top={top!r}; expected an integer in 1..{clusters.k}.")
    L, H, K = arr.shape
    flat = arr.reshape(L * H, K)
    key = np.where(np.isnan(flat), np.inf, -flat)
    order = np.argsort(key, axis=1, kind="stable")[:, : int(top)]  # (L*H, top)
    names = clusters.cluster_types[order]  # (L*H, top)
    cells = np.empty(L * H, dtype=object)
    for i, row in enumerate(names):
        cells[i] = tuple(str(x) for x in row)
    return pd.DataFrame(cells.reshape(L, H), index=pd.RangeIndex(L, name="layer"), columns=pd.RangeIndex(H, name="head"))


# --- null baselines -------------------------------------------------------------------------------


def _psi_lhv(psi: Any) -> np.ndarray:
    arr = np.asarray(psi.get("qkv") if hasattr(psi, "get") and not isinstance(psi, dict) else psi)
    if arr.ndim != 3:
        raise ValueError(f"expected psi of shape (L, H, V) (a Stretch or its psi_qkv), got {arr.shape}.")
    return arr


def _shape_stats(curves: np.ndarray, K: int) -> dict[str, np.ndarray]:
    """Shape statistics of cluster curves ``(..., K)`` sorted in descending order (NaN-free)."""
    med = np.median(curves, axis=-1)
    n_top = max(1, K // 100)
    low = curves[..., K - K // 2 :] if K >= 2 else curves  # the lower half (curves are sorted descending)
    return {
        "peak_ratio": curves[..., 0] / med,
        "top1pct_ratio": curves[..., :n_top].mean(axis=-1) / med,
        "tail_cv": low.std(axis=-1) / low.mean(axis=-1),
    }


@dataclass(frozen=True, eq=False)
class ClusterNull:
    """Cluster curves of the real clustering against clusters of the same sizes with shuffled members.

    Attributes
    ----------
    observed : dict of str to numpy.ndarray, shape (L, H)
        Shape statistics of every head's curve (cluster mean psi sorted in
        descending order): ``peak_ratio`` (largest cluster mean / median
        cluster mean), ``top1pct_ratio`` (mean of the top 1 % of clusters /
        median) and ``tail_cv`` (coefficient of variation of the lower half).
    null : dict of str to numpy.ndarray, shape (n_perm, L, H)
        The same statistics for every permutation.
    percentile : dict of str to numpy.ndarray, shape (L, H)
        Share (in percent) of permutations whose statistic is below the
        observed one.
    curve : numpy.ndarray, shape (L, H, K)
        The observed sorted curve.
    null_median, null_low, null_high : numpy.ndarray, shape (L, H, K)
        Median and the 2.5 % / 97.5 % quantiles of the permuted sorted curves
        at every rank.
    n_perm, seed : int
    """

    observed: dict = field(repr=False)
    null: dict = field(repr=False)
    percentile: dict = field(repr=False)
    curve: np.ndarray = field(repr=False)
    null_median: np.ndarray = field(repr=False)
    null_low: np.ndarray = field(repr=False)
    null_high: np.ndarray = field(repr=False)
    n_perm: int = 0
    seed: int = 0

    def summary(self, layers: Sequence[int] | None = None):
        """Per layer: the mean over heads of each observed statistic, of its null median and of its percentile."""
        import pandas as pd

        L = self.curve.shape[0]
        idx = pd.Index(list(layers) if layers is not None else range(L), name="layer")
        cols = {}
        for name, obs in self.observed.items():
            cols[(name, "observed")] = obs.mean(axis=1)
            cols[(name, "null median")] = np.median(self.null[name], axis=0).mean(axis=1)
            cols[(name, "percentile")] = self.percentile[name].mean(axis=1)
        out = pd.DataFrame(cols, index=idx)
        out.columns = pd.MultiIndex.from_tuples(out.columns, names=["statistic", ""])
        return out


def cluster_permutation_null(psi: Any, clusters: VocabClusters, n_perm: int = 100, seed: int = 0) -> ClusterNull:
    """Null distribution of the cluster curves (the paper's Fig. 2) under random cluster membership.

    Every permutation keeps the cluster sizes and assigns the tokens to the
    clusters at random: with ``perm = rng.permutation(V)`` (``rng =
    numpy.random.default_rng(seed)``, one call per permutation), cluster
    ``c`` receives the tokens ``perm[start_c : start_c + size_c]`` where the
    clusters are laid out in id order. The cluster means are then sorted in
    descending order as for the real clusters.

    Parameters
    ----------
    psi : Stretch or numpy.ndarray, shape (L, H, V)
        psi_qkv (or a normalised psi) of every token; a Stretch gives its
        ``psi_qkv``. NaN values (zero vectors) are not allowed here.
    clusters : VocabClusters
        From :func:`cluster_vocab` on the same vocabulary.
    n_perm : int, default 100
        Number of permutations.
    seed : int, default 0
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    ClusterNull
        The observed shape statistics of every head's curve, their null distributions and percentiles, and
        the observed and permuted sorted curves ``(L, H, K)``.

    Raises
    ------
    ValueError
        psi is not ``(L, H, V)`` for the clusters' vocabulary or holds NaN, ``n_perm`` is not a positive
        integer, or a cluster is empty.

    Notes
    -----
    Vectorised: each permutation is one gather of the ``(L*H, V)`` matrix and
    one :func:`numpy.add.reduceat`; 100 permutations of 72 heads x 30,522
    tokens take a few seconds on one core.

    Examples
    --------
    >>> c = mixlib.cluster_vocab(enc, k=8, max_iter=5, cache=False)  # small and uncached for the example
    >>> null = mixlib.cluster_permutation_null(mixlib.norm_stretch(enc, layers=[0]), c, n_perm=20)
    >>> sorted(null.observed)
    ['peak_ratio', 'tail_cv', 'top1pct_ratio']
    >>> null.percentile["peak_ratio"].shape, null.null_median.shape  # (L, H), (L, H, K)
    ((1, 12), (1, 12, 8))
    """
    arr = _psi_lhv(psi)
    L, H, V = arr.shape
    if V != len(clusters.labels):
        raise ValueError(f"psi has {V} vectors but the clusters cover {len(clusters.labels)} tokens.")
    if not np.all(np.isfinite(arr)):
        raise ValueError("psi contains NaN (zero vectors); drop those tokens or use cluster_stretch for the observed curve only.")
    if not isinstance(n_perm, (int, np.integer)) or isinstance(n_perm, bool) or n_perm < 1:
        raise ValueError(f"n_perm={n_perm!r}; expected a positive integer.")
    K = clusters.k
    sizes = clusters.sizes
    if np.any(sizes == 0):
        raise ValueError("some clusters are empty; the permutation null needs every cluster to hold a token.")
    flat = np.ascontiguousarray(arr.reshape(L * H, V), dtype=np.float32)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])

    def sorted_means(cols: np.ndarray) -> np.ndarray:
        m = np.add.reduceat(flat[:, cols], starts, axis=1, dtype=np.float64) / sizes  # (L*H, K), sums in float64
        return -np.sort(-m, axis=1)

    order = np.argsort(clusters.labels, kind="stable")  # tokens laid out cluster by cluster = the real clustering
    obs_curve = sorted_means(order)
    obs = _shape_stats(obs_curve, K)
    rng = np.random.default_rng(int(seed))
    curves = np.empty((int(n_perm), L * H, K), dtype=np.float32)
    for i in range(int(n_perm)):
        curves[i] = sorted_means(rng.permutation(V))
    nul = _shape_stats(curves, K)
    pct = {k: 100.0 * (nul[k] < obs[k][None]).mean(axis=0) for k in obs}
    q = np.quantile(curves, [0.5, 0.025, 0.975], axis=0)  # (3, L*H, K)
    return ClusterNull(
        observed={k: v.reshape(L, H) for k, v in obs.items()},
        null={k: v.reshape(-1, L, H) for k, v in nul.items()},
        percentile={k: v.reshape(L, H) for k, v in pct.items()},
        curve=obs_curve.reshape(L, H, K),
        null_median=q[0].reshape(L, H, K),
        null_low=q[1].reshape(L, H, K),
        null_high=q[2].reshape(L, H, K),
        n_perm=int(n_perm),
        seed=int(seed),
    )


def feature_scores(psi: Any, ids: Sequence[int], *, relative: bool = False) -> np.ndarray:
    """Mean psi of a token set in every head: ``(L, H)``.

    Parameters
    ----------
    psi : Stretch or numpy.ndarray, shape (L, H, V)
    ids : sequence of int
        Token ids of the set.
    relative : bool, default False
        Divide each head's mean by the median psi of that head over all
        tokens (NaN left out): "how much more than a typical token". The
        result is then the same for raw and normalised psi (a per-head scale
        cancels). Without it, pass a normalised psi
        (:func:`mixlib.stretch.normalize_stretch`) to compare heads.

    Returns
    -------
    numpy.ndarray, shape (L, H)
        The mean psi of the set in every head (divided by the head's median with ``relative=True``).

    Raises
    ------
    ValueError
        ``ids`` is empty or holds an id outside ``0..V-1``, or psi is not ``(L, H, V)``.

    Examples
    --------
    >>> import numpy as np
    >>> psi = np.ones((1, 2, 5)); psi[0, 1, :2] = 3.0  # head 1 stretches tokens 0 and 1
    >>> mixlib.feature_scores(psi, [0, 1]).tolist()
    [[1.0, 3.0]]
    >>> s = mixlib.normalize_stretch(mixlib.norm_stretch(enc, layers=[0]), enc)
    >>> mixlib.feature_scores(s, mixlib.feature_sets(enc.tokenizer)["月だけ"]).shape
    (1, 12)
    """
    arr = _psi_lhv(psi)
    idx = np.asarray(list(ids), dtype=np.int64)
    if idx.ndim != 1 or idx.size == 0:
        raise ValueError("ids must be a non-empty list of token ids.")
    if idx.min() < 0 or idx.max() >= arr.shape[2]:
        raise ValueError(f"token ids must lie in 0..{arr.shape[2] - 1}; got {idx.min()}..{idx.max()}.")
    out = arr[:, :, idx].mean(axis=2)
    return out / np.nanmedian(arr, axis=2) if relative else out


@dataclass(frozen=True, eq=False)
class FeatureNull:
    """The best head for a token set, against the best head for random token sets of the same size.

    Attributes
    ----------
    scores : numpy.ndarray, shape (L, H)
        :func:`feature_scores` of the set.
    best : float
        Largest score over all heads.
    best_head : tuple of int
        ``(layer index, head)`` of ``best`` (index into the first axis of psi).
    null_best : numpy.ndarray, shape (n_draws,)
        Largest score over all heads for each random set.
    percentile : float
        Share (percent) of random sets whose best score is below ``best``.
    p_value : float
        ``(1 + #{null_best >= best}) / (1 + n_draws)``.
    size, n_draws, seed : int
    """

    scores: np.ndarray = field(repr=False)
    best: float
    best_head: tuple[int, int]
    null_best: np.ndarray = field(repr=False)
    percentile: float
    p_value: float
    size: int
    n_draws: int
    seed: int

    def passes(self, level: float = 95.0) -> bool:
        """True when the set's best head beats at least ``level`` percent of the random sets."""
        return bool(self.percentile >= level)

    def lift(self) -> float:
        """How much the set's best head beats random sets of the same size: ``best - median(null_best)``, in the
        score's own units (with ``relative=True``, a ratio to the head's median).

        A rough effect size. Unlike a count of sets that pass, or the distance in units of the null's spread (which
        narrows like 1/sqrt(size)), it does not grow with the set's size for the same lift per token (tested for
        sets of 20 and 2,000 tokens). It is not free of the size either: for a small set, the best of many heads
        over a few random tokens pushes the null's median up (the lift comes out smaller), and for a set that holds
        much of the vocabulary the random sets share its tokens (the lift shrinks towards 0). Compare it between
        sets of similar size.
        """
        return float(self.best - np.median(self.null_best))

    def candidates(self, wins: Any, *, level: float = 95.0, min_wins: float = 0.05) -> list[tuple[int, int]]:
        """The heads a reading of the set keeps, most wins first: ``(layer index, head)``.

        ``wins`` is :func:`best_head_support` of the same set (``(L, H)`` shares). A head is kept when it is the
        best in at least ``min_wins`` of the resamplings; when the set :meth:`passes` at ``level``, only if its own
        score also reaches the null's ``level`` percentile (a head that wins often but whose score chance reaches
        would be read as picking up the feature without support).
        """
        wins = np.asarray(wins)
        if wins.shape != self.scores.shape:
            raise ValueError(f"wins has shape {wins.shape}; expected {self.scores.shape}, best_head_support of the same set.")
        order = np.argsort(-wins, axis=None, kind="stable")
        cands = [tuple(int(i) for i in np.unravel_index(j, wins.shape)) for j in order if wins.flat[j] >= min_wins]
        if self.passes(level):
            q_level = float(np.percentile(self.null_best, level))
            cands = [c for c in cands if self.scores[c] >= q_level]
        return cands


def head_label(heads: Sequence[tuple[int, int]], layers: Sequence[int]) -> str:
    """``L3-H2/H5`` for heads of one layer, ``L3-H2 / L4-H1`` otherwise: ``heads`` as ``(layer index, head)``."""
    if not heads:
        return "-"
    if len({li for li, _ in heads}) == 1:
        return f"L{layers[heads[0][0]]}-H" + "/H".join(str(h) for _, h in heads)
    return " / ".join(f"L{layers[li]}-H{h}" for li, h in heads)


def trained_pool(tokenizer: Any) -> np.ndarray:
    """The ids a random token set should be drawn from: the whole vocabulary but its Special tokens.

    Special tokens (:func:`token_type`: the padding token and the reserved placeholders ``[unused0]`` ...,
    ``<unused0>`` ... in the Tohoku vocabularies; 特殊 for a Japanese tokenizer) never occur in pretraining text, so
    their embeddings stay near where training started, and their ψ says nothing about what a head does with words. A
    random-set null that draws them compares a feature with a pool no feature is drawn from. The tags (``[CLS]``,
    ``[SEP]`` ...) stay: the model sees them in every input.

    Parameters
    ----------
    tokenizer : tokenizer
        The model's tokenizer (``enc.tokenizer``); its whole vocabulary is typed with :func:`token_type`.

    Returns
    -------
    numpy.ndarray of int64, sorted
        Ids in ``0 .. tokenizer.vocab_size - 1``.

    Examples
    --------
    >>> pool = mixlib.trained_pool(enc.tokenizer)
    >>> len(pool), enc.tokenizer.vocab_size  # [PAD] and the 994 placeholders [unused0] ... left out
    (29527, 30522)
    >>> enc.tokenizer.convert_tokens_to_ids("[PAD]") in pool, enc.tokenizer.convert_tokens_to_ids("[CLS]") in pool
    (False, True)
    """
    rule, (tags, special) = _rule(tokenizer), _special_sets(tokenizer)
    tokens = tokenizer.convert_ids_to_tokens(list(range(int(tokenizer.vocab_size))))
    untrained = "特殊" if _is_japanese(tokenizer) else "Special"
    return np.array([i for i, t in enumerate(tokens) if rule(t, tags, special) != untrained], dtype=np.int64)


def feature_null(psi: Any, ids: Sequence[int], n_draws: int = 100, seed: int = 0, pool: Sequence[int] | None = None,
                 *, relative: bool = False) -> FeatureNull:
    """Is the best head for a token set better than the best head for random sets of the same size?

    Every "head h selects feature X" claim picks the head with the largest
    score for the set X out of all ``L * H`` heads; with that many heads some
    head scores high for any set. This draws ``n_draws`` random sets of the
    same size (without replacement, from ``pool``; ``rng =
    numpy.random.default_rng(seed)``, one ``rng.choice(pool, size,
    replace=False)`` per draw) and records the best score over all heads of
    each.

    Parameters
    ----------
    psi : Stretch or numpy.ndarray, shape (L, H, V)
        Use a normalised psi (:func:`mixlib.stretch.normalize_stretch`) so that
        heads are comparable.
    ids : sequence of int
        Token ids of the set (duplicates are kept as given).
    n_draws : int, default 100
        Number of random sets.
    seed : int, default 0
        Seed of ``numpy.random.default_rng``.
    pool : sequence of int, optional
        Token ids random sets are drawn from (default: every token whose psi is
        finite in all heads).
    relative : bool, default False
        Score = mean over the set / the head's median over all tokens (see
        :func:`feature_scores`), for the set and every random set alike.

    Returns
    -------
    FeatureNull
        The set's scores ``(L, H)``, its best head and score, the best score of every random set, the
        percentile and the p-value.

    Raises
    ------
    ValueError
        ``ids`` is empty or out of range, ``n_draws`` is not a positive integer, a ``pool`` id is out of range,
        or the pool holds fewer tokens than the set.

    Examples
    --------
    >>> s = mixlib.normalize_stretch(mixlib.norm_stretch(enc, layers=[0, 1]), enc)
    >>> months = mixlib.feature_sets(enc.tokenizer)["月だけ"]
    >>> f = mixlib.feature_null(s, months, n_draws=50, pool=mixlib.trained_pool(enc.tokenizer))
    >>> f.size, f.scores.shape, f.null_best.shape
    (12, (2, 12), (50,))
    >>> f.best_head  # (layer index, head)
    (1, 10)
    """
    arr = _psi_lhv(psi)
    L, H, V = arr.shape
    scores = feature_scores(arr, ids, relative=relative)
    n = len(list(ids))
    if not isinstance(n_draws, (int, np.integer)) or isinstance(n_draws, bool) or n_draws < 1:
        raise ValueError(f"n_draws={n_draws!r}; expected a positive integer.")
    if pool is None:
        pool_ids = np.flatnonzero(np.isfinite(arr).all(axis=(0, 1)))
    else:
        pool_ids = np.unique(np.asarray(list(pool), dtype=np.int64))
        if pool_ids.size and (pool_ids.min() < 0 or pool_ids.max() >= V):
            raise ValueError(f"pool ids must lie in 0..{V - 1}.")
    if pool_ids.size < n:
        raise ValueError(f"the pool has {pool_ids.size} tokens, fewer than the set's {n}; give a larger pool.")
    flat = arr.reshape(L * H, V)
    denom = np.nanmedian(flat, axis=1) if relative else np.ones(L * H)
    rng = np.random.default_rng(int(seed))
    null = np.empty(int(n_draws))
    for i in range(int(n_draws)):
        draw = rng.choice(pool_ids, size=n, replace=False)
        null[i] = (flat[:, draw].mean(axis=1) / denom).max()
    flat_best = int(np.nanargmax(scores))
    best = float(scores.reshape(-1)[flat_best])
    return FeatureNull(
        scores=scores,
        best=best,
        best_head=(flat_best // H, flat_best % H),
        null_best=null,
        percentile=float(100.0 * np.mean(null < best)),
        p_value=float((1 + np.sum(null >= best)) / (1 + n_draws)),
        size=n,
        n_draws=int(n_draws),
        seed=int(seed),
    )


#: The word lists of chapter 11's feature search (after Maeda et al.'s Table 2: years and months,
#: function words, verbs with their inflected forms).
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
FUNCTION_WORDS = ("the", "a", "an", "of", "to", "in", "for", "on", "with", "by", "at", "from", "and", "or", "but",
                  "as", "is", "are", "was", "were", "it", "that", "this", "he", "she", "they", "we", "i", "you",
                  "his", "her", "their", "its", "him", "them")
VERB_FORMS = (("teach", "teaches", "taught", "teaching"), ("keep", "keeps", "kept", "keeping"),
              ("announce", "announces", "announced", "announcing"), ("welcome", "welcomes", "welcomed", "welcoming"),
              ("write", "writes", "wrote", "written", "writing"), ("give", "gives", "gave", "given", "giving"),
              ("take", "takes", "took", "taken", "taking"), ("speak", "speaks", "spoke", "spoken", "speaking"),
              ("build", "builds", "built", "building"), ("describe", "describes", "described", "describing"),
              ("receive", "receives", "received", "receiving"), ("choose", "chooses", "chose", "chosen", "choosing"),
              ("bring", "brings", "brought", "bringing"), ("drive", "drives", "drove", "driven", "driving"),
              ("sell", "sells", "sold", "selling"), ("win", "wins", "won", "winning"))


def feature_sets(tokenizer: Any) -> dict[str, list[int]]:
    """The token sets of the feature search, as ids of ``tokenizer``'s vocabulary.

    ``年だけ`` is every whole-word vocabulary entry of four digits from 1000 to
    2099; ``月だけ`` the month names, ``機能語`` :data:`FUNCTION_WORDS`,
    ``動詞の活用形`` every form in :data:`VERB_FORMS`, and ``年・月`` the years
    followed by the months. Words missing from the vocabulary are left out.

    A Japanese tokenizer gets the Japanese sets instead (:func:`mixlib.japanese.feature_sets`: 年だけ, 曜日, 助詞,
    助動詞, 音便形): the English lists would match a few Latin words of its vocabulary, not the classes they stand for.

    Parameters
    ----------
    tokenizer : tokenizer
        The model's tokenizer (``enc.tokenizer``).

    Returns
    -------
    dict
        Name → list of token ids, in the order above (``年・月`` first).

    Examples
    --------
    >>> sets = mixlib.feature_sets(enc.tokenizer)
    >>> list(sets)
    ['年・月', '年だけ', '月だけ', '機能語', '動詞の活用形']
    >>> enc.tokenizer.convert_ids_to_tokens(sets["月だけ"][:3])
    ['january', 'february', 'march']
    """
    if _is_japanese(tokenizer):
        from .japanese import feature_sets as ja_sets

        return ja_sets(tokenizer)
    vocab = tokenizer.get_vocab()
    years = sorted(t for t in vocab if t.isdigit() and len(t) == 4 and 1000 <= int(t) <= 2099)
    words = {
        "年・月": years + list(MONTHS),
        "年だけ": years,
        "月だけ": list(MONTHS),
        "機能語": list(FUNCTION_WORDS),
        "動詞の活用形": [form for forms in VERB_FORMS for form in forms],
    }
    return {name: [vocab[t] for t in toks if t in vocab] for name, toks in words.items()}


def best_head_support(psi: Any, ids: Sequence[int], *, n_boot: int = 1000, seed: int = 0,
                      relative: bool = False) -> np.ndarray:
    """How often each head is the best for a token set when the set is resampled: ``(L, H)`` shares.

    :func:`feature_null` asks whether *some* head scores above chance for a
    set; it does not say *which* head, and two heads with nearly equal
    scores are not told apart by their order. This bootstraps the set
    (``n_boot`` resamples of its tokens with replacement: ``rng =
    numpy.random.default_rng(seed)``, counts from ``rng.multinomial(n,
    [1/n] * n, size=n_boot)``), takes the best head of each resample by
    :func:`feature_scores`, and returns the share of resamples each head wins.
    A head that wins, say, 95 % or more is *the* head for the set; when two
    heads share the wins, the reading is "one of these heads".

    Parameters
    ----------
    psi : Stretch or numpy.ndarray, shape (L, H, V)
        Use a normalised psi (:func:`mixlib.stretch.normalize_stretch`) so that heads are comparable.
    ids : sequence of int
        Token ids of the set.
    n_boot : int, default 1000
        Number of resamples of the set.
    seed : int, default 0
        Seed of ``numpy.random.default_rng``.
    relative : bool, default False
        As in :func:`feature_scores`.

    Returns
    -------
    numpy.ndarray, shape (L, H)
        Shares that sum to 1.

    Raises
    ------
    ValueError
        ``ids`` is empty or out of range, psi is not ``(L, H, V)``, or ``n_boot`` is not a positive integer.

    Examples
    --------
    >>> import numpy as np
    >>> psi = np.ones((1, 2, 5)); psi[0, 1, :2] = 3.0  # head 1 stretches tokens 0 and 1
    >>> mixlib.best_head_support(psi, [0, 1], n_boot=50).tolist()
    [[0.0, 1.0]]
    """
    arr = _psi_lhv(psi)
    L, H, _ = arr.shape
    feature_scores(arr, ids)  # validates ids
    idx = np.asarray(list(ids), dtype=np.int64)
    if not isinstance(n_boot, (int, np.integer)) or isinstance(n_boot, bool) or n_boot < 1:
        raise ValueError(f"n_boot={n_boot!r}; expected a positive integer.")
    n = idx.size
    sub = arr[:, :, idx].reshape(L * H, n).astype(np.float64)  # (L*H, n)
    denom = np.nanmedian(arr.reshape(L * H, -1), axis=1) if relative else np.ones(L * H)
    counts = np.random.default_rng(int(seed)).multinomial(n, np.full(n, 1.0 / n), size=int(n_boot))  # (n_boot, n)
    means = (counts @ sub.T) / n / denom  # (n_boot, L*H)
    wins = np.argmax(np.where(np.isnan(means), -np.inf, means), axis=1)
    return (np.bincount(wins, minlength=L * H) / int(n_boot)).reshape(L, H)


# --- stability over k-means seeds -----------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ClusterStability:
    """Agreement of several clusterings of the same vocabulary.

    Attributes
    ----------
    ari : pandas.DataFrame
        Adjusted Rand index between every pair of runs (1 on the diagonal).
    type_counts : pandas.DataFrame
        Rows = runs, columns = the runs' types: clusters of each majority type.
    token_counts : pandas.DataFrame
        Rows = runs, columns = the runs' types: tokens in clusters of each type.
    anchors : pandas.DataFrame
        Rows = anchor tokens, columns = runs after the first: Jaccard overlap
        of the cluster holding the token in that run with the cluster holding
        it in the first run (1 = the same member set). Empty without anchors.
    """

    ari: Any = field(repr=False)
    type_counts: Any = field(repr=False)
    token_counts: Any = field(repr=False)
    anchors: Any = field(repr=False)


def cluster_stability(runs: Sequence[VocabClusters], names: Sequence[str] | None = None,
                      anchors: Sequence[str] = ()) -> ClusterStability:
    """How much a clustering depends on the k-means seed (or other settings).

    Parameters
    ----------
    runs : sequence of VocabClusters
        At least two clusterings of the same vocabulary (e.g.
        :func:`cluster_vocab` with different seeds).
    names : sequence of str, optional
        A label per run (default ``"seed <seed>"``).
    anchors : sequence of str, default ()
        Vocabulary entries whose cluster is followed across runs.

    Returns
    -------
    ClusterStability
        The adjusted Rand index of every pair of runs, the clusters and tokens of each type per run, and the
        Jaccard overlap of each anchor's cluster with its cluster in the first run.

    Raises
    ------
    ValueError
        Fewer than two runs, runs over different vocabularies, or ``names`` that are not one distinct label per run.
    KeyError
        An anchor is not in the vocabulary.

    Examples
    --------
    >>> runs = [mixlib.cluster_vocab(enc, k=8, seed=s, max_iter=5, cache=False) for s in (0, 1)]
    >>> st = mixlib.cluster_stability(runs, anchors=["1990", "##ing"])
    >>> st.ari.shape, st.ari.index.tolist()
    ((2, 2), ['seed 0', 'seed 1'])
    >>> st.anchors.index.tolist(), st.anchors.columns.tolist()
    (['1990', '##ing'], ['seed 1'])
    """
    import pandas as pd
    from sklearn.metrics import adjusted_rand_score

    runs = list(runs)
    if len(runs) < 2:
        raise ValueError("give at least two clusterings to compare.")
    V = len(runs[0].labels)
    if any(len(r.labels) != V or r.tokens != runs[0].tokens for r in runs):
        raise ValueError("the clusterings cover different vocabularies; cluster the same model's embeddings.")
    names = [f"seed {r.seed}" for r in runs] if names is None else [str(n) for n in names]
    if len(names) != len(runs) or len(set(names)) != len(names):
        raise ValueError(f"names must be {len(runs)} distinct labels, got {names!r}.")
    n = len(runs)
    ari = np.eye(n)
    for i in range(n):
        for j in range(i + 1, n):
            ari[i, j] = ari[j, i] = adjusted_rand_score(runs[i].labels, runs[j].labels)
    types = list(runs[0].types)
    tc = pd.DataFrame([[int((r.cluster_types == t).sum()) for t in types] for r in runs], index=names, columns=types)
    tk = pd.DataFrame([[int((r.cluster_types[r.labels] == t).sum()) for t in types] for r in runs], index=names, columns=types)
    rows = {}
    for tok in anchors:
        base = set(runs[0].members(find_cluster(runs[0], tok)).tolist())
        row = {}
        for name, r in zip(names[1:], runs[1:]):
            other = set(r.members(find_cluster(r, tok)).tolist())
            row[name] = len(base & other) / len(base | other)
        rows[tok] = row
    anc = pd.DataFrame.from_dict(rows, orient="index", columns=names[1:])
    anc.index.name = "anchor"
    return ClusterStability(ari=pd.DataFrame(ari, index=names, columns=names), type_counts=tc, token_counts=tk, anchors=anc)
