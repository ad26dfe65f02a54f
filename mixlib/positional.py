"""Word embeddings vs. position embeddings: near-orthogonal subspaces (Maeda et al., appendix B).

The input of BERT's first layer is (the LayerNorm of) the sum of a word
embedding and a position embedding. :func:`positional_orthogonality` measures
how the two sets of vectors sit relative to each other: a joint PCA (for a
picture), the cosine of every word x position pair (summarised), and the
principal angles between the subspaces their top principal components span (a
number instead of a picture). :func:`position_attention` computes the attention
pattern that the position vectors alone would produce in one layer.

Shapes: ``V`` vocabulary, ``P`` positions, ``D`` model dimension, ``H`` heads.
Results are numpy arrays on the CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

__all__ = ["Positional", "positional_orthogonality", "position_attention", "principal_angles"]


@dataclass(frozen=True, eq=False)
class Positional:
    """Geometry of word embeddings vs. position embeddings.

    Attributes
    ----------
    model : str
    word_coords : numpy.ndarray, float32, shape (V, n_components)
        Word embeddings in the joint PCA coordinates.
    pos_coords : numpy.ndarray, float32, shape (P, n_components)
        Position embeddings in the same coordinates.
    explained_variance_ratio : numpy.ndarray, shape (n_components,)
        Of the joint PCA (fitted on the ``V + P`` vectors stacked).
    bin_edges : numpy.ndarray, shape (bins + 1,)
        Fixed, equal-width histogram edges on ``[-1, 1]``.
    hist : numpy.ndarray, int64, shape (bins,)
        Counts of the cosine similarity over all ``V x P`` word x position pairs
        (the last bin includes 1.0; pairs involving a zero vector are left out).
    n_pairs : int
        Pairs counted (``V * P`` unless some vector is zero).
    mean_cos, mean_abs_cos, std_cos : float
        Mean, mean absolute value and standard deviation of the cosine over those pairs.
    top_pairs : pandas.DataFrame
        The pairs with the largest ``|cos|``: columns ``token_id``, ``token``,
        ``position``, ``cos``; sorted by ``|cos|`` descending.
    cls_pos0_cos : float
        Cosine of the ``[CLS]`` word embedding (the tokenizer's ``cls_token``,
        else ``bos_token``) and position 0; NaN if the tokenizer has neither.
    top_k : int
        Dimension of the compared subspaces.
    angles_deg : numpy.ndarray, shape (top_k,)
        Principal angles (degrees, ascending) between the span of the top
        ``top_k`` principal components of the word embeddings and that of the
        position embeddings (each set centred and analysed on its own). 90
        means orthogonal directions; 0 a shared direction.
    random_angles_deg : numpy.ndarray, shape (top_k,)
        The same angles for two random ``top_k``-dimensional subspaces of
        ``R^D`` (Gaussian, seed 0): a reference for what "unrelated" looks like.
    """

    model: str
    word_coords: np.ndarray = field(repr=False)
    pos_coords: np.ndarray = field(repr=False)
    explained_variance_ratio: np.ndarray = field(repr=False)
    bin_edges: np.ndarray = field(repr=False)
    hist: np.ndarray = field(repr=False)
    n_pairs: int
    mean_cos: float
    mean_abs_cos: float
    std_cos: float
    top_pairs: Any = field(repr=False)
    cls_pos0_cos: float
    top_k: int
    angles_deg: np.ndarray = field(repr=False)
    random_angles_deg: np.ndarray = field(repr=False)
    d_model: int = 0

    @property
    def random_mean_abs_cos(self) -> float:
        """Mean ``|cos|`` of two independent isotropic random vectors in ``R^D``
        (``Gamma(D/2) / (sqrt(pi) Gamma((D+1)/2))``, about ``sqrt(2 / (pi D))``): the "unrelated" reference."""
        D = self.d_model
        return float(math.exp(math.lgamma(D / 2) - math.lgamma((D + 1) / 2)) / math.sqrt(math.pi))


def _int_arg(name: str, value: Any, lo: int, hi: int) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not lo <= int(value) <= hi:
        raise ValueError(f"{name}={value!r} is out of range; expected an integer in {lo}..{hi}.")
    return int(value)


def _pca(X: np.ndarray, k: int):
    """An exact (not randomized) PCA in float64: ``covariance_eigh`` where scikit-learn has it (>= 1.5), else ``full``."""
    import sklearn
    from sklearn.decomposition import PCA

    major, minor = (int(x) for x in sklearn.__version__.split(".")[:2])
    solver = "covariance_eigh" if (major, minor) >= (1, 5) else "full"
    return PCA(n_components=k, svd_solver=solver).fit(np.asarray(X, dtype=np.float64))


def principal_angles(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Principal angles (degrees, ascending) between the column spaces of ``A`` (D, k) and ``B`` (D, m).

    Uses :func:`scipy.linalg.subspace_angles` (accurate also for small angles).
    """
    from scipy.linalg import subspace_angles

    return np.sort(np.degrees(subspace_angles(np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64))))


def positional_orthogonality(
    enc: Any,
    *,
    n_components: int = 3,
    top_k: int = 10,
    bins: int = 200,
    n_top: int = 10,
    chunk: int = 4096,
) -> Positional:
    """How word and position embeddings relate: joint PCA, cosine statistics, principal angles.

    Parameters
    ----------
    enc : Encoder
    n_components : int, default 3
        Coordinates kept from the joint PCA (2 or 3 for a plot).
    top_k : int, default 10
        Principal components of each set that span the compared subspaces.
    bins : int, default 200
        Equal-width histogram bins on ``[-1, 1]`` for the cosines.
    n_top : int, default 10
        Word x position pairs with the largest ``|cos|`` to report.
    chunk : int, default 4096
        Word embeddings processed at a time; at most ``chunk x P`` cosines
        exist at once (the full ``V x P`` matrix is never formed).

    Returns
    -------
    Positional

    Notes
    -----
    PCA is exact (float64, no randomized solver), so coordinates and angles
    are reproducible. The raw embedding matrices are used (no LayerNorm, no token-type
    embedding), as in the paper. Cosines are computed in float32 from
    unit-normalised rows and clipped to ``[-1, 1]``; sums are accumulated in
    float64.
    """
    import pandas as pd

    W = enc.word_embeddings().numpy().astype(np.float32)  # (V, D)
    Pm = enc.position_embeddings().numpy().astype(np.float32)  # (P, D)
    V, D = W.shape
    P = Pm.shape[0]
    n_components = _int_arg("n_components", n_components, 1, D)
    top_k = _int_arg("top_k", top_k, 1, min(D, P, V))
    bins = _int_arg("bins", bins, 1, 100_000)
    n_top = _int_arg("n_top", n_top, 0, V * P)
    chunk = _int_arg("chunk", chunk, 1, 10**9)

    # -- joint PCA for the picture ------------------------------------------
    pca = _pca(np.vstack([W, Pm]), n_components)
    word_coords = pca.transform(W.astype(np.float64)).astype(np.float32)  # (V, n)
    pos_coords = pca.transform(Pm.astype(np.float64)).astype(np.float32)  # (P, n)

    # -- cosines of all pairs, streamed over the vocabulary -------------------
    wn = np.linalg.norm(W, axis=1)  # (V,)
    pn = np.linalg.norm(Pm, axis=1)  # (P,)
    Wu = np.divide(W, wn[:, None], out=np.zeros_like(W), where=wn[:, None] > 0)  # (V, D)
    Pu = np.divide(Pm, pn[:, None], out=np.zeros_like(Pm), where=pn[:, None] > 0)  # (P, D)
    pos_ok = pn > 0  # (P,)
    edges = np.linspace(-1.0, 1.0, bins + 1)
    hist = np.zeros(bins, dtype=np.int64)
    s1 = s_abs = s2 = 0.0
    count = 0
    cand_val: list[np.ndarray] = []
    cand_w: list[np.ndarray] = []
    cand_p: list[np.ndarray] = []
    all_ok = bool((wn > 0).all() and pos_ok.all())
    for s in range(0, V, chunk):
        C = np.clip(Wu[s : s + chunk] @ Pu.T, -1.0, 1.0)  # (c, P)
        if all_ok:
            vals = C.ravel()
            A = np.abs(C)  # (c, P)
        else:
            ok = (wn[s : s + chunk] > 0)[:, None] & pos_ok[None, :]  # (c, P)
            vals = C[ok]
            A = np.where(ok, np.abs(C), -1.0)  # excluded pairs can never be among the largest
        hist += np.histogram(vals, bins=bins, range=(-1.0, 1.0))[0]  # same edges as `edges`, fast uniform path
        s1 += float(vals.sum(dtype=np.float64))
        s_abs += float(np.abs(vals).sum(dtype=np.float64))
        s2 += float(np.dot(vals.astype(np.float64), vals.astype(np.float64)))
        count += int(vals.size)
        if n_top:
            # the n largest |cos| of this chunk lie in the n rows with the largest row maximum
            rmax = A.max(axis=1)  # (c,)
            m = min(n_top, rmax.size)
            rows = np.argpartition(-rmax, m - 1)[:m]  # (m,)
            sub = A[rows].ravel()  # (m * P,)
            mm = min(n_top, sub.size)
            part = np.argpartition(-sub, mm - 1)[:mm]
            part = part[sub[part] >= 0]
            r, c = rows[part // P], part % P
            cand_val.append(C[r, c])
            cand_w.append(r + s)
            cand_p.append(c)
    mean = s1 / count if count else float("nan")
    var = max(s2 / count - mean * mean, 0.0) if count else float("nan")

    tokens = enc.token_strings(V)
    if n_top and cand_val:
        cv, cw, cp = np.concatenate(cand_val), np.concatenate(cand_w), np.concatenate(cand_p)
        order = np.lexsort((cp, cw, -np.abs(cv)))[:n_top]
        top_pairs = pd.DataFrame({"token_id": cw[order].astype(np.int64), "token": [tokens[i] for i in cw[order]],
                                  "position": cp[order].astype(np.int64), "cos": cv[order].astype(np.float64)})
    else:
        top_pairs = pd.DataFrame({"token_id": [], "token": [], "position": [], "cos": []})

    tok = enc.tokenizer
    cls_id = getattr(tok, "cls_token_id", None)
    if cls_id is None:
        cls_id = getattr(tok, "bos_token_id", None)
    if cls_id is not None and 0 <= cls_id < V and wn[cls_id] > 0 and pn[0] > 0:
        a, b = W[cls_id].astype(np.float64), Pm[0].astype(np.float64)
        cls_cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    else:
        cls_cos = float("nan")

    # -- principal angles between the two top-k PCA subspaces -----------------
    Qw = _pca(W, top_k).components_.T  # (D, k)
    Qp = _pca(Pm, top_k).components_.T  # (D, k)
    angles = principal_angles(Qw, Qp)
    rng = np.random.default_rng(0)
    rand = principal_angles(rng.standard_normal((D, top_k)), rng.standard_normal((D, top_k)))

    return Positional(
        model=enc.name,
        word_coords=word_coords,
        pos_coords=pos_coords,
        explained_variance_ratio=pca.explained_variance_ratio_.copy(),
        bin_edges=edges,
        hist=hist,
        n_pairs=count,
        mean_cos=mean,
        mean_abs_cos=s_abs / count if count else float("nan"),
        std_cos=math.sqrt(var) if count else float("nan"),
        top_pairs=top_pairs,
        cls_pos0_cos=cls_cos,
        top_k=top_k,
        angles_deg=angles,
        random_angles_deg=rand,
        d_model=D,
    )




def position_attention(enc: Any, layer: int = 0, n: int = 64, *, layernorm: bool = False, bias: bool = False) -> np.ndarray:
    """Attention weights that the position embeddings alone produce in one layer (the paper's Fig. 6).

    ``A^h = softmax((X W_Q^h)(X W_K^h)^T / sqrt(d'))`` with ``X`` the first ``n``
    position embeddings (rows = query position, columns = key position).

    Parameters
    ----------
    enc : Encoder
    layer : int, default 0
        0-based layer whose query/key weights are used. Only layer 0 sees the
        embeddings directly; other layers are a probe of their weights.
    n : int, default 64
        Positions ``0..n-1`` (at most the model's number of positions).
    layernorm : bool, default False
        False (default, the paper's formula): the raw position embeddings.
        True: pass them through the model's embedding LayerNorm first (with its
        gain and bias), as each would be normalised if it reached the first
        layer on its own (without word or token-type embedding).
    bias : bool, default False
        False (default, as the paper leaves biases out): ``X W^T`` only. True:
        add the query and key biases, as the model does.

    Returns
    -------
    numpy.ndarray, float32, shape (H, n, n)
        Each row sums to 1.
    """
    enc.check_layer(layer)
    n = _int_arg("n", n, 1, enc.max_positions)
    H, dh = enc.n_heads, enc.d_head
    dev = enc.device
    with torch.inference_mode():
        X = enc.position_embeddings()[:n].to(dev)  # (n, D)
        if layernorm:
            X = enc.embedding_module("embedding_norm")(X)
        Wq, bq = enc.projection(layer, "query")
        Wk, bk = enc.projection(layer, "key")
        Q = X @ Wq.t()  # (n, D)
        K = X @ Wk.t()  # (n, D)
        if bias:
            if bq is not None:
                Q = Q + bq
            if bk is not None:
                K = K + bk
        Q = Q.view(n, H, dh).transpose(0, 1)  # (H, n, d')
        K = K.view(n, H, dh).transpose(0, 1)  # (H, n, d')
        A = torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(dh), dim=-1)  # (H, n, n)
    return A.float().cpu().numpy()
