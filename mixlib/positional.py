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

__all__ = [
    "Positional",
    "positional_orthogonality",
    "position_attention",
    "principal_angles",
    "Overlap",
    "centred_overlap",
    "one_sided_centring",
    "cls_spread",
    "cross_term_ratio",
    "percentile_of",
    "random_orthonormal",
    "random_abs_cos",
    "real_input",
    "input_std",
    "position_std",
    "token_attention",
    "map_correlation",
    "own_sieve",
    "offset_groups",
    "psi_rank_agreement",
]


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

    def __repr__(self) -> str:
        return (f"Positional(model={self.model!r}, n_pairs={self.n_pairs:,}, mean_cos={self.mean_cos:+.4f}, "
                f"mean_abs_cos={self.mean_abs_cos:.4f}, std_cos={self.std_cos:.4f}, cls_pos0_cos={self.cls_pos0_cos:+.4f}, "
                f"top_k={self.top_k}, d_model={self.d_model})")

    @property
    def random_mean_abs_cos(self) -> float:
        """Mean ``|cos|`` of two independent isotropic random vectors in ``R^D``: the "unrelated" reference
        (:func:`random_abs_cos` of ``d_model``)."""
        return random_abs_cos(self.d_model)


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

    Parameters
    ----------
    A : array-like, shape (D, k)
        Columns spanning the first subspace (need not be orthonormal).
    B : array-like, shape (D, m)
        Columns spanning the second subspace.

    Returns
    -------
    numpy.ndarray, float64, shape (min(k, m),)
        The angles in degrees, smallest first: 0 for a shared direction, 90 for orthogonal ones.

    Examples
    --------
    >>> import numpy as np
    >>> e = np.eye(4)
    >>> mixlib.principal_angles(e[:, :2], e[:, 1:3]).round(1).tolist()  # they share axis 1
    [0.0, 90.0]
    >>> mixlib.principal_angles(e[:, :2], e[:, 2:]).round(1).tolist()
    [90.0, 90.0]
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
        From :func:`mixlib.load_encoder`; its word and position embedding matrices are compared.
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
        The joint PCA coordinates, the histogram and summary of the ``V x P`` cosines, the pairs with the
        largest ``|cos|`` and the principal angles between the two top-``top_k`` subspaces.

    Raises
    ------
    ValueError
        A size out of range (``n_components`` in ``1..D``, ``top_k`` in ``1..min(D, P, V)``, ``bins``,
        ``n_top``, ``chunk``).

    Notes
    -----
    PCA is exact (float64, no randomized solver), so coordinates and angles
    are reproducible. The raw embedding matrices are used (no LayerNorm, no token-type
    embedding), as in the paper. Cosines are computed in float32 from
    unit-normalised rows and clipped to ``[-1, 1]``; sums are accumulated in
    float64.

    Examples
    --------
    >>> pos = mixlib.positional_orthogonality(enc, top_k=5)
    >>> pos.word_coords.shape, pos.pos_coords.shape  # (V, 3), (P, 3)
    ((30522, 3), (512, 3))
    >>> pos.n_pairs, round(pos.mean_abs_cos, 2)  # every word x position pair: nearly orthogonal
    (15627264, 0.04)
    >>> bool((pos.angles_deg > 80).all())  # the two top-5 subspaces barely share a direction
    True
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




def position_attention(
    enc: Any, layer: int = 0, n: int = 64, *, layernorm: bool = False, bias: bool = False, input_std: Any = None
) -> np.ndarray:
    """Attention weights that the position embeddings alone produce in one layer (the paper's Fig. 6).

    ``A^h = softmax((X W_Q^h)(X W_K^h)^T / sqrt(d'))`` with ``X`` the first ``n``
    position embeddings (rows = query position, columns = key position).

    Parameters
    ----------
    enc : Encoder
        From :func:`mixlib.load_encoder`.
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
    input_std : float or array-like of shape (n,), optional
        Only with ``layernorm=True``: divide each centred position vector by
        this standard deviation instead of its own, i.e. scale it as it is
        scaled inside the real input ``LN(e + p + s)`` (``mixlib.positional.input_std(enc, n, ids)``
        computes it over the token ids ``ids``).
        ``LN(p)`` alone divides by the small spread of ``p`` and so enlarges
        the position part several times more than the real input does.

    Returns
    -------
    numpy.ndarray, float32, shape (H, n, n)
        Each row sums to 1.

    Raises
    ------
    ValueError
        ``input_std`` without ``layernorm=True``, of the wrong length, or not
        positive and finite; ``layer`` or ``n`` out of range.

    Examples
    --------
    >>> a = mixlib.position_attention(enc, layer=0, n=16)
    >>> a.shape  # (H, n, n): query position x key position
    (12, 16, 16)
    >>> a.sum(-1).round(4).min(), a.sum(-1).round(4).max()
    (np.float32(1.0), np.float32(1.0))
    """
    enc.check_layer(layer)
    n = _int_arg("n", n, 1, enc.max_positions)
    H, dh = enc.n_heads, enc.d_head
    dev = enc.device
    std = None
    if input_std is not None:
        if not layernorm:
            raise ValueError("input_std only applies with layernorm=True (it replaces LayerNorm's own divisor).")
        std_np = np.broadcast_to(np.asarray(input_std, dtype=np.float32), (n,)) if np.ndim(input_std) == 0 else np.asarray(input_std, dtype=np.float32)
        if std_np.shape != (n,) or not np.all(np.isfinite(std_np)) or not np.all(std_np > 0):
            raise ValueError(f"input_std must be a positive finite number or an array of shape ({n},); got shape {std_np.shape}.")
        std = torch.from_numpy(np.ascontiguousarray(std_np)).to(dev)
    with torch.inference_mode():
        X = enc.position_embeddings()[:n].to(dev)  # (n, D)
        if std is not None:
            ln = enc.embedding_module("embedding_norm")
            Xc = X - X.mean(dim=1, keepdim=True)  # (n, D) centred over the components, as LayerNorm does
            X = Xc / std[:, None] * ln.weight.detach() + ln.bias.detach()
        elif layernorm:
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


# ---------------------------------------------------------------------------
# Centred overlap of the two sets, against random subspaces (issue 9, C1)
# ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Overlap:
    """Word vs. position embeddings after centring, each statistic beside a random-subspace null.

    Attributes
    ----------
    model : str
    d_model : int
    ks : tuple of int
        Subspace dimensions compared (ascending).
    mean_cos_raw, mean_abs_cos_raw : float
        Mean cosine and mean ``|cos|`` over all ``V x P`` pairs of the raw
        (uncentred) embeddings, as in :func:`positional_orthogonality`.
    mean_cos_centred, mean_abs_cos_centred : float
        The same after subtracting the mean word vector from every word
        embedding and the mean position vector from every position embedding.
    mean_alignment : float
        Cosine of the mean word vector and the mean position vector. A large
        value inflates every uncentred cosine: each raw vector shares its set's
        mean, and the two means point the same way.
    mean_share_of_norm : tuple of float
        ``||mean||^2 / mean(||x||^2)`` for words and positions: how much of each
        set's squared length is its common mean.
    sample_ids : numpy.ndarray, int64, shape (S,)
        Word ids used for the null (a seeded sample of the vocabulary).
    sample_mean_abs_cos : float
        Centred mean ``|cos|`` over ``sample_ids x P`` (the observed value the
        null is compared with; close to :attr:`mean_abs_cos_centred`).
    null_mean_abs_cos : numpy.ndarray, shape (n_rotations,)
        The same statistic with the centred position vectors turned by a
        Haar-random rotation of ``R^D`` (their own geometry kept, their
        orientation relative to the words random), one value per draw.
    share_centred : numpy.ndarray, shape (len(ks),)
        Share of the centred position variance inside the span of the top-k
        principal components of the (centred) word embeddings.
    share_raw : numpy.ndarray, shape (len(ks),)
        Share of the uncentred position second moment ``sum ||p||^2`` inside the
        span of the top-k right singular vectors of the uncentred word matrix.
    null_share_centred, null_share_raw : numpy.ndarray, shape (n_draws, len(ks))
        The same shares for Haar-random k-dimensional subspaces (expected value
        ``k / D`` for both).
    min_angle_centred, min_angle_raw : numpy.ndarray, shape (len(ks),)
        Smallest principal angle (degrees) between the top-k word subspace and
        the top-k position subspace, centred (PCA) and uncentred (SVD).
    null_min_angle : numpy.ndarray, shape (n_draws, len(ks))
        Smallest principal angle between the centred top-k word subspace and a
        random k-dimensional subspace.
    """

    model: str
    d_model: int
    ks: tuple[int, ...]
    mean_cos_raw: float
    mean_abs_cos_raw: float
    mean_cos_centred: float
    mean_abs_cos_centred: float
    mean_alignment: float
    mean_share_of_norm: tuple[float, float]
    sample_ids: np.ndarray = field(repr=False)
    sample_mean_abs_cos: float = float("nan")
    null_mean_abs_cos: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    share_centred: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    share_raw: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    null_share_centred: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    null_share_raw: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    min_angle_centred: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    min_angle_raw: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    null_min_angle: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]

    @property
    def n_draws(self) -> int:
        """Random subspaces drawn for the share and angle nulls."""
        return int(self.null_share_centred.shape[0])

    def cos_table(self):
        """Mean ``|cos|`` raw / centred and the null's mean, 2.5 % and 97.5 % quantiles and the observed percentile.

        Returns
        -------
        pandas.Series
        """
        import pandas as pd

        null = self.null_mean_abs_cos
        return pd.Series({
            "mean_abs_cos_raw": self.mean_abs_cos_raw,
            "mean_abs_cos_centred": self.mean_abs_cos_centred,
            "mean_alignment": self.mean_alignment,
            "sample_mean_abs_cos": self.sample_mean_abs_cos,
            "null_mean": float(null.mean()),
            "null_q025": float(np.quantile(null, 0.025)),
            "null_q975": float(np.quantile(null, 0.975)),
            "percentile": percentile_of(self.sample_mean_abs_cos, null),
        })

    def share_table(self):
        """Per k: observed shares (centred, raw), the random-subspace null (mean, 2.5 %, 97.5 %) and percentiles.

        Returns
        -------
        pandas.DataFrame
            Index ``k``.
        """
        import pandas as pd

        rows = {}
        for i, k in enumerate(self.ks):
            nc, nr, na = self.null_share_centred[:, i], self.null_share_raw[:, i], self.null_min_angle[:, i]
            rows[k] = {
                "share_centred": self.share_centred[i],
                "null_mean": nc.mean(),
                "null_q025": np.quantile(nc, 0.025),
                "null_q975": np.quantile(nc, 0.975),
                "percentile_centred": percentile_of(self.share_centred[i], nc),
                "share_raw": self.share_raw[i],
                "null_raw_q025": np.quantile(nr, 0.025),
                "null_raw_q975": np.quantile(nr, 0.975),
                "percentile_raw": percentile_of(self.share_raw[i], nr),
                "k_over_D": k / self.d_model,
                "min_angle_centred": self.min_angle_centred[i],
                "min_angle_raw": self.min_angle_raw[i],
                "null_min_angle_q025": np.quantile(na, 0.025),
                "null_min_angle_median": np.median(na),
                "null_min_angle_q975": np.quantile(na, 0.975),
                "percentile_min_angle": percentile_of(self.min_angle_centred[i], na),
            }
        df = pd.DataFrame.from_dict(rows, orient="index")
        df.index.name = "k"
        return df

    def k_verdicts(self, ceiling: float = 1.0) -> dict[str, list[int]]:
        """Which ``k`` fall outside the random subspaces' 95% interval, and on which side.

        Returns
        -------
        dict of list of int
            ``below`` / ``above``: the centred share below its null's 2.5% point / above its 97.5% point;
            ``above_raw`` / ``below_raw``: the raw share at percentile >= 97.5 / <= 2.5 of its null;
            ``angle_wider`` / ``angle_typical`` / ``angle_narrower``: the centred smallest principal angle at
            percentile >= 97.5, strictly between 2.5 and 97.5, <= 2.5; ``angle_ceiling``: those of ``angle_typical``
            whose null's 97.5% point lies within ``ceiling`` degrees of 90 (random subspaces are already almost
            orthogonal there, so the comparison has no room to show "more orthogonal than random": untestable, not
            failed); ``angle_raw_below``: the raw smallest angle
            below the null's 2.5% point; ``reversed``: k in both ``above_raw`` and ``below`` (centring turns the
            conclusion round).
        """
        t = self.share_table()
        ks = lambda mask: [int(k) for k in t.index[mask]]  # noqa: E731
        pa = t["percentile_min_angle"]
        out = {"below": ks(t["share_centred"] < t["null_q025"]), "above": ks(t["share_centred"] > t["null_q975"]),
               "above_raw": ks(t["percentile_raw"] >= 97.5), "below_raw": ks(t["percentile_raw"] <= 2.5),
               "angle_wider": ks(pa >= 97.5), "angle_typical": ks((pa > 2.5) & (pa < 97.5)), "angle_narrower": ks(pa <= 2.5),
               "angle_raw_below": ks(t["min_angle_raw"] < t["null_min_angle_q025"])}
        out["reversed"] = [k for k in out["above_raw"] if k in out["below"]]
        q975 = np.quantile(self.null_min_angle, 0.975, axis=0)  # (len(ks),)
        out["angle_ceiling"] = [k for k, q in zip(self.ks, q975) if k in out["angle_typical"] and q >= 90 - ceiling]
        return out


def percentile_of(value: float, null: np.ndarray) -> float:
    """Percentage of the null draws strictly below ``value`` plus half of the ties (0..100).

    50 means "typical of the null"; near 0 or 100 means the observed value lies
    in a tail.
    """
    null = np.asarray(null, dtype=np.float64).ravel()
    if null.size == 0:
        raise ValueError("the null distribution is empty; draw at least one sample.")
    return float(100.0 * ((null < value).sum() + 0.5 * (null == value).sum()) / null.size)


def random_abs_cos(d: int) -> float:
    """Mean ``|cos|`` of two independent isotropic random directions in ``R^d`` (exact).

    ``Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2))``, about ``sqrt(2 / (pi d))`` for large ``d``
    (larger by a factor of about ``1 + 1/(4d)``). It is also the mean ``|cos|`` between a
    random direction and any fixed one.
    """
    if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 2:
        raise ValueError(f"d must be an integer of at least 2 (a dimension); got {d!r}.")
    return float(math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi))


def random_orthonormal(D: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """A Haar-random ``(D, k)`` matrix with orthonormal columns (QR of a Gaussian, signs fixed).

    Its first ``j`` columns span a Haar-random ``j``-dimensional subspace for every ``j <= k``.
    """
    G = rng.standard_normal((D, k))
    Q, R = np.linalg.qr(G)
    return Q * np.sign(np.diag(R))[None, :]


def _mean_cos_stats(A: np.ndarray, B: np.ndarray, chunk: int = 4096) -> tuple[float, float]:
    """Mean cosine and mean |cos| over all rows of A x rows of B (zero rows left out), streamed over A."""
    an = np.linalg.norm(A, axis=1)
    bn = np.linalg.norm(B, axis=1)
    A = A[an > 0] / an[an > 0, None]
    B = B[bn > 0] / bn[bn > 0, None]
    s = s_abs = 0.0
    for i in range(0, A.shape[0], chunk):
        C = A[i : i + chunk] @ B.T  # (c, P)
        s += float(C.sum(dtype=np.float64))
        s_abs += float(np.abs(C).sum(dtype=np.float64))
    n = A.shape[0] * B.shape[0]
    return s / n, s_abs / n


def _top_dirs(X: np.ndarray, k: int, *, centre: bool) -> np.ndarray:
    """Top-k right singular vectors ``(D, k)`` of ``X`` (centred first when ``centre``)."""
    X = np.asarray(X, dtype=np.float64)
    if centre:
        X = X - X.mean(0)
    # eigenvectors of the (D, D) second-moment matrix: exact and cheap for V >> D
    evals, evecs = np.linalg.eigh(X.T @ X)
    return evecs[:, ::-1][:, :k]


def _share_in(Q: np.ndarray, M: np.ndarray) -> np.ndarray:
    """Cumulative share of ``tr(M)`` inside the first j columns of Q, for j = 1..k (M = X^T X, (D, D))."""
    part = (Q * (M @ Q)).sum(0)  # (k,) q_j^T M q_j
    return np.cumsum(part) / np.trace(M)


def centred_overlap(
    W: Any,
    P: Any,
    *,
    ks: Any = (1, 2, 5, 10, 20, 50),
    n_draws: int = 200,
    n_rotations: int = 100,
    n_sample: int = 1000,
    seed: int = 0,
    model: str = "",
) -> Overlap:
    """Centred cosines and subspace overlap of word vs. position embeddings, each against a random-subspace null.

    The mean word vector and the mean position vector can point the same way;
    then every raw cosine carries that shared offset. This function reports the
    raw and the centred statistics side by side, and compares the centred ones
    with what randomly oriented subspaces give.

    Parameters
    ----------
    W : array-like or Encoder, shape (V, D)
        Word embeddings, or an :class:`~mixlib.Encoder` (then ``P`` must be None
        and both matrices are taken from it).
    P : array-like or None, shape (P, D)
        Position embeddings.
    ks : sequence of int, default (1, 2, 5, 10, 20, 50)
        Subspace dimensions (each in ``1..min(V, P, D)``; sorted, duplicates removed).
    n_draws : int, default 200
        Random subspaces drawn for the share and principal-angle nulls (>= 1).
    n_rotations : int, default 100
        Random rotations drawn for the mean ``|cos|`` null (>= 1; each costs
        one ``(D, D)`` QR and one ``(n_sample, P)`` cosine matrix).
    n_sample : int, default 1000
        Words (a seeded sample) used for the mean ``|cos|`` null; the observed
        value over the same sample is reported as ``sample_mean_abs_cos``.
    seed : int, default 0
        Seed of ``numpy.random.default_rng`` (the word sample, the rotations and the random subspaces).
    model : str, default ""
        Name stored in the result (taken from the encoder when one is given).

    Returns
    -------
    Overlap
        The raw and centred statistics beside their random-subspace nulls; :meth:`Overlap.share_table` and
        :meth:`Overlap.cos_table` summarise them.

    Raises
    ------
    ValueError
        On shape mismatch, non-finite values or out-of-range sizes.

    Notes
    -----
    *Mean |cos| null*: the centred position vectors are multiplied by a
    Haar-random orthogonal matrix (:func:`random_orthonormal`), which keeps
    their norms and mutual angles but orients them at random relative to the
    words. *Share null*: the share of the centred (or raw) position variance
    inside a Haar-random k-dimensional subspace; its expectation is ``k / D``.
    Principal angles use the same random subspaces. All in float64.

    Examples
    --------
    >>> ov = mixlib.centred_overlap(enc, None, ks=(1, 10), n_draws=20, n_rotations=5, n_sample=200)
    >>> round(ov.mean_alignment, 2)  # the mean word and the mean position vector point alike
    0.52
    >>> round(ov.mean_abs_cos_raw, 3), round(ov.mean_abs_cos_centred, 3)  # centring removes most of the overlap
    (0.037, 0.014)
    >>> ov.share_table().index.tolist()  # one row per k
    [1, 10]
    """
    if P is None and hasattr(W, "word_embeddings"):
        enc = W
        model = model or enc.name
        W, P = enc.word_embeddings().numpy(), enc.position_embeddings().numpy()
    if P is None:
        raise ValueError("P is None; give the position embeddings (P, D), or pass an Encoder as W.")
    W = np.asarray(W, dtype=np.float64)
    P = np.asarray(P, dtype=np.float64)
    if W.ndim != 2 or P.ndim != 2 or W.shape[1] != P.shape[1]:
        raise ValueError(f"W and P must be (V, D) and (P, D) with the same D; got {W.shape} and {P.shape}.")
    if not (np.isfinite(W).all() and np.isfinite(P).all()):
        raise ValueError("W or P contains NaN or infinite values.")
    V, D = W.shape
    kmax_allowed = min(V, P.shape[0], D)
    try:
        ks_t = tuple(sorted({_int_arg("ks", k, 1, kmax_allowed) for k in ks}))
    except TypeError:
        raise ValueError(f"ks={ks!r}; expected a sequence of integers in 1..{kmax_allowed}.") from None
    if not ks_t:
        raise ValueError(f"ks is empty; give at least one subspace dimension in 1..{kmax_allowed}.")
    n_draws = _int_arg("n_draws", n_draws, 1, 100_000)
    n_rotations = _int_arg("n_rotations", n_rotations, 1, 100_000)
    n_sample = _int_arg("n_sample", n_sample, 1, 10**9)
    kmax = ks_t[-1]
    rng = np.random.default_rng(seed)

    mw, mp = W.mean(0), P.mean(0)  # (D,)
    Wc, Pc = W - mw, P - mp  # centred
    # cosines in float32 (sums in float64), as positional_orthogonality
    mean_cos_raw, mean_abs_raw = _mean_cos_stats(W.astype(np.float32), P.astype(np.float32))
    mean_cos_c, mean_abs_c = _mean_cos_stats(Wc.astype(np.float32), Pc.astype(np.float32))
    nw, npn = np.linalg.norm(mw), np.linalg.norm(mp)
    align = float(mw @ mp / (nw * npn)) if nw > 0 and npn > 0 else float("nan")
    share_of_norm = (float(nw**2 / (W**2).sum(1).mean()), float(npn**2 / (P**2).sum(1).mean()))

    # -- mean |cos| null: randomly rotated centred positions ------------------
    sample = np.sort(rng.choice(V, size=min(n_sample, V), replace=False))
    Ws = Wc[sample]
    ws_n = np.linalg.norm(Ws, axis=1)
    Ws = (Ws[ws_n > 0] / ws_n[ws_n > 0, None]).astype(np.float32)  # (S, D)
    pn = np.linalg.norm(Pc, axis=1)
    Pu = Pc[pn > 0] / pn[pn > 0, None]  # (P', D)
    sample_abs = float(np.abs(Ws @ Pu.astype(np.float32).T).mean(dtype=np.float64))
    null_abs = np.empty(n_rotations)
    for i in range(n_rotations):
        R = random_orthonormal(D, D, rng)  # (D, D) Haar-random rotation
        null_abs[i] = np.abs(Ws @ (Pu @ R).astype(np.float32).T).mean(dtype=np.float64)

    # -- shares of position variance inside the top-k word directions ---------
    Mc, Mr = Pc.T @ Pc, P.T @ P  # (D, D)
    Sw = W.T @ W  # (D, D) uncentred second moment of the words; the centred one follows without a second pass
    Ur = np.linalg.eigh(Sw)[1][:, ::-1][:, :kmax]  # (D, kmax) top right singular vectors of W
    Uc = np.linalg.eigh(Sw - V * np.outer(mw, mw))[1][:, ::-1][:, :kmax]  # top principal components of W
    idx = np.array(ks_t) - 1
    share_c = _share_in(Uc, Mc)[idx]
    share_r = _share_in(Ur, Mr)[idx]
    Pcd = _top_dirs(P, kmax, centre=True)
    Prd = _top_dirs(P, kmax, centre=False)
    min_c = np.array([principal_angles(Uc[:, :k], Pcd[:, :k])[0] for k in ks_t])
    min_r = np.array([principal_angles(Ur[:, :k], Prd[:, :k])[0] for k in ks_t])
    null_c = np.empty((n_draws, len(ks_t)))
    null_r = np.empty((n_draws, len(ks_t)))
    null_ang = np.empty((n_draws, len(ks_t)))
    for i in range(n_draws):
        Q = random_orthonormal(D, kmax, rng)  # (D, kmax)
        null_c[i] = _share_in(Q, Mc)[idx]
        null_r[i] = _share_in(Q, Mr)[idx]
        G = Uc.T @ Q  # (kmax, kmax); the top-left k x k block pairs the first k columns of each
        for j, k in enumerate(ks_t):
            s = np.linalg.svd(G[:k, :k], compute_uv=False)
            null_ang[i, j] = math.degrees(math.acos(min(1.0, float(s.max()))))

    return Overlap(
        model=model,
        d_model=D,
        ks=ks_t,
        mean_cos_raw=mean_cos_raw,
        mean_abs_cos_raw=mean_abs_raw,
        mean_cos_centred=mean_cos_c,
        mean_abs_cos_centred=mean_abs_c,
        mean_alignment=align,
        mean_share_of_norm=share_of_norm,
        sample_ids=sample.astype(np.int64),
        sample_mean_abs_cos=sample_abs,
        null_mean_abs_cos=null_abs,
        share_centred=share_c,
        share_raw=share_r,
        null_share_centred=null_c,
        null_share_raw=null_r,
        min_angle_centred=min_c,
        min_angle_raw=min_r,
        null_min_angle=null_ang,
    )


def _pair_of_sets(A: Any, B: Any) -> tuple[np.ndarray, np.ndarray]:
    """Two non-empty finite 2-D arrays with the same number of columns (one line saying what is wrong otherwise)."""
    A, B = np.asarray(A), np.asarray(B)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[1] or not len(A) or not len(B):
        raise ValueError(f"expected two non-empty (n, D) arrays with the same D, got shapes {A.shape} and {B.shape}.")
    if not (np.isfinite(A).all() and np.isfinite(B).all()):
        raise ValueError("the vectors contain NaN or inf: check the embeddings passed in.")
    return A, B


def one_sided_centring(W: Any, P: Any, *, n_words: int = 6000, seed: int = 0) -> dict[str, float]:
    """Which mean inflates the raw cosines of word x position pairs: centre neither set, one, or both.

    A raw cosine of a word ``w`` and a position ``p`` splits as ``w.p = wbar.pbar + wbar.(p - pbar) + (w - wbar).pbar
    + (w - wbar).(p - pbar)``. Subtracting one set's mean removes the terms that carry it.

    Parameters
    ----------
    W : array-like, shape (V, D)
        Word embeddings (the means are over all of them).
    P : array-like, shape (P, D)
        Position embeddings.
    n_words : int, default 6000
        Words sampled (seeded, without replacement) for the pairs.
    seed : int, default 0

    Returns
    -------
    dict
        ``none``, ``pos``, ``word``, ``both``: mean ``|cos|`` over the sampled words x all positions with neither set
        centred, the positions only, the words only, both; ``n_words``; ``lowers_pct``: % of pairs whose cosine is
        lower once both are centred; ``t3_raises_pct``: % of pairs whose ``|cos|`` the third term
        ``(w - wbar).pbar / (|w| |p|)`` makes larger.
    """
    W, P = _pair_of_sets(W, P)
    n_words = _int_arg("n_words", n_words, 1, 10**9)
    sub = np.random.default_rng(seed).choice(W.shape[0], size=min(n_words, W.shape[0]), replace=False)
    unit = lambda X: X / np.linalg.norm(X, axis=1, keepdims=True)  # noqa: E731
    w, wc, p, pc = unit(W[sub]), unit(W[sub] - W.mean(0)), unit(P), unit(P - P.mean(0))
    raw = w @ p.T
    t3 = ((W[sub] - W.mean(0)) @ P.mean(0))[:, None] / (np.linalg.norm(W[sub], axis=1)[:, None] * np.linalg.norm(P, axis=1)[None, :])
    return {"none": float(np.abs(raw).mean()), "pos": float(np.abs(w @ pc.T).mean()), "word": float(np.abs(wc @ p.T).mean()),
            "both": float(np.abs(wc @ pc.T).mean()), "n_words": len(sub),
            "lowers_pct": float(100 * (raw > wc @ pc.T).mean()), "t3_raises_pct": float(100 * (np.abs(raw) > np.abs(raw - t3)).mean())}


def cls_spread(W: Any, P: Any, cls_id: int, sep_id: int, *, near: float = 0.1, early: int = 16) -> dict[str, Any]:
    """Is [CLS] x position 0 an isolated pair? The cosines of [CLS] and of [SEP] with every position, summarised.

    Parameters
    ----------
    W, P : array-like, shape (V, D) and (P, D)
        Word and position vectors with unit rows (raw or centred), so that a dot product is a cosine.
    cls_id, sep_id : int
    near : float, default 0.1
        A position counts as near position 0 when its cosine with [CLS] is at least position 0's minus ``near``.
    early : int, default 16
        Positions ``1 .. early - 1`` are the early ones.

    Returns
    -------
    dict
        ``pos0``: [CLS] x position 0; ``near``: the other positions near it; ``second`` / ``c2``: the largest other
        position and its cosine; ``early_lo`` / ``early_hi``: the range over the early positions; ``sep_pos`` /
        ``sep_c``: [SEP]'s largest position and its cosine.
    """
    W, P = _pair_of_sets(W, P)
    cls_id, sep_id = _int_arg("cls_id", cls_id, 0, len(W) - 1), _int_arg("sep_id", sep_id, 0, len(W) - 1)
    early = _int_arg("early", early, 2, len(P))
    cc, cs = P @ W[cls_id], P @ W[sep_id]  # (P,)
    near_ = [int(k) for k in np.flatnonzero(cc >= cc[0] - near) if k != 0]
    second = int(np.argmax(np.where(np.arange(len(cc)) == 0, -np.inf, cc)))
    return {"pos0": float(cc[0]), "near": near_, "second": second, "c2": float(cc[second]),
            "early_lo": float(cc[1:early].min()), "early_hi": float(cc[1:early].max()),
            "sep_pos": int(np.argmax(cs)), "sep_c": float(cs.max())}


def cross_term_ratio(enc: Any, words: Any, positions: Any, *, layer: int = 0, component: str = "query") -> np.ndarray:
    """How large the word-position cross term is in one layer's projection, per head.

    For a head's projection ``M`` (``d_head x D``), ``|M(e + p)|^2 = |Me|^2 + |Mp|^2 + 2 e^T M^T M p``. This returns,
    per head, the mean over every word ``e`` x position ``p`` of ``|2 e^T M^T M p| / (|Me|^2 + |Mp|^2)``: 0 when the
    head sees words and positions in orthogonal subspaces.

    Parameters
    ----------
    enc : Encoder
    words, positions : array-like, shape (n, D) and (k, D)
    layer : int, default 0
    component : {"query", "key", "value"}, default "query"

    Returns
    -------
    numpy.ndarray, shape (H,)
    """
    W, _ = enc.projection(layer, component)
    M = W.cpu().numpy().reshape(enc.n_heads, enc.d_head, enc.d_model)  # (H, d', D)
    e, p = _pair_of_sets(words, positions)
    if e.shape[1] != enc.d_model:
        raise ValueError(f"words and positions have {e.shape[1]} columns but {enc.name} has d_model = {enc.d_model}.")
    out = []
    for h in range(enc.n_heads):
        Pw, Pp = e @ M[h].T, p @ M[h].T  # (n, d'), (k, d')
        den = (Pw**2).sum(1)[:, None] + (Pp**2).sum(1)[None, :]
        out.append((2 * np.abs(Pw @ Pp.T) / den).mean())
    return np.array(out)


# ---------------------------------------------------------------------------
# The real input LN(e + p + s) and position-only attention at its scale (issue 9, C2)
# ---------------------------------------------------------------------------


def _token_ids(enc: Any, ids: Any) -> torch.Tensor:
    V = enc.vocab_size
    t = torch.as_tensor(np.asarray(ids), dtype=torch.long).reshape(-1)
    if t.numel() == 0:
        raise ValueError("ids is empty; give at least one token id.")
    if int(t.min()) < 0 or int(t.max()) >= V:
        raise ValueError(f"ids must lie in 0..{V - 1} (the vocabulary of {enc.name}); got {int(t.min())}..{int(t.max())}.")
    return t


def _segment_vector(enc: Any, segment: int) -> torch.Tensor:
    emb = enc.embedding_module("token_type_embeddings").weight.detach().float().cpu()  # (S, D)
    segment = _int_arg("segment", segment, 0, emb.shape[0] - 1)
    return emb[segment]


def real_input(enc: Any, ids: Any, position: int, *, segment: int = 0) -> torch.Tensor:
    """The vectors layer 0 receives for tokens ``ids`` at one position: ``LN(e_t + p_k + s_segment)``.

    Parameters
    ----------
    enc : Encoder
    ids : array-like of int, shape (N,)
        Token ids.
    position : int
        0-based position ``k`` (RoBERTa's reserved rows are skipped, as in
        :meth:`Encoder.position_embeddings`).
    segment : int, default 0
        Token type (0 = sentence A).

    Returns
    -------
    torch.Tensor, float32, shape (N, D), on the CPU
        The embedding LayerNorm applied (with its gain and bias), without dropout.
    """
    t = _token_ids(enc, ids)
    position = _int_arg("position", position, 0, enc.max_positions - 1)
    E = enc.word_embeddings()[t]  # (N, D)
    p = enc.position_embeddings()[position]  # (D,)
    s = _segment_vector(enc, segment)  # (D,)
    ln = enc.embedding_module("embedding_norm")
    with torch.inference_mode():
        X = ln((E + p + s).to(enc.device))  # (N, D)
    return X.float().cpu()


def input_std(enc: Any, n: int, ids: Any, *, segment: int = 0) -> np.ndarray:
    """The divisor LayerNorm uses on the real input, per position: mean over tokens of ``sqrt(var(e_t + p_k + s) + eps)``.

    Parameters
    ----------
    enc : Encoder
    n : int
        Positions ``0..n-1``.
    ids : array-like of int, shape (N,)
        Token ids to average over (e.g. a random sample of the vocabulary).
    segment : int, default 0

    Returns
    -------
    numpy.ndarray, float32, shape (n,)
        Pass it as ``input_std`` to :func:`position_attention`. Compare with
        the spread of ``p_k`` alone (:func:`position_std`) to see how much more
        ``LN(p)`` enlarges the position part than the real input does.
    """
    n = _int_arg("n", n, 1, enc.max_positions)
    t = _token_ids(enc, ids)
    eps = float(enc.embedding_module("embedding_norm").eps)
    E = enc.word_embeddings()[t].double()  # (N, D)
    Pm = enc.position_embeddings()[:n].double()  # (n, D)
    s = _segment_vector(enc, segment).double()  # (D,)
    out = np.empty(n, dtype=np.float32)
    for k in range(n):
        X = E + Pm[k] + s  # (N, D)
        out[k] = float(torch.sqrt(X.var(dim=1, unbiased=False) + eps).mean())
    return out


def position_std(enc: Any, n: int) -> np.ndarray:
    """The divisor ``LN(p_k)`` alone uses: ``sqrt(var(p_k) + eps)`` for positions ``0..n-1`` (float32, shape (n,))."""
    n = _int_arg("n", n, 1, enc.max_positions)
    eps = float(enc.embedding_module("embedding_norm").eps)
    Pm = enc.position_embeddings()[:n].double()
    return torch.sqrt(Pm.var(dim=1, unbiased=False) + eps).float().numpy()


def token_attention(
    enc: Any, layer: int = 0, n: int = 64, *, n_seqs: int = 32, seed: int = 0, segment: int = 0, batch: int = 16
) -> np.ndarray:
    """Mean attention weights of one layer in a real forward pass over sequences of random tokens.

    Each sequence is ``n`` token ids drawn uniformly (seeded) from the
    vocabulary without the special tokens, all of segment ``segment``, no
    padding. Averaging over sequences leaves what the heads do by position;
    the word-dependent part averages out.

    Parameters
    ----------
    enc : Encoder
        From :func:`mixlib.load_encoder` (in eval mode).
    layer : int, default 0
        0-based layer whose attention weights are averaged.
    n : int, default 64
        Sequence length (positions ``0..n-1``).
    n_seqs : int, default 32
        Random sequences averaged.
    seed : int, default 0
        Seed of ``numpy.random.default_rng`` that draws the tokens.
    segment : int, default 0
        Token type (segment) id of every token.
    batch : int, default 16
        Sequences per forward pass.

    Returns
    -------
    numpy.ndarray, float32, shape (H, n, n)
        Rows = query position, columns = key position; each row sums to 1.

    Raises
    ------
    ValueError
        ``layer``, ``n``, ``n_seqs``, ``batch`` or ``segment`` out of range, or the model is in train mode
        (dropout on).

    Examples
    --------
    >>> t = mixlib.token_attention(enc, layer=0, n=16, n_seqs=8)
    >>> t.shape  # (H, n, n)
    (12, 16, 16)
    >>> bool(abs(t.sum(-1) - 1).max() < 1e-4)
    True
    """
    from .models import check_eval

    check_eval(enc, "token_attention")
    enc.check_layer(layer)
    n = _int_arg("n", n, 1, enc.max_positions)
    n_seqs = _int_arg("n_seqs", n_seqs, 1, 10**6)
    batch = _int_arg("batch", batch, 1, 10**6)
    n_types = enc.embedding_module("token_type_embeddings").weight.shape[0]
    segment = _int_arg("segment", segment, 0, n_types - 1)
    special = set(enc.tokenizer.all_special_ids)
    pool = np.array([i for i in range(enc.vocab_size) if i not in special])
    rng = np.random.default_rng(seed)
    ids = torch.from_numpy(rng.choice(pool, size=(n_seqs, n)))  # (B, n)
    acc = torch.zeros(enc.n_heads, n, n, dtype=torch.float64)
    with torch.inference_mode():
        for s in range(0, n_seqs, batch):
            x = ids[s : s + batch].to(enc.device)
            out = enc.model(
                input_ids=x,
                attention_mask=torch.ones_like(x),
                token_type_ids=torch.full_like(x, segment),
                output_attentions=True,
            )
            acc += out.attentions[layer].double().sum(0).cpu()  # (H, n, n)
    return (acc / n_seqs).float().numpy()


def _pearson_rows(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row of X with the matching row of Y (last axis)."""
    Xc = X - X.mean(-1, keepdims=True)
    Yc = Y - Y.mean(-1, keepdims=True)
    den = np.sqrt((Xc**2).sum(-1) * (Yc**2).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (Xc * Yc).sum(-1) / den, np.nan)


def map_correlation(A: Any, B: Any, *, n_perm: int = 200, seed: int = 0):
    """Per head, how alike two attention maps are, against a position-permutation null.

    Parameters
    ----------
    A, B : array-like, shape (H, n, n)
        E.g. position-only attention (:func:`position_attention`) and the real
        mean attention (:func:`token_attention`); rows = queries, columns = keys.
    n_perm : int, default 200
        Random permutations. Each draw reorders the rows of ``A`` by one random
        permutation and its columns by another (the same pair for every head):
        the null map keeps ``A``'s weights but loses every alignment with the
        positions, the diagonal included (a joint permutation of rows and
        columns would keep the diagonal in place and so "explain" any
        attend-to-self head).
    seed : int, default 0
        Seed of ``numpy.random.default_rng`` that draws the permutations.

    Returns
    -------
    pandas.DataFrame
        Index ``head``; columns

        ``r``
            Pearson correlation of the ``n * n`` weights of the two maps.
        ``null_mean``, ``null_q95``, ``null_max``
            Of ``r`` over the permutations.
        ``p_value``
            ``(1 + #{r_null >= r}) / (1 + n_perm)``.
        ``survives``
            ``r > null_max`` (above every permutation).
        ``best_match``
            The head ``h'`` whose map in ``B`` correlates best with head ``h``
            of ``A`` (equal to the head itself when the pattern is specific to it).
        ``runner_up``
            The best-matching *other* head of ``B`` (the one ``margin`` is measured against).
        ``margin``
            ``r`` minus the best correlation of head ``h`` of ``A`` with any *other*
            head of ``B``: positive when the head itself is the best match, and
            by how much (a small margin means the shape is shared with another head).
        ``tv``
            Mean over query rows of the total-variation distance
            ``0.5 * sum_j |A_ij - B_ij|`` (0 = identical rows, 1 = disjoint). Unlike
            ``r`` it sees the scale: a nearly uniform map with the right shape
            has a high ``r`` but a large ``tv``.

    Raises
    ------
    ValueError
        If the shapes differ or are not (H, n, n), or ``n_perm`` is out of range.

    Examples
    --------
    >>> a = mixlib.position_attention(enc, n=16)
    >>> t = mixlib.token_attention(enc, n=16, n_seqs=8)
    >>> mc = mixlib.map_correlation(a, t, n_perm=20)
    >>> mc.shape, mc.index.name  # one row per head
    ((12, 10), 'head')
    >>> mc.columns.tolist()[:5]
    ['r', 'null_mean', 'null_q95', 'null_max', 'p_value']
    """
    import pandas as pd

    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    if A.ndim != 3 or A.shape != B.shape or A.shape[1] != A.shape[2]:
        raise ValueError(f"A and B must both have shape (H, n, n); got {A.shape} and {B.shape}.")
    n_perm = _int_arg("n_perm", n_perm, 1, 100_000)
    H, n, _ = A.shape
    rng = np.random.default_rng(seed)
    Af, Bf = A.reshape(H, -1), B.reshape(H, -1)
    r = _pearson_rows(Af, Bf)  # (H,)
    cross = _pearson_rows(Af[:, None, :], Bf[None, :, :])  # (H, H): A head h vs B head h'
    null = np.empty((n_perm, H))
    for i in range(n_perm):
        rows, cols = rng.permutation(n), rng.permutation(n)
        null[i] = _pearson_rows(A[:, rows][:, :, cols].reshape(H, -1), Bf)
    df = pd.DataFrame({
        "r": r,
        "null_mean": null.mean(0),
        "null_q95": np.quantile(null, 0.95, axis=0),
        "null_max": null.max(0),
        "p_value": (1 + (null >= r[None, :]).sum(0)) / (1 + n_perm),
    }, index=pd.RangeIndex(H, name="head"))
    df["survives"] = df["r"] > df["null_max"]
    df["best_match"] = np.nanargmax(np.where(np.isnan(cross), -np.inf, cross), axis=1)
    others = np.where(np.eye(H, dtype=bool) | np.isnan(cross), -np.inf, cross)
    df["runner_up"] = others.argmax(axis=1)
    df["margin"] = r - others.max(axis=1) if H > 1 else np.nan
    df["tv"] = 0.5 * np.abs(A - B).sum(-1).mean(-1)
    return df


SIEVE_LABELS = ("distinct", "unsure", "indistinct", "not_own")


def own_sieve(full: Any, half_a: Any, half_b: Any, *, margin: float = 0.05):
    """Which heads keep their own position-only pattern in real attention, and how clearly.

    The three frames come from :func:`map_correlation` of the same position-only
    maps against the real mean map of all sequences (``full``, whose
    ``survives`` is used) and of the two halves of the sequences
    (``half_a``, ``half_b``; their null is not used).

    Parameters
    ----------
    full, half_a, half_b : pandas.DataFrame
        :func:`map_correlation` results with the same heads.
    margin : float, default 0.05
        How much higher a head's correlation with its own real map must be than
        with the runner-up head's, in (0, 1).

    Returns
    -------
    pandas.Series
        Index ``head``; one of :data:`SIEVE_LABELS` per head:

        ``"not_own"``
            The head fails the null, or some other head's real map correlates
            best with its position-only map (in the whole set or in either half).
        ``"distinct"``
            Its own real map is best and ahead of the runner-up by at least
            ``margin`` in both halves.
        ``"unsure"``
            Ahead by ``margin`` in the whole set or in one half, but not in both
            halves (the halves' maps are noisier, so this cannot be decided).
        ``"indistinct"``
            Ahead by less than ``margin`` in the whole set and in both halves:
            the head cannot be told apart from another.

    Raises
    ------
    ValueError
        If the frames lack the columns or their heads differ, or ``margin`` is
        not in (0, 1).

    Examples
    --------
    >>> a = mixlib.position_attention(enc, n=16)
    >>> t1 = mixlib.token_attention(enc, n=16, n_seqs=4, seed=0)
    >>> t2 = mixlib.token_attention(enc, n=16, n_seqs=4, seed=1)
    >>> full, half_a, half_b = (mixlib.map_correlation(a, t, n_perm=20) for t in ((t1 + t2) / 2, t1, t2))
    >>> s = mixlib.own_sieve(full, half_a, half_b)
    >>> s.name, s.shape  # one label per head
    ('sieve', (12,))
    >>> set(s) <= {"distinct", "unsure", "indistinct", "not_own"}
    True
    """
    import pandas as pd

    margin = float(margin)
    if not 0 < margin < 1:
        raise ValueError(f"margin must be in (0, 1); got {margin}.")
    need = {"survives", "best_match", "margin"}
    for name, df in (("full", full), ("half_a", half_a), ("half_b", half_b)):
        if not isinstance(df, pd.DataFrame) or not need <= set(df.columns):
            raise ValueError(f"{name} must be a map_correlation() result (columns {sorted(need)}).")
        if not df.index.equals(full.index):
            raise ValueError(f"{name} has heads {list(df.index)}, full has {list(full.index)}: compare the same maps.")
    heads = full.index.to_numpy()
    own = (full["survives"].to_numpy(bool) & (full["best_match"].to_numpy() == heads)
           & (half_a["best_match"].to_numpy() == heads) & (half_b["best_match"].to_numpy() == heads))
    halves = np.minimum(half_a["margin"].to_numpy(float), half_b["margin"].to_numpy(float)) >= margin
    anywhere = np.maximum.reduce([full["margin"].to_numpy(float), half_a["margin"].to_numpy(float),
                                  half_b["margin"].to_numpy(float)]) >= margin
    label = np.where(~own, "not_own", np.where(halves, "distinct", np.where(anywhere, "unsure", "indistinct")))
    return pd.Series(label, index=full.index, name="sieve")


OFFSET_GROUPS = ("same", "other", "posflat", "flat", "unsettled")


def offset_groups(heads: Any, *, settled: Any, flat_pos: Any, flat_tok: Any, peak_pos: Any, peak_tok: Any) -> dict:
    """Sort heads by whether their relative-offset peaks can be compared, position-only map against real attention.

    Parameters
    ----------
    heads : sequence of int
        The heads to sort (e.g. those whose real map matches their own position-only map).
    settled, flat_pos, flat_tok, peak_pos, peak_tok : indexable by head
        Real attention's peak offset agrees between the two halves of the sequences and clears the bar
        (``settled``); the position-only / real profile stays under the bar (``flat_pos`` / ``flat_tok``); the
        peak offsets (``peak_pos`` / ``peak_tok``).

    Returns
    -------
    dict
        Keys :data:`OFFSET_GROUPS`, each a list of heads; every head is in exactly one:
        ``same`` (both concentrate on one offset, the same), ``other`` (both concentrate, on different offsets),
        ``posflat`` (real attention settles, the position-only map is flat), ``flat`` (real attention is flat),
        ``unsettled`` (real attention concentrates but the halves disagree on where).

    Raises
    ------
    ValueError
        A head is both ``settled`` and ``flat_tok`` (settling includes clearing the bar).

    Examples
    --------
    >>> mixlib.offset_groups([0, 1, 2, 3], settled=[True, True, False, False], flat_pos=[False, True, False, False],
    ...                      flat_tok=[False, False, True, False], peak_pos=[1, -1, 0, 0], peak_tok=[1, 1, 0, 0])
    {'same': [0], 'other': [], 'posflat': [1], 'flat': [2], 'unsettled': [3]}
    """
    groups: dict[str, list[int]] = {k: [] for k in OFFSET_GROUPS}
    for h in heads:
        if settled[h] and flat_tok[h]:
            raise ValueError(f"head {h} is both settled and flat: settled must include clearing the bar.")
        if settled[h]:
            key = "posflat" if flat_pos[h] else ("same" if peak_pos[h] == peak_tok[h] else "other")
        else:
            key = "flat" if flat_tok[h] else "unsettled"
        groups[key].append(int(h))
    return groups


# ---------------------------------------------------------------------------
# psi on word embeddings alone vs. on the real input (issue 9, C3)
# ---------------------------------------------------------------------------


def _boot_ranks(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Average ranks of every item of ``x`` inside each bootstrap resample, without sorting per resample.

    ``counts[b, i]`` is how often item ``i`` was drawn in resample ``b``. Within
    a resample the ``counts[b, i]`` copies of item ``i`` tie, so their average
    rank is (copies of items with a smaller ``x``) + ``(counts[b, i] + 1) / 2``.
    Ties inside ``x`` itself are broken by position (psi values are continuous).
    """
    order = np.argsort(x, kind="stable")
    c = counts[:, order]  # (B, N) multiplicities in ascending x
    c = c.astype(x.dtype if np.issubdtype(x.dtype, np.floating) else np.float64)
    r_sorted = np.cumsum(c, axis=1) - c + (c + 1) / 2  # exact in float32 too (integers and halves below 2**24)
    r = np.empty_like(r_sorted)
    r[:, order] = r_sorted
    return r


def _boot_centred_ranks(x: np.ndarray, counts: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap ranks of ``x`` centred by their weighted mean, times the weights, and their weighted sums of squares."""
    r = _boot_ranks(x, counts)  # (B, N)
    r -= (w * r).sum(1, keepdims=True) / w.sum(1, keepdims=True)
    wr = w * r
    return wr, (wr * r).sum(1)


def _boot_spearman(x: np.ndarray, y: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Spearman's rho of ``(x, y)`` in each bootstrap resample given by ``counts`` (B, N): a weighted Pearson of the ranks."""
    w = counts.astype(np.float64)
    wdx, vx = _boot_centred_ranks(x, counts, w)
    dy = _boot_ranks(y, counts)
    dy -= (w * dy).sum(1, keepdims=True) / w.sum(1, keepdims=True)
    return (wdx * dy).sum(1) / np.sqrt(vx * (w * dy * dy).sum(1))


def psi_rank_agreement(
    enc: Any,
    ids: Any,
    positions: Any,
    *,
    layer: int = 0,
    segment: int = 0,
    which: str = "qkv",
    n_boot: int = 200,
    seed: int = 0,
):
    """Spearman correlation, per head, of psi on the word embeddings alone and psi on the real input.

    For every position ``k`` in ``positions`` the real input is
    ``LN(e_t + p_k + s_segment)`` (:func:`real_input`). psi comes from
    :func:`mixlib.norm_stretch`. A rank correlation within one head does not
    change when psi is divided by a per-head constant, so it is the same for
    the raw and for a head-normalised psi.

    Parameters
    ----------
    enc : Encoder
        From :func:`mixlib.load_encoder`.
    ids : array-like of int, shape (N,)
        Tokens to compare (e.g. a random sample of the vocabulary); at least 3.
    positions : iterable of int
        Positions ``k`` at which the real input is built, each in ``0..P-1``.
    layer : int, default 0
        Layer whose projections are used. Only layer 0 receives this input; for
        other layers it is a probe of the weights.
    segment : int, default 0
        Token type (segment) id of the real input.
    which : {"q", "k", "v", "qkv"}, default "qkv"
        Which psi to compare (:meth:`Stretch.get`).
    n_boot : int, default 200
        Bootstrap resamples of the tokens for the 95 % interval (0 = none).
    seed : int, default 0
        Seed of ``numpy.random.default_rng`` that draws the resamples.

    Returns
    -------
    pandas.DataFrame
        One row per (position, head): ``position``, ``head``, ``rho``,
        ``ci_lo``, ``ci_hi`` (2.5 % / 97.5 % bootstrap quantiles; NaN when
        ``n_boot=0``).

    Raises
    ------
    ValueError
        ``positions`` is empty or holds a position out of range, fewer than 3 token ids, ``n_boot`` or
        ``layer`` out of range, or a token id outside the vocabulary.

    Examples
    --------
    >>> import numpy as np
    >>> ids = np.random.default_rng(0).choice(np.arange(1000, 30000), size=50, replace=False)
    >>> r = mixlib.psi_rank_agreement(enc, ids, [0, 5], n_boot=20)
    >>> r.shape  # 2 positions x 12 heads
    (24, 5)
    >>> r.columns.tolist()
    ['position', 'head', 'rho', 'ci_lo', 'ci_hi']
    """
    import pandas as pd
    from scipy.stats import spearmanr

    from .stretch import norm_stretch

    enc.check_layer(layer)
    t = _token_ids(enc, ids)
    positions = [_int_arg("position", k, 0, enc.max_positions - 1) for k in positions]
    if not positions:
        raise ValueError("positions is empty; give at least one position.")
    n_boot = _int_arg("n_boot", n_boot, 0, 100_000)
    N = t.numel()
    if N < 3:
        raise ValueError(f"give at least 3 token ids for a rank correlation; got {N}.")
    rng = np.random.default_rng(seed)
    counts = None
    if n_boot:  # the same resamples for every head and position, as multiplicities (n_boot, N)
        draws = rng.integers(0, N, size=(n_boot, N))
        counts = np.zeros((n_boot, N), dtype=np.int64)
        np.add.at(counts, (np.arange(n_boot)[:, None], draws), 1)
    psi_w = norm_stretch(enc, X=enc.word_embeddings()[t], layers=layer).get(which)[0]  # (H, N) float32
    if counts is not None:
        w = counts.astype(np.float32)  # float32 bootstrap arithmetic: half the memory traffic, ample for a 95 % interval
        word_ranks = [_boot_centred_ranks(psi_w[h], counts, w) for h in range(enc.n_heads)]  # shared by every position
    rows = []
    for k in positions:
        psi_r = norm_stretch(enc, X=real_input(enc, t, k, segment=segment), layers=layer).get(which)[0]  # (H, N)
        for h in range(enc.n_heads):
            rho = float(spearmanr(psi_w[h], psi_r[h]).statistic)
            lo = hi = float("nan")
            if counts is not None:
                wdx, vx = word_ranks[h]
                dy = _boot_ranks(psi_r[h], counts)  # (n_boot, N) float32
                dy -= (w * dy).sum(1, keepdims=True) / N  # every resample has N draws
                rb = (wdx * dy).sum(1) / np.sqrt(vx * (w * dy * dy).sum(1))  # (n_boot,) Spearman per resample
                lo, hi = (float(x) for x in np.nanquantile(rb, [0.025, 0.975]))
            rows.append({"position": k, "head": h, "rho": rho, "ci_lo": lo, "ci_hi": hi})
    return pd.DataFrame(rows)
