"""Recurrent models: a GRU language model, and GRU encoder-decoders with and without attention.

:class:`WordLM` is the recurrent language model of the seq2seq chapter: it
reads a sentence word by word and predicts the next word; trained on the
grammar corpus, its samples can be checked with
:func:`mixlib.course.corpus.check_sentence`. A seq2seq decoder is the same kind
of model, conditioned on the encoder.

The seq2seq chapter trains :class:`Seq2Seq` with ``attention=False``: the
decoder receives **one** vector, made from the encoder's final states, and
nothing else (Sutskever et al. 2014; Cho et al. 2014). The attention chapter
trains the same model with ``attention=True``: at every output step the
decoder scores every encoder state with an additive (Bahdanau et al. 2015)
score, takes the softmax-weighted mean of the states as a context vector and
feeds it to the GRU and the output layer. Everything else -- encoder, the
sizes E, H, Hd, data, optimiser, number of updates -- is the same. The
attention decoder has more parameters, though (its score and its wider GRU
and output layer: 1.7x the whole model at the chapters' sizes), so the
chapter also trains an attention model shrunk below the bottleneck model's
parameter count (:func:`dec_hidden_within`) and the bottleneck model for a
multiple of the budget (:func:`train_more`): the first rules out capacity,
the second too little training.

Data are strings from :mod:`mixlib.course.corpus` (the reversal task). Every
batch holds strings of one length, so there is no padding and no mask: the
length is exactly what the chapters vary.

Shapes: ``B`` batch, ``S`` source length, ``T`` target steps (``S + 1`` with
``<eos>``), ``E`` embedding size, ``H`` encoder size per direction, ``Hd``
decoder size, ``V`` characters (with ``<bos>`` and ``<eos>``).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from .word2vec import torch_threads

__all__ = [
    "WordLM",
    "train_language_model",
    "sample_sentences",
    "perplexity",
    "CharVocab",
    "EncoderOutput",
    "GRUEncoder",
    "BottleneckDecoder",
    "AttentionDecoder",
    "Seq2Seq",
    "sample_batch",
    "TrainResult",
    "train_seq2seq",
    "train_more",
    "dec_hidden_within",
    "Decoded",
    "greedy_decode",
    "accuracy_by_length",
]


class WordLM(nn.Module):
    """Word-level GRU language model: ``p(w_{t+1} | w_1..w_t) = softmax(W h_t)``.

    Parameters
    ----------
    words : sequence of str
        The vocabulary; ids 0, 1, 2 are ``<pad>``, ``<bos>``, ``<eos>`` and
        ``words[i]`` gets id ``i + 3``.
    emb, hidden : int, default 32, 64
    seed : int, default 0
        Seeds the initial weights.
    """

    PAD, BOS, EOS = 0, 1, 2

    def __init__(self, words: Sequence[str], *, emb: int = 32, hidden: int = 64, seed: int = 0):
        super().__init__()
        if len(set(words)) != len(words) or not words:
            raise ValueError("words must be a non-empty sequence without repeats.")
        self.itos = ["<pad>", "<bos>", "<eos>", *words]
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.embed = nn.Embedding(len(self.itos), emb, padding_idx=self.PAD)
            self.rnn = nn.GRU(emb, hidden, batch_first=True)
            self.out = nn.Linear(hidden, len(self.itos))

    def encode(self, sentence: Sequence[str]) -> list[int]:
        bad = [w for w in sentence if w not in self.stoi or self.stoi[w] < 3]
        if bad:
            raise ValueError(f"words {bad[:5]} are not in the language model's vocabulary.")
        return [self.stoi[w] for w in sentence]

    def batch(self, sentences: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Input ``<bos> w_1 .. w_n`` and target ``w_1 .. w_n <eos>``, padded: two ``(B, T)`` tensors."""
        seqs = [self.encode(s) for s in sentences]
        T = max(len(x) for x in seqs) + 1
        inp = torch.full((len(seqs), T), self.PAD, dtype=torch.long)
        tgt = torch.full((len(seqs), T), self.PAD, dtype=torch.long)
        for i, x in enumerate(seqs):
            inp[i, : len(x) + 1] = torch.tensor([self.BOS, *x])
            tgt[i, : len(x) + 1] = torch.tensor([*x, self.EOS])
        return inp, tgt

    def forward(self, inp: torch.Tensor, h0: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits ``(B, T, V)`` and the last state ``(1, B, H)``."""
        h, h_n = self.rnn(self.embed(inp), h0)  # (B, T, H)
        return self.out(h), h_n


def train_language_model(
    model: WordLM,
    sentences: Sequence[Sequence[str]],
    *,
    steps: int,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    num_threads: int | None = 1,
) -> "TrainResult":
    """Train on random minibatches of ``sentences`` (cross-entropy of every next word, padding ignored)."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer; got {steps!r}.")
    if not sentences:
        raise ValueError("sentences is empty.")
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = np.zeros(steps)
    model.train()
    t0 = time.perf_counter()
    with torch_threads(num_threads):
        for k in range(steps):
            idx = torch.randint(0, len(sentences), (batch_size,), generator=gen).tolist()
            inp, tgt = model.batch([sentences[i] for i in idx])
            logits, _ = model(inp)
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=model.PAD)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses[k] = float(loss.detach())
    model.eval()
    return TrainResult(losses=losses, seconds=time.perf_counter() - t0, steps=steps, batch_size=batch_size)


@torch.no_grad()
def sample_sentences(model: WordLM, n: int, *, max_len: int = 20, temperature: float = 1.0, seed: int = 0) -> list[list[str]]:
    """Sample ``n`` sentences word by word from ``<bos>`` until ``<eos>`` (at most ``max_len`` words)."""
    if not temperature > 0:
        raise ValueError(f"temperature must be positive; got {temperature!r}.")
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    y = torch.full((n, 1), model.BOS, dtype=torch.long)
    h = None
    out = torch.zeros((n, 0), dtype=torch.long)
    done = torch.zeros(n, dtype=torch.bool)
    for _ in range(max_len + 1):
        logits, h = model(y, h)  # (n, 1, V)
        logits = logits[:, -1] / temperature
        logits[:, [model.PAD, model.BOS]] = -float("inf")  # never generated
        y = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)  # (n, 1)
        y[done] = model.EOS
        out = torch.cat([out, y], 1)
        done |= y[:, 0] == model.EOS
        if done.all():
            break
    sents = []
    for row in out.tolist():
        words = []
        for i in row:
            if i == model.EOS:
                break
            words.append(model.itos[i])
        sents.append(words[:max_len])
    return sents


@torch.no_grad()
def perplexity(model: WordLM, sentences: Sequence[Sequence[str]]) -> float:
    """``exp`` of the mean negative log-likelihood per predicted token (the words and each ``<eos>``)."""
    model.eval()
    inp, tgt = model.batch(sentences)
    logits, _ = model(inp)
    nll = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=model.PAD, reduction="sum")
    return float(torch.exp(nll / (tgt != model.PAD).sum()))


class CharVocab:
    """Characters of the task plus ``<bos>`` (id 0) and ``<eos>`` (id 1).

    Parameters
    ----------
    alphabet : str
        Distinct characters; character ``alphabet[i]`` gets id ``i + 2``.
    """

    BOS = 0
    EOS = 1

    def __init__(self, alphabet: str):
        if len(alphabet) < 1 or len(set(alphabet)) != len(alphabet):
            raise ValueError(f"alphabet must be non-empty without repeated characters; got {alphabet!r}.")
        self.alphabet = alphabet
        self.itos = ["<bos>", "<eos>", *alphabet]
        self.stoi = {ch: i + 2 for i, ch in enumerate(alphabet)}

    def __len__(self) -> int:
        return len(self.itos)

    def __repr__(self) -> str:
        return f"CharVocab({self.alphabet!r})"

    def encode(self, text: str) -> list[int]:
        """Ids of the characters of ``text`` (no ``<bos>``/``<eos>``)."""
        bad = sorted({ch for ch in text if ch not in self.stoi})
        if bad:
            raise ValueError(f"characters {bad} are not in the alphabet {self.alphabet!r}.")
        return [self.stoi[ch] for ch in text]

    def decode(self, ids: Sequence[int]) -> str:
        """Characters up to (not including) the first ``<eos>``; ``<bos>`` is skipped."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.EOS:
                break
            if i >= 2:
                out.append(self.itos[i])
        return "".join(out)

    def tensors(self, sources: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Source, decoder input and decoder target for the reversal of equal-length strings.

        Returns
        -------
        src : ``(B, S)``; tgt_in : ``(B, T)`` = ``<bos>`` + reversed source;
        tgt_out : ``(B, T)`` = reversed source + ``<eos>``.
        """
        lengths = {len(s) for s in sources}
        if len(lengths) != 1 or 0 in lengths:
            raise ValueError(f"a batch must hold non-empty strings of one length; got lengths {sorted(lengths)}.")
        src = torch.tensor([self.encode(s) for s in sources], dtype=torch.long)  # (B, S)
        rev = src.flip(1)
        B = src.shape[0]
        bos = torch.full((B, 1), self.BOS, dtype=torch.long)
        eos = torch.full((B, 1), self.EOS, dtype=torch.long)
        return src, torch.cat([bos, rev], 1), torch.cat([rev, eos], 1)


def sample_batch(vocab: CharVocab, batch_size: int, length: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A fresh random batch of the reversal task (uniform characters), as :meth:`CharVocab.tensors` returns it."""
    src = torch.randint(2, len(vocab), (batch_size, length), generator=generator)  # (B, S)
    rev = src.flip(1)
    bos = torch.full((batch_size, 1), vocab.BOS, dtype=torch.long)
    eos = torch.full((batch_size, 1), vocab.EOS, dtype=torch.long)
    return src, torch.cat([bos, rev], 1), torch.cat([rev, eos], 1)


# ---------------------------------------------------------------------------
# model
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EncoderOutput:
    """What the encoder hands over.

    Attributes
    ----------
    states : torch.Tensor
        ``(B, S, 2H)`` the bidirectional GRU state at every source position.
    summary : torch.Tensor
        ``(B, Hd)`` one fixed-size vector, ``tanh(W [h_fwd(S); h_bwd(1)])``:
        the forward GRU's state after the last character and the backward GRU's
        state after the first, i.e. the two *final* states.
    """

    states: torch.Tensor
    summary: torch.Tensor


class GRUEncoder(nn.Module):
    """Embedding + one bidirectional GRU layer; the summary becomes the decoder's initial state."""

    def __init__(self, vocab_size: int, emb: int, hidden: int, dec_hidden: int):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb)
        self.rnn = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(2 * hidden, dec_hidden)

    def forward(self, src: torch.Tensor) -> EncoderOutput:
        states, h_n = self.rnn(self.embed(src))  # (B, S, 2H), (2, B, H)
        final = torch.cat([h_n[0], h_n[1]], dim=-1)  # (B, 2H): forward after x_S, backward after x_1
        return EncoderOutput(states=states, summary=torch.tanh(self.bridge(final)))


class BottleneckDecoder(nn.Module):
    """A GRU language model over the target whose initial state is the encoder summary -- and nothing else."""

    attention = False

    def __init__(self, vocab_size: int, emb: int, enc_dim: int, hidden: int):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb)
        self.rnn = nn.GRU(emb, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab_size)

    def forward(self, tgt_in: torch.Tensor, memory: EncoderOutput) -> tuple[torch.Tensor, None]:
        """Teacher-forced logits ``(B, T, V)``; ``memory.states`` is never read."""
        h, _ = self.rnn(self.embed(tgt_in), memory.summary[None])  # (B, T, Hd)
        return self.out(h), None

    def init_state(self, memory: EncoderOutput) -> torch.Tensor:
        return memory.summary  # (B, Hd)

    def step(self, y_prev: torch.Tensor, s_prev: torch.Tensor, memory: EncoderOutput) -> tuple[torch.Tensor, torch.Tensor, None]:
        """One decoding step: ``y_prev (B,)``, ``s_prev (B, Hd)`` -> logits ``(B, V)``, state, no weights."""
        h, _ = self.rnn(self.embed(y_prev)[:, None], s_prev[None])  # (B, 1, Hd)
        return self.out(h[:, 0]), h[:, 0], None


class AttentionDecoder(nn.Module):
    r"""GRU decoder with Bahdanau (additive) attention over all encoder states.

    .. math::
        e_{t,s} = \mathbf{v}^\top \tanh(W s_{t-1} + U h_s), \quad
        a_{t,s} = \frac{\exp e_{t,s}}{\sum_{s'} \exp e_{t,s'}}, \quad
        c_t = \sum_s a_{t,s} h_s,

        s_t = \mathrm{GRU}(s_{t-1}, [\mathrm{emb}(y_{t-1}); c_t]), \quad
        \text{logits}_t = W_o [s_t; c_t].
    """

    attention = True

    def __init__(self, vocab_size: int, emb: int, enc_dim: int, hidden: int, attn_dim: int | None = None):
        super().__init__()
        attn_dim = attn_dim or hidden
        self.embed = nn.Embedding(vocab_size, emb)
        self.W = nn.Linear(hidden, attn_dim, bias=False)
        self.U = nn.Linear(enc_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)
        self.cell = nn.GRUCell(emb + enc_dim, hidden)
        self.out = nn.Linear(hidden + enc_dim, vocab_size)

    def init_state(self, memory: EncoderOutput) -> torch.Tensor:
        return memory.summary  # (B, Hd)

    def attend(self, s_prev: torch.Tensor, keys: torch.Tensor, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Weights ``(B, S)`` (each row sums to 1) and context ``(B, 2H)`` for decoder state ``s_prev (B, Hd)``.

        ``keys = U(states)`` ``(B, S, A)`` is computed once per sequence.
        """
        e = self.v(torch.tanh(self.W(s_prev)[:, None, :] + keys))[..., 0]  # (B, S)
        a = torch.softmax(e, dim=-1)  # (B, S)
        c = torch.einsum("bs,bsd->bd", a, states)  # (B, 2H)
        return a, c

    def _advance(self, e_prev: torch.Tensor, s_prev: torch.Tensor, keys: torch.Tensor, states: torch.Tensor):
        a, c = self.attend(s_prev, keys, states)
        s = self.cell(torch.cat([e_prev, c], -1), s_prev)  # (B, Hd)
        return s, c, a

    def step(self, y_prev: torch.Tensor, s_prev: torch.Tensor, memory: EncoderOutput, keys: torch.Tensor | None = None):
        """One step: logits ``(B, V)``, new state ``(B, Hd)``, attention weights ``(B, S)``."""
        keys = self.U(memory.states) if keys is None else keys
        s, c, a = self._advance(self.embed(y_prev), s_prev, keys, memory.states)
        return self.out(torch.cat([s, c], -1)), s, a

    def forward(self, tgt_in: torch.Tensor, memory: EncoderOutput) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced logits ``(B, T, V)`` and attention weights ``(B, T, S)``.

        The same computation as calling :meth:`step` ``T`` times; the embeddings
        and the output layer are applied to all steps at once for speed.
        """
        keys = self.U(memory.states)  # (B, S, A)
        emb = self.embed(tgt_in)  # (B, T, E)
        s = self.init_state(memory)
        states, contexts, weights = [], [], []
        for t in range(tgt_in.shape[1]):
            s, c, a = self._advance(emb[:, t], s, keys, memory.states)
            states.append(s)
            contexts.append(c)
            weights.append(a)
        logits = self.out(torch.cat([torch.stack(states, 1), torch.stack(contexts, 1)], -1))  # (B, T, V)
        return logits, torch.stack(weights, 1)


class Seq2Seq(nn.Module):
    """Encoder + decoder for the reversal task.

    Parameters
    ----------
    vocab : CharVocab
    attention : bool
        False: :class:`BottleneckDecoder` (only the summary vector reaches the decoder).
        True: :class:`AttentionDecoder`.
    emb, hidden, dec_hidden : int, default 32, 64, 128
        Embedding size E, encoder size per direction H, decoder size Hd.
    seed : int, default 0
        Seeds the initial weights.
    """

    def __init__(self, vocab: CharVocab, *, attention: bool, emb: int = 32, hidden: int = 64, dec_hidden: int = 128, seed: int = 0):
        super().__init__()
        for name, v in (("emb", emb), ("hidden", hidden), ("dec_hidden", dec_hidden)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer; got {v!r}.")
        self.vocab = vocab
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            V = len(vocab)
            self.encoder = GRUEncoder(V, emb, hidden, dec_hidden)
            dec = AttentionDecoder if attention else BottleneckDecoder
            self.decoder = dec(V, emb, 2 * hidden, dec_hidden)

    @property
    def attention(self) -> bool:
        return self.decoder.attention

    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher-forced logits ``(B, T, V)`` and attention weights ``(B, T, S)`` (None without attention)."""
        return self.decoder(tgt_in, self.encoder(src))


# ---------------------------------------------------------------------------
# training and evaluation
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainResult:
    """Losses of :func:`train_seq2seq`: ``losses (steps,)`` per update, wall-clock ``seconds``.

    ``cached`` is True when the run was read from mixlib's cache (``train_seq2seq(..., cache=True)``);
    ``seconds`` is then the time the training took when it ran.
    """

    losses: np.ndarray
    seconds: float
    steps: int
    batch_size: int
    cached: bool = False


def _train_key(model: "Seq2Seq", args: dict) -> dict:
    """The cache key of one training run: the starting weights, the arguments, the code and torch."""
    from ..cache import array_digest, key_digest

    start = {name: array_digest(t) for name, t in model.state_dict().items()}
    return {"start": key_digest(start), "alphabet": model.vocab.alphabet, "args": args,
            "code": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(), "torch": torch.__version__}


def train_seq2seq(
    model: Seq2Seq,
    *,
    steps: int,
    batch_size: int = 64,
    min_len: int = 5,
    max_len: int = 40,
    lr: float = 3e-3,
    clip: float = 1.0,
    seed: int = 0,
    num_threads: int | None = 1,
    cache: bool = False,
) -> TrainResult:
    """Train on fresh random reversal batches, one source length per batch.

    Each update draws a length uniformly from ``[min_len, max_len]`` and
    ``batch_size`` random strings of that length; the loss is the mean
    cross-entropy of the teacher-forced targets (reversed string + ``<eos>``).
    Adam, gradient-norm clipping, learning rate decaying linearly to 10 %.
    Two models trained with the same arguments see exactly the same batches.

    ``cache=True`` stores the trained weights and losses in mixlib's cache
    (:mod:`mixlib.cache`: ``.npz``, atomic, no pickle) and, when the same run
    was stored before, loads them instead of training: chapter 5 trains the
    bottleneck model of chapter 4 with the same call and gets chapter 4's
    model without training it again. The key is the model's starting weights
    (which fix its sizes and seed), every argument but ``num_threads``, the
    alphabet, this module's source and torch's version, so a change to any of
    them trains anew.

    Returns
    -------
    TrainResult
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer; got {steps!r}.")
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len; got min_len={min_len}, max_len={max_len}.")
    if cache:
        from ..cache import entry_lock, read_arrays, write_arrays

        args = dict(steps=steps, batch_size=batch_size, min_len=min_len, max_len=max_len, lr=lr, clip=clip, seed=seed)
        key = _train_key(model, args)
        state = model.state_dict()
        expect = {"losses": ((steps,), "f"), "seconds": ((), "f"),
                  **{f"w:{name}": (tuple(t.shape), "f") for name, t in state.items()}}
        with entry_lock("seq2seq-train", key):
            stored = read_arrays("seq2seq-train", key, expect)
            if stored is not None:
                model.load_state_dict({name: torch.from_numpy(stored[f"w:{name}"]) for name in state})
                model.eval()
                return TrainResult(losses=stored["losses"], seconds=float(stored["seconds"]), steps=steps,
                                   batch_size=batch_size, cached=True)
            run = train_seq2seq(model, **args, num_threads=num_threads)
            write_arrays("seq2seq-train", key, {"losses": run.losses, "seconds": np.float64(run.seconds),
                                                **{f"w:{n}": t for n, t in model.state_dict().items()}})
            return run
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 1.0 - 0.9 * k / steps)
    losses = np.zeros(steps)
    model.train()
    t0 = time.perf_counter()
    with torch_threads(num_threads):
        for k in range(steps):
            length = int(torch.randint(min_len, max_len + 1, (1,), generator=gen))
            src, tgt_in, tgt_out = sample_batch(model.vocab, batch_size, length, gen)
            logits, _ = model(src, tgt_in)  # (B, T, V)
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            sched.step()
            losses[k] = float(loss.detach())
    model.eval()
    return TrainResult(losses=losses, seconds=time.perf_counter() - t0, steps=steps, batch_size=batch_size)


def train_more(model: Seq2Seq, factor: int, *, steps: int, seed: int = 0, **kwargs):
    """Go on training ``model`` (in place) up to ``factor`` times the budget of one :func:`train_seq2seq` run.

    The model is taken to have had its first run (``steps`` updates). Round
    ``k = 2 .. factor`` is another ``train_seq2seq(model, steps=steps,
    seed=seed + 100 * k, **kwargs)``, so its batches do not repeat the first
    run's, and the same call gives the same model in every chapter that makes
    it. A generator: yields ``(k, TrainResult)`` after each round, so the
    caller can evaluate the model at each multiple of the budget.

    Examples
    --------
    >>> for k, run in train_more(model, 5, steps=600, batch_size=64, min_len=5, max_len=30):  # doctest: +SKIP
    ...     print(k, run.losses[-100:].mean())
    """
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
        raise ValueError(f"factor must be a positive integer (the multiple of one run's budget); got {factor!r}.")
    for k in range(2, factor + 1):
        yield k, train_seq2seq(model, steps=steps, seed=seed + 100 * k, **kwargs)


def dec_hidden_within(vocab: CharVocab, n_parameters: int, *, attention: bool = True, emb: int = 32, hidden: int = 64) -> int:
    """The largest decoder size ``Hd`` whose :class:`Seq2Seq` has at most ``n_parameters`` parameters.

    Used to build a size-matched control: e.g. the attention model shrunk
    (same ``emb`` and ``hidden``, a narrower decoder) until it is no larger
    than the bottleneck model, so that a gain in accuracy cannot come from
    extra capacity. Parameters are counted on the real modules.

    Raises
    ------
    ValueError
        If even ``Hd = 1`` exceeds ``n_parameters``.
    """

    def count(dec_hidden: int) -> int:
        return Seq2Seq(vocab, attention=attention, emb=emb, hidden=hidden, dec_hidden=dec_hidden).n_parameters()

    if count(1) > n_parameters:
        raise ValueError(
            f"no decoder size fits in {n_parameters:,} parameters: with emb={emb}, hidden={hidden} even dec_hidden=1 "
            f"has {count(1):,}; lower emb or hidden, or allow more parameters."
        )
    lo, hi = 1, 2
    while count(hi) <= n_parameters:  # the count grows with dec_hidden
        lo, hi = hi, 2 * hi
    while hi - lo > 1:  # count(lo) <= n_parameters < count(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if count(mid) <= n_parameters else (lo, mid)
    return lo


@dataclass(frozen=True)
class Decoded:
    """Greedy decoding of one batch.

    Attributes
    ----------
    ids : torch.Tensor
        ``(B, T_max)`` generated ids (after ``<eos>`` the content is meaningless).
    texts : list of str
        Each output up to its first ``<eos>``.
    weights : torch.Tensor or None
        ``(B, T_max, S)`` attention weights of each step (None without attention).
    """

    ids: torch.Tensor
    texts: list[str]
    weights: torch.Tensor | None


@torch.no_grad()
def greedy_decode(model: Seq2Seq, sources: Sequence[str], *, extra_steps: int = 2, num_threads: int | None = 1) -> Decoded:
    """Decode equal-length strings greedily (argmax at each step) for ``S + 1 + extra_steps`` steps."""
    model.eval()
    with torch_threads(num_threads):
        src, _, _ = model.vocab.tensors(sources)
        memory = model.encoder(src)
        dec = model.decoder
        keys = dec.U(memory.states) if dec.attention else None
        s = dec.init_state(memory)
        y = torch.full((src.shape[0],), model.vocab.BOS, dtype=torch.long)
        ids, weights = [], []
        for _ in range(src.shape[1] + 1 + extra_steps):
            if dec.attention:
                logits, s, a = dec.step(y, s, memory, keys)
                weights.append(a)
            else:
                logits, s, _ = dec.step(y, s, memory)
            y = logits.argmax(-1)
            ids.append(y)
    out = torch.stack(ids, 1)  # (B, T_max)
    texts = [model.vocab.decode(row) for row in out.tolist()]
    return Decoded(ids=out, texts=texts, weights=torch.stack(weights, 1) if weights else None)


def accuracy_by_length(model: Seq2Seq, lengths: Sequence[int], *, n_per_length: int = 100, seed: int = 1234) -> pd.DataFrame:
    """Exact-match accuracy (the whole reversed string right, then ``<eos>``) for each source length.

    The test strings come from :func:`mixlib.course.corpus.reversal_pairs`
    with ``seed`` (different from the training stream).

    Returns
    -------
    pandas.DataFrame
        Columns ``length``, ``accuracy`` (0-1), ``char_accuracy`` (fraction of
        positions right, over the target length) and ``n``.
    """
    from .corpus import reversal_pairs

    rows = []
    for L in lengths:
        task = reversal_pairs(0, lengths=[int(L)] * n_per_length, alphabet=model.vocab.alphabet, seed=seed + int(L))
        dec = greedy_decode(model, task.sources)
        exact = np.mean([p == t for p, t in zip(dec.texts, task.targets)])
        chars = np.mean([sum(a == b for a, b in zip(p, t)) / len(t) for p, t in zip(dec.texts, task.targets)])
        rows.append({"length": int(L), "accuracy": float(exact), "char_accuracy": float(chars), "n": n_per_length})
    return pd.DataFrame(rows)
