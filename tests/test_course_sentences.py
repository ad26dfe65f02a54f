"""Sentence vectors (mixlib.course.sentences): mean pooling against per-sentence and Sentence-Transformers computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mixlib.course import sentences as sv

TEXTS = ["A cat sleeps on a laptop.", "Rain falls on a long football match that nobody wants to stop today.", "Hi."]


def test_mean_pool_ignores_padding():
    torch.manual_seed(0)
    h = torch.randn(3, 6, 4)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]])
    got = sv.mean_pool(h, mask)
    for b in range(3):
        n = int(mask[b].sum())
        assert torch.allclose(got[b], h[b, :n].mean(0), atol=1e-6)
    with pytest.raises(ValueError):
        sv.mean_pool(h, mask[:, :3])


def test_batched_vectors_equal_one_sentence_at_a_time(packaged_enc):
    enc = packaged_enc
    batched = sv.sentence_vectors(enc, TEXTS, batch_size=8)
    cls = sv.sentence_vectors(enc, TEXTS, pooling="cls")
    static = sv.sentence_vectors(enc, TEXTS, pooling="static")
    first = sv.sentence_vectors(enc, TEXTS, layer=0)
    by_layer = sv.sentence_vectors_by_layer(enc, TEXTS, batch_size=2)
    assert by_layer.shape == (enc.n_layers + 1, len(TEXTS), enc.d_model)
    W = enc.word_embeddings()
    for i, t in enumerate(TEXTS):
        ids = enc.tokenizer(t, return_tensors="pt")  # no padding at all
        with torch.no_grad():
            out = enc.model(**ids, output_hidden_states=True)
        assert np.allclose(batched[i], out.last_hidden_state[0].mean(0).numpy(), atol=1e-5)
        assert np.allclose(cls[i], out.last_hidden_state[0, 0].numpy(), atol=1e-5)
        assert np.allclose(first[i], out.hidden_states[0][0].mean(0).numpy(), atol=1e-5)
        for layer in range(enc.n_layers + 1):
            assert np.allclose(by_layer[layer, i], out.hidden_states[layer][0].mean(0).numpy(), atol=1e-5)
        assert np.allclose(static[i], W[ids["input_ids"][0]].mean(0).numpy(), atol=1e-6)


def test_mean_pooling_matches_sentence_transformers(packaged_enc):
    st = pytest.importorskip("sentence_transformers")
    from mixlib.models import packaged_model_dir

    model = st.SentenceTransformer(str(packaged_model_dir()), device="cpu")
    ref = model.encode(TEXTS, normalize_embeddings=True)
    ours = sv.sentence_vectors(packaged_enc, TEXTS, normalize=True)
    assert np.allclose(ours, ref, atol=1e-5)


def test_bad_input(packaged_enc):
    for kw, msg in [(dict(pooling="max"), "pooling"), (dict(layer=99), "layer"), (dict(layer=-1), "layer")]:
        with pytest.raises(ValueError, match=msg):
            sv.sentence_vectors(packaged_enc, TEXTS, **kw)
    with pytest.raises(ValueError, match="non-empty"):
        sv.sentence_vectors(packaged_enc, [])
    with pytest.raises(ValueError, match="texts\\[1\\]"):
        sv.sentence_vectors(packaged_enc, ["ok", 3])


def test_cosine_and_group_scores():
    x = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [0.8, 0.3]])
    c = sv.cosine_matrix(x)
    assert np.allclose(np.diag(c), 1.0) and np.allclose(c, c.T)
    assert np.isclose(c[0, 2], 0.0)
    s = sv.group_scores(x, ["a", "a", "b", "b", "b"])
    assert s["nn_accuracy"] == pytest.approx(4 / 5)  # the last vector's nearest neighbour is in group a
    same = [(0, 1), (2, 3), (2, 4), (3, 4)]
    assert s["within"] == pytest.approx(np.mean([c[i, j] for i, j in same]))
    with pytest.raises(ValueError):
        sv.cosine_matrix(np.zeros((2, 3)))


def test_sentence_groups_data():
    df = sv.load_sentence_groups()
    sizes = df.groupby("group").size()
    assert len(sizes) >= 4 and (sizes >= 4).all()
    assert df.sentence.is_unique and df.groupby("group").scene.nunique().eq(1).all()


def test_group_scores_null_matches_a_loop_over_permutations():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(12, 5))
    g = np.array(list("aaabbbcccddd"))
    null = sv.group_scores_null(x, g, n_perm=50, seed=7)
    assert null.shape == (50, 2)
    # the same permutations, one at a time through group_scores
    perm = np.argsort(np.random.default_rng(7).random((50, 12)), axis=1)
    for k in (0, 17, 49):
        s = sv.group_scores(x, g[perm[k]])
        assert null.gap.iloc[k] == pytest.approx(s["gap"])
        assert null.nn_accuracy.iloc[k] == pytest.approx(s["nn_accuracy"])
    # well separated groups lie far outside their null
    centres = np.eye(4)[np.repeat(np.arange(4), 3)]
    sep = centres + 0.01 * rng.normal(size=(12, 4))
    obs = sv.group_scores(sep, g)
    null = sv.group_scores_null(sep, g, n_perm=200)
    assert obs["nn_accuracy"] == 1.0 and (null.nn_accuracy < 1.0).all() and obs["gap"] > null.gap.max()
    with pytest.raises(ValueError):
        sv.group_scores_null(x, g, n_perm=0)
    with pytest.raises(ValueError):
        sv.group_scores_null(x, g[:5])


def test_in_batch_contrastive_matches_torch_cross_entropy():
    rng = np.random.default_rng(0)
    u, v = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    out = sv.in_batch_contrastive(u, v, scale=20.0)
    cos = torch.nn.functional.cosine_similarity(torch.tensor(u)[:, None], torch.tensor(v)[None, :], dim=-1)  # (B, B)
    ref = torch.nn.functional.cross_entropy(20.0 * cos, torch.arange(6))
    assert out["loss"] == pytest.approx(float(ref), rel=1e-9)
    assert out["accuracy"] == pytest.approx(float((cos.argmax(1) == torch.arange(6)).double().mean()))
    assert out["chance_loss"] == pytest.approx(np.log(6))
    # v = u: every row finds its partner; equal vectors everywhere: the loss is log B
    assert sv.in_batch_contrastive(u, u)["accuracy"] == 1.0
    same = np.ones((4, 3))
    assert sv.in_batch_contrastive(same, same)["loss"] == pytest.approx(np.log(4))
    for bad in ((u, v[:5]), (u[:1], v[:1]), (u, np.zeros_like(v))):
        with pytest.raises(ValueError):
            sv.in_batch_contrastive(*bad)
    with pytest.raises(ValueError):
        sv.in_batch_contrastive(u, v, scale=0)
