"""The Ogura Hyakunin Isshu (小倉百人一首) as data for a small encoder-decoder.

Chapter 7 feeds the upper phrase (上の句, kami-no-ku, 5-7-5) of each poem to a
Transformer encoder and lets the decoder write the lower phrase (下の句,
shimo-no-ku, 7-7), one hiragana character at a time.  This module holds what
that chapter needs besides the model itself (:mod:`mixlib.course.transformer`):

* :func:`load_poems` / :func:`validate_poems` -- read ``data/hyakunin_isshu.tsv``
  and check its structure (100 distinct poems, numbers 1..100, hiragana only,
  plausible lengths per phrase);
* :class:`CharVocab` -- the character vocabulary with ``<pad> <bos> <eos> <unk>``;
* :func:`split_poems`, :func:`encode_pairs` -- a train/held-out split and the
  tensors for teacher forcing (decoder input shifted right by one);
* :func:`train_chihaya` -- training with per-epoch scores of *generated*
  (greedy) lower phrases, exact match and character accuracy;
* :func:`char_accuracy`, :func:`render_errors` -- the scores and a coloured
  right/wrong print of the generated characters (HTML for the book, ANSI for a
  terminal).
"""

from __future__ import annotations

import html
import math
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import torch

__all__ = [
    "COLUMNS",
    "KANA",
    "PAD",
    "BOS",
    "EOS",
    "UNK",
    "load_poems",
    "validate_poems",
    "CharVocab",
    "split_poems",
    "encode_pairs",
    "char_accuracy",
    "score_generations",
    "ChihayaConfig",
    "lecture_config",
    "ChihayaRun",
    "train_chihaya",
    "render_errors",
    "char_frequency",
    "kimariji_lengths",
    "prefix_generations",
    "kfold_heldout",
]

#: Columns of ``data/hyakunin_isshu.tsv``.
COLUMNS = ("number", "poet", "kami_no_ku", "shimo_no_ku")

#: The characters a poem may contain: the 83 hiragana from ぁ to ゖ minus the small
#: ones, including the historical ゐ and ゑ.  Phrases (句) are separated by a space.
_SMALL = set("ぁぃぅぇぉっゃゅょゎゕゖ")
KANA = frozenset(chr(c) for c in range(ord("あ"), ord("ゖ") + 1)) - _SMALL

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"

#: Allowed length (in characters) of each phrase: 5-mora phrases may have one extra
#: character (字余り), 7-mora phrases one extra or one missing.
_KAMI_LENGTHS = ((5, 6), (6, 8), (5, 6))
_SHIMO_LENGTHS = ((6, 8), (6, 8))


# ---------------------------------------------------------------------------
# the data
# ---------------------------------------------------------------------------


def load_poems(path: str | Path | None = None, *, validate: bool = True) -> pd.DataFrame:
    """Read the 100 poems.

    Parameters
    ----------
    path : str or Path, optional
        A TSV file with the columns :data:`COLUMNS`; default
        ``data/hyakunin_isshu.tsv`` of the repository.
    validate : bool, default True
        Run :func:`validate_poems` on the result.

    Returns
    -------
    pandas.DataFrame
        One row per poem with ``number`` (int), ``poet``, ``kami_no_ku`` and
        ``shimo_no_ku`` as in the file (phrases separated by a space), plus
        ``kami`` and ``shimo``: the same text with the spaces removed, which is
        what the model reads and writes.

    Examples
    --------
    >>> poems = load_poems()
    >>> poems.loc[poems.number == 17, "kami"].item()
    'ちはやぶるかみよもきかずたつたがは'
    """
    if path is None:
        from ..paths import data_path

        path = data_path("hyakunin_isshu.tsv")
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path} lacks the column(s) {missing}; expected the columns {list(COLUMNS)}.")
    df = df[list(COLUMNS)].copy()
    df["number"] = pd.to_numeric(df["number"], errors="raise").astype(int)
    for col in ("poet", "kami_no_ku", "shimo_no_ku"):
        df[col] = df[col].map(lambda s: unicodedata.normalize("NFC", s.strip()))
    df["kami"] = df["kami_no_ku"].str.replace(" ", "", regex=False)
    df["shimo"] = df["shimo_no_ku"].str.replace(" ", "", regex=False)
    if validate:
        validate_poems(df)
    return df.reset_index(drop=True)


def validate_poems(df: pd.DataFrame) -> None:
    """Raise ``ValueError`` naming every row that breaks the structure of the data.

    Checked: exactly 100 rows numbered 1..100 in order; 100 distinct poems and
    100 distinct upper phrases; a poet on every row; upper phrase = 3 phrases
    and lower phrase = 2 phrases separated by single spaces; only the
    characters in :data:`KANA`; each phrase's length within 5/7 mora plus the
    usual 字余り (one extra character; a 7-mora phrase may also have 6).
    """
    problems: list[str] = []
    if len(df) != 100:
        problems.append(f"{len(df)} rows, expected 100")
    numbers = list(df["number"])
    if numbers != list(range(1, len(df) + 1)):
        problems.append("numbers are not 1, 2, ..., n in order")
    full = (df["kami_no_ku"] + "/" + df["shimo_no_ku"]).tolist()
    dups = [p for p, c in Counter(full).items() if c > 1]
    if dups:
        problems.append(f"duplicated poems: {dups}")
    kami_dups = [p for p, c in Counter(df["kami_no_ku"]).items() if c > 1]
    if kami_dups:
        problems.append(f"duplicated upper phrases: {kami_dups}")
    for row in df.itertuples(index=False):
        where = f"poem {row.number}"
        if not row.poet:
            problems.append(f"{where}: no poet")
        for name, text, lengths in (("kami_no_ku", row.kami_no_ku, _KAMI_LENGTHS), ("shimo_no_ku", row.shimo_no_ku, _SHIMO_LENGTHS)):
            bad = sorted({ch for ch in text if ch != " " and ch not in KANA})
            if bad:
                problems.append(f"{where}: {name} has characters that are not full-size hiragana: {bad}")
            parts = text.split(" ")
            if len(parts) != len(lengths):
                problems.append(f"{where}: {name} has {len(parts)} phrases separated by single spaces, expected {len(lengths)}")
                continue
            for i, (part, (lo, hi)) in enumerate(zip(parts, lengths)):
                if not lo <= len(part) <= hi:
                    problems.append(f"{where}: {name} phrase {i + 1} {part!r} has {len(part)} characters, expected {lo}..{hi}")
    if problems:
        raise ValueError("the poem data is malformed:\n  " + "\n  ".join(problems))


# ---------------------------------------------------------------------------
# characters
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CharVocab:
    """Character vocabulary: ids 0..3 are ``<pad> <bos> <eos> <unk>``, then the characters in code-point order.

    Build it with :meth:`from_texts`.
    """

    itos: tuple[str, ...]
    stoi: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if tuple(self.itos[:4]) != (PAD, BOS, EOS, UNK):
            raise ValueError(f"the first four entries must be {(PAD, BOS, EOS, UNK)}, got {tuple(self.itos[:4])}.")
        if len(set(self.itos)) != len(self.itos):
            raise ValueError("the vocabulary has duplicated entries.")
        object.__setattr__(self, "stoi", {s: i for i, s in enumerate(self.itos)})

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> "CharVocab":
        chars = sorted({ch for t in texts for ch in t if ch != " "})
        return cls((PAD, BOS, EOS, UNK, *chars))

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str, *, bos: bool = False, eos: bool = False) -> list[int]:
        """Characters -> ids (unknown characters -> ``<unk>``; spaces are dropped)."""
        ids = [self.stoi.get(ch, self.unk_id) for ch in text if ch != " "]
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text, stopping at the first ``<eos>``; ``<pad>``/``<bos>`` are skipped, ``<unk>`` -> ``？``."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if i in (self.pad_id, self.bos_id):
                continue
            out.append("？" if i == self.unk_id or i >= len(self.itos) else self.itos[i])
        return "".join(out)


def char_frequency(texts: Iterable[str]) -> pd.Series:
    """How often each character occurs in ``texts`` (spaces ignored), most frequent first."""
    counts = Counter(ch for t in texts for ch in t if ch != " ")
    s = pd.Series(counts, name="count").sort_values(ascending=False, kind="stable")
    s.index.name = "char"
    return s


# ---------------------------------------------------------------------------
# tensors
# ---------------------------------------------------------------------------


def split_poems(n: int = 100, held_out: int = 0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random train / held-out split of poem indices 0..n-1 (both sorted).

    ``held_out=0`` gives all poems to training and an empty held-out set.
    """
    if not 0 <= held_out < n:
        raise ValueError(f"held_out={held_out} must be in 0..{n - 1}.")
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[held_out:]), np.sort(perm[:held_out])


def _pad(seqs: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    n = max(len(s) for s in seqs)
    out = torch.full((len(seqs), n), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(list(s), dtype=torch.long)
    return out


def encode_pairs(vocab: CharVocab, kami: Sequence[str], shimo: Sequence[str], *, shift: bool = True, bos_in_target: bool = False, max_len: int = 22) -> dict[str, torch.Tensor]:
    """Tensors for teacher forcing.

    Parameters
    ----------
    vocab : CharVocab
    kami, shimo : sequences of str
        Upper and lower phrases (spaces are ignored).
    shift : bool, default True
        True: the decoder reads ``<bos> y_1 ... y_{T-1}`` and must predict
        ``y_1 ... y_T <eos>`` -- the target shifted by one
        (:func:`mixlib.course.transformer.shift_right`). False reproduces the
        lecture's leaky setting: the decoder reads the very sequence it must
        predict, ``y_1 ... y_T <eos>``.
    bos_in_target : bool, default False
        Only with ``shift=False``: the lecture's framing as it ran, where the
        decoder reads *and* must predict ``<bos> y_1 ... y_T <eos>``.
    max_len : int, default 22
        Longest sequence allowed (the model's ``max_len``).

    Returns
    -------
    dict with ``src`` (B, N), ``dec_in`` (B, T), ``target`` (B, T), padded with ``vocab.pad_id``.
    """
    from .transformer import shift_right

    if len(kami) != len(shimo) or not len(kami):
        raise ValueError(f"kami and shimo must be non-empty and of equal length, got {len(kami)} and {len(shimo)}.")
    if shift and bos_in_target:
        raise ValueError("bos_in_target=True is the lecture's unshifted framing; use it with shift=False.")
    src = _pad([vocab.encode(k, eos=True) for k in kami], vocab.pad_id)  # (B, N)
    target = _pad([vocab.encode(s, bos=bos_in_target, eos=True) for s in shimo], vocab.pad_id)  # (B, T)
    for name, t in (("upper phrase", src), ("lower phrase", target)):
        if t.shape[1] > max_len:
            raise ValueError(f"an encoded {name} has {t.shape[1]} tokens, more than max_len={max_len}.")
    dec_in = shift_right(target, vocab.bos_id) if shift else target.clone()
    return {"src": src, "dec_in": dec_in, "target": target}


# ---------------------------------------------------------------------------
# scores
# ---------------------------------------------------------------------------


def char_accuracy(pred: str, gold: str) -> float:
    """Share of positions where ``pred`` has the right character, over ``max(len(pred), len(gold))``.

    Missing and extra characters count as wrong, so only a perfect copy scores 1.
    """
    n = max(len(pred), len(gold))
    if n == 0:
        return 1.0
    return sum(p == g for p, g in zip(pred, gold)) / n


def score_generations(preds: Sequence[str], golds: Sequence[str]) -> dict[str, float]:
    """Exact-match rate and mean character accuracy of generated strings."""
    if len(preds) != len(golds) or not golds:
        raise ValueError(f"preds and golds must be non-empty and of equal length, got {len(preds)} and {len(golds)}.")
    return {
        "exact": float(np.mean([p == g for p, g in zip(preds, golds)])),
        "char": float(np.mean([char_accuracy(p, g) for p, g in zip(preds, golds)])),
    }


# ---------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ChihayaConfig:
    """Everything that defines one training run of chapter 7.

    The defaults are the lecture's model in layers, width, heads and maximum length (1 layer, d_model 32,
    4 heads, max length 22), with a wider FFN (d_ff 128; the lecture's is 32).
    With ``schedule="warmup_cosine"`` the learning rate rises linearly for
    ``warmup`` steps, then decays to 0 along a half cosine over the remaining
    steps; ``schedule="constant"`` keeps ``lr`` throughout (the lecture's
    set-up). ``dropout=0`` because the task is memorisation: dropout 0.1 slows
    it down several times.

    ``shift=False`` feeds the decoder the very sequence it must predict;
    with ``bos_in_target=True`` as well, that sequence is ``<bos> y <eos>``
    (the lecture's framing as it ran). :func:`lecture_config` returns the
    lecture's whole set-up. ``eval_every`` > 1 generates (the costly part of
    the per-epoch scores) only every that many epochs and at the last one.
    """

    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 1
    d_ff: int = 128
    max_len: int = 22
    dropout: float = 0.0
    epochs: int = 100
    batch_size: int = 20
    lr: float = 5e-3
    warmup: int = 50
    shift: bool = True
    held_out: int = 0
    seed: int = 0
    bos_in_target: bool = False
    schedule: str = "warmup_cosine"
    eval_every: int = 1

    def __post_init__(self) -> None:
        if self.schedule not in ("warmup_cosine", "constant"):
            raise ValueError(f"schedule must be 'warmup_cosine' or 'constant', got {self.schedule!r}.")
        if self.shift and self.bos_in_target:
            raise ValueError("bos_in_target=True needs shift=False (it is the lecture's unshifted framing).")
        if self.eval_every < 1 or self.epochs < 1 or self.batch_size < 1:
            raise ValueError("epochs, batch_size and eval_every must be positive.")


def lecture_config(**changes) -> ChihayaConfig:
    """The lecture's set-up as it ran: target ``<bos> y <eos>`` fed unshifted, batch 1
    (100 updates per epoch on 100 poems), Adam with a constant lr 1e-3, d_ff 32,
    1 layer, d_model 32, 4 heads, max length 22. ``changes`` override fields
    (e.g. ``shift=True, bos_in_target=False`` for the same schedule with the shift)."""
    base = dict(d_ff=32, batch_size=1, lr=1e-3, schedule="constant", warmup=0, shift=False, bos_in_target=True, epochs=10)
    return ChihayaConfig(**(base | changes))


@dataclass(frozen=True)
class ChihayaRun:
    """The result of :func:`train_chihaya`.

    Attributes
    ----------
    model : Seq2SeqTransformer
        The trained model (eval mode).
    vocab : CharVocab
    config : ChihayaConfig
    history : pandas.DataFrame
        One row per epoch and split (``train``/``heldout``): ``loss`` (train
        loss of the epoch), ``tf_char`` (character accuracy of the argmax under
        teacher forcing), ``tf_poem`` (share of poems whose every target token,
        specials included, is the argmax under teacher forcing: the lecture's
        正解率), ``gen_exact`` and ``gen_char`` (exact match and character
        accuracy of greedily *generated* lower phrases; NaN at epochs skipped
        by ``eval_every``).
    generations : dict
        ``{split: DataFrame}`` with one row per epoch and poem: ``epoch``,
        ``number``, ``gold``, ``pred`` (generated; "" at skipped epochs) and
        ``tf_pred`` (the teacher-forced argmax at each character of ``gold``,
        aligned with it; a special token predicted there shows as ``？``).
    train_idx, heldout_idx : ndarray
        Row indices of the poems in each split.
    seconds : float
        Wall time of the whole run.
    """

    model: object
    vocab: CharVocab
    config: ChihayaConfig
    history: pd.DataFrame
    generations: dict
    train_idx: np.ndarray
    heldout_idx: np.ndarray
    seconds: float

    def final(self, split: str = "train") -> pd.DataFrame:
        """Last epoch's generations of ``split`` with ``exact`` and ``char`` columns."""
        g = self.generations[split]
        g = g[g.epoch == g.epoch.max()].copy()
        g["exact"] = g.pred == g.gold
        g["char"] = [char_accuracy(p, q) for p, q in zip(g.pred, g.gold)]
        return g.reset_index(drop=True)


def _generate(model, vocab: CharVocab, src: torch.Tensor) -> list[str]:
    from .transformer import greedy_decode

    out = greedy_decode(model, src, bos_id=vocab.bos_id, eos_id=vocab.eos_id)
    return [vocab.decode(row) for row in out.tolist()]


@torch.no_grad()
def _teacher_forced(model, batch: dict[str, torch.Tensor], vocab: CharVocab) -> tuple[float, float, list[str]]:
    """Character accuracy, whole-poem accuracy and the aligned per-character argmax under teacher forcing."""
    model.eval()
    pred = model(batch["src"], batch["dec_in"]).argmax(-1)  # (B, T)
    tgt = batch["target"]
    real = tgt != vocab.pad_id
    hit = (pred == tgt) | ~real
    chars = tgt > vocab.eos_id  # positions that hold a character of the lower phrase
    aligned = ["".join(vocab.itos[i] if i > vocab.unk_id else "？" for i in p[c].tolist()) for p, c in zip(pred, chars)]
    return float((pred == tgt)[real].float().mean()), float(hit.all(dim=1).float().mean()), aligned


def train_chihaya(poems: pd.DataFrame, config: ChihayaConfig = ChihayaConfig(), *, vocab: CharVocab | None = None,
                  heldout_idx: Sequence[int] | None = None, verbose: bool = False) -> ChihayaRun:
    """Train the upper-phrase -> lower-phrase Transformer and score it after every epoch.

    Training uses teacher forcing (cross-entropy on every target character,
    padding ignored, Adam with warm-up and cosine decay, gradient clipping at 1). After each epoch the model
    *generates* the lower phrase of every poem greedily from ``<bos>``
    (:func:`mixlib.course.transformer.greedy_decode`), and the generated text
    is compared with the true lower phrase; the teacher-forced argmax accuracy
    is recorded beside it.

    Parameters
    ----------
    poems : DataFrame
        From :func:`load_poems`.
    config : ChihayaConfig
    vocab : CharVocab, optional
        Default: built from all 100 poems (a held-out poem's characters are
        known, its text is not trained on).
    heldout_idx : sequence of int, optional
        Row indices to hold out, overriding ``config.held_out`` (used by
        :func:`kfold_heldout`).
    verbose : bool, default False
        Print one line per epoch.

    Notes
    -----
    Runs on one CPU thread (:func:`mixlib.course.transformer.torch_threads`):
    the model is tiny, and more threads only add overhead.
    """
    from .transformer import torch_threads

    with torch_threads(1):
        return _train_chihaya(poems, config, vocab, heldout_idx, verbose)


def _train_chihaya(poems: pd.DataFrame, config: ChihayaConfig, vocab: CharVocab | None, heldout_idx, verbose: bool) -> ChihayaRun:
    from .transformer import Seq2SeqTransformer

    t0 = time.perf_counter()
    torch.manual_seed(config.seed)
    vocab = vocab or CharVocab.from_texts(list(poems["kami"]) + list(poems["shimo"]))
    if heldout_idx is None:
        train_idx, held_idx = split_poems(len(poems), config.held_out, config.seed)
    else:
        held_idx = np.sort(np.asarray(heldout_idx, dtype=int))
        if len(set(held_idx.tolist())) != len(held_idx) or (len(held_idx) and not 0 <= held_idx.min() <= held_idx.max() < len(poems)):
            raise ValueError(f"heldout_idx must be distinct row indices in 0..{len(poems) - 1}.")
        train_idx = np.setdiff1d(np.arange(len(poems)), held_idx)
        if not len(train_idx):
            raise ValueError("heldout_idx leaves no poem to train on.")
    splits = {"train": train_idx} | ({"heldout": held_idx} if len(held_idx) else {})
    data = {
        name: encode_pairs(vocab, list(poems["kami"].iloc[idx]), list(poems["shimo"].iloc[idx]), shift=config.shift,
                           bos_in_target=config.bos_in_target, max_len=config.max_len)
        for name, idx in splits.items()
    }
    model = Seq2SeqTransformer(len(vocab), len(vocab), d_model=config.d_model, n_heads=config.n_heads, n_layers=config.n_layers,
                               d_ff=config.d_ff, max_len=config.max_len, dropout=config.dropout, pad_id=vocab.pad_id)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr, betas=(0.9, 0.98))
    total = config.epochs * math.ceil(len(train_idx) / config.batch_size)
    if config.schedule == "constant":
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    else:
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min(1.0, (s + 1) / max(config.warmup, 1)) * 0.5 * (1 + math.cos(math.pi * min(s, total) / total))
        )
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=vocab.pad_id)
    gen = torch.Generator().manual_seed(config.seed)
    train = data["train"]
    n = train["src"].shape[0]
    rows, gens = [], {name: [] for name in splits}
    for epoch in range(1, config.epochs + 1):
        model.train()
        losses = []
        for b in torch.randperm(n, generator=gen).split(config.batch_size):
            logits = model(train["src"][b], train["dec_in"][b])  # (b, T, V)
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), train["target"][b].reshape(-1))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
        model.eval()
        generate = epoch % config.eval_every == 0 or epoch == config.epochs
        for name, idx in splits.items():
            golds = list(poems["shimo"].iloc[idx])
            preds = _generate(model, vocab, data[name]["src"]) if generate else [""] * len(golds)
            sc = score_generations(preds, golds) if generate else {"exact": float("nan"), "char": float("nan")}
            tf_char, tf_poem, tf_pred = _teacher_forced(model, data[name], vocab)
            rows.append({"epoch": epoch, "split": name, "loss": float(np.mean(losses)), "tf_char": tf_char, "tf_poem": tf_poem,
                         "gen_exact": sc["exact"], "gen_char": sc["char"]})
            gens[name].append(pd.DataFrame({"epoch": epoch, "number": poems["number"].iloc[idx].to_numpy(), "gold": golds, "pred": preds,
                                            "tf_pred": tf_pred}))
        if verbose:
            r = rows[-len(splits)]
            print(f"epoch {epoch:3d}  loss {r['loss']:.4f}  teacher-forced char {r['tf_char']:.3f} poem {r['tf_poem']:.3f}  "
                  f"generated exact {r['gen_exact']:.3f}  char {r['gen_char']:.3f}")
    model.eval()
    return ChihayaRun(model=model, vocab=vocab, config=config, history=pd.DataFrame(rows),
                      generations={k: pd.concat(v, ignore_index=True) for k, v in gens.items()},
                      train_idx=train_idx, heldout_idx=held_idx, seconds=time.perf_counter() - t0)


def kfold_heldout(poems: pd.DataFrame, config: ChihayaConfig, k: int = 10, *, vocab: CharVocab | None = None) -> pd.DataFrame:
    """Train ``k`` models, each holding out one of ``k`` disjoint folds, so every poem is held out exactly once.

    The folds come from one random permutation (``config.seed``); each run
    uses ``config`` (its ``held_out`` is ignored). Returns one row per poem:
    ``fold``, ``number``, ``gold``, ``pred`` (generated by the model that
    never trained on it), ``exact``, ``char``, and ``train_exact`` (that
    model's exact-match rate on its own training poems).
    """
    n = len(poems)
    if not 2 <= k <= n:
        raise ValueError(f"k must be in 2..{n}, got {k}.")
    folds = np.array_split(np.random.default_rng(config.seed).permutation(n), k)
    vocab = vocab or CharVocab.from_texts(list(poems["kami"]) + list(poems["shimo"]))
    out = []
    for f, held in enumerate(folds):
        run = train_chihaya(poems, config, vocab=vocab, heldout_idx=held)
        g = run.final("heldout").assign(fold=f, train_exact=float(run.final("train").exact.mean()))
        out.append(g[["fold", "number", "gold", "pred", "exact", "char", "train_exact"]])
    return pd.concat(out, ignore_index=True).sort_values("number").reset_index(drop=True)


def kimariji_lengths(kami: Sequence[str]) -> list[int]:
    """For each upper phrase, how many leading characters single it out among all of ``kami`` (spaces ignored).

    This is the 決まり字 counted in written kana (competitive karuta counts
    sounds, so を and お are the same there). Raises if one phrase is a prefix
    of another (no prefix would single it out).
    """
    texts = [k.replace(" ", "") for k in kami]
    out = []
    for i, t in enumerate(texts):
        others = [o for j, o in enumerate(texts) if j != i]
        n = 1
        while n <= len(t) and any(o.startswith(t[:n]) for o in others):
            n += 1
        if n > len(t):
            raise ValueError(f"upper phrase {t!r} is a prefix of another one; it has no 決まり字.")
        out.append(n)
    return out


@torch.no_grad()
def prefix_generations(model, vocab: CharVocab, kami: Sequence[str], shimo: Sequence[str]) -> pd.DataFrame:
    """Generate the lower phrase from every prefix ``kami[i][:n]`` (n = 1 .. full length) of every upper phrase.

    Returns one row per poem and prefix: ``poem`` (row index), ``n``,
    ``pred``, ``correct`` (pred equals the lower phrase), and ``locked``:
    True when this prefix and every longer one give the right lower phrase.
    """
    from .transformer import greedy_decode, torch_threads

    texts = [k.replace(" ", "") for k in kami]
    golds = [s.replace(" ", "") for s in shimo]
    rows = []
    with torch_threads(1):
        for n in range(1, max(len(t) for t in texts) + 1):
            idx = [i for i, t in enumerate(texts) if len(t) >= n]
            src = _pad([vocab.encode(texts[i][:n], eos=True) for i in idx], vocab.pad_id)
            out = greedy_decode(model, src, bos_id=vocab.bos_id, eos_id=vocab.eos_id)
            for i, ids in zip(idx, out.tolist()):
                pred = vocab.decode(ids)
                rows.append({"poem": i, "n": n, "pred": pred, "correct": pred == golds[i]})
    df = pd.DataFrame(rows).sort_values(["poem", "n"]).reset_index(drop=True)
    # locked: correct here and at every longer prefix (reverse cumulative AND within each poem)
    df["locked"] = df[::-1].groupby("poem").correct.cummin()[::-1].astype(bool)
    return df


# ---------------------------------------------------------------------------
# coloured errors
# ---------------------------------------------------------------------------

#: Colours of :func:`render_errors` (the lecture's convention: blue = right, red = wrong).
RIGHT_COLOR, WRONG_COLOR = "#1f5fbf", "#d62728"
_ANSI_RIGHT, _ANSI_WRONG, _ANSI_RESET = "\x1b[34m", "\x1b[1;31m", "\x1b[0m"


def render_errors(golds: Sequence[str], preds: Sequence[str], *, labels: Sequence[str] | None = None, fmt: str = "html", only_errors: bool = True, max_rows: int | None = None) -> str:
    """Generated lower phrases with right characters in blue and wrong ones in red.

    Parameters
    ----------
    golds, preds : sequences of str
    labels : sequence of str, optional
        A label per row (e.g. the poem number).
    fmt : {"html", "ansi"}
        ``"html"`` returns a table for ``IPython.display.HTML`` (rendered in
        the book); wrong characters are also bold and underlined, so the
        difference survives without colour. ``"ansi"`` returns terminal text.
    only_errors : bool, default True
        Leave out the rows generated exactly right.
    max_rows : int, optional

    Returns
    -------
    str
    """
    if fmt not in ("html", "ansi"):
        raise ValueError(f"fmt must be 'html' or 'ansi', got {fmt!r}.")
    if len(golds) != len(preds):
        raise ValueError(f"golds and preds differ in length: {len(golds)} vs {len(preds)}.")
    labels = list(labels) if labels is not None else [str(i) for i in range(len(golds))]
    rows = [(lab, g, p) for lab, g, p in zip(labels, golds, preds) if not (only_errors and g == p)]
    if max_rows is not None:
        rows = rows[:max_rows]

    def marked(gold: str, pred: str) -> str:
        parts = []
        for i, ch in enumerate(pred):
            ok = i < len(gold) and gold[i] == ch
            if fmt == "html":
                style = f"color:{RIGHT_COLOR}" if ok else f"color:{WRONG_COLOR};font-weight:bold;text-decoration:underline"
                parts.append(f'<span style="{style}">{html.escape(ch)}</span>')
            else:
                parts.append(f"{_ANSI_RIGHT if ok else _ANSI_WRONG}{ch}{_ANSI_RESET}")
        missing = max(0, len(gold) - len(pred))
        if missing:
            gap = "＿" * missing
            parts.append(f'<span style="color:{WRONG_COLOR}">{gap}</span>' if fmt == "html" else f"{_ANSI_WRONG}{gap}{_ANSI_RESET}")
        return "".join(parts)

    if fmt == "ansi":
        return "\n".join(f"{lab:>4}  正解 {g}\n      生成 {marked(g, p)}" for lab, g, p in rows)
    body = "".join(
        f"<tr><td style='text-align:right'>{html.escape(str(lab))}</td><td style='font-family:monospace'>{html.escape(g)}</td>"
        f"<td style='font-family:monospace'>{marked(g, p)}</td></tr>"
        for lab, g, p in rows
    )
    head = "<tr><th>番号</th><th>正解の下の句</th><th>生成された下の句</th></tr>"
    return f"<table>{head}{body}</table>" if rows else "<p>誤りはない（すべて完全一致）。</p>"
