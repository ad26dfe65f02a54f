"""Analysis A: how much each layer mixes context and how much it preserves the token.

Kobayashi et al. (NLP2021; EMNLP 2021) split the output of the LayerNorm that
follows the attention block of a post-LN Transformer layer, exactly and for
every token j, into four vectors::

    LN(y_j) = mix_j + keep_attn_j + keep_res_j + bias_j                     (1)

    y_j       = x_j + sum_i f_j(x_i) + b_O        the LayerNorm's input
    f_j(x_i)  = sum_h alpha^h_{j,i} (x_i W_V^h + b_V^h) W_O^h
    g(z)      = (z - m(z)) / s(y_j) * gamma       LayerNorm applied to a part
    mix_j       = g(sum_{i != j} f_j(x_i))        what attention brings from the others
    keep_attn_j = g(f_j(x_j))                     what attention brings from j itself
    keep_res_j  = g(x_j)                          what the residual connection keeps
    bias_j      = g(b_O) + beta

with m the mean over the d elements and s(y_j) the standard deviation of the
real LayerNorm input (population variance plus the model's epsilon). Because g
is linear in z once s(y_j) is fixed and sum(alpha) = 1, (1) holds without
approximation. The paper's mixing ratio (AttnResLn-N) compares the norms::

    ratio_j = ||mix_j|| / (||mix_j|| + ||keep_attn_j + keep_res_j||)

How it is computed (fast and exact)
-----------------------------------
Forward hooks on the *unmodified* ``query``, ``key``, ``value``,
``self_attn``, ``attn_out`` and ``attn_norm`` modules of each layer (found
through :meth:`mixlib.Encoder.module`) capture what one ordinary forward pass
computes anyway, including the attention weights the model itself used (its
self-attention module returns them in eager mode; where it returns none, they
are recomputed from the hooked Q and K). Per layer, beyond that:

* ``f_j(x_j) = sum_h alpha^h_{j,j} v^h_j W_O^h`` -- one (B*N, D) x (D, D)
  product, the only large one (about 8% of a BERT layer's arithmetic);
* ``sum_{i != j} f_j(x_i) = (attention output - b_O) - f_j(x_j)``;
* the LayerNorm split and the eight norms: element-wise passes.

The n x n x d tensor of all f_j(x_i) is never built; memory per layer is
O(B*N*D) plus the (B, H, N, N) attention weights the model itself holds, and a
layer's captured tensors are let go as soon as it is decomposed. Each layer is
decomposed inside the hook on its LayerNorm, while the forward pass runs, and
the pass stops after the last layer asked for (the last FFN is never
computed). The per-token work goes through blocks of about
:data:`BLOCK_TOKENS` tokens with reused scratch buffers, so that it stays in
the CPU cache. ``benchmarks/bench_mixing.py`` measures the cost against a
plain forward pass, stage by stage.

Every call checks itself on every layer and every real token, three ways
(the step functions of :mod:`mixlib.mixing.kernel`), each within ``atol``
(1e-4); otherwise a :class:`RuntimeError` names the layer and the error:

* attention: ``alpha V`` must be the model's own attention output (the input
  of ``attn_out``), compared along one fixed random unit direction per head
  (one pass over alpha instead of a second ``alpha V``), and alpha's rows must
  sum to 1 (attention dropout in train mode breaks both);
* reconstruction: mix + keep_attn + keep_res + bias must reproduce the model's
  own LayerNorm output (max abs error over all elements);
* the split, below.

The reconstruction check alone cannot see the one error that matters most: because
``sum_{i != j} f_j(x_i)`` is obtained as a remainder, ``mix + keep_attn``
equals ``g(attention output - b_O)`` whatever ``f_j(x_j)`` was. A third check
therefore recomputes, along one fixed random unit direction u of the output
space, both ``f_j(x_j) . u = sum_h alpha^h_jj (v^h_j . p_h)`` and
``sum_{i != j} f_j(x_i) . u = context_j . p - f_j(x_j) . u`` with
``p = W_O^T u`` taken from the ``attn_out`` module itself and cut per head,
the diagonal read off the attention weights again, and the model's own
context -- a path that shares no slicing code with the decomposition. A W_O
sliced from the wrong head, a transposed W_O or a forgotten b_O moves these
projections far beyond ``atol`` (``Mixing.max_split_error``), on any single
token it touches.

Padding
-------
Positions where ``attention_mask`` is 0 hold NaN in every per-token field
(norms, ratios, vectors), so any statistic that forgets to exclude them shows
NaN instead of a silently wrong number. :func:`mixing_table` and
:func:`mixing_summary` exclude them.

Uncertainty and conventions
---------------------------
:func:`mixing_table` and :func:`mixing_summary` take ``ci=0.95`` for a
seeded bootstrap interval over sequences (:func:`layer_means` does the same
for any per-token quantity). The ratio depends on conventions that the
decomposition itself leaves free -- which side ``b_V W_O`` and ``b_O`` are
counted on -- and on the LayerNorm's centring and gamma (a uniform scale
cannot move it); :func:`mixing_conventions` measures both.

Units
-----
Fields of :class:`Mixing` hold ratios as fractions in [0, 1]. The tables
(:func:`mixing_table`, :func:`mixing_summary`) print ratios in percent by
default, as the paper's figures and Table 1 do.
"""

from __future__ import annotations

__all__ = [
    "Mixing",
    "decompose",
    "mixing_table",
    "mixing_summary",
    "decompose_layer",
    "RATIO_METRICS",
    "NORM_METRICS",
    "METRICS",
    "SUMMARY_ROWS",
    "OVERALL",
    "CI_LEVELS",
    "bootstrap_counts",
    "layer_means",
    "sequence_means",
    "split_probe",
    "mixing_conventions",
    "MixingVariants",
    "CONVENTIONS",
    "LN_STEPS",
]

# The package's files, one idea each: result (the Mixing record and its field names), kernel (one layer's
# decomposition and its self-checks), forward (hooks on the model's forward pass), tables (per-layer means and
# bootstrap intervals), conventions (what the free choices do to the ratio). Every public name, and the private ones
# other modules of mixlib use, is importable from mixlib.mixing as before.
from .conventions import CONVENTIONS, LN_STEPS, MixingVariants, mixing_conventions
from .forward import BATCH_KEYS, VECTOR_LIMIT_BYTES, _as_batch, _chunks, _first, _register, _run_hooked, _StopForward, decompose  # noqa: F401
from .kernel import BLOCK_TOKENS, PRECISIONS, SPLIT_PROBE_SEED, check_precision, decompose_layer, split_probe  # noqa: F401
from .result import METRICS, NORM_METRICS, OVERALL, RATIO_METRICS, SUMMARY_ROWS, VECTOR_FIELDS, Mixing  # noqa: F401
from .tables import CI_LEVELS, bootstrap_counts, layer_means, mixing_summary, mixing_table, sequence_means
