"""BERT's pre-training, small enough to run in a chapter: MLM masking, NSP pairs, a miniature BERT.

Chapter 8 uses this module to show the two pre-training tasks of BERT
(Devlin et al., 2019) with real code:

* :func:`mlm_mask` -- choose 15% of the ordinary tokens; replace 80% of the
  chosen ones by ``[MASK]``, 10% by a random token, keep 10% unchanged; the
  labels are the original tokens at the chosen positions. :func:`masking_stats`
  counts what happened.
* :func:`nsp_examples` -- segment pairs for next-sentence prediction: each one
  the real continuation (``IsNext``) with probability 1/2, else the second
  segment of another pair (``NotNext``).
* :func:`train_minibert` -- a tiny ``transformers.BertForMaskedLM`` trained
  with the MLM loss on a small corpus in a minute or two on a CPU, over a
  compact vocabulary (the WordPiece ids that occur in the corpus).
* :func:`fill_mask` -- the top-k predictions for every ``[MASK]`` of a text,
  for the miniature model or for a real pre-trained MLM head
  (``AutoModelForMaskedLM``, e.g. bert-base-uncased where it can be downloaded).
* :func:`cloze_probes` / :func:`cloze_accuracy` -- every fill-in-the-blank
  question the grammar corpus implies, per relation, and the top-1 accuracy of
  a model on all of them (with the majority-answer baseline as the null);
  :func:`train_minibert` can record it during training (``probes=``).
* :func:`load_mlm_head` -- the masked-LM model behind an encoder, or ``None``
  when its checkpoint has no MLM head (the packaged all-MiniLM-L6-v2).
* :func:`tense_minimal_pairs` -- the tense probes grouped into minimal pairs
  (only the time word differs; only the object differs), so a cue's use is
  read off whole groups rather than off near-identical questions counted apart.
* :func:`compare_to_corpus` -- a fill-in's candidates against the corpus' own
  counts, the orders the counts fix judged by exact tests (Holm).
* :func:`diff_yardstick` / :func:`compare_settings` / :func:`describe_verdicts`
  -- the papers' ablation tables read against a rough dev-set yardstick for a
  difference, also widened for a whole table (Bonferroni).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
import torch
from scipy.stats import binomtest, norm

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
    "cloze_probes",
    "cloze_accuracy",
    "tense_minimal_pairs",
    "compare_to_corpus",
    "diff_yardstick",
    "compare_settings",
    "describe_verdicts",
    "load_mlm_head",
    "plot_fill_mask",
    "CLOZE_RELATIONS",
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
    probe_history : DataFrame
        One row per evaluation during training (``step`` and one column of
        top-1 accuracy per relation of the ``probes`` given to
        :func:`train_minibert`); empty when no probes were given.
    """

    model: Any
    vocab: CompactVocab
    losses: list
    seconds: float
    config: dict
    probe_history: Any = None

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
    dropout: float = 0.1,
    seed: int = 0,
    threads: int = 1,
    probes: pd.DataFrame | None = None,
    probe_every: int = 250,
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
    dropout : float, default 0.1
        Dropout on the hidden states and the attention weights (BERT's 0.1).
    seed : int
    threads : int, default 1
        CPU threads while training (restored afterwards); a model this small
        only loses time when split over threads.
    probes : DataFrame, optional
        Cloze questions (:func:`cloze_probes`): their top-1 accuracy per
        relation is measured at step 0, every ``probe_every`` steps and at the
        end, and returned in :attr:`MiniBert.probe_history`. The time spent on
        it is excluded from :attr:`MiniBert.seconds`.
    probe_every : int, default 250

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
    if not 0.0 <= float(dropout) < 1.0:
        raise ValueError(f"dropout={dropout} must be in [0, 1).")
    if probe_every < 1:
        raise ValueError(f"probe_every={probe_every} must be a positive number of steps.")
    config = dict(d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_ff=d_ff, max_len=max_len, steps=steps,
                  batch_size=batch_size, lr=lr, warmup=warmup, rate=rate, dropout=dropout, seed=seed)
    t0 = time.perf_counter()
    history: list[dict] = []
    probe_seconds = 0.0
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
                         hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout, attn_implementation="eager")
        model = BertForMaskedLM(cfg)
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / max(warmup, 1), max(0.0, (steps - s) / max(steps - warmup, 1))))
        gen = torch.Generator().manual_seed(seed)
        random_ids = torch.arange(len(vocab.special_compact), len(vocab))
        losses = []

        def record(step: int) -> None:
            nonlocal probe_seconds
            if probes is None:
                return
            t = time.perf_counter()
            acc = cloze_accuracy(model, tokenizer, probes, vocab=vocab)
            history.append({"step": step} | acc.groupby("relation", sort=False)["correct"].mean().to_dict())
            model.train()
            probe_seconds += time.perf_counter() - t

        record(0)
        model.train()
        for step in range(1, steps + 1):
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
            if step % probe_every == 0 and step != steps:
                record(step)
        record(steps)
        model.eval()
    return MiniBert(model=model, vocab=vocab, losses=losses, seconds=time.perf_counter() - t0 - probe_seconds, config=config,
                    probe_history=pd.DataFrame(history))


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


# ---------------------------------------------------------------------------
# whole-set cloze evaluation
# ---------------------------------------------------------------------------

#: What each relation of :func:`cloze_probes` asks, and on which side of the blank its clue stands.
CLOZE_RELATIONS = {
    "代名詞（手がかりは左）": "the {w} loves [MASK] {obj} -> his / her",
    "代名詞（手がかりは右）": "[MASK] is a {w} with a {obj} -> he / she",
    "人物（手がかりは右）": "the [MASK] loves {his} {obj} -> the person of that pair and gender",
    "時制（時は左、動詞は右）": "yesterday / every day ... {subj} [MASK] {obj} -> the verb form",
    "国と首都": "the capital of {country} is [MASK] -> its capital",
}


def cloze_probes() -> pd.DataFrame:
    """Every fill-in-the-blank question the grammar corpus implies, for five relations.

    The questions are the corpus's own templates (:mod:`mixlib.course.corpus`)
    with one word blanked, over *all* the corpus's people, objects, verbs,
    subjects and countries -- a complete set, not picked examples:

    * 代名詞（手がかりは左）: ``the {w} loves [MASK] {obj}`` -> his / her (16 x 3);
    * 代名詞（手がかりは右）: ``[MASK] is a {w} with a {obj}`` -> he / she (16 x 3);
    * 人物（手がかりは右）: ``the [MASK] loves {his} {obj}`` -> the person (16 x 3);
    * 時制（時は左、動詞は右）: the six tense templates x 4 subjects x 10 verbs (240): the tense comes from the
      time word on the left, the verb from its object on the right;
    * 国と首都: ``the capital of {country} is [MASK]`` (8).

    Returns
    -------
    DataFrame with ``relation``, ``text`` (with ``[MASK]``) and ``answer``.
    """
    from .corpus import COUNTRIES, GENDER_WORDS, PERSON_PAIRS, VERBS

    rel = list(CLOZE_RELATIONS)
    rows = []
    for male, female, objects in PERSON_PAIRS:
        for w, gender in ((male, "male"), (female, "female")):
            he, his = GENDER_WORDS[gender]
            for obj in objects:
                rows.append((rel[0], f"the {w} loves [MASK] {obj}", his))
                rows.append((rel[1], f"[MASK] is a {w} with a {obj}", he))
                rows.append((rel[2], f"the [MASK] loves {his} {obj}", w))
    cues = {"present": ("every day {s} [MASK] {o}", "{s} usually [MASK] {o}", "{s} often [MASK] {o}"),
            "past": ("yesterday {s} [MASK] {o}", "last night {s} [MASK] {o}", "{s} already [MASK] {o}")}
    for present, past, obj in VERBS:
        for tense, form in (("present", present), ("past", past)):
            for template in cues[tense]:
                for subj in ("i", "we", "you", "they"):
                    rows.append((rel[3], template.format(s=subj, o=obj), form))
    for country, capital, _ in COUNTRIES:
        rows.append((rel[4], f"the capital of {country} is [MASK]", capital))
    return pd.DataFrame(rows, columns=["relation", "text", "answer"])


@torch.no_grad()
def cloze_accuracy(model: Any, tokenizer: Any, probes: pd.DataFrame, *, vocab: CompactVocab | None = None,
                   batch_size: int = 256) -> pd.DataFrame:
    """Top-1 fill-in of every probe (one ``[MASK]`` each) and whether it is the answer.

    Parameters
    ----------
    model : masked-LM model (``BertForMaskedLM``) over ``vocab`` (compact) or the tokenizer's vocabulary.
    tokenizer : its WordPiece tokenizer.
    probes : DataFrame with ``relation``, ``text`` and ``answer`` (:func:`cloze_probes`).
    vocab : CompactVocab, optional
        For a :class:`MiniBert` model.
    batch_size : int

    Returns
    -------
    DataFrame
        ``probes`` plus ``predicted`` (the top-1 token), ``correct`` (bool) and
        ``chance`` -- the accuracy of always answering the relation's most
        frequent answer (the null a model must beat: it knows the answer set
        but not the clue).

    Raises
    ------
    ValueError
        A text without exactly one ``[MASK]``, or an answer that is not a single
        token of the vocabulary.
    """
    if probes.empty:
        raise ValueError("probes is empty; build them with cloze_probes().")
    texts = list(probes["text"])
    answers = []
    for a in probes["answer"]:
        ids = tokenizer(str(a), add_special_tokens=False)["input_ids"]
        if len(ids) != 1 or (vocab is not None and ids[0] not in vocab._index):
            raise ValueError(f"answer {a!r} is not one token of the model's vocabulary; a cloze answer must be.")
        answers.append(ids[0])
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    predicted = []
    for start in range(0, len(texts), batch_size):
        enc = tokenizer(texts[start:start + batch_size], padding=True, return_tensors="pt")
        ids = enc["input_ids"]  # (B, N)
        n_mask = (ids == tokenizer.mask_token_id).sum(1)
        if not bool((n_mask == 1).all()):
            bad = texts[start + int((n_mask != 1).nonzero()[0])]
            raise ValueError(f"{bad!r} must contain exactly one {tokenizer.mask_token}.")
        model_ids = vocab.to_compact(ids) if vocab is not None else ids
        logits = model(input_ids=model_ids.to(device), attention_mask=enc["attention_mask"].to(device)).logits  # (B, N, V)
        at = (ids == tokenizer.mask_token_id).to(device)
        top = logits[at].argmax(-1).cpu()  # (B,)
        predicted += [vocab.ids[int(t)] for t in top] if vocab is not None else top.tolist()
    if was_training:
        model.train()
    out = probes.reset_index(drop=True).copy()
    out["predicted"] = tokenizer.convert_ids_to_tokens(predicted)
    out["correct"] = [p == a for p, a in zip(predicted, answers)]
    out["chance"] = out.groupby("relation")["answer"].transform(lambda s: s.value_counts().iloc[0] / len(s))
    return out


def tense_minimal_pairs(scored: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The tense probes of :func:`cloze_accuracy`'s output grouped into minimal pairs.

    A tense probe's answer depends on two cues: the time word on the left (yesterday,
    every day ...) fixes the tense, the object on the right (some tea ...) fixes the verb.
    Its 240 questions are 10 verbs x 6 time frames x 4 subjects, so they are not 240
    independent trials. Grouped instead:

    * by subject and object (6 questions that differ only in the time word): did the model
      give the right tense to all 6? A model that ignores the time word answers the same
      form across the group, so it gets no group right;
    * by frame -- the sentence without its object (10 questions that differ only in the
      object): did it give the right verb to all 10? A model that ignores the object gets
      no group right.

    Parameters
    ----------
    scored : DataFrame
        :func:`cloze_accuracy`'s output (``relation``, ``text``, ``answer``, ``predicted``).

    Returns
    -------
    (by_time, by_object) : two boolean Series, one entry per group.
    """
    from .corpus import VERBS

    tense = scored[scored["relation"] == list(CLOZE_RELATIONS)[3]]
    if tense.empty:
        raise ValueError("scored holds no tense probe; pass cloze_accuracy(model, tokenizer, cloze_probes()).")
    form = {f: (t, verb) for verb in VERBS for t, f in zip(("present", "past"), verb[:2])}  # form -> (tense, verb)
    ok_tense = [p in form and form[p][0] == form[a][0] for p, a in zip(tense["predicted"], tense["answer"])]
    ok_verb = [p in form and form[p][1] == form[a][1] for p, a in zip(tense["predicted"], tense["answer"])]
    obj = tense["text"].str.split("[MASK] ", regex=False).str[1]
    subject = [next(w for w in t.split() if w in ("i", "we", "you", "they")) for t in tense["text"]]
    frame = [t.replace(o, "") for t, o in zip(tense["text"], obj)]
    by_time = pd.Series(ok_tense, index=tense.index).groupby([subject, list(obj)]).all()
    by_object = pd.Series(ok_verb, index=tense.index).groupby(frame).all()
    return by_time, by_object


def compare_to_corpus(counts: pd.Series, model: pd.Series, *, alpha: float = 0.05) -> str:
    """One Japanese sentence comparing a model's fill-in candidates with what its training corpus says.

    Parameters
    ----------
    counts : Series of int
        word -> how often the corpus puts that word at the blank's position (e.g. right after
        "furry").
    model : Series
        word -> the model's probability, its top candidates (at least ``len(counts)``), sorted
        from the most probable.
    alpha : float
        Level of the tests that decide which orders the corpus fixes.

    Returns
    -------
    str
        Whether the model's top ``len(counts)`` are the corpus' words and how much probability it
        puts on them; the largest gap between the model's probability and the corpus' share; and,
        for every pair of words, whether the corpus fixes their order -- an exact binomial test of
        ``n_a`` against ``n_b`` given ``n_a + n_b`` (equal probabilities under the null), two-sided,
        the ``k (k - 1) / 2`` pairs judged together by Holm's step-down procedure at ``alpha`` --
        and, where it does, whether the model keeps that order. An order the corpus does not fix
        is not read. The model is one training run: whether a reversal is more than the
        spread across runs is not something this sentence can say.

    Raises
    ------
    ValueError
        An empty series, counts that are not positive whole numbers, or fewer model candidates
        than corpus words.
    """
    if counts.empty or model.empty:
        raise ValueError("counts and model must each hold at least one word.")
    if (counts <= 0).any() or not np.allclose(counts, np.round(counts)):
        raise ValueError(f"counts must be positive whole numbers (how often each word occurs), got {counts.tolist()}.")
    if len(model) < len(counts):
        raise ValueError(f"model holds {len(model)} candidates; give its top {len(counts)} (as many as the corpus has words).")
    counts = counts.astype(int).sort_values(ascending=False, kind="stable")
    k, n = len(counts), int(counts.sum())
    top = model.iloc[:k]
    mass = float(top[top.index.isin(counts.index)].sum())
    if not top.index.isin(counts.index).all():
        shared = int(top.index.isin(counts.index).sum())
        return (f"モデルの上位 {k} 個のうち、コーパスで現れる単語は {shared} 個だけで（確率の和 {mass:.2f}）、"
                "顔ぶれがコーパスと一致しない。")
    gap = (top - counts / n).abs()
    said = (f"上位 {k} 個の顔ぶれはコーパスと同じで（モデルがこれらに置いた確率の和 {mass:.2f}）、"
            f"コーパスの割合との差は最大 {gap.max():.2f}（{gap.idxmax()}）である。")
    words = list(counts.index)
    tests = sorted(((binomtest(int(counts[a]), int(counts[a] + counts[b]), 0.5).pvalue, a, b)
                    for i, a in enumerate(words) for b in words[i + 1:]), key=lambda t: t[0])
    fixed = []  # (more, fewer, p): Holm -- the i-th smallest p (from 0) must be below alpha / (m - i)
    for i, (p, a, b) in enumerate(tests):
        if p >= alpha / (len(tests) - i):
            break
        fixed.append((a, b, p))
    holm = f"組ごとの二項検定を {len(tests)} 組まとめて Holm の方法で {alpha} の水準で見る"
    if not fixed:
        smallest = f"（最小の p = {tests[0][0]:.3f}）" if tests else ""
        return said + f"コーパスの回数の差は、{holm}と、どの組も偶然の範囲{smallest}で、コーパスからは順が決まらないので、順は読まない。"
    kept = [(a, b, p) for a, b, p in fixed if top[a] > top[b]]
    flipped = [(a, b, p) for a, b, p in fixed if top[a] <= top[b]]
    said += (f"コーパスで偶然とは言えないほど回数が違う組（{holm}）は "
             + "、".join(f"{a} > {b}（p = {p:.3g}）" for a, b, p in fixed) + " で、")
    if not flipped:
        return said + "モデルはそのどれの順も保っている。"
    said += "モデルは " + "、".join(f"{a} と {b}" for a, b, _ in flipped) + " の順を逆にしている"
    return said + ("（ほかの組の順は保っている）。" if kept else "。")


# ---------------------------------------------------------------------------
# reading the papers' ablation tables
# ---------------------------------------------------------------------------


def diff_yardstick(score: Any, n: Any, *, z: float = 1.96) -> Any:
    """A rough 95% yardstick (points) for the difference of two dev-set scores.

    ``z * sqrt(2) * sqrt(p (1 - p) / n) * 100`` with ``p = score / 100``: the half-width for the
    difference of two independent binomial proportions measured on ``n`` examples each. It is a
    yardstick, not a bound: two models scored on the *same* dev set often err on the same
    examples (the paired difference spreads less), and the spread across pre-training runs,
    which the papers do not report, comes on top. F1 is treated as a proportion over the
    examples, an approximation.

    Parameters
    ----------
    score : float or array-like
        The baseline's score in percent (0-100).
    n : int or array-like
        The dev set's size.
    """
    if np.any((np.asarray(score, dtype=float) < 0) | (np.asarray(score, dtype=float) > 100)):
        raise ValueError(f"score is a percentage in [0, 100], got {score}.")
    if np.any(np.asarray(n, dtype=float) < 1):
        raise ValueError(f"n is a dev-set size (at least 1), got {n}.")
    if isinstance(score, (list, tuple)):
        score = np.asarray(score, dtype=float)
    if isinstance(n, (list, tuple)):
        n = np.asarray(n, dtype=float)
    p = score / 100
    out = z * np.sqrt(2) * 100 * np.sqrt(p * (1 - p) / n)  # a Series stays a Series (aligned on its index)
    return float(out) if np.ndim(out) == 0 else out


def compare_settings(scores: pd.DataFrame, dev_sizes: dict[str, int], *, against: str = "first") -> pd.DataFrame:
    """Each setting's difference from its baseline in a paper's ablation table, with a yardstick.

    Parameters
    ----------
    scores : DataFrame
        One row per setting in the table's order, one column per task, scores in percent.
    dev_sizes : dict
        task -> dev-set size; tasks missing here get no yardstick.
    against : {"first", "previous"}
        ``"first"``: every row against the first (a baseline and its variants, e.g. RoBERTa's
        input formats against SEGMENT-PAIR). ``"previous"``: each row against the row above it,
        for a ladder of ablations where each row changes one more thing (BERT's Table 5:
        No NSP against BERT-base, LTR & No NSP against No NSP, + BiLSTM against LTR & No NSP).

    Returns
    -------
    DataFrame
        One row per (setting, task) after the first setting: ``setting``, ``baseline``, ``task``,
        ``score``, ``diff`` (points), ``yardstick`` (:func:`diff_yardstick` at the baseline's
        score; NaN without a dev size), ``times`` (``|diff| / yardstick``) and ``beyond``
        (``|diff| > yardstick``; False without a yardstick), and ``beyond_all`` -- still beyond when
        the yardstick is widened for looking at all the table's comparisons at once (Bonferroni:
        ``z`` for a two-sided ``0.05 / m`` instead of 1.96, ``m`` the comparisons with a
        yardstick), so that a single marginal exceedance among many is not read as a finding.
        The widening factor is in ``attrs["widen"]``.
    """
    if against not in ("first", "previous"):
        raise ValueError(f"against must be 'first' or 'previous', got {against!r}.")
    if len(scores) < 2:
        raise ValueError(f"need a baseline and at least one more setting, got {len(scores)} row(s).")
    rows = []
    for i in range(1, len(scores)):
        base = scores.iloc[0 if against == "first" else i - 1]
        for task in scores.columns:
            d = float(scores.iloc[i][task] - base[task])
            yard = diff_yardstick(float(base[task]), dev_sizes[task]) if task in dev_sizes else float("nan")
            rows.append({"setting": scores.index[i], "baseline": base.name, "task": task, "score": float(scores.iloc[i][task]),
                         "diff": d, "yardstick": yard, "times": abs(d) / yard, "beyond": bool(abs(d) > yard)})
    out = pd.DataFrame(rows)
    m = int(out["yardstick"].notna().sum())
    widen = float(norm.ppf(1 - 0.05 / (2 * max(m, 1))) / 1.96)
    out["beyond_all"] = out["diff"].abs() > widen * out["yardstick"]
    out.attrs["widen"] = widen
    return out


def describe_verdicts(rows: pd.DataFrame) -> str:
    """Japanese clause for one setting's rows of :func:`compare_settings`: which tasks are beyond the
    yardstick even for the whole table (with their differences), which only just, which inside.
    Tasks without a yardstick are named as such."""
    def listed(r):
        return "・".join(f"{t}（{d:+.1f}）" for t, d in zip(r["task"], r["diff"]))

    clear = rows[rows["beyond_all"]]
    barely = rows[rows["beyond"] & ~rows["beyond_all"]]
    inside = rows[~rows["beyond"] & rows["yardstick"].notna()]
    none = rows[rows["yardstick"].isna()]
    parts = []
    if len(clear):
        parts.append(f"表の比較をまとめて見ても物差しを超えるのは {listed(clear)}")
    if len(barely):
        parts.append(f"物差しをわずかに超えるだけなのは {listed(barely)}")
    if len(inside):
        parts.append(f"物差しの内側にあるのは {'・'.join(inside['task'])}")
    if len(none):
        parts.append(f"物差しの無いのは {'・'.join(none['task'])}")
    if not len(clear) and not len(barely):
        parts.insert(0, "物差しを超える差は無く")
    return "、".join(parts)


def load_mlm_head(enc: Any) -> Any | None:
    """The masked-LM model behind ``enc``, or ``None`` when its checkpoint has no MLM head.

    Loads ``AutoModelForMaskedLM`` from where ``enc`` came from (the hub, the
    Hugging Face cache, a local folder or the packaged model) without touching
    the network unless ``enc`` itself came from the hub. A checkpoint saved
    without the head (the packaged all-MiniLM-L6-v2, any sentence-transformers
    model) would load with a *randomly initialised* head; this function checks
    the loading report and returns ``None`` in that case instead of a model
    that predicts noise.

    Parameters
    ----------
    enc : mixlib.models.Encoder

    Returns
    -------
    transformers model in eval mode, on ``enc.device``, or None.
    """
    import logging

    from transformers import AutoModelForMaskedLM
    from transformers.utils import logging as hf_logging

    if getattr(enc, "source", None) == "packaged":
        from mixlib.models import packaged_model_dir

        where = str(packaged_model_dir())
    else:
        where = getattr(enc.model.config, "_name_or_path", "") or enc.name
    level, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity(logging.ERROR)  # the "newly initialized" warning is what we check ourselves
    hf_logging.disable_progress_bar()
    try:
        model, info = AutoModelForMaskedLM.from_pretrained(where, local_files_only=enc.source != "hub", output_loading_info=True)
    except (OSError, ValueError, KeyError):
        return None
    finally:
        hf_logging.set_verbosity(level)
        if bar:
            hf_logging.enable_progress_bar()
    missing = [k for k in info.get("missing_keys", []) if "predictions" in k or k.startswith(("cls.", "lm_head", "vocab_"))]
    if missing:
        return None
    return model.to(enc.device).eval()


def plot_fill_mask(tables: "dict[str, pd.DataFrame]", text: str, *, note: str = "") -> Any:
    """Bar charts of the top-k fill-ins of one ``[MASK]``, one panel per model.

    Parameters
    ----------
    tables : dict of str to DataFrame
        Model name -> the ``fill_mask`` table of the blank to draw (``token``, ``prob``).
    text : str
        The input, written in the title.
    note : str
        A line under the panels (e.g. which models these are).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    if not tables:
        raise ValueError("tables is empty; give at least one model's fill-in table.")
    fig, axes = plt.subplots(1, len(tables), figsize=(4.2 * len(tables), 0.42 * max(len(t) for t in tables.values()) + 1.6),
                             squeeze=False)
    for ax, (name, table) in zip(axes[0], tables.items()):
        ax.barh(range(len(table)), table["prob"].to_numpy(), color="#2ca02c")
        ax.set_yticks(range(len(table)), list(table["token"]))
        ax.invert_yaxis()
        ax.set(xlim=(0, 1), xlabel="確率", title=name)
        for y, p in enumerate(table["prob"].to_numpy()):
            ax.text(min(float(p) + 0.02, 0.85), y, f"{float(p):.2f}", va="center", fontsize=9.5)
    fig.suptitle(f"「{text}」の [MASK] の穴埋め（上位 {max(len(t) for t in tables.values())} 個）", fontsize=11)
    fig.tight_layout()
    if note:
        from ..plots import note_below

        note_below(fig, note)
    return fig
