"""One layer's decomposition from the tensors its forward pass produced (pure tensors, no model).

The package docstring (:mod:`mixlib.mixing`) gives the equations; :func:`decompose_layer` computes them on blocks of
about :data:`BLOCK_TOKENS` tokens and checks itself three ways.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .result import NORM_METRICS, VECTOR_FIELDS

#: Tokens per block in the per-token part of :func:`decompose_layer` (keeps its working set in the CPU cache).
BLOCK_TOKENS = 512


#: The dtypes the decomposition computes in: its self-checks compare sums to ``atol`` (1e-4 by default),
#: beyond what float16 and bfloat16 can hold.
PRECISIONS = (torch.float32, torch.float64)


def check_precision(enc: Any, what: str) -> torch.dtype:
    """The dtype ``enc.model`` computes in, if an analysis can be exact in it; else one ValueError naming it.

    A model in ``train()`` mode is refused first (:func:`mixlib.models.check_eval`).

    float32 and float64 are analysed (float64 results are returned as float32,
    like all results); float16 and bfloat16, and a model on the meta device
    (no values), are refused with what to do.
    """
    from ..models import check_eval

    check_eval(enc, what)  # every analysis that runs the model passes here or calls it itself
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

    def directions(self, n_heads: int, d_head: int) -> torch.Tensor:
        """``(H, d')``: one fixed random unit vector per head (the attention check's probe)."""
        key = f"directions/{n_heads}/{d_head}"
        r = self._bufs.get(key)
        if r is None:
            gen = torch.Generator().manual_seed(20210)
            r = torch.randn(n_heads, d_head, generator=gen)
            r = (r / r.norm(dim=1, keepdim=True)).to(self.device, self.dtype)
            self._bufs[key] = r
        return r


    def receiver_weights(self, n: int) -> torch.Tensor:
        """``(n,)``: fixed random positive weights summing to 1 (the maps' sum check, over receiving tokens)."""
        key = f"receiver_weights/{n}"
        w = self._bufs.get(key)
        if w is None:
            w = torch.rand(n, generator=torch.Generator().manual_seed(20212), dtype=torch.float64).add_(0.5)
            w = (w / w.sum()).to(self.device, self.dtype)
            self._bufs[key] = w
        return w


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


def _attention_weights(q: torch.Tensor, k: torch.Tensor, additive_mask: torch.Tensor, n_heads: int, ws: _Workspace) -> torch.Tensor:
    """``softmax(Q K^T / sqrt(d') + mask)`` per head, ``(b, H, N, N)``: used only when the model does not return its own.

    ``q``, ``k`` (b, N, D) are the model's projections; ``additive_mask`` (b, N)
    is 0 for real keys and very negative for padding.
    """
    b, N, D = q.shape
    H, dh = n_heads, D // n_heads
    # the scaling rides on the copy of Q into head-major layout
    q3 = torch.mul(q.view(b, N, H, dh).transpose(1, 2), dh**-0.5, out=ws.get("q3", (b, H, N, dh))).view(b * H, N, dh)
    k3t = ws.get("k3t", (b, H, dh, N)).copy_(k.view(b, N, H, dh).permute(0, 2, 3, 1)).view(b * H, dh, N)
    mask = additive_mask[:, None, None, :].expand(b, H, 1, N).reshape(b * H, 1, N)  # (b*H, 1, N)
    scores = torch.baddbmm(mask, q3, k3t, out=ws.get("scores", (b * H, N, N)))
    return torch.softmax(scores, dim=-1).view(b, H, N, N)


def _check_attention(alpha: torch.Tensor, v: torch.Tensor, context: torch.Tensor, r: torch.Tensor,
                     pad: torch.Tensor | None, ws: _Workspace) -> torch.Tensor:
    """Self-check 1: ``alpha V`` is the model's attention output (the input of ``attn_out``) and alpha's rows sum to 1.

    Compared along one fixed random unit direction ``r^h`` per head (``r``,
    (H, d')): ``(alpha V) r^h = alpha (V r^h)``, one pass over alpha instead
    of a second ``alpha V``; any difference shows in it with probability 1.
    Row sums other than 1 mean attention dropout (a model in train mode).
    Returns the largest absolute deviation over real query positions (0-d).
    """
    b, H, N, _ = alpha.shape
    dh = v.shape[-1] // H
    v_r = torch.mul(v.view(b, N, H, dh), r, out=ws.get("tmp", (b, N, H, dh))).sum(-1).transpose(1, 2)  # (b, H, N)
    ctx_r = torch.mul(context.view(b, N, H, dh), r, out=ws.get("tmp", (b, N, H, dh))).sum(-1).transpose(1, 2)
    got = torch.mul(alpha, v_r[:, :, None, :], out=ws.get("alpha_v", alpha.shape)).sum(-1)  # (b, H, N): alpha (V r^h)
    err = torch.maximum(got.sub_(ctx_r).abs_(), alpha.sum(-1).sub_(1.0).abs_())  # (b, H, N)
    if pad is not None:
        err.masked_fill_(pad[:, None, :], 0.0)
    return err.max()


def _split(v: torch.Tensor, a_self: torch.Tensor, attn_out: torch.Tensor, w_o: torch.Tensor, b_o: torch.Tensor | None,
           ws: _Workspace) -> tuple[torch.Tensor, torch.Tensor]:
    """``f_j(x_j)`` and ``sum_{i!=j} f_j(x_i) = (attention output - b_O) - f_j(x_j)``, each ``(b, N, D)`` (scratch)."""
    b, N, D = v.shape
    H = a_self.shape[-1]
    f_self = _self_part(v, a_self, w_o, ws.get("tmp", (b, N, H, D // H)), ws.get("f_self", (b * N, D)))
    f_others = torch.sub(attn_out, f_self, out=ws.get("f_others", (b, N, D)))
    if b_o is not None:
        f_others.sub_(b_o)
    return f_self, f_others


def _check_split(f_self: torch.Tensor, f_others: torch.Tensor, diag: torch.Tensor, v: torch.Tensor, context: torch.Tensor,
                 probe: tuple[torch.Tensor, torch.Tensor], pad: torch.Tensor | None, ws: _Workspace) -> torch.Tensor:
    """Self-check 3: the split itself, which checks 1 and 2 cannot see (the remainder absorbs a wrong ``f_j(x_j)``).

    Along the probe's direction u, recomputed by a path that shares nothing
    with :func:`_self_part`: the diagonal ``diag`` (b, H, N) read off alpha
    again, V projected per head on ``p_h = (W_O^T u)_h``, and the model's own
    context projected on ``W_O^T u``::

        f_j(x_j) . u = sum_h alpha^h_jj (v^h_j . p_h)
        sum_{i!=j} f_j(x_i) . u = context_j . p - f_j(x_j) . u

    Returns the largest absolute deviation over real positions (0-d).
    """
    b, N, D = v.shape
    H = diag.shape[1]
    u, p_heads = probe
    p = p_heads.sum(dim=1)  # (D,) = W_O^T u; column h of p_heads holds head h's coordinates
    v_p = torch.mul(v.view(b, N, H, D // H), p.view(H, D // H), out=ws.get("tmp", (b, N, H, D // H))).sum(-1)  # (b, N, H)
    ref_self = v_p.mul_(diag.transpose(1, 2)).sum(-1)  # (b, N)
    ref_others = torch.mv(context.reshape(b * N, D), p).view(b, N).sub_(ref_self)
    diff_self = torch.mv(f_self.reshape(b * N, D), u).view(b, N).sub_(ref_self)
    diff_others = torch.mv(f_others.reshape(b * N, D), u).view(b, N).sub_(ref_others)
    err = torch.maximum(diff_self.abs_(), diff_others.abs_())
    if pad is not None:
        err.masked_fill_(pad, 0.0)
    return err.max()


def _inverse_std(y: torch.Tensor, eps: float, ws: _Workspace) -> torch.Tensor:
    """``1 / s(y_j)`` (b, N, 1): the real LayerNorm input's population standard deviation with the model's epsilon."""
    centred = torch.sub(y, y.mean(dim=-1, keepdim=True), out=ws.get("tmp", y.shape))
    var = torch.linalg.vector_norm(centred, dim=-1, keepdim=True).square_().div_(y.shape[-1])
    return torch.rsqrt(var.add_(eps))


def _layernorm_pieces(f_others: torch.Tensor, f_self: torch.Tensor, x: torch.Tensor, inv_s: torch.Tensor, gamma: torch.Tensor,
                      beta: torch.Tensor, b_c: torch.Tensor, vec: dict[str, torch.Tensor], norms: dict[str, torch.Tensor],
                      ws: _Workspace) -> tuple[torch.Tensor, torch.Tensor]:
    """``g`` of each part and the eight norms; returns ``mix`` and ``keep_attn + keep_res`` for the reconstruction check.

    ``g(z) = (z - m(z)) / s(y_j) * gamma``. The vectors go to ``vec`` (views of
    the result, written once) when given there; otherwise ``mix`` and
    ``keep_attn`` overwrite ``f_others`` and ``f_self`` (scratch, no longer
    needed) and ``keep_res`` goes to scratch. ``vec["bias"]``, when present,
    receives ``g(b_O) + beta``; ``norms`` holds one (b, N) destination per norm.
    """

    def norm(z: torch.Tensor, name: str) -> None:
        torch.linalg.vector_norm(z, dim=-1, out=norms[name])

    def g(z: torch.Tensor, name: str, scratch: torch.Tensor) -> torch.Tensor:
        dst = vec.get(name, scratch)
        return torch.sub(z, z.mean(dim=-1, keepdim=True), out=dst).mul_(gamma).mul_(inv_s)

    norm(f_others, "norm_mix")
    norm(f_self, "norm_keep_attn")
    norm(x, "norm_res")
    tmp = ws.get("tmp", x.shape)
    norm(torch.add(f_self, x, out=tmp), "norm_keep")
    mix, keep_attn, keep_res = g(f_others, "mix", f_others), g(f_self, "keep_attn", f_self), g(x, "keep_res", tmp)
    if "bias" in vec:
        torch.addcmul(beta, inv_s, b_c, out=vec["bias"])
    norm(mix, "norm_mix_ln")
    norm(keep_attn, "norm_keep_attn_ln")
    norm(keep_res, "norm_res_ln")
    keep_ln = torch.add(keep_attn, keep_res, out=tmp)
    norm(keep_ln, "norm_keep_ln")
    return mix, keep_ln


def _check_reconstruction(mix: torch.Tensor, keep_ln: torch.Tensor, bias: torch.Tensor | None, inv_s: torch.Tensor,
                          b_c: torch.Tensor, beta: torch.Tensor, ln_out: torch.Tensor, pad: torch.Tensor | None) -> torch.Tensor:
    """Self-check 2: mix + keep_attn + keep_res + bias must be the model's own LayerNorm output (max abs error, 0-d).

    ``keep_ln`` (keep_attn + keep_res) is overwritten.
    """
    diff = keep_ln.add_(mix)
    if bias is not None:
        diff.add_(bias)
    else:
        diff.addcmul_(inv_s, b_c).add_(beta)
    diff.sub_(ln_out)
    if pad is not None:
        diff.masked_fill_(pad[..., None], 0.0)
    return torch.linalg.vector_norm(diff, ord=float("inf"))


CHECKS = ("attention_error", "split_error", "ln_error")


def decompose_layer(
    x: torch.Tensor,
    q: torch.Tensor | None,
    k: torch.Tensor | None,
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
    alpha: torch.Tensor | None = None,
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
    q, k : (B, N, D) or None
        Outputs of the query/key projections; used only to recompute the
        attention weights when ``alpha`` is not given.
    v : (B, N, D)
        Output of the value projection (bias included).
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
    alpha : (B, H, N, N), optional
        The attention weights the model itself used (its self-attention
        module returns them in eager mode); default: recomputed from q and k.
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
        ``alpha_self`` ``(B, H, N)``), the vectors when asked, and the three
        self-check errors (0-d tensors: the largest absolute deviation over
        the real positions) ``attention_error`` (:func:`_check_attention`),
        ``split_error`` (:func:`_check_split`) and ``ln_error``
        (:func:`_check_reconstruction`).
    """
    B, N, D = x.shape
    H = n_heads
    out = out or {}
    ws = workspace if workspace is not None else _Workspace(x.device, x.dtype)
    if alpha is None and (q is None or k is None):
        raise ValueError("decompose_layer: give the model's attention weights (alpha) or its q and k to recompute them.")
    pad = additive_mask != 0  # (B, N)
    has_pad = bool(pad.any())
    new = {"device": x.device, "dtype": x.dtype}
    vec = {name: out[name] if out.get(name) is not None else torch.empty((B, N, D), **new)
           for name in VECTOR_FIELDS} if keep_vectors else {}
    norms = {name: torch.empty((B, N), **new) for name in NORM_METRICS}  # (B, N) each
    a_self = torch.empty((B, N, H), **new)  # alpha^h_{j,j}
    b_c = (b_o - b_o.mean()) * gamma if b_o is not None else torch.zeros_like(gamma)  # (D,): centred b_O times gamma
    r = ws.directions(H, D // H)  # (H, d'): one fixed random unit vector per head
    probe = split_probe(w_o, H) if probe is None else probe
    errors = {name: torch.zeros((), **new) for name in CHECKS}

    def worst(name: str, err: torch.Tensor) -> None:
        errors[name] = torch.maximum(errors[name], err)

    # Blocks of whole sequences of about BLOCK_TOKENS tokens: the element-wise passes below work on data
    # that is still in the CPU cache.
    step = max(1, BLOCK_TOKENS // max(N, 1))
    for s0 in range(0, B, step):
        sl = slice(s0, min(B, s0 + step))
        pad_b = pad[sl] if has_pad and bool(pad[sl].any()) else None  # (b, N) or None
        alpha_b = alpha[sl] if alpha is not None else _attention_weights(q[sl], k[sl], additive_mask[sl], H, ws)
        diag = alpha_b.diagonal(dim1=-2, dim2=-1)  # (b, H, N): alpha^h_{j,j}
        a_self[sl] = diag.transpose(1, 2)
        worst("attention_error", _check_attention(alpha_b, v[sl], context[sl], r, pad_b, ws))
        f_self, f_others = _split(v[sl], a_self[sl], attn_out[sl], w_o, b_o, ws)
        worst("split_error", _check_split(f_self, f_others, diag, v[sl], context[sl], probe, pad_b, ws))
        inv_s = _inverse_std(ln_in[sl], eps, ws)  # (b, N, 1)
        vec_b = {name: t[sl] for name, t in vec.items()}
        mix, keep_ln = _layernorm_pieces(f_others, f_self, x[sl], inv_s, gamma, beta, b_c, vec_b,
                                         {name: t[sl] for name, t in norms.items()}, ws)
        worst("ln_error", _check_reconstruction(mix, keep_ln, vec_b.get("bias"), inv_s, b_c, beta, ln_out[sl], pad_b))
    return _per_token_fields(norms, a_self) | errors | vec


def _per_token_fields(norms: dict[str, torch.Tensor], a_self: torch.Tensor) -> dict[str, torch.Tensor]:
    """The ratios of :class:`Mixing` from the norms and the attention's diagonal ``a_self`` (B, N, H)."""
    alpha_self = a_self.transpose(1, 2)  # (B, H, N)
    attn_w = 1.0 - alpha_self.mean(dim=1)  # (B, N)
    n_mix, n_mix_ln = norms["norm_mix"], norms["norm_mix_ln"]
    return {
        "ratio": n_mix_ln / (n_mix_ln + norms["norm_keep_ln"]),
        "attnres_n": n_mix / (n_mix + norms["norm_keep"]),
        "attn_n": n_mix / (n_mix + norms["norm_keep_attn"]),
        "attn_w": attn_w,
        "attnres_w": attn_w / 2.0,
        **norms,
        "alpha_self": alpha_self,
    }
