"""A small Transformer written from the equations of Vaswani et al. (2017).

Chapter 6 builds it piece by piece and chapter 7 trains it on the 百人一首.
Everything follows the original paper: scaled dot-product attention, multi-head
attention, sinusoidal positional encoding, post-LN encoder and decoder layers
(``LayerNorm(x + Sublayer(x))``), embeddings scaled by ``sqrt(d_model)``.

Shapes are written ``B`` batch, ``N`` source length, ``T`` target length,
``D`` = d_model, ``H`` heads, ``K`` = d_k = D / H, ``V`` vocabulary.

Masks
-----
A mask is a boolean tensor that broadcasts to ``(B, H, Nq, Nk)`` and is
**True where a query may attend to a key** (the opposite of
``torch.nn.MultiheadAttention``'s ``attn_mask``, where True forbids).
:func:`causal_mask` and :func:`padding_mask` build the two kinds the model
uses; combine them with ``&``.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Iterator

import pandas as pd
import torch
from torch import nn

__all__ = [
    "sinusoidal_positions",
    "causal_mask",
    "padding_mask",
    "scaled_dot_product_attention",
    "MultiHeadAttention",
    "FeedForward",
    "EncoderLayer",
    "DecoderLayer",
    "Seq2SeqTransformer",
    "shift_right",
    "greedy_decode",
    "trace_shapes",
    "torch_threads",
]


# ---------------------------------------------------------------------------
# positional encoding and masks
# ---------------------------------------------------------------------------


def sinusoidal_positions(n_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The paper's positional encoding, ``(P, D)``.

    ``PE[pos, 2i] = sin(pos / base^(2i/D))`` and ``PE[pos, 2i+1] = cos(pos / base^(2i/D))``:
    dimension pair ``i`` is a sine/cosine of wavelength ``2π·base^(2i/D)``,
    from ``2π`` (i = 0) up to almost ``2π·base``.

    Parameters
    ----------
    n_positions : int
        Number of positions P (0 .. P-1).
    d_model : int
        Model dimension D; must be even (sines and cosines come in pairs).
    base : float, default 10000
        The paper's constant.

    Raises
    ------
    ValueError
        ``n_positions`` < 1, or ``d_model`` not a positive even number.

    Examples
    --------
    >>> pe = sinusoidal_positions(50, 16)
    >>> pe.shape, float(pe[0, 1])
    (torch.Size([50, 16]), 1.0)
    """
    if not isinstance(n_positions, int) or n_positions < 1:
        raise ValueError(f"n_positions must be a positive int, got {n_positions!r}.")
    if not isinstance(d_model, int) or d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be a positive even int (sines and cosines come in pairs), got {d_model!r}.")
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (P, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)[None, :]  # (1, D/2)
    angle = pos / base ** (two_i / d_model)  # (P, D/2)
    pe = torch.empty(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()


def causal_mask(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """``(n, n)`` boolean mask, True on and below the diagonal: position t sees 0..t only."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}.")
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def padding_mask(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """``(B, 1, 1, N)`` boolean mask, True on real tokens (keys that may be attended to)."""
    if ids.dim() != 2:
        raise ValueError(f"ids must be (B, N), got shape {tuple(ids.shape)}.")
    return (ids != pad_id)[:, None, None, :]


# ---------------------------------------------------------------------------
# attention
# ---------------------------------------------------------------------------


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(Q Kᵀ / sqrt(d_k)) V`` with an optional mask.

    Parameters
    ----------
    q : Tensor (..., Nq, K)
    k : Tensor (..., Nk, K)
    v : Tensor (..., Nk, Dv)
    mask : bool Tensor broadcastable to (..., Nq, Nk), optional
        True where the query may attend to the key. A masked score becomes the
        most negative float, so its weight is exactly 0 after the softmax
        (a row with every key masked gets uniform weights instead of NaN).

    Returns
    -------
    out : Tensor (..., Nq, Dv)
    weights : Tensor (..., Nq, Nk)
        The attention weights; every row sums to 1.
    """
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension d_k, got {q.shape[-1]} and {k.shape[-1]}.")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of keys, got {k.shape[-2]} and {v.shape[-2]}.")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Nq, Nk)
    if mask is not None:
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be a bool tensor (True = may attend), got {mask.dtype}.")
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)  # (..., Nq, Nk)
    return weights @ v, weights


class MultiHeadAttention(nn.Module):
    """``MultiHead(Q, K, V) = Concat(head_1, ..., head_H) W^O`` with ``head_h = Attention(Q W_h^Q, K W_h^K, V W_h^V)``.

    The H projections ``W_h^Q`` (D × K) are stored side by side in one
    ``nn.Linear(D, D)`` per role, so head h uses output columns ``h·K .. (h+1)·K``.

    Parameters
    ----------
    d_model : int
    n_heads : int
        Must divide ``d_model``; ``d_k = d_v = d_model // n_heads``.
    dropout : float, default 0.0
        Dropout on the attention weights (as in the reference implementation).
    bias : bool, default True

    Attributes
    ----------
    last_weights : Tensor (B, H, Nq, Nk) or None
        The attention weights of the latest forward pass (detached), for figures.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if n_heads < 1 or d_model % n_heads:
            raise ValueError(f"n_heads={n_heads} must be >= 1 and divide d_model={d_model}.")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.last_weights: torch.Tensor | None = None

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        return x.view(b, n, self.n_heads, self.d_k).transpose(1, 2)  # (B, H, N, K)

    def forward(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """query (B, Nq, D), key/value (B, Nk, D), mask -> out (B, Nq, D), weights (B, H, Nq, Nk)."""
        if query.dim() != 3 or query.shape[-1] != self.d_model:
            raise ValueError(f"query must be (B, N, {self.d_model}), got {tuple(query.shape)}.")
        q = self._split(self.w_q(query))  # (B, H, Nq, K)
        k = self._split(self.w_k(key))  # (B, H, Nk, K)
        v = self._split(self.w_v(value))  # (B, H, Nk, K)
        heads, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, Nq, K), (B, H, Nq, Nk)
        if self.training and self.dropout.p > 0:
            heads = self.dropout(weights) @ v
        concat = heads.transpose(1, 2).reshape(query.shape[0], query.shape[1], self.d_model)  # (B, Nq, D)
        self.last_weights = weights.detach()
        return self.w_o(concat), weights

    def to_torch(self) -> nn.MultiheadAttention:
        """A ``torch.nn.MultiheadAttention`` (batch_first) holding the same weights.

        PyTorch keeps W^Q, W^K, W^V stacked in one ``in_proj_weight`` (3D × D).
        Note its mask convention is the opposite of ours: pass ``attn_mask=~mask``.
        """
        bias = self.w_q.bias is not None
        ref = nn.MultiheadAttention(self.d_model, self.n_heads, bias=bias, batch_first=True)
        with torch.no_grad():
            ref.in_proj_weight.copy_(torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight], dim=0))
            ref.out_proj.weight.copy_(self.w_o.weight)
            if bias:
                ref.in_proj_bias.copy_(torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias], dim=0))
                ref.out_proj.bias.copy_(self.w_o.bias)
        return ref.eval()


class FeedForward(nn.Module):
    """``FFN(x) = max(0, x W_1 + b_1) W_2 + b_2``, applied to every position separately."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.lin1, self.lin2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin2(self.dropout(torch.relu(self.lin1(x))))


class EncoderLayer(nn.Module):
    """Post-LN encoder layer: ``x = LN(x + SelfAttn(x))``, then ``x = LN(x + FFN(x))``.

    ``norm_first=True`` gives the pre-LN form used by GPT-2 and most later
    models (Xiong et al., 2020): ``x = x + SelfAttn(LN(x))``, then
    ``x = x + FFN(LN(x))`` -- the residual stream itself is never normalised.
    Chapter 6 compares the two; the book's models are post-LN.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, *, norm_first: bool = False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = bool(norm_first)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, N, D), mask (B, 1, 1, N) -> (B, N, D)."""
        if self.norm_first:
            h = self.norm1(x)
            a, _ = self.self_attn(h, h, h, mask)
            x = x + self.dropout(a)
            return x + self.dropout(self.ffn(self.norm2(x)))
        a, _ = self.self_attn(x, x, x, mask)
        x = self.norm1(x + self.dropout(a))
        return self.norm2(x + self.dropout(self.ffn(x)))


class DecoderLayer(nn.Module):
    """Post-LN decoder layer: masked self-attention, attention over the encoder output, FFN."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, y: torch.Tensor, memory: torch.Tensor, self_mask: torch.Tensor | None = None, cross_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """y (B, T, D), memory (B, N, D), self_mask (B, 1, T, T), cross_mask (B, 1, 1, N) -> (B, T, D)."""
        a, _ = self.self_attn(y, y, y, self_mask)
        y = self.norm1(y + self.dropout(a))
        c, _ = self.cross_attn(y, memory, memory, cross_mask)
        y = self.norm2(y + self.dropout(c))
        return self.norm3(y + self.dropout(self.ffn(y)))


# ---------------------------------------------------------------------------
# the encoder-decoder model
# ---------------------------------------------------------------------------


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder Transformer for token sequences (the paper's Fig. 1, any number of layers).

    Parameters
    ----------
    src_vocab, tgt_vocab : int
        Vocabulary sizes of the source and target (they may be the same vocabulary).
    d_model : int, default 32
    n_heads : int, default 4
    n_layers : int, default 1
        Encoder layers = decoder layers.
    d_ff : int, optional
        Inner size of the feed-forward block; default ``4 * d_model``.
    max_len : int, default 22
        Longest source or decoder input accepted (positional encodings are made for it).
    dropout : float, default 0.1
    pad_id : int, default 0
        Padding id in both vocabularies: padded keys are masked, padded embeddings are zero.
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        *,
        d_model: int = 32,
        n_heads: int = 4,
        n_layers: int = 1,
        d_ff: int | None = None,
        max_len: int = 22,
        dropout: float = 0.1,
        pad_id: int = 0,
    ):
        super().__init__()
        d_ff = d_ff or 4 * d_model
        self.d_model, self.max_len, self.pad_id = d_model, max_len, pad_id
        self.config = dict(src_vocab=src_vocab, tgt_vocab=tgt_vocab, d_model=d_model, n_heads=n_heads,
                           n_layers=n_layers, d_ff=d_ff, max_len=max_len, dropout=dropout, pad_id=pad_id)
        self.src_embed = nn.Embedding(src_vocab, d_model, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model, padding_idx=pad_id)
        self.register_buffer("pe", sinusoidal_positions(max_len, d_model), persistent=False)  # (P, D)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.generator = nn.Linear(d_model, tgt_vocab)
        self.dropout = nn.Dropout(dropout)

    def _embed(self, table: nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[1]
        if n > self.max_len:
            raise ValueError(f"sequence of length {n} is longer than max_len={self.max_len}; shorten it or build the model with a larger max_len.")
        return self.dropout(table(ids) * math.sqrt(self.d_model) + self.pe[:n])  # (B, N, D)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, N) -> memory (B, N, D) and its key mask (B, 1, 1, N)."""
        src_mask = padding_mask(src, self.pad_id)
        x = self._embed(self.src_embed, src)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return x, src_mask

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor, *, causal: bool = True) -> torch.Tensor:
        """tgt_in (B, T) -> logits (B, T, V) for the next token at every position.

        With ``causal=False`` every position also sees the later ones (only
        useful to show what goes wrong without the mask).
        """
        t = tgt_in.shape[1]
        self_mask = padding_mask(tgt_in, self.pad_id)  # (B, 1, 1, T)
        if causal:
            self_mask = self_mask & causal_mask(t, tgt_in.device)  # (B, 1, T, T)
        y = self._embed(self.tgt_embed, tgt_in)
        for layer in self.decoder:
            y = layer(y, memory, self_mask, src_mask)
        return self.generator(y)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, *, causal: bool = True) -> torch.Tensor:
        """src (B, N), tgt_in (B, T) -> logits (B, T, V)."""
        memory, src_mask = self.encode(src)
        return self.decode(tgt_in, memory, src_mask, causal=causal)


def shift_right(target: torch.Tensor, bos_id: int) -> torch.Tensor:
    """Decoder input for teacher forcing: ``[bos, y_1, ..., y_{T-1}]`` for target ``[y_1, ..., y_T]``.

    Position t of the decoder then reads y_1..y_{t-1} (plus bos) and must
    predict y_t: it never sees the token it has to produce.
    """
    if target.dim() != 2:
        raise ValueError(f"target must be (B, T), got shape {tuple(target.shape)}.")
    bos = torch.full_like(target[:, :1], bos_id)
    return torch.cat([bos, target[:, :-1]], dim=1)  # (B, T)


@torch.no_grad()
def greedy_decode(
    model: Seq2SeqTransformer, src: torch.Tensor, *, bos_id: int, eos_id: int, max_new: int | None = None
) -> torch.Tensor:
    """Generate autoregressively: each step appends the most probable next token.

    Parameters
    ----------
    model : Seq2SeqTransformer
    src : LongTensor (B, N)
    bos_id, eos_id : int
    max_new : int, optional
        Most tokens generated per sequence (default and upper bound:
        ``model.max_len``, the longest decoder input the model accepts).

    Returns
    -------
    LongTensor (B, T) with T <= max_new
        The generated ids, without the leading bos; a sequence that produced
        eos keeps it and is padded with ``model.pad_id`` after it. Generation
        stops when every sequence has produced eos or after ``max_new`` steps.
        The padding and bos ids are never generated (their scores are set to
        minus infinity before the argmax).
    """
    limit = model.max_len
    max_new = limit if max_new is None else int(max_new)
    if not 1 <= max_new <= limit:
        raise ValueError(f"max_new={max_new} must be in 1..{limit} (the model's max_len).")
    was_training = model.training
    model.eval()
    memory, src_mask = model.encode(src)
    b = src.shape[0]
    ys = torch.full((b, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    done = torch.zeros(b, dtype=torch.bool, device=src.device)
    for _ in range(max_new):
        logits = model.decode(ys, memory, src_mask)[:, -1]  # (B, V) scores of the next token
        logits[:, [model.pad_id, bos_id]] = float("-inf")
        nxt = logits.argmax(-1)  # (B,)
        nxt = torch.where(done, torch.full_like(nxt, model.pad_id), nxt)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        done |= nxt == eos_id
        if bool(done.all()):
            break
    model.train(was_training)
    return ys[:, 1:]


def trace_shapes(model: nn.Module, *inputs: Any, **kwargs: Any) -> pd.DataFrame:
    """Run ``model(*inputs)`` once and list the output shape of every named submodule, in call order.

    Uses forward hooks on the unmodified modules; handy for a table of shapes.
    """
    rows: list[dict[str, Any]] = []
    handles = []

    def hook(name: str):
        def f(module: nn.Module, args: Any, out: Any) -> None:
            first = out[0] if isinstance(out, tuple) else out
            extra = tuple(out[1].shape) if isinstance(out, tuple) and len(out) > 1 and torch.is_tensor(out[1]) else None
            rows.append({"module": name, "type": type(module).__name__, "output": tuple(first.shape), "weights": extra})

        return f

    for name, mod in model.named_modules():
        if name and not isinstance(mod, (nn.Dropout, nn.ModuleList)):
            handles.append(mod.register_forward_hook(hook(name)))
    try:
        with torch.no_grad():
            model(*inputs, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return pd.DataFrame(rows)


@contextlib.contextmanager
def torch_threads(n: int = 1) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(n)``, then restore the previous setting.

    The models of chapters 7 and 8 are so small that every operation takes
    microseconds; splitting them over threads costs more than it saves, and
    on a busy machine (a shared 2-core CI runner) it made training ten times
    slower than one thread.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, int(n)))
    try:
        yield
    finally:
        torch.set_num_threads(before)
