"""BERT's pre-training, small enough to run in a chapter: MLM masking, NSP pairs, a miniature BERT.

Chapter 8 uses this module to show the two pre-training tasks of BERT
(Devlin et al., 2019) with real code:

* :func:`mlm_mask` -- choose 15% of the ordinary tokens; replace 80% of the
  chosen ones by ``[MASK]``, 10% by a random token, keep 10% unchanged; the
  labels are the original tokens at the chosen positions. :func:`masking_stats`
  counts what happened.
* :func:`nsp_examples` -- sentence pairs for next-sentence prediction: half
  real continuations (``IsNext``), half random sentences (``NotNext``).
* :func:`train_minibert` -- a tiny ``transformers.BertForMaskedLM`` trained
  with the MLM loss on a small corpus in a minute or two on a CPU, over a
  compact vocabulary (the WordPiece ids that occur in the corpus).
* :func:`fill_mask` -- the top-k predictions for every ``[MASK]`` of a text,
  for the miniature model or for a real pre-trained MLM head
  (``AutoModelForMaskedLM``, e.g. bert-base-uncased where it can be downloaded).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
import torch

__all__ = [
    "NONE",
    "MASKED",
    "RANDOM",
    "KEPT",
    "ACTION_NAMES",
    "MaskedBatch",
    "mlm_mask",
    "masking_stats",
    "nsp_examples",
    "CompactVocab",
    "MiniBert",
    "train_minibert",
    "fill_mask",
]

#: What :func:`mlm_mask` did to each position (``MaskedBatch.action``).
NONE, MASKED, RANDOM, KEPT = 0, 1, 2, 3
ACTION_NAMES = {NONE: "選ばれない", MASKED: "[MASK] に置換", RANDOM: "ランダムな語に置換", KEPT: "そのまま"}


# ---------------------------------------------------------------------------
# masked language modelling
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MaskedBatch:
    """The result of :func:`mlm_mask`.

    Attributes
    ----------
    input_ids : LongTensor (B, N)
        The corrupted input the model reads.
    labels : LongTensor (B, N)
        The original id at the chosen positions, ``-100`` elsewhere (the value
        ``torch.nn.CrossEntropyLoss`` and ``BertForMaskedLM`` ignore).
    chosen : BoolTensor (B, N)
        Positions chosen for prediction.
    action : LongTensor (B, N)
        :data:`NONE`, :data:`MASKED`, :data:`RANDOM` or :data:`KEPT` per position.
    eligible : BoolTensor (B, N)
        Positions that could have been chosen (not special, not padding).
    """

    input_ids: torch.Tensor
    labels: torch.Tensor
    chosen: torch.Tensor
    action: torch.Tensor
    eligible: torch.Tensor


def mlm_mask(
    input_ids: torch.Tensor,
    *,
    mask_id: int,
    special_ids: Iterable[int],
    random_ids: Sequence[int] | torch.Tensor,
    rate: float = 0.15,
    p_mask: float = 0.8,
    p_random: float = 0.1,
    generator: torch.Generator | None = None,
) -> MaskedBatch:
    """BERT's masking for the masked-language-model task.

    Every position whose id is not in ``special_ids`` is chosen independently
    with probability ``rate``. A chosen token is replaced by ``mask_id`` with
    probability ``p_mask``, by a token drawn uniformly from ``random_ids`` with
    probability ``p_random``, and kept unchanged otherwise. The model must
    predict the original token at every chosen position, whatever happened to it.

    Parameters
    ----------
    input_ids : LongTensor (B, N)
    mask_id : int
        The id of ``[MASK]``.
    special_ids : iterable of int
        Ids never chosen: ``[CLS]``, ``[SEP]``, ``[PAD]`` ...
    random_ids : sequence of int
        Ids a random replacement is drawn from (usually every ordinary token).
    rate, p_mask, p_random : float
        BERT's 0.15, 0.8, 0.1. ``p_mask + p_random`` must be at most 1; the
        rest, ``1 - p_mask - p_random``, is the share kept unchanged.
    generator : torch.Generator, optional
        For reproducible masks.

    Returns
    -------
    MaskedBatch

    Raises
    ------
    ValueError
        A probability outside [0, 1], ``p_mask + p_random > 1``, an empty
        ``random_ids``, or ``input_ids`` that is not 2-D.

    Notes
    -----
    BERT's own data pipeline picks exactly ``round(0.15 * length)`` tokens per
    sequence; choosing each token independently (as Hugging Face's
    ``DataCollatorForLanguageModeling`` does) gives the same rate on average.
    """
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be (B, N), got shape {tuple(input_ids.shape)}.")
    for name, p in (("rate", rate), ("p_mask", p_mask), ("p_random", p_random)):
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"{name}={p} must be a probability in [0, 1].")
    if p_mask + p_random > 1.0 + 1e-9:
        raise ValueError(f"p_mask + p_random = {p_mask + p_random} exceeds 1; the rest is the share kept unchanged.")
    random_ids = torch.as_tensor(random_ids, dtype=torch.long)
    if random_ids.numel() == 0:
        raise ValueError("random_ids is empty: give the ids a random replacement may be drawn from.")
    special = torch.as_tensor(sorted(set(int(i) for i in special_ids)), dtype=torch.long)
    eligible = ~torch.isin(input_ids, special)  # (B, N)
    u = torch.rand(input_ids.shape, generator=generator)
    chosen = eligible & (u < rate)
    v = torch.rand(input_ids.shape, generator=generator)
    to_mask = chosen & (v < p_mask)
    to_random = chosen & (v >= p_mask) & (v < p_mask + p_random)
    kept = chosen & ~to_mask & ~to_random
    pick = torch.randint(len(random_ids), input_ids.shape, generator=generator)
    corrupted = input_ids.clone()
    corrupted[to_mask] = mask_id
    corrupted[to_random] = random_ids[pick[to_random]]
    action = torch.zeros_like(input_ids)
    action[to_mask], action[to_random], action[kept] = MASKED, RANDOM, KEPT
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    return MaskedBatch(input_ids=corrupted, labels=labels, chosen=chosen, action=action, eligible=eligible)


def masking_stats(batch: MaskedBatch) -> dict[str, float]:
    """How many tokens could be chosen, how many were, and how the chosen ones were treated.

    Returns ``n_eligible``, ``n_chosen``, ``chosen_rate`` (of the eligible),
    ``mask``, ``random``, ``kept`` (shares of the chosen), ``random_changed``
    (share of the chosen whose random replacement differs from the original)
    and ``special_chosen`` (chosen positions that were not eligible: always 0).
    """
    n_eligible = int(batch.eligible.sum())
    n_chosen = int(batch.chosen.sum())
    denom = max(n_chosen, 1)
    rnd = batch.action == RANDOM
    return {
        "n_eligible": n_eligible,
        "n_chosen": n_chosen,
        "chosen_rate": n_chosen / max(n_eligible, 1),
        "mask": int((batch.action == MASKED).sum()) / denom,
        "random": int(rnd.sum()) / denom,
        "kept": int((batch.action == KEPT).sum()) / denom,
        "random_changed": int((rnd & (batch.input_ids != batch.labels)).sum()) / max(int(rnd.sum()), 1),
        "special_chosen": int((batch.chosen & ~batch.eligible).sum()),
    }


# ---------------------------------------------------------------------------
# next sentence prediction
# ---------------------------------------------------------------------------


def nsp_examples(pairs: Sequence[tuple[str, str]], *, seed: int = 0, p_next: float = 0.5) -> pd.DataFrame:
    """Next-sentence-prediction examples from consecutive sentence pairs.

    For each pair (A, B), with probability ``p_next`` the example is (A, B)
    labelled ``IsNext``; otherwise B is replaced by the second sentence of a
    different, randomly drawn pair and labelled ``NotNext``.

    Returns
    -------
    DataFrame with ``sentence_a``, ``sentence_b``, ``label`` (``IsNext``/``NotNext``)
    and ``source`` (index of the pair B came from).
    """
    if len(pairs) < 2:
        raise ValueError(f"need at least 2 sentence pairs to draw NotNext examples, got {len(pairs)}.")
    rng = random.Random(seed)
    rows = []
    for i, (a, b) in enumerate(pairs):
        if rng.random() < p_next:
            rows.append({"sentence_a": a, "sentence_b": b, "label": "IsNext", "source": i})
        else:
            j = rng.randrange(len(pairs) - 1)
            j += j >= i  # any pair but i
            rows.append({"sentence_a": a, "sentence_b": pairs[j][1], "label": "NotNext", "source": j})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------
# a miniature BERT
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactVocab:
    """The WordPiece ids that occur in a corpus, renumbered 0..V-1 (special tokens first).

    A miniature model needs no rows for the 30,000 pieces its corpus never uses.
    """

    ids: tuple[int, ...]
    tokenizer: Any = field(repr=False, compare=False)
    _index: dict[int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {t: i for i, t in enumerate(self.ids)})

    @classmethod
    def from_token_ids(cls, tokenizer: Any, seqs: Iterable[Sequence[int]]) -> "CompactVocab":
        specials = [tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id]
        used = sorted({int(t) for s in seqs for t in s} - set(specials))
        return cls(tuple(specials + used), tokenizer)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def special_compact(self) -> tuple[int, ...]:
        return (0, 1, 2, 3, 4)

    pad, unk, cls_, sep, mask = 0, 1, 2, 3, 4

    def to_compact(self, ids: torch.Tensor) -> torch.Tensor:
        """Tokenizer ids -> compact ids (pieces the corpus never had -> ``[UNK]``)."""
        flat = [self._index.get(int(t), self.unk) for t in ids.reshape(-1).tolist()]
        return torch.tensor(flat, dtype=torch.long).reshape(ids.shape)

    def to_tokens(self, compact: Iterable[int]) -> list[str]:
        return self.tokenizer.convert_ids_to_tokens([self.ids[int(i)] for i in compact])


@dataclass(frozen=True)
class MiniBert:
    """A trained miniature BERT (see :func:`train_minibert`).

    Attributes
    ----------
    model : transformers.BertForMaskedLM
        In eval mode; its vocabulary is :attr:`vocab`.
    vocab : CompactVocab
    losses : list of float
        The MLM loss of every training step.
    seconds : float
        Training wall time.
    config : dict
        The arguments of :func:`train_minibert`.
    """

    model: Any
    vocab: CompactVocab
    losses: list
    seconds: float
    config: dict

    def fill_mask(self, text: str, k: int = 5) -> list[pd.DataFrame]:
        """Top-k predictions for each ``[MASK]`` of ``text`` (see :func:`fill_mask`)."""
        return fill_mask(self.model, self.vocab.tokenizer, text, k=k, vocab=self.vocab)


def _tokenize(tokenizer: Any, sentences: Sequence[str], max_len: int) -> list[list[int]]:
    enc = tokenizer(list(sentences), add_special_tokens=True, truncation=True, max_length=max_len)
    return enc["input_ids"]


def train_minibert(
    sentences: Sequence[str],
    tokenizer: Any,
    *,
    d_model: int = 64,
    n_layers: int = 2,
    n_heads: int = 4,
    d_ff: int = 256,
    max_len: int = 32,
    steps: int = 1500,
    batch_size: int = 128,
    lr: float = 2e-3,
    warmup: int = 100,
    rate: float = 0.15,
    seed: int = 0,
    threads: int = 1,
) -> MiniBert:
    """Train a small ``BertForMaskedLM`` with the MLM loss alone (no NSP).

    The sentences are tokenised with ``tokenizer`` (WordPiece for BERT) as
    ``[CLS] sentence [SEP]``, the vocabulary is cut down to the pieces that
    occur (:class:`CompactVocab`), and every step masks a fresh random batch
    with :func:`mlm_mask` (dynamic masking, as RoBERTa; BERT masked each
    sequence in advance, ten different ways). AdamW, linear warm-up then linear
    decay, as BERT.

    Parameters
    ----------
    sentences : sequence of str
    tokenizer : a Hugging Face tokenizer with ``[MASK]`` (e.g. ``enc.tokenizer``)
    d_model, n_layers, n_heads, d_ff, max_len : int
        Model size; ``max_len`` also truncates the sentences.
    steps, batch_size, lr, warmup : training schedule
    rate : float
        Share of tokens chosen for prediction.
    seed : int
    threads : int, default 1
        CPU threads while training (restored afterwards); a model this small
        only loses time when split over threads.

    Returns
    -------
    MiniBert
    """
    from transformers import BertConfig, BertForMaskedLM

    from .transformer import torch_threads

    if not sentences:
        raise ValueError("sentences is empty; give the corpus to train on.")
    if tokenizer.mask_token_id is None:
        raise ValueError("the tokenizer has no [MASK] token; use a BERT-style (WordPiece) tokenizer.")
    config = dict(d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_ff=d_ff, max_len=max_len, steps=steps,
                  batch_size=batch_size, lr=lr, warmup=warmup, rate=rate, seed=seed)
    t0 = time.perf_counter()
    with torch_threads(threads):
        torch.manual_seed(seed)
        seqs = _tokenize(tokenizer, sentences, max_len)
        vocab = CompactVocab.from_token_ids(tokenizer, seqs)
        lengths = torch.tensor([len(s) for s in seqs])
        data = torch.full((len(seqs), int(lengths.max())), vocab.pad, dtype=torch.long)  # (S, N)
        for i, s in enumerate(seqs):
            data[i, : len(s)] = vocab.to_compact(torch.tensor(s))
        cfg = BertConfig(vocab_size=len(vocab), hidden_size=d_model, num_hidden_layers=n_layers, num_attention_heads=n_heads,
                         intermediate_size=d_ff, max_position_embeddings=max_len, type_vocab_size=2, pad_token_id=vocab.pad,
                         attn_implementation="eager")
        model = BertForMaskedLM(cfg)
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / max(warmup, 1), max(0.0, (steps - s) / max(steps - warmup, 1))))
        gen = torch.Generator().manual_seed(seed)
        random_ids = torch.arange(len(vocab.special_compact), len(vocab))
        losses = []
        model.train()
        for _ in range(steps):
            idx = torch.randint(len(seqs), (batch_size,), generator=gen)
            n = int(lengths[idx].max())
            batch = data[idx, :n]  # (B, n)
            m = mlm_mask(batch, mask_id=vocab.mask, special_ids=vocab.special_compact, random_ids=random_ids, rate=rate, generator=gen)
            if not bool(m.chosen.any()):
                continue
            out = model(input_ids=m.input_ids, attention_mask=(batch != vocab.pad).long(), labels=m.labels)
            opt.zero_grad()
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(float(out.loss.detach()))
        model.eval()
    return MiniBert(model=model, vocab=vocab, losses=losses, seconds=time.perf_counter() - t0, config=config)


@torch.no_grad()
def fill_mask(model: Any, tokenizer: Any, text: str, *, k: int = 5, vocab: CompactVocab | None = None) -> list[pd.DataFrame]:
    """The ``k`` most probable tokens for every ``[MASK]`` in ``text``.

    Parameters
    ----------
    model : a masked-LM model returning ``.logits`` of shape (1, N, V)
        ``BertForMaskedLM`` (the miniature one, or a pre-trained one from
        ``AutoModelForMaskedLM``).
    tokenizer : its tokenizer; write the blank as ``tokenizer.mask_token`` ("[MASK]").
    k : int, default 5
    vocab : CompactVocab, optional
        The compact vocabulary of a :class:`MiniBert`; ``None`` for a model
        over the tokenizer's full vocabulary.

    Returns
    -------
    list of DataFrame
        One per ``[MASK]``, left to right, with columns ``rank``, ``token`` and
        ``prob`` (softmax over the model's whole vocabulary).

    Raises
    ------
    ValueError
        ``text`` contains no mask token.
    """
    enc = tokenizer(text, return_tensors="pt")
    ids = enc["input_ids"]  # (1, N)
    where = (ids[0] == tokenizer.mask_token_id).nonzero().flatten().tolist()
    if not where:
        raise ValueError(f"{text!r} contains no {tokenizer.mask_token}; write the blank as {tokenizer.mask_token!r}.")
    model_ids = vocab.to_compact(ids) if vocab is not None else ids
    device = next(model.parameters()).device
    logits = model(input_ids=model_ids.to(device), attention_mask=enc["attention_mask"].to(device)).logits[0].float().cpu()  # (N, V)
    out = []
    for pos in where:
        p = torch.softmax(logits[pos], dim=-1)
        top = torch.topk(p, k)
        tokens = vocab.to_tokens(top.indices.tolist()) if vocab is not None else tokenizer.convert_ids_to_tokens(top.indices.tolist())
        out.append(pd.DataFrame({"rank": range(1, k + 1), "token": tokens, "prob": top.values.numpy()}))
    return out
