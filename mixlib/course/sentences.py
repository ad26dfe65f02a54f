"""Sentence vectors from a BERT-family encoder: mean pooling, [CLS], and how well they group sentences.

Chapter 9 turns every sentence into one vector -- the mean of the encoder's
output vectors over the sentence's real tokens (mean pooling, as Sentence-BERT
and the packaged all-MiniLM-L6-v2 do) -- and compares sentences by cosine.

* :func:`mean_pool` -- masked mean over tokens (padding excluded).
* :func:`sentence_vectors` -- texts -> (S, D) vectors with ``"mean"``,
  ``"cls"`` or ``"static"`` pooling, from any layer;
  :func:`sentence_vectors_by_layer` -- all layers from one forward pass.
* :func:`cosine_matrix`, :func:`group_scores` -- pairwise cosines, and how
  well they separate groups of sentences (within vs between groups, and
  nearest-neighbour accuracy).
* :func:`load_sentence_groups` -- the book's sentence groups (``data/sentence_groups.tsv``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

__all__ = [
    "POOLINGS",
    "mean_pool",
    "sentence_vectors",
    "sentence_vectors_by_layer",
    "cosine_matrix",
    "group_scores",
    "group_scores_null",
    "in_batch_contrastive",
    "load_sentence_groups",
]

#: The poolings :func:`sentence_vectors` knows.
POOLINGS = ("mean", "cls", "static")


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``hidden`` over the positions where ``attention_mask`` is 1.

    Parameters
    ----------
    hidden : Tensor (B, N, D)
    attention_mask : Tensor (B, N)
        1 for real tokens (``[CLS]`` and ``[SEP]`` included, as Sentence-BERT does), 0 for padding.

    Returns
    -------
    Tensor (B, D)
    """
    if hidden.dim() != 3 or attention_mask.shape != hidden.shape[:2]:
        raise ValueError(f"hidden must be (B, N, D) and attention_mask (B, N); got {tuple(hidden.shape)} and {tuple(attention_mask.shape)}.")
    m = attention_mask.to(hidden.dtype).unsqueeze(-1)  # (B, N, 1)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


def _check_texts(texts: Sequence[str]) -> None:
    if isinstance(texts, str) or not len(texts):
        raise ValueError("texts must be a non-empty list of strings.")
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str) or not t.strip()]
    if bad:
        raise ValueError(f"texts[{bad[0]}] is {texts[bad[0]]!r}; every item must be a non-empty string.")


@torch.no_grad()
def sentence_vectors_by_layer(enc: Any, texts: Sequence[str], *, pooling: str = "mean", batch_size: int = 32) -> np.ndarray:
    """Pooled vectors of every hidden state at once, ``(L + 1, S, D)``: index 0 is the embedding layer's output.

    One forward pass per batch serves all layers (``output_hidden_states``).
    ``pooling`` is ``"mean"`` or ``"cls"`` (see :func:`sentence_vectors`).
    """
    from ..models import check_eval

    _check_texts(texts)
    if pooling not in ("mean", "cls"):
        raise ValueError(f"pooling={pooling!r}; sentence_vectors_by_layer supports 'mean' and 'cls'.")
    check_eval(enc, "sentence_vectors_by_layer")
    out = []
    for start in range(0, len(texts), batch_size):
        batch = enc.tokenizer(list(texts[start : start + batch_size]), padding=True, truncation=True, max_length=512, return_tensors="pt")
        batch = {k: v.to(enc.device) for k, v in batch.items()}
        hs = torch.stack(enc.model(**batch, output_hidden_states=True).hidden_states)  # (L+1, B, N, D)
        if pooling == "mean":
            m = batch["attention_mask"].to(hs.dtype)[None, :, :, None]  # (1, B, N, 1)
            vec = (hs * m).sum(2) / m.sum(2).clamp(min=1e-9)  # (L+1, B, D)
        else:
            vec = hs[:, :, 0]  # (L+1, B, D)
        out.append(vec.float().cpu())
    return torch.cat(out, dim=1).numpy().astype(np.float32)


@torch.no_grad()
def sentence_vectors(
    enc: Any, texts: Sequence[str], *, pooling: str = "mean", layer: int | None = None, batch_size: int = 32, normalize: bool = False
) -> np.ndarray:
    """One vector per text from an :class:`mixlib.Encoder`.

    Parameters
    ----------
    enc : mixlib.Encoder
    texts : sequence of str
    pooling : {"mean", "cls", "static"}, default "mean"
        ``"mean"``: mean over real tokens of the chosen layer's output;
        ``"cls"``: the ``[CLS]`` vector of that layer; ``"static"``: the mean
        of the *word embeddings* of the tokens (no context at all; a
        word2vec-like baseline).
    layer : int, optional
        Which hidden state: 0 = the embedding layer's output, ``enc.n_layers``
        = the last layer (default).
    batch_size : int, default 32
    normalize : bool, default False
        Scale every vector to unit length.

    Returns
    -------
    ndarray (S, D), float32

    Raises
    ------
    ValueError
        Empty ``texts``, a non-string item, an unknown pooling or a layer out of range.
    """
    _check_texts(texts)
    if pooling not in POOLINGS:
        raise ValueError(f"pooling={pooling!r}; choose one of {POOLINGS}.")
    layer = enc.n_layers if layer is None else layer
    if not isinstance(layer, int) or not 0 <= layer <= enc.n_layers:
        raise ValueError(f"layer={layer!r} must be in 0..{enc.n_layers} (0 = embeddings, {enc.n_layers} = last layer).")
    if pooling == "static":
        out = []
        for start in range(0, len(texts), batch_size):
            batch = enc.tokenizer(list(texts[start : start + batch_size]), padding=True, truncation=True, max_length=512, return_tensors="pt")
            ids, mask = batch["input_ids"].to(enc.device), batch["attention_mask"].to(enc.device)
            out.append(mean_pool(enc.embedding_module("word_embeddings")(ids), mask).float().cpu())  # (B, D)
        x = torch.cat(out).numpy()
    else:
        x = sentence_vectors_by_layer(enc, texts, pooling=pooling, batch_size=batch_size)[layer]
    if normalize:
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


def cosine_matrix(x: np.ndarray) -> np.ndarray:
    """(S, S) cosine similarities of the rows of ``x`` (S, D)."""
    x = np.asarray(x, dtype=np.float64)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    if (n == 0).any():
        raise ValueError("a zero vector has no direction; its cosine is undefined.")
    u = x / n
    return u @ u.T


def group_scores(x: np.ndarray, groups: Sequence[Any]) -> dict[str, float]:
    """How well cosine similarity separates the groups.

    Returns ``within`` (mean cosine of two different sentences of the same
    group), ``between`` (mean cosine across groups), ``gap`` = within - between,
    and ``nn_accuracy``: the share of sentences whose most similar *other*
    sentence belongs to the same group.
    """
    g = np.asarray(groups)
    if len(g) != len(x):
        raise ValueError(f"{len(x)} vectors but {len(g)} group labels.")
    c = cosine_matrix(x)
    same = g[:, None] == g[None, :]
    off = ~np.eye(len(g), dtype=bool)
    if not (same & off).any() or not (~same).any():
        raise ValueError("need at least two groups, one of them with at least two sentences.")
    nn = np.where(off, c, -np.inf).argmax(axis=1)
    within, between = float(c[same & off].mean()), float(c[~same].mean())
    return {"within": within, "between": between, "gap": within - between, "nn_accuracy": float((g[nn] == g).mean())}


def group_scores_null(x: np.ndarray, groups: Sequence[Any], *, n_perm: int = 2000, seed: int = 0) -> pd.DataFrame:
    """:func:`group_scores` with the group labels randomly permuted, ``n_perm`` times (the null).

    Shuffling the labels keeps the vectors and the group sizes but breaks any
    link between a sentence and its group, so the observed ``gap`` and
    ``nn_accuracy`` can be compared with what chance alone gives. Vectorised:
    one cosine matrix, all permutations at once.

    Returns
    -------
    DataFrame with columns ``gap`` and ``nn_accuracy``, one row per permutation.
    """
    g = np.asarray(groups)
    if len(g) != len(x):
        raise ValueError(f"{len(x)} vectors but {len(g)} group labels.")
    if isinstance(n_perm, bool) or not isinstance(n_perm, (int, np.integer)) or n_perm < 1:
        raise ValueError(f"n_perm={n_perm!r}; give a positive number of permutations.")
    group_scores(x, g)  # validates the groups
    c = cosine_matrix(x)
    n = len(g)
    rng = np.random.default_rng(seed)
    perm = np.argsort(rng.random((int(n_perm), n)), axis=1)  # (P, S)
    lab = np.unique(g, return_inverse=True)[1][perm]  # (P, S) permuted labels as ints
    same = lab[:, :, None] == lab[:, None, :]  # (P, S, S)
    off = ~np.eye(n, dtype=bool)
    within = (c * (same & off)).sum((1, 2)) / (same & off).sum((1, 2))
    between = (c * ~same).sum((1, 2)) / (~same).sum((1, 2))
    nn = np.where(off, c, -np.inf).argmax(axis=1)  # (S,) the nearest neighbour does not depend on the labels
    nn_acc = (lab[:, nn] == lab).mean(axis=1)
    return pd.DataFrame({"gap": within - between, "nn_accuracy": nn_acc})


def in_batch_contrastive(u: np.ndarray, v: np.ndarray, *, scale: float = 20.0) -> dict[str, float]:
    """The in-batch contrastive loss of a bi-encoder for a batch of pairs ``(u_i, v_i)``.

    Every row ``u_i`` must pick its own partner ``v_i`` out of all the ``v_j`` of
    the batch (the other pairs' sentences are the negatives):
    ``s_ij = scale * cos(u_i, v_j)`` and the loss is the cross-entropy
    ``-mean_i log softmax_j(s_ij)[j = i]`` -- the objective the
    all-MiniLM-L6-v2 sentence model was fine-tuned with (its model card);
    sentence-transformers calls it ``MultipleNegativesRankingLoss``.

    Parameters
    ----------
    u, v : array (B, D)
        Vectors of the first and the second sentence of each pair; row ``i`` of
        ``u`` and row ``i`` of ``v`` belong together.
    scale : float, default 20.0
        Multiplies the cosines before the softmax (an inverse temperature).

    Returns
    -------
    dict with ``loss`` (mean cross-entropy, nats), ``accuracy`` (share of rows
    whose largest score is on the diagonal) and ``chance_loss`` (``log B``, the
    loss when all scores are equal).
    """
    u, v = np.asarray(u, dtype=np.float64), np.asarray(v, dtype=np.float64)
    if u.ndim != 2 or u.shape != v.shape or len(u) < 2:
        raise ValueError(f"u and v must both be (B, D) with B >= 2 pairs; got {u.shape} and {v.shape}.")
    if not scale > 0:
        raise ValueError(f"scale={scale} must be positive.")
    nu, nv = np.linalg.norm(u, axis=1, keepdims=True), np.linalg.norm(v, axis=1, keepdims=True)
    if (nu == 0).any() or (nv == 0).any():
        raise ValueError("a zero vector has no direction; its cosine is undefined.")
    s = scale * (u / nu) @ (v / nv).T  # (B, B)
    s_max = s.max(axis=1, keepdims=True)
    log_z = np.log(np.exp(s - s_max).sum(axis=1)) + s_max[:, 0]
    loss = float((log_z - np.diag(s)).mean())
    return {"loss": loss, "accuracy": float((s.argmax(axis=1) == np.arange(len(s))).mean()), "chance_loss": float(np.log(len(s)))}


def load_sentence_groups(path: str | Path | None = None) -> pd.DataFrame:
    """The sentence groups of chapter 9: columns ``group``, ``scene`` (Japanese summary), ``sentence``.

    Checks that there are at least 4 groups of at least 4 distinct sentences.
    """
    if path is None:
        from ..paths import data_path

        path = data_path("sentence_groups.tsv")
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    missing = {"group", "scene", "sentence"} - set(df.columns)
    if missing:
        raise ValueError(f"{path} lacks the column(s) {sorted(missing)}; expected group, scene, sentence.")
    sizes = df.groupby("group", sort=False).size()
    if len(sizes) < 4 or (sizes < 4).any():
        raise ValueError(f"{path}: need >= 4 groups of >= 4 sentences; got sizes {sizes.to_dict()}.")
    if df.sentence.duplicated().any() or (df.sentence.str.strip() == "").any():
        raise ValueError(f"{path}: sentences must be non-empty and distinct.")
    if (df.groupby("group").scene.nunique() != 1).any():
        raise ValueError(f"{path}: every group must have one scene description.")
    return df
