"""The decomposition of a whole model: hooks on one ordinary forward pass, a layer decomposed as it finishes."""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch

from .kernel import CHECKS, _Workspace, check_precision, decompose_layer, split_probe
from .result import METRICS, VECTOR_FIELDS, Mixing

#: Size above which ``vectors=None`` drops the four (L, B, N, D) vector fields.
VECTOR_LIMIT_BYTES = 1 << 30
#: Keys a tokenized batch may carry (the rest is refused, so that typos do not pass silently).
BATCH_KEYS = ("input_ids", "attention_mask", "token_type_ids", "special_tokens_mask", "masked")


class _StopForward(Exception):
    """Raised from the last needed hook: the rest of the forward pass is not needed."""


def _run_hooked(enc: Any, chunk: Mapping[str, torch.Tensor], hooks: Iterable[Iterable[Any]]) -> None:
    """One forward pass of ``enc.model`` on ``chunk`` with forward hooks attached.

    ``hooks`` yields groups of hook handles (e.g. :func:`_register` per layer); they
    are registered as they are drawn and always removed, also when registration
    fails half-way. A hook may end the pass early by raising :class:`_StopForward`.
    """
    handles: list[Any] = []
    try:
        for group in hooks:
            handles.extend(group)
        with torch.no_grad():
            enc.model(**chunk)
    except _StopForward:
        pass
    finally:
        for h in handles:
            h.remove()


def _chunks(inputs: Mapping[str, torch.Tensor], batch_size: int, device: Any) -> Iterable[tuple[int, dict[str, torch.Tensor], torch.Tensor]]:
    """``(b0, chunk, real)`` for each run of ``batch_size`` sequences: the chunk's inputs on ``device``, padded only as
    far as its own longest sequence (trailing all-padding columns dropped), and ``real`` (b, n), True at real tokens
    (on the CPU)."""
    am = inputs["attention_mask"]
    for b0 in range(0, am.shape[0], int(batch_size)):
        b1 = min(am.shape[0], b0 + int(batch_size))
        n = int(torch.nonzero(am[b0:b1].any(0)).flatten().max()) + 1
        yield b0, {key: t[b0:b1, :n].to(device) for key, t in inputs.items()}, am[b0:b1, :n].bool()


def _each_layer(enc: Any, chunk: Mapping[str, torch.Tensor], layer_idx: list[int], finish: Any, keep_qk: bool = True) -> None:
    """One forward pass of ``chunk``, calling ``finish(layer, got, ln_in, ln_out)`` at each layer's attention LayerNorm.

    ``got`` holds what :func:`_register` captured for that layer; it is emptied
    right after ``finish`` (the hooks hold it until the pass ends, and a
    layer's tensors must not outlive it), and the pass stops after the last
    layer in ``layer_idx``.
    """
    state: dict[int, dict[str, Any]] = {}

    def finish_layer(layer: int, ln_in: torch.Tensor, ln_out: torch.Tensor) -> None:
        got = state.pop(layer)
        try:
            finish(layer, got, ln_in, ln_out)
        finally:
            got.clear()
        if layer == layer_idx[-1]:
            raise _StopForward

    try:
        _run_hooked(enc, chunk, (_register(enc, layer, state, finish_layer, keep_qk) for layer in layer_idx))
    finally:
        state.clear()


def _as_tensor(value: Any, key: str) -> torch.Tensor:
    try:
        t = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
    except Exception as err:  # noqa: BLE001
        raise TypeError(f"batch[{key!r}] cannot be turned into a tensor ({type(value).__name__}).") from err
    if t.dim() == 1:
        t = t.unsqueeze(0)
    if t.dim() != 2:
        raise ValueError(f"batch[{key!r}] must have shape (B, N); got {tuple(t.shape)}.")
    if t.dtype.is_floating_point or t.dtype.is_complex:
        raise TypeError(f"batch[{key!r}] must hold integers; got {t.dtype}.")
    return t.long().cpu()


def _as_batch(enc: Any, batch: Any, max_length: int | None) -> dict[str, torch.Tensor]:
    """Texts, pairs or a tokenized dict -> validated ``input_ids``/``attention_mask``/``token_type_ids`` on the CPU."""
    if isinstance(batch, Mapping):
        unknown = [k for k in batch if k not in BATCH_KEYS]
        if unknown:
            raise ValueError(f"batch has unexpected key(s) {unknown}; a tokenized batch may hold {', '.join(BATCH_KEYS)}.")
        if "input_ids" not in batch:
            raise ValueError("the tokenized batch has no 'input_ids'; pass the output of mixlib.mask_tokens / the tokenizer.")
        ids = _as_tensor(batch["input_ids"], "input_ids")
        out = {"input_ids": ids}
        for key in ("attention_mask", "token_type_ids"):
            if batch.get(key) is not None:
                t = _as_tensor(batch[key], key)
                if t.shape != ids.shape:
                    raise ValueError(f"batch[{key!r}] has shape {tuple(t.shape)} but input_ids has {tuple(ids.shape)}.")
                out[key] = t
        if "attention_mask" not in out:
            out["attention_mask"] = torch.ones_like(ids)
        if ids.numel() == 0:
            raise ValueError("the tokenized batch is empty; give at least one sequence with at least one token.")
        if int(ids.min()) < 0 or int(ids.max()) >= enc.vocab_size:
            raise ValueError(f"input_ids hold ids outside 0..{enc.vocab_size - 1}, the vocabulary of {enc.name}.")
        if not bool(((out["attention_mask"] == 0) | (out["attention_mask"] == 1)).all()):
            raise ValueError("attention_mask must hold only 0 (padding) and 1 (real token).")
        if ids.shape[1] > enc.max_positions:
            raise ValueError(f"sequences have {ids.shape[1]} tokens; {enc.name} accepts at most {enc.max_positions}.")
        empty = torch.nonzero(out["attention_mask"].sum(1) == 0).flatten().tolist()
        if empty:
            raise ValueError(f"sequence(s) {empty[:5]} have no real token (attention_mask all 0).")
        _check_padding(enc, out)
        return out
    from ..data import tokenize

    return tokenize(enc, batch, max_length=max_length)


def _check_padding(enc: Any, batch: dict[str, torch.Tensor]) -> None:
    """The batch is padded as the tokenizer pads it for this model; else one ValueError naming the sequence.

    Real tokens first, then padding (the positions of a left-padded sequence differ from its own, and so do its
    numbers); the padding holds the pad token and no real token is one (a pad token counted as real, or a real
    token hidden by the mask, changes that sequence's numbers silently).
    """
    am = batch["attention_mask"].bool()
    n_real = am.sum(1)
    right = torch.arange(am.shape[1])[None] < n_real[:, None]
    bad = torch.nonzero((am != right).any(1)).flatten().tolist()
    if bad:
        raise ValueError(f"sequence {bad[0]} of the batch is not padded on the right (attention_mask must be 1s, "
                         "then 0s); pass the batch the tokenizer makes (mixlib.tokenize or mixlib.mask_tokens), with "
                         "padding_side='right'.")
    pad = getattr(enc.tokenizer, "pad_token_id", None)
    if pad is None:
        return
    ids = batch["input_ids"]
    for where, wrong, what in ((~am, ids != int(pad), "padding (attention_mask 0) that is not the pad token"),
                               (am, ids == int(pad), "the pad token where attention_mask is 1")):
        rows = torch.nonzero((where & wrong).any(1)).flatten().tolist()
        if rows:
            raise ValueError(f"sequence {rows[0]} of the batch has {what}: its attention_mask does not match its "
                             "input_ids; pass the batch the tokenizer makes (mixlib.tokenize or mixlib.mask_tokens).")


def _available_memory() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - psutil is optional
        pass
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def _decide_vectors(vectors: Any, L: int, B: int, N: int, D: int) -> bool:
    size = 4 * L * B * N * D * 4  # four float32 (L, B, N, D) fields
    if vectors is None:
        if size <= VECTOR_LIMIT_BYTES:
            return True
        warnings.warn(
            f"decompose: the four (L, B, N, D) vector fields would take {_gib(size)} "
            f"(L={L}, B={B}, N={N}, D={D}); keeping only norms and ratios. "
            "Pass vectors=True to keep them anyway, or fewer texts/layers.",
            UserWarning,
            stacklevel=3,
        )
        return False
    if vectors is False:
        return False
    if vectors is True:
        avail = _available_memory()
        if avail is not None and size > 0.8 * avail:
            raise MemoryError(
                f"decompose(vectors=True) would need {_gib(size)} for the four (L, B, N, D) vector fields "
                f"(L={L}, B={B}, N={N}, D={D}) but only {_gib(avail)} of memory is available. "
                "Use vectors=False (norms and ratios only), fewer texts, or layers=[...]."
            )
        return True
    raise TypeError(f"vectors must be None (automatic), True or False; got {vectors!r}.")


def _progress(total: int, n_chunks: int, progress: Any, desc: str) -> Any:
    show = n_chunks > 1 if progress is None else bool(progress)
    if not show:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="seq")


def _first(args: tuple, kwargs: dict, name: str = "input") -> torch.Tensor:
    return args[0] if args else kwargs[name]


def decompose(
    enc: Any,
    batch: Any,
    *,
    layers: Any = None,
    batch_size: int = 32,
    vectors: bool | None = None,
    progress: bool | None = None,
    max_length: int | None = None,
    atol: float = 1e-4,
) -> Mixing:
    """Split each attention block's LayerNorm output into mix / keep_attn / keep_res / bias.

    Parameters
    ----------
    enc : mixlib.Encoder
        A post-LN BERT-family encoder (:func:`mixlib.load_encoder`). Runs on
        ``enc.device``; results come back on the CPU.
    batch : list of str, list of (str, str), or dict of tensors
        Texts, sentence pairs (``[CLS] a [SEP] b [SEP]``), or a tokenized
        batch such as the output of :func:`mixlib.mask_tokens` (keys
        ``input_ids``, optional ``attention_mask`` and ``token_type_ids``).
    layers : int or list of int, optional
        Layers to analyse, 0-based; default all. The forward pass stops after
        the last one needed.
    batch_size : int, default 32
        Sequences per forward pass. Many texts are processed in chunks, each
        padded only as far as its own longest sequence; results are padded to
        the longest sequence overall.
    vectors : bool or None, default None
        Keep the four ``(L, B, N, D)`` vector fields? ``None``: when they take
        at most 1 GiB (otherwise one warning, norms and ratios only). ``True``:
        always (``MemoryError`` when they would not fit in memory). ``False``:
        never.
    progress : bool or None, default None
        ``tqdm`` progress bar; ``None`` shows one when there is more than one chunk.
    max_length : int, optional
        For texts: longest sequence in tokens (default: the model's limit,
        512); longer texts are truncated with a warning.
    atol : float, default 1e-4
        Tolerance of the self-checks.

    Returns
    -------
    Mixing
        The four vectors (when kept), their norms and the mixing ratios, each
        ``(L, B, N)`` or ``(L, B, N, D)``, on the CPU; padding positions hold
        NaN. The three self-checks' largest errors per layer are ``max_error``
        (the decomposition against the LayerNorm output), ``max_attention_error``
        and ``max_split_error``.

    Raises
    ------
    RuntimeError
        The decomposition does not reproduce the model's own LayerNorm output,
        the recomputed attention its attention output, or f_j(x_j) its
        independent recomputation (the split check) within ``atol`` on some
        layer; the message names the layer and the error.
    ValueError, TypeError
        Bad input: empty text list, a non-string item, a layer out of range,
        a malformed tokenized batch, a ``batch_size`` that is not a positive int.
    MemoryError
        ``vectors=True`` and the four vector fields would not fit in memory.

    Examples
    --------
    >>> m = mixlib.decompose(enc, mixlib.mask_tokens(enc, ["The cat sat on the mat.", "A dog ran away."]))
    >>> m.ratio.shape  # (L, B, N)
    torch.Size([6, 2, 9])
    >>> m.tokens(0)
    ['[CLS]', 'the', 'cat', 'sat', 'on', 'the', '[MASK]', '.', '[SEP]']
    >>> round(float(m.ratio[0, 0, 1]), 2)  # layer 0, token "the": its share of mixed context
    0.21
    >>> mixlib.mixing_table(m).shape  # layer x category, percent
    (6, 6)
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r} is not allowed; give a positive int.")
    from ..data import check_atol, token_categories

    atol = check_atol(atol)
    mdtype = check_precision(enc, "decompose")
    layer_idx = enc.check_layers(layers)
    inputs = _as_batch(enc, batch, max_length)
    ids, am = inputs["input_ids"], inputs["attention_mask"]
    B, N = ids.shape
    keep_vectors = _decide_vectors(vectors, len(layer_idx), B, N, enc.d_model)
    results = _Results(len(layer_idx), B, N, enc.n_heads, enc.d_model, keep_vectors)
    run = _Run(enc, layer_idx, mdtype, atol, keep_vectors, results)
    bar = _progress(B, math.ceil(B / int(batch_size)), progress, f"decompose ({enc.name})")
    try:
        for b0, chunk, real in _chunks(inputs, batch_size, enc.device):
            run.chunk(chunk, real, b0)
            if bar is not None:
                bar.update(real.shape[0])
    finally:
        if bar is not None:
            bar.close()

    real = am.bool()
    token_strings = tuple(tuple(enc.tokenizer.convert_ids_to_tokens(ids[b][real[b]].tolist())) for b in range(B))
    return Mixing(layers=layer_idx, input_ids=ids, attention_mask=am, categories=token_categories(enc, ids, am),
                  alpha_self=results.alpha_self, max_error=results.errors["ln_error"],
                  max_attention_error=results.errors["attention_error"], max_split_error=results.errors["split_error"],
                  token_strings=token_strings, model_name=enc.name, **results.stats, **results.vecs)


class _Results:
    """The fields of one :func:`decompose` call, ``(L, B, N[, D])``, filled layer by layer and chunk by chunk.

    Every element is written: values at real positions, NaN at padding.
    """

    def __init__(self, L: int, B: int, N: int, H: int, D: int, keep_vectors: bool) -> None:
        nan = float("nan")
        self.stats = {name: torch.full((L, B, N), nan) for name in METRICS}  # (L, B, N)
        self.alpha_self = torch.full((L, B, H, N), nan)  # (L, B, H, N)
        self.vecs = {name: torch.empty((L, B, N, D)) for name in VECTOR_FIELDS} if keep_vectors else {}
        self.errors = {name: np.zeros(L) for name in CHECKS}

    def destinations(self, li: int, b0: int, b1: int, n: int) -> dict[str, torch.Tensor]:
        """Views of the vector fields where the kernel can write layer ``li`` of sequences b0..b1 directly."""
        return {name: t[li, b0:b1, :n] for name, t in self.vecs.items()}

    def store(self, li: int, b0: int, b1: int, res: dict[str, torch.Tensor], pad: torch.Tensor, written: bool) -> None:
        """Copy one layer's result for sequences b0..b1 (``pad`` (b, n): padding) and NaN its padding."""
        nan = float("nan")
        n = pad.shape[1]
        for name in CHECKS:
            self.errors[name][li] = max(self.errors[name][li], float(res[name]))
        for name, t in self.stats.items():
            t[li, b0:b1, :n].copy_(res[name]).masked_fill_(pad, nan)
        self.alpha_self[li, b0:b1, :, :n].copy_(res["alpha_self"]).masked_fill_(pad[:, None, :], nan)
        any_pad = bool(pad.any())
        for name, t in self.vecs.items():
            view = t[li, b0:b1, :n]
            if not written:
                view.copy_(res[name])
            if any_pad:
                view.masked_fill_(pad[..., None], nan)
            t[li, b0:b1, n:] = nan


def _check_errors(layer: int, res: dict[str, torch.Tensor], atol: float) -> None:
    """One RuntimeError naming the layer and the failed self-check, if any exceeds ``atol``."""
    err, ctx_err, split_err = (float(res[name]) for name in ("ln_error", "attention_error", "split_error"))
    if not ctx_err <= atol:
        raise RuntimeError(
            f"decompose: layer {layer}: attention weights (the model's own, or recomputed from its Q and K) do not "
            f"reproduce its attention output or do not sum to 1 over the keys (max abs error {ctx_err:.3e} > "
            f"atol={atol:g}). Is the model in train mode with attention dropout (call enc.model.eval())? mixlib supports "
            "post-LN BERT-family encoders whose attention output is the weights times the value vectors."
        )
    if not err <= atol:
        raise RuntimeError(
            f"decompose: layer {layer}: mix + keep_attn + keep_res + bias differs from the model's own "
            f"LayerNorm output by {err:.3e} (max abs error > atol={atol:g}); the decomposition is not exact "
            "for this model."
        )
    if not split_err <= atol:
        raise RuntimeError(
            f"decompose: layer {layer}: f_j(x_j) or sum_{{i!=j}} f_j(x_i) differs from its independent "
            f"recomputation (alpha^h_jj v^h_j along W_O^T u, per head, from the attn_out module) by "
            f"{split_err:.3e} (max abs error > atol={atol:g}). The split between what attention mixes and what "
            "it keeps is wrong: check which W_O slice goes with which head, W_O's orientation (out x in) "
            "and that b_O is taken out of the attention output."
        )


class _Run:
    """One :func:`decompose` call's fixed parts (parameters, probes, scratch) and its per-chunk forward pass."""

    def __init__(self, enc: Any, layer_idx: list[int], mdtype: torch.dtype, atol: float, keep_vectors: bool,
                 results: _Results) -> None:
        self.enc, self.layer_idx, self.mdtype, self.atol, self.keep_vectors = enc, layer_idx, mdtype, atol, keep_vectors
        self.results = results
        # write straight into the float32 results when the model computes in float32 on the CPU
        self.direct = torch.device(enc.device).type == "cpu" and mdtype == torch.float32
        self.row_of = {layer: li for li, layer in enumerate(layer_idx)}
        self.params, self.probes = {}, {}
        for layer in layer_idx:
            w_o, b_o = enc.projection(layer, "attn_out")
            ln = enc.module(layer, "attn_norm")
            self.params[layer] = (w_o, b_o, ln.weight.detach(), ln.bias.detach(), float(ln.eps))
            # the split self-check's probe comes from the module itself, not from w_o above
            self.probes[layer] = split_probe(enc.module(layer, "attn_out"), enc.n_heads)
        self.workspace = _Workspace(enc.device, mdtype)

    def chunk(self, chunk: dict[str, torch.Tensor], real: torch.Tensor, b0: int) -> None:
        """Decompose sequences ``b0..`` (``chunk``: their inputs on the device; ``real`` (b, n): real tokens)."""
        enc, dev = self.enc, self.enc.device
        b1, n = b0 + real.shape[0], real.shape[1]
        additive = torch.zeros(real.shape, dtype=self.mdtype, device=dev)
        additive.masked_fill_(~real.to(dev), torch.finfo(self.mdtype).min)  # (b, n)

        def finish(layer: int, got: dict[str, torch.Tensor], ln_in: torch.Tensor, ln_out: torch.Tensor) -> None:
            li = self.row_of[layer]
            w_o, b_o, gamma, beta, eps = self.params[layer]
            dst = self.results.destinations(li, b0, b1, n) if self.direct else None
            res = decompose_layer(
                got["x"], got["q"], got["k"], got["v"], got["context"], got["attn_out"], ln_in, ln_out, additive,
                w_o, b_o, gamma, beta, eps, enc.n_heads, alpha=got.get("alpha"), keep_vectors=self.keep_vectors,
                out=dst, workspace=self.workspace, probe=self.probes[layer],
            )
            _check_errors(layer, res, self.atol)
            self.results.store(li, b0, b1, res, ~real, written=self.direct)

        _each_layer(enc, chunk, self.layer_idx, finish, keep_qk=False)


def _register(enc: Any, layer: int, state: dict, finish: Any, keep_qk: bool = True) -> list[Any]:
    """Forward hooks on the unmodified modules of one layer; ``finish`` runs at its LayerNorm.

    The slot ``state[layer]`` receives ``x``, ``q``, ``k``, ``v``, ``context``,
    ``attn_out`` and, when the self-attention module returns its attention
    weights (eager attention does), ``alpha`` (B, H, N, N); then ``q`` and ``k``
    become None unless ``keep_qk``.
    """
    slot = state.setdefault(layer, {})

    def on_query(module, args, kwargs, output):
        slot["x"] = _first(args, kwargs)
        slot["q"] = output

    def on_key(module, args, kwargs, output):
        slot["k"] = output

    def on_value(module, args, kwargs, output):
        slot["v"] = output

    def on_self_attn(module, args, kwargs, output):
        weights = output[1] if isinstance(output, (tuple, list)) and len(output) > 1 else None
        if isinstance(weights, torch.Tensor) and weights.dim() == 4:
            slot["alpha"] = weights
            if not keep_qk:  # only needed to recompute the weights: let them go as the model does
                slot["q"] = slot["k"] = None

    def on_attn_out(module, args, kwargs, output):
        slot["context"] = _first(args, kwargs)
        slot["attn_out"] = output

    def on_norm(module, args, kwargs, output):
        missing = [k for k in ("x", "q", "k", "v", "context", "attn_out") if k not in slot]
        if missing:
            raise RuntimeError(f"decompose: layer {layer}: the forward pass did not go through {missing} before the LayerNorm.")
        finish(layer, _first(args, kwargs), output)

    hooks = {"query": on_query, "key": on_key, "value": on_value, "self_attn": on_self_attn, "attn_out": on_attn_out,
             "attn_norm": on_norm}
    return [enc.module(layer, role).register_forward_hook(fn, with_kwargs=True) for role, fn in hooks.items()]
