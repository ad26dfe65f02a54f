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

__all__ = ["POOLINGS", "mean_pool", "sentence_vectors", "sentence_vectors_by_layer", "cosine_matrix", "group_scores", "load_sentence_groups"]

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
    _check_texts(texts)
    if pooling not in ("mean", "cls"):
        raise ValueError(f"pooling={pooling!r}; sentence_vectors_by_layer supports 'mean' and 'cls'.")
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
