"""The from-scratch Transformer (mixlib.course.transformer), checked against independent computations."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from mixlib.course import transformer as tf


def test_positional_encoding_matches_the_formula_elementwise():
    p, d = 40, 12
    pe = tf.sinusoidal_positions(p, d)
    assert pe.shape == (p, d)
    for pos in range(p):
        for j in range(d):
            i = j // 2
            angle = pos / (10000 ** (2 * i / d))
            want = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert abs(float(pe[pos, j]) - want) < 1e-6, (pos, j)


def test_positional_encoding_bad_input():
    with pytest.raises(ValueError, match="even"):
        tf.sinusoidal_positions(10, 7)
    with pytest.raises(ValueError, match="positive"):
        tf.sinusoidal_positions(0, 8)


def test_attention_weights_sum_to_one_and_mask_gives_zero_weight():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 5, 4), torch.randn(2, 6, 4), torch.randn(2, 6, 3)
    mask = torch.ones(2, 5, 6, dtype=torch.bool)
    mask[:, :, 4:] = False
    out, w = tf.scaled_dot_product_attention(q, k, v, mask)
    assert torch.allclose(w.sum(-1), torch.ones(2, 5), atol=1e-6)
    assert float(w[..., 4:].abs().max()) == 0.0
    # naive loop over queries, keys 0..3 only
    for b in range(2):
        for i in range(5):
            s = torch.tensor([float(q[b, i] @ k[b, j]) / 2.0 for j in range(4)])
            a = torch.softmax(s, 0)
            assert torch.allclose(out[b, i], (a[:, None] * v[b, :4]).sum(0), atol=1e-5)


@pytest.mark.parametrize("use_mask", [False, True])
def test_multihead_equals_torch_multiheadattention(use_mask):
    torch.manual_seed(1)
    d, h, b, nq, nk = 16, 4, 3, 5, 7
    mha = tf.MultiHeadAttention(d, h).eval()
    for p in mha.parameters():  # non-default values, biases included
        nn.init.normal_(p, std=0.3)
    ref = mha.to_torch()
    x, mem = torch.randn(b, nq, d), torch.randn(b, nk, d)
    if use_mask:
        keys = torch.ones(b, nk, dtype=torch.bool)
        keys[0, 5:] = False
        keys[2, 3:] = False
        out, w = mha(x, mem, mem, keys[:, None, None, :])
        ref_out, ref_w = ref(x, mem, mem, key_padding_mask=~keys, need_weights=True, average_attn_weights=False)
    else:
        out, w = mha(x, mem, mem)
        ref_out, ref_w = ref(x, mem, mem, need_weights=True, average_attn_weights=False)
    assert w.shape == (b, h, nq, nk)
    assert torch.allclose(out, ref_out, atol=1e-5)
    assert torch.allclose(w, ref_w, atol=1e-6)


def test_multihead_causal_self_attention_equals_torch():
    torch.manual_seed(2)
    mha = tf.MultiHeadAttention(8, 2).eval()
    ref = mha.to_torch()
    x = torch.randn(2, 6, 8)
    m = tf.causal_mask(6)
    out, w = mha(x, x, x, m)
    ref_out, _ = ref(x, x, x, attn_mask=~m, need_weights=False)
    assert torch.allclose(out, ref_out, atol=1e-5)
    assert float(w.detach().triu(1).abs().max()) == 0.0


def test_causal_mask_blocks_the_future():
    torch.manual_seed(3)
    model = tf.Seq2SeqTransformer(11, 13, d_model=16, n_heads=4, n_layers=2, max_len=12, dropout=0.0).eval()
    src = torch.randint(1, 11, (2, 7))
    tgt = torch.randint(1, 13, (2, 9))
    changed = tgt.clone()
    changed[:, 5:] = torch.randint(1, 13, (2, 4))
    a, b = model(src, tgt), model(src, changed)
    assert torch.allclose(a[:, :5], b[:, :5], atol=1e-6)  # positions 0..4 never see 5..8
    assert not torch.allclose(a[:, 5:], b[:, 5:], atol=1e-4)
    # without the causal mask the earlier positions do change
    a2, b2 = model(src, tgt, causal=False), model(src, changed, causal=False)
    assert not torch.allclose(a2[:, :5], b2[:, :5], atol=1e-4)


def test_padding_in_source_is_ignored():
    torch.manual_seed(4)
    model = tf.Seq2SeqTransformer(10, 10, d_model=16, n_heads=2, max_len=10, dropout=0.0).eval()
    src = torch.tensor([[3, 4, 5, 0, 0]])
    longer = torch.tensor([[3, 4, 5, 0, 0, 0, 0]])
    tgt = torch.tensor([[1, 6, 7]])
    assert torch.allclose(model(src, tgt), model(longer, tgt), atol=1e-6)


def test_shift_right():
    y = torch.tensor([[5, 6, 7, 2, 0], [8, 2, 0, 0, 0]])
    x = tf.shift_right(y, bos_id=1)
    assert x.tolist() == [[1, 5, 6, 7, 2], [1, 8, 2, 0, 0]]
    # the decoder input at t is the target at t-1
    assert torch.equal(x[:, 1:], y[:, :-1])


def test_greedy_decode_length_limits():
    torch.manual_seed(5)
    model = tf.Seq2SeqTransformer(9, 9, d_model=16, n_heads=2, max_len=8, dropout=0.0)
    src = torch.randint(3, 9, (4, 6))
    with torch.no_grad():  # make eos (id 2) impossible: generation must run to the limit
        model.generator.bias[2] = -1e4
    out = tf.greedy_decode(model, src, bos_id=1, eos_id=2, max_new=5)
    assert out.shape == (4, 5)
    out = tf.greedy_decode(model, src, bos_id=1, eos_id=2)
    assert out.shape == (4, 8)
    with pytest.raises(ValueError, match="max_len"):
        tf.greedy_decode(model, src, bos_id=1, eos_id=2, max_new=9)
    # eos always: stops after one step, one column
    with torch.no_grad():
        model.generator.bias[2] = 1e4
    out = tf.greedy_decode(model, src, bos_id=1, eos_id=2)
    assert out.tolist() == [[2]] * 4


def test_greedy_decode_agrees_with_the_models_own_argmax():
    torch.manual_seed(6)
    model = tf.Seq2SeqTransformer(9, 9, d_model=16, n_heads=2, max_len=8, dropout=0.0).eval()
    src = torch.randint(3, 9, (3, 5))
    with torch.no_grad():
        model.generator.bias[2] = -1e4
    out = tf.greedy_decode(model, src, bos_id=1, eos_id=2, max_new=6)
    # feeding the generated prefix back in, each token is the argmax of the step before
    dec_in = torch.cat([torch.ones(3, 1, dtype=torch.long), out[:, :-1]], dim=1)
    scores = model(src, dec_in)
    scores[..., [0, 1]] = float("-inf")  # padding and bos are never generated
    assert torch.equal(scores.argmax(-1), out)
    assert not ((out == 0) | (out == 1)).any()


def test_too_long_input_is_refused():
    model = tf.Seq2SeqTransformer(5, 5, d_model=8, n_heads=2, max_len=4)
    with pytest.raises(ValueError, match="max_len=4"):
        model(torch.ones(1, 5, dtype=torch.long), torch.ones(1, 2, dtype=torch.long))


def test_trace_shapes_lists_heads():
    model = tf.Seq2SeqTransformer(7, 7, d_model=32, n_heads=4, max_len=22).eval()
    table = tf.trace_shapes(model, torch.ones(2, 10, dtype=torch.long), torch.ones(2, 6, dtype=torch.long))
    row = table[table.module == "decoder.0.cross_attn"].iloc[0]
    assert row.output == (2, 6, 32) and row.weights == (2, 4, 6, 10)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_torch_transformer_encoder_layer(norm_first):
    """Post-LN and pre-LN encoder layers against torch.nn.TransformerEncoderLayer with the same weights."""
    torch.manual_seed(1)
    d, h, ff = 16, 4, 40
    ours = tf.EncoderLayer(d, h, ff, dropout=0.0, norm_first=norm_first).eval()
    with torch.no_grad():
        for p in ours.parameters():
            p.normal_(0, 0.3)
    ref = nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    mha = ours.self_attn.to_torch()
    with torch.no_grad():
        ref.self_attn.load_state_dict(mha.state_dict())
        for a, b in ((ref.linear1, ours.ffn.lin1), (ref.linear2, ours.ffn.lin2), (ref.norm1, ours.norm1), (ref.norm2, ours.norm2)):
            a.weight.copy_(b.weight)
            a.bias.copy_(b.bias)
        x = torch.randn(3, 7, d)
        keep = torch.ones(3, 7, dtype=torch.bool)
        keep[2, 5:] = False
        got = ours(x, keep[:, None, None, :])
        want = ref(x, src_key_padding_mask=~keep)
    # padded query rows are meaningless (and torch's fast path may zero them); compare real positions
    assert torch.allclose(got[keep], want[keep], atol=1e-5)
