"""One layer's decomposition from the tensors its forward pass produced (pure tensors, no model).

The package docstring (:mod:`mixlib.mixing`) gives the equations; :func:`decompose_layer` computes them on blocks of
about :data:`BLOCK_TOKENS` tokens and checks itself three ways.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .result import VECTOR_FIELDS

#: Tokens per block in the per-token part of :func:`decompose_layer` (keeps its working set in the CPU cache).
BLOCK_TOKENS = 2048


#: The dtypes the decomposition computes in: its self-checks compare sums to ``atol`` (1e-4 by default),
#: beyond what float16 and bfloat16 can hold.
PRECISIONS = (torch.float32, torch.float64)


def check_precision(enc: Any, what: str) -> torch.dtype:
    """The dtype ``enc.model`` computes in, if an analysis can be exact in it; else one ValueError naming it.

    float32 and float64 are analysed (float64 results are returned as float32,
    like all results); float16 and bfloat16, and a model on the meta device
    (no values), are refused with what to do.
    """
    params = list(enc.model.parameters())
    if not params:
        raise ValueError(f"{what}: enc.model has no parameters; give a BERT-family encoder.")
    if any(p.device.type == "meta" for p in params):
        raise ValueError(f"{what}: enc.model is on the meta device (shapes without values); load its weights "
                         "(load_encoder, or from_pretrained without device_map='meta') before analysing it.")
    dtypes = {p.dtype for p in params}
    if len(dtypes) > 1:
        raise ValueError(f"{what}: enc.model mixes dtypes ({', '.join(sorted(str(d) for d in dtypes))}); "
                         "call enc.model.float() to analyse it in float32.")
    dtype = dtypes.pop()
    if dtype not in PRECISIONS:
        raise ValueError(f"{what}: enc.model computes in {dtype}, which cannot hold the decomposition's self-checks "
                         "(sums exact to about 1e-4); call enc.model.float() (float32, as load_encoder loads it) or "
                         "enc.model.double() first.")
    return dtype


class _Workspace:
    """Flat scratch buffers by name, grown on demand and reused (large CPU allocations are slow)."""

    def __init__(self, device: torch.device | str, dtype: torch.dtype = torch.float32) -> None:
        self.device = torch.device(device)
        self.dtype = dtype
        self._bufs: dict[str, torch.Tensor] = {}

    def get(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        numel = math.prod(shape)
        buf = self._bufs.get(name)
        if buf is None or buf.numel() < numel:
            buf = torch.empty(numel, device=self.device, dtype=self.dtype)
            self._bufs[name] = buf
        return buf[:numel].view(shape)

    def projection(self, n_heads: int, d_head: int) -> torch.Tensor:
        """``(D, H)`` block-diagonal matrix of one fixed random unit vector per head (for the attention check)."""
        key = f"projection/{n_heads}/{d_head}"
        r = self._bufs.get(key)
        if r is None:
            gen = torch.Generator().manual_seed(20210)
            dirs = torch.randn(n_heads, d_head, generator=gen)
            dirs /= dirs.norm(dim=1, keepdim=True)  # (H, dh)
            r = torch.block_diag(*dirs[:, :, None]).to(self.device, self.dtype)  # (H*dh, H)
            self._bufs[key] = r
        return r


def _norm(z: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(z, dim=-1)


#: Seed of the fixed random unit direction along which the split self-check compares f_j(x_j).
SPLIT_PROBE_SEED = 20211


def split_probe(out_module: Any, n_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The probe of the split self-check, taken from the ``attn_out`` module itself.

    Parameters
    ----------
    out_module : torch.nn.Linear or torch.Tensor
        The layer's attention output projection, or its weight ``(D, D)``
        (out x in, as ``torch.nn.Linear`` stores it).
    n_heads : int

    Returns
    -------
    u : torch.Tensor, (D,)
        A fixed random unit vector in the output space.
    p_heads : torch.Tensor, (D, H)
        ``p = W_O^T u`` (so that ``(c W_O^T) . u = c . p`` for any context
        row ``c``), cut into one column per head: column h holds p on head h's
        ``d'`` input coordinates and 0 elsewhere.
    """
    weight = getattr(out_module, "weight", out_module).detach()  # (D_out, D_in), as torch.nn.Linear stores it
    d_out, d_in = weight.shape
    gen = torch.Generator().manual_seed(SPLIT_PROBE_SEED)
    u = torch.randn(d_out, generator=gen, dtype=torch.float64)
    u = (u / u.norm()).to(weight.dtype).to(weight.device)  # (D,)
    p = torch.mv(weight.t(), u)  # (D_in,)
    dh = d_in // n_heads
    p_heads = torch.zeros(d_in, n_heads, dtype=weight.dtype, device=weight.device)  # (D, H)
    for h in range(n_heads):
        p_heads[h * dh:(h + 1) * dh, h] = p[h * dh:(h + 1) * dh]
    return u, p_heads


def _self_part(v: torch.Tensor, a_self: torch.Tensor, w_o: torch.Tensor, tmp: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``f_j(x_j) = sum_h alpha^h_jj v^h_j W_O^h`` for a block: ``v`` (b, N, D), ``a_self`` (b, N, H) -> (b, N, D).

    ``tmp`` (b, N, H, d') and ``out`` (b*N, D) are scratch buffers. Kept as a
    function of its own so that the tests can replace it with a faulty
    version and see the split self-check fail.
    """
    b, N, D = v.shape
    H = a_self.shape[-1]
    self_ctx = torch.mul(v.view(b, N, H, D // H), a_self.unsqueeze(-1), out=tmp)
    return torch.mm(self_ctx.view(b * N, D), w_o.t(), out=out).view(b, N, D)


def decompose_layer(
    x: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    context: torch.Tensor,
    attn_out: torch.Tensor,
    ln_in: torch.Tensor,
    ln_out: torch.Tensor,
    additive_mask: torch.Tensor,
    w_o: torch.Tensor,
    b_o: torch.Tensor | None,
    gamma: torch.Tensor,
    beta: torch.Tensor,
    eps: float,
    n_heads: int,
    *,
    keep_vectors: bool = True,
    out: dict[str, torch.Tensor] | None = None,
    workspace: "_Workspace | None" = None,
    probe: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> dict[str, torch.Tensor]:
    """The decomposition of one layer from the tensors its forward pass produced.

    Parameters
    ----------
    x : (B, N, D)
        The layer's input (the residual stream).
    q, k, v : (B, N, D)
        Outputs of the query/key/value projections (biases included).
    context : (B, N, D)
        The attention output before ``W_O`` (the input of ``attn_out``).
    attn_out : (B, N, D)
        The output of ``attn_out`` (``context W_O^T + b_O``).
    ln_in, ln_out : (B, N, D)
        Input (``attn_out + x``) and output of the model's LayerNorm.
    additive_mask : (B, N)
        0 for real tokens, a large negative number for padding; padding keys
        get no attention and padding positions are left out of the checks.
    w_o : (D, D)
        ``attn_out`` weight (``torch.nn.Linear`` layout, out x in).
    b_o : (D,) or None
    gamma, beta : (D,)
        LayerNorm parameters; ``eps`` its epsilon.
    n_heads : int
    keep_vectors : bool
        Return the four (B, N, D) vectors as well.
    out : dict of str to (B, N, D) tensors, optional
        Where to write ``mix``, ``keep_attn``, ``keep_res`` and ``bias`` (e.g.
        slices of the result's (L, B, N, D) fields), saving a copy.
    workspace : _Workspace, optional
        Scratch buffers reused from layer to layer (fewer large allocations).
        Vectors that are returned and not written to ``out`` live in it, so
        they are only valid until the next call with the same workspace.
    probe : (u, p_heads), optional
        The split self-check's probe (:func:`split_probe`), best taken from
        the model's ``attn_out`` module rather than from ``w_o``; default: made
        from ``w_o``.

    Returns
    -------
    dict of str to torch.Tensor
        Every per-token field of :class:`Mixing` for this layer (``(B, N)``;
        ``alpha_self`` ``(B, H, N)``), the vectors when asked, and the two
        self-check errors ``ln_error``, ``attention_error`` and
        ``split_error`` (0-d tensors: the largest absolute deviation from the
        model's LayerNorm output, from its attention output, and of
        ``f_j(x_j)`` and ``sum_{i!=j} f_j(x_i)`` along the probe direction from
        their independent recomputation, over the real positions).
    """
    B, N, D = x.shape
    H = n_heads
    dh = D // H
    out = out or {}
    ws = workspace if workspace is not None else _Workspace(x.device, x.dtype)
    pad = additive_mask != 0  # (B, N)
    has_pad = bool(pad.any())
    inf = float("inf")

    # Everything runs on blocks of whole sequences of about BLOCK_TOKENS tokens, so that the attention
    # weights and the dozen element-wise passes below work on data that is still in the CPU cache.
    dev = x.device
    vec = {}
    if keep_vectors:
        vec = {name: out[name] if out.get(name) is not None else torch.empty((B, N, D), device=dev, dtype=x.dtype)
               for name in VECTOR_FIELDS}
    norm_names = ("norm_mix", "norm_keep_attn", "norm_res", "norm_keep", "norm_mix_ln", "norm_keep_attn_ln", "norm_res_ln", "norm_keep_ln")
    norms = {name: torch.empty((B, N), device=dev, dtype=x.dtype) for name in norm_names}  # (B, N) each
    a_self = torch.empty((B, N, H), device=dev, dtype=x.dtype)  # alpha^h_{j,j}
    b_c = (b_o - b_o.mean()) * gamma if b_o is not None else torch.zeros_like(gamma)  # (D,): centred b_O times gamma
    r = ws.projection(H, dh)  # (D, H), block-diagonal: one fixed random unit vector per head
    if probe is None:
        probe = split_probe(w_o, H)
    u, p_heads = probe  # (D,), (D, H)
    p_all = p_heads.sum(dim=1)  # (D,) = W_O^T u
    ln_error = torch.zeros((), device=dev, dtype=x.dtype)
    attention_error = torch.zeros((), device=dev, dtype=x.dtype)
    split_error = torch.zeros((), device=dev, dtype=x.dtype)
    step = max(1, BLOCK_TOKENS // max(N, 1))
    for s0 in range(0, B, step):
        sl = slice(s0, min(B, s0 + step))
        b = sl.stop - s0
        xb = x[sl]  # (b, N, D)
        pad_b = pad[sl]  # (b, N)
        pad_here = has_pad and bool(pad_b.any())

        # attention weights from the model's own Q and K: softmax(Q K^T / sqrt(d') + mask), per head;
        # the scaling rides on the copy of Q into head-major layout
        q3 = torch.mul(q[sl].view(b, N, H, dh).transpose(1, 2), dh**-0.5, out=ws.get("q3", (b, H, N, dh))).view(b * H, N, dh)
        k3t = ws.get("k3t", (b, H, dh, N)).copy_(k[sl].view(b, N, H, dh).permute(0, 2, 3, 1)).view(b * H, dh, N)
        scores = ws.get("scores", (b * H, N, N))
        if pad_here:
            mask = additive_mask[sl, None, None, :].expand(b, H, 1, N).reshape(b * H, 1, N)  # (b*H, 1, N)
            torch.baddbmm(mask, q3, k3t, out=scores)
        else:
            torch.bmm(q3, k3t, out=scores)
        alpha = torch.softmax(scores, dim=-1)  # (b*H, N, N)
        a_self[sl] = alpha.diagonal(dim1=-2, dim2=-1).view(b, H, N).transpose(1, 2)
        # self-check 1: alpha V must be the model's own attention output (the input of attn_out), compared along
        # one fixed random unit direction r^h per head: (alpha V) r^h = alpha (V r^h), a matrix-vector product
        # instead of a second alpha V; any difference in alpha shows up in it (with probability 1).
        v_r = torch.mm(v[sl].reshape(b * N, D), r).view(b, N, H).transpose(1, 2).reshape(b * H, N, 1)  # (b*H, N, 1)
        ctx_r = torch.mm(context[sl].reshape(b * N, D), r).view(b, N, H).transpose(1, 2)  # (b, H, N)
        diff_ctx = torch.bmm(alpha, v_r).view(b, H, N).sub_(ctx_r)  # (b, H, N)
        if pad_here:
            diff_ctx.masked_fill_(pad_b[:, None, :], 0.0)
        attention_error = torch.maximum(attention_error, torch.linalg.vector_norm(diff_ctx, ord=inf))
        # reference for self-check 3, by a path that shares nothing with f_self below: the diagonal read off
        # alpha again, V projected per head on p_h = (W_O^T u)_h, and the model's own context projected on W_O^T u:
        #   f_j(x_j) . u = sum_h alpha^h_jj (v^h_j . p_h),   sum_{i!=j} f_j(x_i) . u = context_j . p - f_j(x_j) . u
        diag = alpha.diagonal(dim1=-2, dim2=-1).reshape(b, H, N)  # (b, H, N)
        v_p = torch.mm(v[sl].reshape(b * N, D), p_heads).view(b, N, H).transpose(1, 2)  # (b, H, N)
        ref_self_u = (diag * v_p).sum(dim=1)  # (b, N)
        ref_others_u = torch.mv(context[sl].reshape(b * N, D), p_all).view(b, N).sub_(ref_self_u)  # (b, N)
        del alpha, diag, v_p

        # f_j(x_j) = sum_h alpha^h_jj v^h_j W_O^h ; the rest of the attention output is what attention mixes in
        f_self = _self_part(v[sl], a_self[sl], w_o, ws.get("tmp", (b, N, H, dh)), ws.get("f_self", (b * N, D)))
        f_others = torch.sub(attn_out[sl], f_self, out=ws.get("f_others", (b, N, D)))  # (b, N, D)
        if b_o is not None:
            f_others.sub_(b_o)

        # self-check 3: the split itself. Checks 1 and 2 cannot see a wrong f_j(x_j) (the remainder absorbs it).
        diff_self = torch.mv(f_self.reshape(b * N, D), u).view(b, N).sub_(ref_self_u)  # (b, N)
        diff_others = torch.mv(f_others.reshape(b * N, D), u).view(b, N).sub_(ref_others_u)  # (b, N)
        split_b = torch.maximum(diff_self.abs_(), diff_others.abs_())
        if pad_here:
            split_b.masked_fill_(pad_b, 0.0)
        split_error = torch.maximum(split_error, split_b.max())

        # g(z) = (z - m(z)) / s(y_j) * gamma, with s(y_j) the standard deviation of the real LayerNorm input
        y = ln_in[sl]
        centred = torch.sub(y, y.mean(dim=-1, keepdim=True), out=ws.get("tmp", (b, N, D)))  # (b, N, D)
        var = torch.linalg.vector_norm(centred, dim=-1, keepdim=True).square_().div_(D)  # (b, N, 1), population variance
        inv_s = torch.rsqrt(var.add_(eps))  # (b, N, 1)
        scale = torch.mul(inv_s, gamma, out=ws.get("scale", (b, N, D)))  # (b, N, D)

        def g(z: torch.Tensor, name: str, scale: torch.Tensor = scale, sl: slice = sl, b: int = b) -> torch.Tensor:
            dst = vec[name][sl] if name in vec else ws.get(name, (b, N, D))
            return torch.sub(z, z.mean(dim=-1, keepdim=True), out=dst).mul_(scale)

        mix = g(f_others, "mix")  # (b, N, D)
        keep_attn = g(f_self, "keep_attn")  # (b, N, D)
        keep_res = g(xb, "keep_res")  # (b, N, D)
        if keep_vectors:  # g(b_O) + beta
            torch.addcmul(beta, inv_s, b_c, out=vec["bias"][sl])

        def norm(z: torch.Tensor, name: str, sl: slice = sl) -> None:
            torch.linalg.vector_norm(z, dim=-1, out=norms[name][sl])

        norm(f_others, "norm_mix")
        norm(f_self, "norm_keep_attn")
        norm(xb, "norm_res")
        norm(torch.add(f_self, xb, out=ws.get("tmp", (b, N, D))), "norm_keep")
        norm(mix, "norm_mix_ln")
        norm(keep_attn, "norm_keep_attn_ln")
        norm(keep_res, "norm_res_ln")
        keep_ln = torch.add(keep_attn, keep_res, out=ws.get("tmp", (b, N, D)))  # (b, N, D)
        norm(keep_ln, "norm_keep_ln")

        # self-check 2: the four vectors must add up to the model's own LayerNorm output
        diff = keep_ln.add_(mix)
        if keep_vectors:
            diff.add_(vec["bias"][sl])
        else:
            diff.addcmul_(inv_s, b_c).add_(beta)
        diff.sub_(ln_out[sl])
        if pad_here:
            diff.masked_fill_(pad_b[..., None], 0.0)
        ln_error = torch.maximum(ln_error, torch.linalg.vector_norm(diff, ord=inf))

    n_mix, n_keep_attn, n_res, n_keep = norms["norm_mix"], norms["norm_keep_attn"], norms["norm_res"], norms["norm_keep"]
    n_mix_ln, n_keep_attn_ln, n_keep_ln = norms["norm_mix_ln"], norms["norm_keep_attn_ln"], norms["norm_keep_ln"]
    alpha_self = a_self.transpose(1, 2)  # (B, H, N)
    attn_w = 1.0 - alpha_self.mean(dim=1)  # (B, N)
    res = {
        "ratio": n_mix_ln / (n_mix_ln + n_keep_ln),
        "attnres_n": n_mix / (n_mix + n_keep),
        "attn_n": n_mix / (n_mix + n_keep_attn),
        "attn_w": attn_w,
        "attnres_w": attn_w / 2.0,
        **norms,
        "alpha_self": alpha_self,
        "ln_error": ln_error,
        "attention_error": attention_error,
        "split_error": split_error,
    }
    res.update(vec)
    return res
