"""Norm stretch psi of every token in every attention head (Maeda et al., section 3.1).

A head ``h`` of layer ``l`` maps a ``d``-dimensional vector ``x`` to ``d'`` dimensions
with the head's slice ``P`` of the query, key or value weight (rows
``h*d' : (h+1)*d'`` of the ``nn.Linear`` weight, biases left out as in the paper).
The *norm stretch*

.. math::

    \\psi = \\frac{\\lVert P x \\rVert / \\sqrt{d'}}{\\lVert x \\rVert / \\sqrt{d}}

compares the length of ``x`` before and after the projection, each normalised by
the square root of its dimension. Its square is a scaled Rayleigh quotient,
``psi**2 = (d / d') * x^T (P^T P) x / x^T x`` (paper eq. 5), so it lies between
the scaled smallest and largest eigenvalues of ``P^T P`` (:func:`stretch_bounds`).

psi = 1 is not a neutral value for a trained head: a random direction gets
``sqrt(E psi**2) = ||P||_F / sqrt(d')`` (:func:`random_psi_rms`), which differs
from head to head and projection to projection. :func:`normalize_stretch`
divides by it, so that 1 means "as much as a random direction" in every head;
compare heads only on that scale. ``norm_stretch(bias=True)`` adds the
projection biases the paper leaves out, and :func:`bias_rank_correlation`
says how much that changes the order of the tokens.

Results are numpy arrays on the CPU; shapes are commented as ``(L, H, V)`` =
layers, heads, vectors (the vocabulary by default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import torch

__all__ = [
    "Stretch",
    "StretchBounds",
    "norm_stretch",
    "stretch_bounds",
    "random_psi_rms",
    "normalize_stretch",
    "bias_rank_correlation",
    "eigen_alignment",
    "PROJECTIONS",
]

#: The three projections of a head, in the order used by every array with a projection axis.
PROJECTIONS: tuple[str, ...] = ("query", "key", "value")
_SHORT = {"q": "query", "k": "key", "v": "value", "query": "query", "key": "key", "value": "value"}




def _as_matrix(enc: Any, X: Any) -> torch.Tensor:
    """``X`` as a float32 ``(N, D)`` tensor on the CPU, validated."""
    if X is None:
        return enc.word_embeddings()
    if isinstance(X, np.ndarray):
        X = torch.from_numpy(np.ascontiguousarray(X))
    if not isinstance(X, torch.Tensor):
        raise TypeError(f"X must be a torch.Tensor or numpy array of shape (N, {enc.d_model}), got {type(X).__name__}.")
    if X.ndim == 1:
        X = X[None]
    if X.ndim != 2 or X.shape[1] != enc.d_model:
        raise ValueError(f"X must have shape (N, {enc.d_model}) (one {enc.d_model}-dimensional vector per row), got {tuple(X.shape)}.")
    if X.shape[0] == 0:
        raise ValueError("X has no rows; give at least one vector.")
    if not (X.is_floating_point() or X.is_complex()):
        X = X.float()
    X = X.detach().to(torch.float32)
    if not torch.isfinite(X).all():
        raise ValueError("X contains NaN or infinite values; psi is only defined for finite vectors.")
    return X


@dataclass(frozen=True, eq=False)
class Stretch:
    """Norm stretch of every vector in every head, for the query, key and value projections.

    Attributes
    ----------
    psi_q, psi_k, psi_v : numpy.ndarray, float32, shape (L, H, V)
        psi for the query, key and value projection; ``L`` runs over :attr:`layers`.
    psi_qkv : numpy.ndarray, float32, shape (L, H, V)
        The product ``psi_q * psi_k * psi_v`` (the paper's combined score).
    layers : tuple of int
        The (0-based) model layer of each index of the first axis.
    model : str
        Name of the encoder.
    d_model, d_head : int
        ``d`` and ``d'``.
    tokens : tuple of str or None
        The token string of each vector when ``X`` was the word-embedding
        matrix (the default), else None.
    n_zero : int
        How many vectors had norm 0 (their psi is NaN, see :func:`norm_stretch`).
    bias : bool
        True when the projection biases were added (``norm_stretch(bias=True)``).
    normalized : bool
        True for the output of :func:`normalize_stretch` (psi divided by the
        head's random-direction RMS value).
    """

    psi_q: np.ndarray = field(repr=False)
    psi_k: np.ndarray = field(repr=False)
    psi_v: np.ndarray = field(repr=False)
    psi_qkv: np.ndarray = field(repr=False)
    layers: tuple[int, ...]
    model: str
    d_model: int
    d_head: int
    tokens: tuple[str, ...] | None = field(default=None, repr=False)
    n_zero: int = 0
    bias: bool = False
    normalized: bool = False

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(L, H, V)``."""
        return tuple(self.psi_qkv.shape)  # type: ignore[return-value]

    def get(self, which: str = "qkv") -> np.ndarray:
        """The ``(L, H, V)`` array for ``which`` in ``{"q", "k", "v", "qkv"}`` (or ``query``/``key``/``value``)."""
        key = {"query": "q", "key": "k", "value": "v"}.get(which, which)
        if key not in ("q", "k", "v", "qkv"):
            raise ValueError(f"which={which!r}; expected one of 'q', 'k', 'v', 'qkv'.")
        return getattr(self, f"psi_{key}")

    def index(self, layer: int) -> int:
        """Position of model layer ``layer`` on the first axis; a clear error if it was not computed."""
        if not isinstance(layer, (int, np.integer)) or isinstance(layer, bool) or int(layer) not in self.layers:
            raise ValueError(f"layer={layer!r} is not in this Stretch; it holds layers {list(self.layers)} (0-based).")
        return self.layers.index(int(layer))

    def check_head(self, head: int) -> int:
        H = self.psi_qkv.shape[1]
        if not isinstance(head, (int, np.integer)) or isinstance(head, bool) or not 0 <= int(head) < H:
            raise ValueError(f"head={head!r} is out of range: {self.model} has heads 0..{H - 1} (0-based).")
        return int(head)

    def top_tokens(self, layer: int, head: int, n: int = 10, which: str = "qkv"):
        """The ``n`` vectors with the largest psi in one head, as a DataFrame (id, token, psi).

        NaN values (zero vectors) are ranked last.
        """
        import pandas as pd

        li, h = self.index(layer), self.check_head(head)
        if not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n={n!r}; expected a positive integer.")
        psi = self.get(which)[li, h]  # (V,)
        order = np.argsort(np.where(np.isnan(psi), np.inf, -psi), kind="stable")[: int(n)]  # NaN last
        return pd.DataFrame(
            {
                "id": order,
                "token": [self.tokens[i] for i in order] if self.tokens is not None else [None] * len(order),
                f"psi_{which}": psi[order],
            }
        )


def norm_stretch(
    enc: Any,
    X: Any = None,
    *,
    layers: int | Iterable[int] | None = None,
    chunk: int | None = None,
    bias: bool = False,
) -> Stretch:
    """psi_q, psi_k, psi_v (and their product) of every row of ``X`` in every head.

    Parameters
    ----------
    enc : Encoder
        From :func:`mixlib.load_encoder`; the computation runs on ``enc.device``.
    X : torch.Tensor or numpy.ndarray, shape (V, D), optional
        The vectors to measure. Default: the word-embedding matrix (every token
        of the vocabulary), as in the paper.
    layers : int or iterable of int, optional
        0-based layers to compute (default: all). The first axis of the result
        follows this order (see :attr:`Stretch.layers`).
    chunk : int or None, default None
        Rows of ``X`` projected at a time; ``None`` projects all rows at once,
        which is fastest on a CPU (a few large products beat many small ones).
        Give e.g. 8192 to lower the peak memory (on a small GPU); the result
        does not change.
    bias : bool, default False
        Add the projection's bias before taking the norm, ``||P x + b_h||``.
        The paper leaves the biases out (the default); ``True`` measures how
        much that choice matters (see :func:`bias_rank_correlation`). With a
        bias, psi is no longer a function of the direction of ``x`` alone and
        the eigenvalue bounds of :func:`stretch_bounds` do not apply.

    Returns
    -------
    Stretch
        Arrays ``(L, H, V)`` float32 on the CPU.

    Raises
    ------
    ValueError
        A layer out of range, a ``chunk`` that is not a positive int, or an ``X`` that is not ``(V, D)``, has
        no rows, or holds NaN or infinite values.
    TypeError
        ``X`` is not a tensor or array, ``layers`` is not an int or a list of ints, or ``bias`` is not a bool.

    Notes
    -----
    For each layer and projection the whole ``(V, D)`` product ``X W^T`` is
    computed by one matrix multiplication (per chunk), for all heads at once;
    the per-head norms come from reshaping it to ``(V, H, d')``. Layers are
    streamed: only one projection of one layer (of one chunk) is alive at a
    time, so the memory held beyond the result is one ``(V, D)`` product
    (``(chunk, D)`` with ``chunk``), a third of one layer's projections.

    **Zero vectors.** psi is a ratio of norms and is undefined for ``x = 0``
    (0 / 0). Such rows get ``psi = NaN`` in every head and projection (and in
    ``psi_qkv``); :attr:`Stretch.n_zero` counts them. Nothing raises. NaN or
    infinite input is rejected with a ``ValueError``.

    Examples
    --------
    >>> s = mixlib.norm_stretch(enc, layers=[0])  # the whole vocabulary, layer 0
    >>> s.shape  # (L, H, V)
    (1, 12, 30522)
    >>> s.tokens[2000], round(float(s.psi_q[0, 0, 2000]), 2)
    ('to', 2.34)
    >>> import numpy as np
    >>> X = np.random.default_rng(0).standard_normal((5, enc.d_model))  # any vectors
    >>> mixlib.norm_stretch(enc, X, layers=[0]).psi_qkv.shape
    (1, 12, 5)
    """
    Lsel = enc.check_layers(layers)
    if chunk is not None and (not isinstance(chunk, (int, np.integer)) or isinstance(chunk, bool) or chunk < 1):
        raise ValueError(f"chunk={chunk!r}; expected a positive number of rows or None.")
    Xc = _as_matrix(enc, X)  # (V, D) float32, validated
    tokens = None
    if X is None:
        tokens = tuple(enc.token_strings(Xc.shape[0]))
    V, D = Xc.shape
    H, dh = enc.n_heads, enc.d_head
    dev = enc.device
    step = V if chunk is None else int(chunk)
    if not isinstance(bias, bool):
        raise TypeError(f"bias must be True or False, got {bias!r}.")

    Xd = Xc.to(dev)
    xnorm = torch.linalg.vector_norm(Xd, dim=1)  # (V,)
    # psi = ||P x|| * sqrt(d / d') / ||x||; NaN where ||x|| == 0 (documented rule).
    scale = torch.where(xnorm > 0, math.sqrt(D / dh) / xnorm, torch.full_like(xnorm, float("nan")))  # (V,)
    n_zero = int((xnorm == 0).sum())

    out = {p: np.empty((len(Lsel), H, V), dtype=np.float32) for p in PROJECTIONS}  # each (L, H, V)
    with torch.inference_mode():
        for li, layer in enumerate(Lsel):
            for p in PROJECTIONS:
                W, b = enc.projection(layer, p)  # (D, D): rows = output features, head h = rows h*dh:(h+1)*dh
                Wt = W.to(dev, torch.float32).t()  # (D, D) view
                bv = b.to(dev, torch.float32) if (bias and b is not None) else None  # (D,)
                dst = out[p][li]  # (H, V)
                for s in range(0, V, step):
                    Y = Xd[s : s + step] @ Wt  # (n, D): one product for all heads
                    if bv is not None:
                        Y += bv
                    nrm = torch.linalg.vector_norm(Y.view(-1, H, dh), dim=2)  # (n, H)
                    del Y
                    nrm.mul_(scale[s : s + step, None])
                    dst[:, s : s + step] = nrm.t().cpu().numpy()
    qkv = out["query"] * out["key"]
    qkv *= out["value"]
    return Stretch(
        psi_q=out["query"],
        psi_k=out["key"],
        psi_v=out["value"],
        psi_qkv=qkv,
        layers=Lsel,
        model=enc.name,
        d_model=D,
        d_head=dh,
        tokens=tokens,
        n_zero=n_zero,
        bias=bias,
    )




@dataclass(frozen=True, eq=False)
class StretchBounds:
    """The range of psi in every head, from the eigenvalues of ``P^T P``.

    ``psi(x)**2 = (d / d') * R(P^T P, x)`` with ``R`` the Rayleigh quotient, so
    over all nonzero ``x`` psi ranges from ``sqrt(d/d' * lambda_min)`` to
    ``sqrt(d/d' * lambda_max)`` of the ``d x d`` matrix ``P^T P``. That matrix has
    rank at most ``d'``, so when ``d' < d`` (more than one head) its smallest
    eigenvalue is 0 and ``psi_min`` is exactly 0 (attained by any ``x`` in the
    null space of ``P``). The nonzero eigenvalues are those of the small
    ``d' x d'`` Gram matrix ``P P^T``, which is what is decomposed here.

    Attributes
    ----------
    psi_min, psi_max : numpy.ndarray, float64, shape (3, L, H)
        Bounds per projection (axis 0 follows :data:`PROJECTIONS`: query, key,
        value), layer and head.
    eigenvalues : numpy.ndarray, float64, shape (3, L, H, d')
        Eigenvalues of ``P P^T`` in ascending order (= the nonzero part of the
        spectrum of ``P^T P``).
    top_vectors : numpy.ndarray, float64, shape (3, L, H, D)
        Unit eigenvector of ``P^T P`` for its largest eigenvalue: the input
        direction with the largest psi (sign arbitrary).
    layers : tuple of int
    model : str
    d_model, d_head : int
    """

    psi_min: np.ndarray = field(repr=False)
    psi_max: np.ndarray = field(repr=False)
    eigenvalues: np.ndarray = field(repr=False)
    top_vectors: np.ndarray = field(repr=False)
    layers: tuple[int, ...]
    model: str
    d_model: int
    d_head: int

    def _idx(self, projection: str, layer: int, head: int) -> tuple[int, int, int]:
        p = _SHORT.get(projection)
        if p is None:
            raise ValueError(f"projection={projection!r}; expected one of 'q', 'k', 'v' (or query/key/value).")
        if not isinstance(layer, (int, np.integer)) or isinstance(layer, bool) or int(layer) not in self.layers:
            raise ValueError(f"layer={layer!r} is not in these bounds; they hold layers {list(self.layers)} (0-based).")
        H = self.psi_max.shape[2]
        if not isinstance(head, (int, np.integer)) or isinstance(head, bool) or not 0 <= int(head) < H:
            raise ValueError(f"head={head!r} is out of range: {self.model} has heads 0..{H - 1} (0-based).")
        return PROJECTIONS.index(p), self.layers.index(int(layer)), int(head)

    def top_vector(self, projection: str, layer: int, head: int) -> np.ndarray:
        """The unit input direction ``(D,)`` with the largest psi for one head and projection."""
        return self.top_vectors[self._idx(projection, layer, head)]

    def bounds(self, projection: str, layer: int, head: int) -> tuple[float, float]:
        """``(psi_min, psi_max)`` for one head and projection."""
        i = self._idx(projection, layer, head)
        return float(self.psi_min[i]), float(self.psi_max[i])


def stretch_bounds(enc: Any, *, layers: int | Iterable[int] | None = None) -> StretchBounds:
    """Smallest and largest possible psi of every head and projection, and the maximising direction.

    Parameters
    ----------
    enc : Encoder
        From :func:`mixlib.load_encoder`.
    layers : int or iterable of int, optional
        0-based layers (default: all).

    Returns
    -------
    StretchBounds
        See its docstring for the eigenvalue argument. Computed in float64 on
        the CPU from the ``H`` small Gram matrices ``P P^T`` (``d' x d'``) of each
        projection, batched over heads.

    Raises
    ------
    ValueError, TypeError
        ``layers`` is empty, repeats a layer, holds one out of range or is not an int or a list of ints.

    Examples
    --------
    >>> b = mixlib.stretch_bounds(enc, layers=[0])
    >>> b.psi_max.shape  # (projection, L, H)
    (3, 1, 12)
    >>> lo, hi = b.bounds("q", layer=0, head=1)
    >>> round(lo, 2), round(hi, 2)  # psi_min is 0: P has a null space (d' < d)
    (0.0, 10.88)
    """
    Lsel = enc.check_layers(layers)
    H, dh, D = enc.n_heads, enc.d_head, enc.d_model
    lam = np.empty((3, len(Lsel), H, dh))
    top = np.empty((3, len(Lsel), H, D))
    for li, layer in enumerate(Lsel):
        for pi, p in enumerate(PROJECTIONS):
            W, _ = enc.projection(layer, p)
            P = W.detach().to("cpu", torch.float64).reshape(H, dh, D)  # (H, d', D): P_h = rows of head h
            G = P @ P.transpose(1, 2)  # (H, d', d') = P P^T
            evals, evecs = torch.linalg.eigh(G)  # ascending; (H, d'), (H, d', d')
            u = evecs[:, :, -1]  # (H, d') top eigenvector of P P^T
            v = torch.einsum("hk,hkd->hd", u, P)  # (H, D) = P^T u, an eigenvector of P^T P
            v = v / torch.linalg.vector_norm(v, dim=1, keepdim=True)
            lam[pi, li] = evals.clamp_min(0).numpy()
            top[pi, li] = v.numpy()
    ratio = D / dh
    psi_max = np.sqrt(ratio * lam[..., -1])  # (3, L, H)
    if dh < D:
        psi_min = np.zeros_like(psi_max)  # P^T P (D x D) has rank <= d' < D: a null space exists
    else:
        psi_min = np.sqrt(ratio * lam[..., 0])
    return StretchBounds(
        psi_min=psi_min, psi_max=psi_max, eigenvalues=lam, top_vectors=top, layers=Lsel, model=enc.name, d_model=D, d_head=dh
    )


def random_psi_rms(enc: Any, *, layers: int | Iterable[int] | None = None) -> np.ndarray:
    r"""Root-mean-square psi of a random direction, for every projection, layer and head.

    For ``x`` drawn uniformly from the unit sphere of ``R^d`` (or from any
    isotropic distribution), ``E ||P x||^2 / ||x||^2 = tr(P^T P) / d``, so

    .. math::

        \sqrt{E\,\psi^2} = \sqrt{\tfrac{d}{d'} \cdot \tfrac{\lVert P\rVert_F^2}{d}} = \lVert P\rVert_F / \sqrt{d'} .

    This is the value psi takes "by chance" in a head; it is 1 only when the
    head's rows have mean squared norm 1, and for trained weights it differs
    widely between heads and between query, key and value. Divide by it
    (:func:`normalize_stretch`) before comparing heads.

    Parameters
    ----------
    enc : Encoder
    layers : int or iterable of int, optional
        0-based layers (default: all).

    Returns
    -------
    numpy.ndarray, float64, shape (3, L, H)
        Axis 0 follows :data:`PROJECTIONS` (query, key, value).

    Examples
    --------
    >>> r = mixlib.random_psi_rms(enc, layers=[0])
    >>> r.shape  # (projection, L, H)
    (3, 1, 12)
    >>> r[:, 0, 0].round(2).tolist()  # query, key, value of head 0: far from 1
    [1.74, 1.64, 0.83]
    """
    Lsel = enc.check_layers(layers)
    H, dh, D = enc.n_heads, enc.d_head, enc.d_model
    out = np.empty((3, len(Lsel), H))
    for li, layer in enumerate(Lsel):
        for pi, p in enumerate(PROJECTIONS):
            W, _ = enc.projection(layer, p)
            P = W.detach().to("cpu", torch.float64).reshape(H, dh, D)  # (H, d', D)
            out[pi, li] = (torch.sqrt((P * P).sum(dim=(1, 2))) / math.sqrt(dh)).numpy()
    return out


def normalize_stretch(stretch: Stretch, rms: Any) -> Stretch:
    """psi divided by the head's random-direction value: 1 = "as much as a random direction".

    Parameters
    ----------
    stretch : Stretch
        From :func:`norm_stretch` (without ``bias``: with biases psi is not a
        function of the direction and the random-direction value does not
        apply).
    rms : numpy.ndarray, shape (3, L, H), or Encoder
        :func:`random_psi_rms` for the same layers as ``stretch``; an encoder
        is accepted and the values are computed for ``stretch.layers``.

    Returns
    -------
    Stretch
        ``psi_q / rms[0]``, ``psi_k / rms[1]``, ``psi_v / rms[2]`` (per layer
        and head) and their product as ``psi_qkv`` (= psi_qkv divided by the
        product of the three values); ``normalized=True``. float32.

    Raises
    ------
    ValueError
        ``stretch`` is already normalised or was computed with biases, or
        ``rms`` has the wrong shape or a non-positive value.
    TypeError
        ``stretch`` is not a :class:`Stretch`.

    Examples
    --------
    >>> s = mixlib.norm_stretch(enc, layers=[0])
    >>> n = mixlib.normalize_stretch(s, mixlib.random_psi_rms(enc, layers=[0]))
    >>> n.normalized, n.shape
    (True, (1, 12, 30522))
    >>> round(float(n.psi_q[0, 0, 2000]), 1)  # "to" in head 0: 1.3 times a random direction
    1.3
    """
    if not isinstance(stretch, Stretch):
        raise TypeError(f"stretch must be a Stretch from norm_stretch(), got {type(stretch).__name__}.")
    if stretch.normalized:
        raise ValueError("this Stretch is already normalised; normalise the output of norm_stretch() once.")
    if stretch.bias:
        raise ValueError("psi with biases (norm_stretch(bias=True)) has no random-direction reference; use bias=False.")
    if hasattr(rms, "projection"):
        rms = random_psi_rms(rms, layers=stretch.layers)
    r = np.asarray(rms, dtype=np.float64)
    L, H, _ = stretch.shape
    if r.shape != (3, L, H):
        raise ValueError(f"rms must have shape (3, {L}, {H}) (projection, layer, head) from random_psi_rms(enc, layers=stretch.layers), got {r.shape}.")
    if not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise ValueError("rms must be positive and finite (a head whose projection is all zeros has no random-direction value).")
    q = (stretch.psi_q / r[0][..., None]).astype(np.float32)
    k = (stretch.psi_k / r[1][..., None]).astype(np.float32)
    v = (stretch.psi_v / r[2][..., None]).astype(np.float32)
    return Stretch(
        psi_q=q, psi_k=k, psi_v=v, psi_qkv=q * k * v, layers=stretch.layers, model=stretch.model, d_model=stretch.d_model,
        d_head=stretch.d_head, tokens=stretch.tokens, n_zero=stretch.n_zero, bias=False, normalized=True,
    )


def bias_rank_correlation(plain: Stretch, biased: Stretch, which: str = "qkv") -> np.ndarray:
    """Spearman rank correlation over the vectors of psi without and with the projection biases, per head.

    Parameters
    ----------
    plain, biased : Stretch
        ``norm_stretch(enc, X)`` and ``norm_stretch(enc, X, bias=True)`` for
        the same vectors and layers.
    which : {"qkv", "q", "k", "v"}, default "qkv"
        Which psi to compare: the product (default) or one projection's.

    Returns
    -------
    numpy.ndarray, float64, shape (L, H)
        Spearman's rho between the two psi of every head (ties get average
        ranks; vectors with NaN psi are left out). 1 means the biases do not
        change the order of the tokens in that head.

    Raises
    ------
    ValueError
        The two results differ in shape or layers, are passed in the wrong order (``plain`` with biases or
        ``biased`` without), fewer than two vectors have a finite psi, or ``which`` is not one of the four.

    Examples
    --------
    >>> plain = mixlib.norm_stretch(enc, layers=[0])
    >>> biased = mixlib.norm_stretch(enc, layers=[0], bias=True)
    >>> rho = mixlib.bias_rank_correlation(plain, biased)
    >>> rho.shape  # (L, H)
    (1, 12)
    >>> bool((rho > 0).all())
    True
    """
    from scipy.stats import rankdata

    if plain.shape != biased.shape or plain.layers != biased.layers:
        raise ValueError(f"the two Stretch objects differ: shapes {plain.shape} vs {biased.shape}, layers {plain.layers} vs {biased.layers}.")
    if plain.bias or not biased.bias:
        raise ValueError("pass the psi without biases first and the psi with biases (norm_stretch(bias=True)) second.")
    a = plain.get(which).astype(np.float64)
    b = biased.get(which).astype(np.float64)
    ok = np.isfinite(a).all(axis=(0, 1)) & np.isfinite(b).all(axis=(0, 1))  # (V,)
    a, b = a[..., ok], b[..., ok]
    if a.shape[-1] < 2:
        raise ValueError("fewer than two vectors with a finite psi; a rank correlation needs at least two.")
    ra = rankdata(a, axis=-1)
    rb = rankdata(b, axis=-1)
    ra -= ra.mean(axis=-1, keepdims=True)
    rb -= rb.mean(axis=-1, keepdims=True)
    return (ra * rb).sum(axis=-1) / np.sqrt((ra * ra).sum(axis=-1) * (rb * rb).sum(axis=-1))


def eigen_alignment(enc: Any, stretch: Stretch, X: Any, *, top: int = 100):
    """Do the vectors a head stretches most lie along its top eigenvector, or only inside its row space?

    For every projection, layer and head, take the ``top`` vectors of ``X`` with the largest ψ (NaN ψ never
    counts) and compare them with the eigenvectors of ``M = P^T P`` (``P`` the head's ``d' x D`` block of the
    projection weight; eigenvalues ``lambda_k = s_k^2`` from its singular values).

    Parameters
    ----------
    enc : Encoder
        The encoder ``stretch`` was computed with.
    stretch : Stretch
        ``norm_stretch(enc, X=X)`` (or of the word embeddings, with ``X`` the same matrix).
    X : array-like, shape (V, D)
        The vectors ``stretch`` was computed on.
    top : int, default 100
        How many of the most stretched vectors of each head to compare, 1..V.

    Returns
    -------
    pandas.DataFrame
        One row per (projection, layer, head): ``top_cos`` mean ``|cos|`` with the top eigenvector; ``top_share``
        mean share of ψ² carried by the top eigenvalue's component, ``lambda_1 c_1^2 / sum_k lambda_k c_k^2``;
        ``top_share_rand`` the same for a random direction, ``lambda_1 / sum lambda``; ``row_share`` mean share
        of the squared (unit) length inside the row space (``d'/D`` for a random direction); ``lam21``
        ``lambda_2 / lambda_1``.

    Raises
    ------
    ValueError
        ``X`` does not have the shape ``(V, D)`` of the vectors of ``stretch``, or ``top`` is not in 1..V.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).standard_normal((20, enc.d_model))
    >>> e = mixlib.eigen_alignment(enc, mixlib.norm_stretch(enc, X, layers=[0]), X, top=5)
    >>> e.shape  # 3 projections x 1 layer x 12 heads
    (36, 8)
    >>> e.columns.tolist()
    ['projection', 'layer', 'head', 'top_cos', 'top_share', 'top_share_rand', 'row_share', 'lam21']
    """
    import pandas as pd

    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] != stretch.shape[2] or X.shape[1] != enc.d_model:
        raise ValueError(f"X has shape {X.shape}; expected ({stretch.shape[2]}, {enc.d_model}), the vectors of the Stretch.")
    if not isinstance(top, (int, np.integer)) or isinstance(top, bool) or not 1 <= top <= X.shape[0]:
        raise ValueError(f"top={top!r} is out of range; expected an integer in 1..{X.shape[0]}.")
    dh = enc.d_head
    with np.errstate(invalid="ignore", divide="ignore"):
        X_unit = X / np.linalg.norm(X, axis=1, keepdims=True)  # a zero vector is NaN (its ψ too: never on top)
    rows = []
    for proj in PROJECTIONS:
        p_all = stretch.get(proj[0])  # (L, H, V)
        for li, layer in enumerate(stretch.layers):
            W = enc.projection(int(layer), proj)[0].cpu().numpy().astype(np.float64)  # (D, D)
            for h in range(enc.n_heads):
                _, sv, Vt = np.linalg.svd(W[h * dh:(h + 1) * dh], full_matrices=False)  # eigenvectors of M: rows of Vt
                lam = sv**2
                best = np.argsort(-np.nan_to_num(p_all[li, h], nan=-np.inf))[:top]
                c = X_unit[best] @ Vt.T  # (top, d'): components along the eigenvectors
                rows.append({"projection": proj, "layer": int(layer), "head": h, "top_cos": np.abs(c[:, 0]).mean(),
                             "top_share": (lam[0] * c[:, 0] ** 2 / (c**2 @ lam)).mean(), "top_share_rand": lam[0] / lam.sum(),
                             "row_share": (c**2).sum(1).mean(), "lam21": lam[1] / lam[0]})
    return pd.DataFrame(rows)
