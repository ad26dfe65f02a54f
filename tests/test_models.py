"""Encoder loading: packaged model, local directories, the HF cache, the offline fallback.

The fallback tests run ``load_encoder`` in a subprocess, because huggingface_hub
reads its environment (HF_HUB_OFFLINE, HF_HUB_CACHE) once at import time. Where
``unshare -n`` works (root, Linux) the subprocess runs in a network namespace
with no network at all, which is the real "no network" case; the other tests
make the hub unreachable through HF_ENDPOINT or a probe that never answers.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import mixlib
from mixlib import models
from mixlib.models import FAMILIES, PACKAGED_MODEL, Encoder, load_encoder, packaged_model_dir

REPO = Path(__file__).resolve().parents[1]


def _run(code: str, *, env_extra: dict[str, str] | None = None, drop: tuple[str, ...] = (), prefix: list[str] | None = None,
         timeout: float = 300) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(env_extra or {})
    env["PYTHONPATH"] = str(REPO)
    cmd = [*(prefix or []), sys.executable, "-c", textwrap.dedent(code)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    return proc, time.perf_counter() - t0


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


# ---------------------------------------------------------------------------
# the packaged model
# ---------------------------------------------------------------------------


def test_packaged_encoder_card(packaged_enc):
    enc = packaged_enc
    assert (enc.n_layers, enc.n_heads, enc.d_model, enc.d_head, enc.vocab_size) == (6, 12, 384, 32, 30522)
    assert enc.source == "packaged" and enc.name == PACKAGED_MODEL
    assert enc.describe() == "all-MiniLM-L6-v2（6層・12ヘッド・384次元）"
    assert not enc.model.training
    assert all(p.dtype == torch.float32 for p in enc.model.parameters())
    assert enc.model.config._attn_implementation == "eager"
    assert enc.tokenizer.convert_tokens_to_ids("[MASK]") == 103  # same uncased WordPiece vocabulary as bert-base


def test_untrained_is_the_same_model_before_training(packaged_enc):
    """Same configuration and tokenizer, weights as transformers initialises them, reproducible by seed, and the
    caller's random state untouched."""
    import torch

    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    fresh = packaged_enc.untrained(seed=0)
    assert torch.equal(torch.rand(3), before)  # the global generator is where it was
    assert fresh.tokenizer is packaged_enc.tokenizer and fresh.config.to_dict() == packaged_enc.config.to_dict() | {
        k: v for k, v in fresh.config.to_dict().items() if k in ("_name_or_path", "transformers_version", "architectures")}
    assert (fresh.n_layers, fresh.n_heads, fresh.d_model) == (packaged_enc.n_layers, packaged_enc.n_heads, packaged_enc.d_model)
    w, w0 = fresh.word_embeddings(), packaged_enc.word_embeddings()
    assert not torch.allclose(w, w0)
    assert abs(float(w.std()) - packaged_enc.config.initializer_range) < 0.002  # transformers' normal(0, 0.02)
    assert torch.equal(w, packaged_enc.untrained(seed=0).word_embeddings())
    assert not torch.equal(w, packaged_enc.untrained(seed=1).word_embeddings())
    assert "学習前" in fresh.describe() and not fresh.fell_back


def test_family_table_resolves_every_module(packaged_enc):
    enc = packaged_enc
    for layer in range(enc.n_layers):
        for role in ("query", "key", "value", "attn_out"):
            assert isinstance(enc.module(layer, role), torch.nn.Linear)
        assert isinstance(enc.module(layer, "attn_norm"), torch.nn.LayerNorm)
    assert enc.word_embeddings().shape == (30522, 384)
    assert enc.position_embeddings().shape == (512, 384)


def test_layer_and_head_out_of_range(packaged_enc):
    with pytest.raises(ValueError, match="0..5"):
        packaged_enc.layer(6)
    with pytest.raises(ValueError, match="0..11"):
        packaged_enc.check_head(12)
    with pytest.raises(ValueError, match="unknown role"):
        packaged_enc.module(0, "ffn")


def test_layer_selection(packaged_enc):
    import numpy as np

    enc = packaged_enc
    assert enc.check_layers(None) == tuple(range(6))
    assert enc.check_layers(np.int64(2)) == (2,) and enc.check_layers([4, np.int32(1)]) == (1, 4)
    for bad, err, msg in (([], ValueError, "empty"), ([1, 1], ValueError, "duplicates"), ("01", TypeError, "list of ints"),
                          (1.5, TypeError, "list of ints"), ([6], ValueError, "0..5"), ([True], ValueError, "out of range")):
        with pytest.raises(err, match=msg):
            enc.check_layers(bad)


def test_packaged_embeddings_agree_with_the_model(packaged_enc):
    """The module table points at the modules the forward pass really uses."""
    enc = packaged_enc
    batch = enc.tokenizer(["a quick test"], return_tensors="pt")
    captured = {}
    h = enc.module(0, "query").register_forward_hook(lambda m, i, o: captured.setdefault("x", i[0]))
    try:
        with torch.no_grad():
            out = enc.model(**batch, output_hidden_states=True)
    finally:
        h.remove()
    torch.testing.assert_close(captured["x"], out.hidden_states[0])


def test_local_directory_and_random_roberta(tmp_path):
    from conftest import make_random_encoder

    enc = make_random_encoder(model_type="roberta", layers=1, heads=2, d=32)
    assert enc.family is FAMILIES["roberta"] and enc.position_embeddings().shape[0] == 512
    enc.model.save_pretrained(tmp_path / "tiny-roberta")
    enc.tokenizer.save_pretrained(tmp_path / "tiny-roberta")
    loaded = load_encoder(tmp_path / "tiny-roberta", device="cpu")
    assert loaded.source == "local" and loaded.name == "tiny-roberta"
    torch.testing.assert_close(loaded.word_embeddings(), enc.word_embeddings())


def test_each_load_gives_a_model_of_its_own():
    """An exercise ablates a head in one encoder, then asks for a fresh one: it gets the real model
    (issue 20: load_encoder used to hand out the same mutable object)."""
    first = load_encoder(PACKAGED_MODEL, device="cpu")
    real = {k: v.clone() for k, v in first.model.state_dict().items()}
    batch = first.tokenizer(["The cat sat on the mat."], return_tensors="pt")
    before = mixlib.decompose(first, batch, vectors=False).ratio
    with torch.no_grad():
        first.module(2, "value").weight.zero_()  # the ablation
    assert not torch.allclose(mixlib.decompose(first, batch, vectors=False).ratio, before)
    again = load_encoder(PACKAGED_MODEL, device="cpu")
    assert again is not first and again.model is not first.model and again.tokenizer is not first.tokenizer
    for name, value in again.model.state_dict().items():
        torch.testing.assert_close(value, real[name], rtol=0, atol=0, msg=name)
    torch.testing.assert_close(mixlib.decompose(again, batch, vectors=False).ratio, before, rtol=0, atol=0)
    assert first.module(2, "value").weight.abs().sum() == 0  # the first one stays as its owner left it


def test_nothing_an_encoder_hands_out_reaches_another_result():
    """Issue 53: what load_encoder hands out besides the model: the tokenizer was shared by every load, and the
    embedding matrices were views of the weights, so a change to one result reached every later one."""
    first = load_encoder(PACKAGED_MODEL, device="cpu")
    batch = mixlib.tokenize(first, ["The cat sat on the mat.", "A dog."])
    before = mixlib.decompose(first, batch, vectors=False).ratio
    E, P = first.word_embeddings(), first.position_embeddings()
    W, b = first.projection(0, "value")
    E -= E.mean(0)  # what a student centring the embeddings writes
    P.zero_()
    W.zero_()
    b.zero_()
    torch.testing.assert_close(mixlib.decompose(first, batch, vectors=False).ratio, before, rtol=0, atol=0, equal_nan=True)
    assert first.word_embeddings().mean(0).abs().max() > 1e-3  # the model's own matrix is untouched
    first.tokenizer.padding_side = "left"  # one encoder's tokenizer changed ...
    first.tokenizer.add_tokens(["zzqword"])
    again = load_encoder(PACKAGED_MODEL, device="cpu")
    assert again.tokenizer.padding_side == "right" and "zzqword" not in again.tokenizer.get_vocab()  # ... not another's
    torch.testing.assert_close(mixlib.decompose(again, mixlib.tokenize(again, ["The cat sat on the mat.", "A dog."]),
                                                vectors=False).ratio, before, rtol=0, atol=0, equal_nan=True)


def test_a_folder_saved_over_is_read_again(tmp_path):
    from conftest import make_random_encoder

    folder = tmp_path / "my-model"
    for seed in (0, 1):
        enc = make_random_encoder(layers=1, heads=2, d=32, seed=seed)
        enc.model.save_pretrained(folder)
        enc.tokenizer.save_pretrained(folder)
        time.sleep(0.01)  # a later modification time even on coarse clocks
        loaded = load_encoder(folder, device="cpu")
        torch.testing.assert_close(loaded.word_embeddings(), enc.word_embeddings(), rtol=0, atol=0)


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(OSError, match="no such directory"):
        load_encoder(str(tmp_path / "nope" / "model"), device="cpu")
    (tmp_path / "empty").mkdir()
    with pytest.raises(OSError, match="no config.json"):
        load_encoder(tmp_path / "empty", device="cpu")


@pytest.fixture
def saved_copy(tiny_model_dir, tmp_path):
    return Path(shutil.copytree(tiny_model_dir, tmp_path / "model"))


@pytest.mark.parametrize("damage, message", [
    ("cut", r"model: the weights cannot be read \(SafetensorError: .*\); the file is corrupt or cut short"),
    ("bin", r"model: the weights cannot be read \(UnpicklingError: Weights only load failed\); the file is corrupt"),
    ("config", r"model: config.json does not match the weights, e.g. \S+: \[\d+(, \d+)?\] in the weights, "
               r"\[\d+(, \d+)?\] by config.json"),
    # issue 20 review: more or fewer layers in config.json than in the weights gave random layers, or dropped some
    ("layers+", r"model: config.json does not match the weights: 16 tensors of the model are not in the weights and "
                r"would be random \(e.g. encoder.layer.1.attention.output.LayerNorm.bias\); config.json says 2 layers"),
    ("layers-", None),
])
@pytest.mark.parametrize("fallback", [True, False])
def test_corrupt_or_mismatched_weights_are_one_line(saved_copy, damage, message, fallback):
    """Issue 20: a corrupt model.safetensors / pytorch_model.bin or a config.json that does not match the
    weights ended in a traceback from safetensors, torch.load or transformers (with and without fallback)."""
    weights = saved_copy / "model.safetensors"
    if damage == "cut":
        weights.write_bytes(weights.read_bytes()[:1000])
    elif damage == "bin":
        weights.unlink()
        (saved_copy / "pytorch_model.bin").write_bytes(bytes(range(256)) * 20)
    else:
        config = json.loads((saved_copy / "config.json").read_text())
        if damage == "config":
            config["intermediate_size"] *= 2
        else:
            config["num_hidden_layers"] += 1 if damage == "layers+" else -1
        (saved_copy / "config.json").write_text(json.dumps(config))
    if damage == "layers-":
        message = r"config.json does not match the weights: 16 tensors of the weights have no place in the model .*says 0 layers"
    with pytest.raises(OSError, match=message) as info:
        load_encoder(saved_copy, fallback=fallback, device="cpu")
    assert "\n" not in str(info.value) and "weights_only=False" not in str(info.value)


def test_a_pretraining_checkpoint_loads_without_its_heads(tmp_path, packaged_enc):
    """Extra pre-training heads (cls.*) and a missing pooler are not a mismatch: bert-base-uncased has both."""
    from transformers import BertConfig, BertForPreTraining

    cfg = BertConfig(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                     vocab_size=packaged_enc.vocab_size)
    model = BertForPreTraining(cfg)
    state = {k: v for k, v in model.state_dict().items() if ".pooler." not in k}
    model.save_pretrained(tmp_path / "pt", state_dict=state)
    packaged_enc.tokenizer.save_pretrained(tmp_path / "pt")
    enc = load_encoder(tmp_path / "pt", device="cpu")
    torch.testing.assert_close(enc.word_embeddings(), model.bert.embeddings.word_embeddings.weight, rtol=0, atol=0)
    # the same checkpoint (keys prefixed 'bert.') with a config.json of fewer layers: its last layer was dropped silently
    config = json.loads((tmp_path / "pt" / "config.json").read_text())
    config["num_hidden_layers"] = 0
    (tmp_path / "pt" / "config.json").write_text(json.dumps(config))
    with pytest.raises(OSError, match=r"16 tensors of the weights have no place in the model \(e.g. bert.encoder.layer.0"):
        load_encoder(tmp_path / "pt", device="cpu")


def test_weights_with_nan_are_one_line_at_load(saved_copy):
    """Issue 20 review: NaN in a weight ended in a decompose self-check traceback blaming the model's design."""
    from safetensors.torch import load_file, save_file

    weights = load_file(saved_copy / "model.safetensors")
    name = next(k for k in weights if k.endswith("intermediate.dense.weight"))
    weights[name][2, 3] = float("nan")
    save_file(weights, saved_copy / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(OSError, match=rf"model: the weights hold 1 non-finite value\(s\) \(NaN or inf\) in \S*intermediate"):
        load_encoder(saved_copy, device="cpu")


def test_a_file_or_an_address_given_as_the_model_says_what_it_is(tmp_path, capsys):
    texts = tmp_path / "t.txt"
    texts.write_text("The cat.\n", encoding="utf-8")
    with pytest.raises(OSError, match=r"t.txt' is a file, not a model folder: give the folder that model.save_pretrained"):
        load_encoder(texts, device="cpu")
    with pytest.raises(ValueError, match=r"'http://x' is an address; .*not a URL: give the model's hub id"):
        load_encoder("http://x", device="cpu")
    with pytest.raises(ValueError, match=r"not a URL: for this page give 'google/electra-small-discriminator'"):
        load_encoder("https://huggingface.co/google/electra-small-discriminator/tree/main", device="cpu")
    from mixlib import cli

    for model, message in [(str(texts), "is a file, not a model folder"), ("http://x", "is an address")]:
        assert cli.main(["mixing", "--model", model, "--texts", str(texts), "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


def test_unsupported_family_names_the_supported_ones(tmp_path):
    from transformers import GPT2Config, GPT2Model

    GPT2Model(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50)).save_pretrained(tmp_path / "gpt2-tiny")
    with pytest.raises(ValueError, match=r"'gpt2'.*bert, electra, roberta"):
        load_encoder(tmp_path / "gpt2-tiny", device="cpu")


def test_device_auto_and_bad_device():
    assert models.resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            models.resolve_device("cuda")
    else:
        with pytest.raises(ValueError, match="CUDA device"):
            models.resolve_device(f"cuda:{torch.cuda.device_count()}")
    # issue 20: these ended in tracebacks from deep inside the analyses
    with pytest.raises(ValueError, match="shapes, not weights"):
        models.resolve_device("meta")
    if not torch.backends.mps.is_available():
        with pytest.raises(ValueError, match="Apple GPU"):
            models.resolve_device("mps")
    with pytest.raises(ValueError, match="runs on 'cpu', 'cuda'"):
        models.resolve_device("xpu")


@pytest.mark.parametrize("device", ["meta", "mps"])
def test_cli_refuses_a_device_it_cannot_use_in_one_line(tmp_path, capsys, device):
    from mixlib import cli

    if device == "mps" and torch.backends.mps.is_available():
        pytest.skip("this machine has an Apple GPU: mps is a real choice here")
    texts = tmp_path / "t.txt"
    texts.write_text("The cat sat on the mat.\n", encoding="utf-8")
    assert cli.main(["mixing", "--model", PACKAGED_MODEL, "--texts", str(texts), "--out", str(tmp_path / "o"),
                     "--device", device]) == 2
    err = capsys.readouterr().err
    assert f"--device {device!r}" in err and "Traceback" not in err and not (tmp_path / "o").exists()


def test_empty_name_rejected(monkeypatch):
    with pytest.raises(ValueError, match="name is empty"):
        load_encoder("", device="cpu")


def test_env_var_selects_the_model(monkeypatch):
    monkeypatch.setenv("MIXLIB_MODEL", "all-MiniLM-L6-v2")
    assert load_encoder(device="cpu").name == PACKAGED_MODEL


# ---------------------------------------------------------------------------
# the probe never hangs
# ---------------------------------------------------------------------------


def test_probe_gives_up_when_the_network_never_answers(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)

    def black_hole(*args, **kwargs):
        time.sleep(30)
        raise OSError("never")

    monkeypatch.setattr(socket, "create_connection", black_hole)
    t0 = time.perf_counter()
    assert models.hub_reachable(timeout=0.5) is False
    assert time.perf_counter() - t0 < 2.0


def test_probe_sees_a_local_listener(monkeypatch):
    """Independent check that the probe can say yes: a listener on loopback."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
        assert models.hub_reachable(timeout=2.0) is True
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert models.hub_reachable() is False


# ---------------------------------------------------------------------------
# fallback and its refusal, in subprocesses with the network really gone
# ---------------------------------------------------------------------------

# What must never hang is the decision: from the call to load_encoder until the packaged model
# starts loading (fallback) or the error is raised (no fallback) -- probe, cache look-up and all.
# It is measured inside the subprocess, so interpreter start-up and the model's own loading time
# (which depends on the machine's load, not on the network) are not counted.
FALLBACK = """
    import time, mixlib, transformers, huggingface_hub
    from transformers import AutoConfig, AutoModel, AutoTokenizer  # imported before the clock starts
    from mixlib import models
    t0 = time.perf_counter()
    decided = []
    original = models._load_packaged
    def timed(*args, **kwargs):
        decided.append(time.perf_counter() - t0)
        return original(*args, **kwargs)
    models._load_packaged = timed
    enc = mixlib.load_encoder("bert-base-uncased", device="cpu")
    print("SECS", decided[0])
    print("SOURCE", enc.source, enc.name, enc.requested)
    print("CAPTION", enc.describe())
"""
REFUSE = """
    import time, mixlib, transformers, huggingface_hub
    from transformers import AutoConfig, AutoModel, AutoTokenizer
    t0 = time.perf_counter()
    try:
        mixlib.load_encoder("bert-base-uncased", fallback=False, device="cpu")
    except OSError as e:
        print("OSERROR", e)
    print("SECS", time.perf_counter() - t0)
"""


class FakeHub:
    """A local stand-in for the hub endpoint (point ``HF_ENDPOINT`` at :attr:`url`).

    ``mode``: ``"silent"`` accepts TCP connections and never sends a byte; ``"503"`` answers every
    request with HTTP 503; ``"serve"`` serves the models in ``repos`` ({repo id: folder}) through the
    two routes huggingface_hub uses (``/api/models/<id>`` and ``/<id>/resolve/<rev>/<file>``) and
    answers 404 RepoNotFound for any other id; ``"stall"`` is ``"serve"`` whose file downloads send
    their headers and then nothing. :attr:`hits` counts connections; :attr:`paths` lists request paths.
    """

    def __init__(self, mode: str, repos: dict[str, Path] | None = None):
        import http.server
        import threading

        self.mode, self.repos, self.hits, self.paths = mode, repos or {}, 0, []
        self._stop = threading.Event()
        self._held: list[socket.socket] = []
        if mode == "silent":
            self._sock = socket.socket()
            self._sock.bind(("127.0.0.1", 0))
            self._sock.listen(16)
            self._sock.settimeout(0.2)
            port = self._sock.getsockname()[1]
            threading.Thread(target=self._accept_forever, daemon=True).start()
            self._httpd = None
        else:
            hub = self

            class Handler(http.server.BaseHTTPRequestHandler):
                def log_message(self, *args):
                    pass

                def do_HEAD(self):
                    hub._answer(self, head=True)

                def do_GET(self):
                    hub._answer(self, head=False)

            self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            self._httpd.daemon_threads = True
            port = self._httpd.server_address[1]
            threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{port}"

    def _accept_forever(self):
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.hits += 1
            self._held.append(conn)  # keep it open, say nothing

    COMMIT = "0123456789abcdef0123456789abcdef01234567"

    def _answer(self, req, *, head: bool):
        from urllib.parse import unquote, urlsplit

        self.hits += 1
        path = unquote(urlsplit(req.path).path)
        self.paths.append(path)

        def send(status, body=b"", headers=None):
            req.send_response(status)
            for k, v in (headers or {}).items():
                req.send_header(k, v)
            req.send_header("Content-Length", str(len(body)))
            req.end_headers()
            if not head:
                req.wfile.write(body)

        if self.mode == "503":
            return send(503, b"Service Unavailable")
        repo = next((r for r in self.repos if path in (f"/api/models/{r}", f"/api/models/{r}/revision/main")
                     or path.startswith(f"/{r}/resolve/")), None)
        if repo is None:
            return send(404, b'{"error": "Repository not found"}', {"X-Error-Code": "RepoNotFound", "Content-Type": "application/json"})
        folder = self.repos[repo]
        if path.startswith("/api/models/"):
            config = json.loads((folder / "config.json").read_text())
            info = {"id": repo, "sha": self.COMMIT, "config": {"model_type": config.get("model_type")},
                    "siblings": [{"rfilename": f.name} for f in sorted(folder.iterdir()) if f.is_file()]}
            return send(200, json.dumps(info).encode(), {"Content-Type": "application/json"})
        name = path.split("/resolve/", 1)[1].split("/", 1)[1]
        f = folder / name
        if not f.is_file():
            return send(404, b"", {"X-Error-Code": "EntryNotFound"})
        body = f.read_bytes()
        headers = {"X-Repo-Commit": self.COMMIT, "ETag": f'"{hash(body) & 0xFFFFFFFF:08x}-{len(body)}"'}
        if self.mode == "stall" and not head:
            req.send_response(200)
            for k, v in headers.items():
                req.send_header(k, v)
            req.send_header("Content-Length", str(len(body)))
            req.end_headers()
            req.wfile.flush()
            self._stop.wait(60)  # never sends the body
            return None
        return send(200, body, headers)

    def close(self):
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        else:
            self._sock.close()
        for c in self._held:
            c.close()


def _secs(stdout: str) -> float:
    return float(next(line.split()[1] for line in stdout.splitlines() if line.startswith("SECS ")))
# an empty HF cache so a developer's cached bert-base-uncased doesn't change the outcome
OFFLINE_ENV_DROP = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT", "MIXLIB_MODEL")


@pytest.mark.parametrize(
    "how",
    [
        pytest.param("no-network-namespace", id="unshare-n"),
        pytest.param("refused-endpoint", id="endpoint-refused"),
        pytest.param("silent", id="hub-accepts-and-never-answers"),
        pytest.param("503", id="hub-answers-503"),
        pytest.param("hf-hub-offline", id="HF_HUB_OFFLINE"),
    ],
)
def test_fallback_without_network_is_quick_and_says_so(how, tmp_path):
    env = {"HF_HOME": str(tmp_path / "hf")}
    prefix = None
    server = None
    if how == "no-network-namespace":
        if not _unshare_works():
            pytest.skip("unshare -n is not permitted here; the other variants cover the fallback")
        prefix = ["unshare", "-n"]
    elif how == "refused-endpoint":
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env["HF_ENDPOINT"] = f"http://127.0.0.1:{port}"
    elif how in ("silent", "503"):
        server = FakeHub(how)
        env["HF_ENDPOINT"] = server.url
    else:
        env["HF_HUB_OFFLINE"] = "1"
    try:
        proc, _ = _run(FALLBACK, env_extra=env, drop=OFFLINE_ENV_DROP, prefix=prefix)
        assert proc.returncode == 0, proc.stderr[-2000:]
        secs = _secs(proc.stdout)
        assert "SOURCE packaged all-MiniLM-L6-v2 bert-base-uncased" in proc.stdout
        assert "［bert-base-uncased の代わりに同梱モデル］" in proc.stdout
        notices = [line for line in proc.stdout.splitlines() if line.startswith("[mixlib]")]
        assert len(notices) == 1 and "bert-base-uncased" in notices[0] and PACKAGED_MODEL in notices[0]
        # the one line says how to choose a model, and names the CLI the pinned huggingface_hub installs
        for hint in ("MIXLIB_MODEL", "--model", "fallback=False", "`hf download bert-base-uncased`"):
            assert hint in notices[0], (hint, notices[0])
        assert "huggingface-cli" not in proc.stdout + proc.stderr
        assert "Retry" not in proc.stdout + proc.stderr and "HTTP Error" not in proc.stderr, proc.stderr[-2000:]
        assert secs < 10, f"falling back took {secs:.1f}s"
        if server is not None:  # the decision was the hub's answer (or silence), not a refused connection
            assert server.hits >= 1
            said = ("answered HTTP 503",) if how == "503" else ("ReadTimeout", "did not answer within")
            assert any(text in notices[0] for text in said), notices[0]

        proc, _ = _run(REFUSE, env_extra=env, drop=OFFLINE_ENV_DROP, prefix=prefix)
        assert proc.returncode == 0, proc.stderr[-2000:]
        secs = _secs(proc.stdout)
        assert "OSERROR Cannot load 'bert-base-uncased'" in proc.stdout
        assert "`hf download bert-base-uncased`" in proc.stdout and "all-MiniLM-L6-v2" in proc.stdout
        assert "huggingface-cli" not in proc.stdout
        assert secs < 10
    finally:
        if server is not None:
            server.close()


def test_fallback_notice_in_japanese_for_the_chapters(tmp_path):
    """lang="ja" (what the chapters pass): the same one line, in Japanese, with the same hints."""
    code = """
        import mixlib
        enc = mixlib.load_encoder("bert-base-uncased", device="cpu", lang="ja")
        print("SOURCE", enc.source, enc.name)
        try:
            mixlib.load_encoder("all-MiniLM-L6-v2", lang="fr")
        except ValueError as e:
            print("VALUEERROR", e)
    """
    proc, _ = _run(code, env_extra={"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}, drop=OFFLINE_ENV_DROP)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "SOURCE packaged all-MiniLM-L6-v2" in proc.stdout
    notices = [line for line in proc.stdout.splitlines() if line.startswith("[mixlib]")]
    assert len(notices) == 1, proc.stdout
    assert "bert-base-uncased を読み込めない" in notices[0] and f"同梱の {PACKAGED_MODEL} を使う" in notices[0]
    assert "理由：" in notices[0] and "`" not in notices[0]  # the technical reason last; no markdown quotes
    for hint in ("MIXLIB_MODEL", "--model", "fallback=False", "「hf download bert-base-uncased」"):
        assert hint in notices[0], (hint, notices[0])
    assert "is not available" not in notices[0]  # not the English line
    assert "VALUEERROR lang must be one of ['en', 'ja']; got 'fr'." in proc.stdout


HUB_LOAD = """
    import mixlib
    from mixlib import models
    models.STALL_TIMEOUT = {stall}
    try:
        enc = mixlib.load_encoder({name!r}, fallback={fallback}, device="cpu")
        print("SOURCE", enc.source, enc.name, enc.n_layers)
    except (OSError, ValueError) as e:
        print("ERROR", type(e).__name__, e)
"""


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    """A saved 1-layer random BERT with the packaged tokenizer (what the fake hub serves)."""
    from conftest import make_random_encoder

    enc = make_random_encoder(layers=1, heads=2, d=32)
    folder = tmp_path_factory.mktemp("tiny-bert")
    enc.model.save_pretrained(folder)
    enc.tokenizer.save_pretrained(folder)
    return folder


def _hub_load(hub: FakeHub, tmp_path: Path, name: str, *, fallback: bool = True, stall: float = 30.0):
    code = HUB_LOAD.format(name=name, fallback=fallback, stall=stall)
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": hub.url}
    proc, secs = _run(code, env_extra=env, drop=OFFLINE_ENV_DROP)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc, secs


def test_hub_download_path_and_then_the_cache(tiny_model_dir, tmp_path):
    """The hub route really downloads (through a local fake hub) and a second, offline load uses the cache."""
    hub = FakeHub("serve", {"mixlib-test/tiny-bert": tiny_model_dir})
    try:
        proc, _ = _hub_load(hub, tmp_path, "mixlib-test/tiny-bert")
    finally:
        hub.close()
    assert "SOURCE hub mixlib-test/tiny-bert 1" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert "[mixlib]" not in proc.stdout
    fetched = {p.rsplit("/", 1)[1] for p in hub.paths if "/resolve/" in p}
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= fetched
    code = HUB_LOAD.format(name="mixlib-test/tiny-bert", fallback=False, stall=30.0)
    proc, _ = _run(code, env_extra={"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}, drop=OFFLINE_ENV_DROP)
    assert "SOURCE cache mixlib-test/tiny-bert 1" in proc.stdout, proc.stdout + proc.stderr[-2000:]


def test_a_name_the_hub_does_not_know_is_an_error_not_a_fallback(tiny_model_dir, tmp_path):
    hub = FakeHub("serve", {"mixlib-test/tiny-bert": tiny_model_dir})
    try:
        proc, _ = _hub_load(hub, tmp_path, "mixlib-test/tiny-brt", fallback=True)
    finally:
        hub.close()
    assert "ERROR OSError Cannot load 'mixlib-test/tiny-brt'" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert "has no model of that name" in proc.stdout and "Choices:" in proc.stdout and PACKAGED_MODEL in proc.stdout
    assert "[mixlib]" not in proc.stdout and "SOURCE" not in proc.stdout


def test_a_non_bert_family_on_the_hub_is_refused_before_downloading(tmp_path):
    from transformers import GPT2Config, GPT2Model

    folder = tmp_path / "gpt2-tiny"
    GPT2Model(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50)).save_pretrained(folder)
    hub = FakeHub("serve", {"mixlib-test/gpt2-tiny": folder})
    try:
        proc, _ = _hub_load(hub, tmp_path, "mixlib-test/gpt2-tiny")
    finally:
        hub.close()
    assert "ERROR ValueError 'mixlib-test/gpt2-tiny' is a 'gpt2' model" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert "bert, electra, roberta" in proc.stdout and "Choices:" in proc.stdout
    assert not [p for p in hub.paths if "/resolve/" in p]  # nothing was downloaded


def test_a_stalled_download_falls_back_with_one_line(tiny_model_dir, tmp_path):
    hub = FakeHub("stall", {"mixlib-test/tiny-bert": tiny_model_dir})
    try:
        proc, secs = _hub_load(hub, tmp_path, "mixlib-test/tiny-bert", stall=2.0)
    finally:
        hub.close()
    notices = [line for line in proc.stdout.splitlines() if line.startswith("[mixlib]")]
    assert len(notices) == 1 and "stalled for 2 s" in notices[0], proc.stdout + proc.stderr[-2000:]
    assert "SOURCE packaged all-MiniLM-L6-v2" in proc.stdout
    assert "Retry" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("name, near", [("bert-base-uncase", "'bert-base-uncased'"), ("robreta-base", "'roberta-base'")])
def test_an_offline_typo_of_a_known_name_is_an_error(name, near, tmp_path):
    code = HUB_LOAD.format(name=name, fallback=True, stall=30.0)
    proc, _ = _run(code, env_extra={"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}, drop=OFFLINE_ENV_DROP)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"ERROR OSError Cannot load {name!r}" in proc.stdout and "looks like a typo of " + near in proc.stdout, proc.stdout
    assert "Choices:" in proc.stdout and "[mixlib]" not in proc.stdout
    # a well-known name that is close to another (bert-base-cased ~ bert-base-uncased) is no typo: it falls back
    assert models._typo_of("bert-base-cased") == [] and models._typo_of("bert-base-uncased") == []


def test_a_folder_named_like_the_papers_model_is_not_taken_for_it(tmp_path, monkeypatch, capsys):
    """Issue 53: a local folder *named* bert-base-uncased was labelled as the paper's model and compared with the
    paper's table. The name now follows the configuration: one that is not the model's is labelled with its path."""
    from conftest import make_random_encoder

    from mixlib import cli, models

    enc = make_random_encoder(layers=1, heads=2, d=32)  # another model, under the paper model's name
    folder = tmp_path / "bert-base-uncased"
    enc.model.save_pretrained(folder)
    enc.tokenizer.save_pretrained(folder)
    loaded = load_encoder(folder, device="cpu")
    assert loaded.name == str(folder) and loaded.name != "bert-base-uncased"
    texts = tmp_path / "t.txt"
    texts.write_text("The cat sat on the mat.\nA dog ran.\n", encoding="utf-8")
    assert cli.main(["mixing", "--model", str(folder), "--device", "cpu", "--texts", str(texts),
                     "--out", str(tmp_path / "o")]) == 0
    run = json.loads((tmp_path / "o" / "run.json").read_text(encoding="utf-8"))
    assert run["model"] == str(folder) and run["paper_diff"] is False
    # a folder whose configuration is the known model's keeps the name (here the tiny model plays the known one)
    tiny = {"model_type": "bert", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 32,
            "intermediate_size": enc.model.config.intermediate_size, "max_position_embeddings": 512, "vocab_size": 30522,
            "type_vocab_size": 2, "hidden_act": "gelu", "lowercase": True}
    monkeypatch.setitem(models.KNOWN_CONFIGS, "bert-base-uncased", tiny)
    assert models._local_name(folder, enc.model.config, enc.tokenizer) == "bert-base-uncased"
    monkeypatch.setitem(models.KNOWN_CONFIGS, "bert-base-uncased", {**tiny, "lowercase": False})  # a cased tokenizer
    assert models._local_name(folder, enc.model.config, enc.tokenizer) == str(folder)
    assert models._local_name(tmp_path / "my-bert", enc.model.config, enc.tokenizer) == "my-bert"  # other names as they are


def test_local_folder_without_tokenizer_files(tmp_path):
    from conftest import make_random_encoder

    enc = make_random_encoder(layers=1, heads=2, d=32)
    enc.model.save_pretrained(tmp_path / "no-tok")
    with pytest.raises(OSError, match=r"no tokenizer files.*tokenizer.save_pretrained.*Choices:"):
        load_encoder(tmp_path / "no-tok", device="cpu")
    enc.tokenizer.save_pretrained(tmp_path / "no-weights")
    (tmp_path / "no-weights" / "config.json").write_text(enc.model.config.to_json_string())
    with pytest.raises(OSError, match="no weights"):
        load_encoder(tmp_path / "no-weights", device="cpu")


def test_hf_cache_is_used_without_network(tmp_path):
    """A model in the Hugging Face cache layout loads offline with source 'cache'."""
    hub = tmp_path / "hf" / "hub"
    snap = hub / "models--mixlib-test--tiny-bert" / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    for f in packaged_model_dir().iterdir():
        if f.is_file() and f.suffix in {".json", ".txt", ".safetensors"}:
            (snap / f.name).symlink_to(f)
    refs = hub / "models--mixlib-test--tiny-bert" / "refs"
    refs.mkdir()
    (refs / "main").write_text("0123abcd")
    code = """
        import mixlib
        enc = mixlib.load_encoder("mixlib-test/tiny-bert", device="cpu")
        print("SOURCE", enc.source, enc.name, enc.n_layers)
    """
    proc, secs = _run(code, env_extra={"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}, drop=OFFLINE_ENV_DROP)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "SOURCE cache mixlib-test/tiny-bert 6" in proc.stdout
    assert "[mixlib]" not in proc.stdout  # no fallback notice


def test_corrupt_weights_in_the_hf_cache_are_one_line(tmp_path):
    """The cache route (issue 20): a cut-short model.safetensors in the Hugging Face cache is one OSError line."""
    snap = tmp_path / "hf" / "hub" / "models--mixlib-test--cut" / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    for f in packaged_model_dir().iterdir():
        if f.is_file() and f.suffix in {".json", ".txt"}:
            (snap / f.name).symlink_to(f)
    (snap / "model.safetensors").write_bytes((packaged_model_dir() / "model.safetensors").read_bytes()[:1000])
    refs = tmp_path / "hf" / "hub" / "models--mixlib-test--cut" / "refs"
    refs.mkdir()
    (refs / "main").write_text("0123abcd")
    code = """
        import mixlib
        try:
            mixlib.load_encoder("mixlib-test/cut", device="cpu")
        except OSError as err:
            print("ERROR", err)
    """
    proc, _ = _run(code, env_extra={"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}, drop=OFFLINE_ENV_DROP)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ERROR 'mixlib-test/cut' in the local Hugging Face cache: the weights cannot be read (SafetensorError" in proc.stdout


def test_from_model_rejects_decoders():
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                     is_decoder=True)
    with pytest.raises(ValueError, match="decoder"):
        Encoder.from_model(BertModel(cfg), None, name="dec")


def test_top_level_exports():
    assert callable(mixlib.load_encoder) and "decompose" in dir(mixlib)
    with pytest.raises(AttributeError):
        mixlib.does_not_exist  # noqa: B018
