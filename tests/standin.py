"""A stand-in for bert-base-uncased that runs offline: the paper model's code path, not its numbers.

bert-base-uncased cannot be downloaded here, so the branches that only run on the
paper's own model (``IS_PAPER_MODEL`` in the notebooks, the MLM head in chapter 8,
12-layer figure layouts, the CLI's paper comparison) would never execute. This
module builds a model with bert-base-uncased's *configuration* -- 12 layers, 12
heads, hidden size 768, intermediate size 3072, 512 positions, with the MLM head
(saved as ``BertForMaskedLM``, so both ``AutoModel`` and ``AutoModelForMaskedLM``
load it) -- but **random weights** (seeded), plus the packaged all-MiniLM-L6-v2
tokenizer, which is the same 30,522-token uncased WordPiece vocabulary.

It is written into a Hugging Face hub cache layout::

    <root>/hub/models--bert-base-uncased/refs/main          (the revision below)
    <root>/hub/models--bert-base-uncased/snapshots/<rev>/   (config, weights, tokenizer)

so that, with ``HF_HUB_OFFLINE=1``, ``HF_HOME=<root>`` and ``HF_HUB_CACHE=<root>/hub``,
``mixlib.load_encoder("bert-base-uncased")`` resolves to it (source ``"cache"``).

Nothing of it is in the repository: it is built at test time (about 440 MB of
float32 weights, tens of seconds) into a cache folder outside the tree (default:
``platformdirs.user_cache_dir("mixlib")/standin-bert-base-uncased-<rev>``;
override with ``$MIXLIB_STANDIN_DIR``) and reused while the recipe is unchanged.
The numbers it produces mean nothing and nothing asserts them.

Command line::

    python tests/standin.py --print-env     # build if needed, print the env vars (shell syntax)
    eval "$(python tests/standin.py --print-env)" && MIXLIB_FAST=1 jupyter nbconvert --execute ...
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

REPO_ID = "bert-base-uncased"
#: bert-base-uncased's published configuration (what changes the code path: sizes and the head).
CONFIG = {
    "architectures": ["BertForMaskedLM"],
    "model_type": "bert",
    "vocab_size": 30522,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
}
SEED = 0
#: tokenizer files copied from the packaged model (its vocabulary is bert-base-uncased's)
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
#: 2: no zero rows or all-zero biases (a trained model has neither; PyTorch's init zeroes the [PAD] row and biases)
RECIPE_VERSION = 2
#: a fake commit hash derived from the recipe, so a changed recipe is a new snapshot
REVISION = hashlib.sha1(json.dumps([RECIPE_VERSION, SEED, CONFIG, TOKENIZER_FILES], sort_keys=True).encode()).hexdigest()


def default_root() -> Path:
    """Where the stand-in lives: ``$MIXLIB_STANDIN_DIR``, else the user cache folder (outside the repository)."""
    env = os.environ.get("MIXLIB_STANDIN_DIR", "").strip()
    if env:
        return Path(env).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_cache_dir("mixlib")) / f"standin-{REPO_ID}-{REVISION[:12]}"


def _snapshot(root: Path) -> Path:
    return root / "hub" / f"models--{REPO_ID}" / "snapshots" / REVISION


def _complete(root: Path) -> bool:
    snap = _snapshot(root)
    need = ("config.json", "model.safetensors", *TOKENIZER_FILES)
    refs = root / "hub" / f"models--{REPO_ID}" / "refs" / "main"
    return all((snap / f).is_file() for f in need) and refs.is_file() and refs.read_text().strip() == REVISION


def unzero(model, config: dict = CONFIG) -> None:
    """Give the parameters PyTorch initialises to constants a spread, as in a trained model.

    ``BertForMaskedLM``'s init leaves the [PAD] embedding row at zero (a zero vector has no
    direction: norm ratios of it are NaN), every bias at zero and every LayerNorm gain at one;
    bert-base-uncased has none of these. Draws are seeded like the rest.
    """
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("word_embeddings.weight"):
                p[config["pad_token_id"]].normal_(0.0, config["initializer_range"])
            elif "LayerNorm.weight" in name:
                p.uniform_(0.8, 1.2)
            elif name.endswith("bias"):
                p.normal_(0.0, 0.02)


def build_tree(root: Path, complete, write, *, what: str, quiet: bool = False) -> Path:
    """Build a stand-in under ``root`` once: ``write(tmp)`` fills a temporary sibling folder, which is then
    renamed into place, so an interrupted build leaves nothing that looks complete, and two builders racing
    each other both end with a complete tree. ``complete(root)`` says whether a tree is whole."""
    if complete(root):
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", dir=root.parent))
    try:
        if not quiet:
            print(f"building the {what} stand-in (random weights) in {root} ...", file=sys.stderr)
        write(tmp)
        (tmp / "README.txt").write_text(
            f"Random-weight stand-in for {what} built by mixlib's tests. Not a trained model; safe to delete.\n"
        )
        if complete(root):  # another process finished first (e.g. a second pytest-xdist worker)
            return root
        if root.exists():  # an incomplete earlier attempt
            shutil.rmtree(root)
        try:
            tmp.rename(root)
        except OSError:
            if not complete(root):  # someone else won the race with a complete tree: fine
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def hub_snapshot(root: Path, repo_id: str, revision: str) -> Path:
    """``<root>/hub/models--<org>--<name>/snapshots/<revision>``, with ``refs/main`` pointing at it."""
    repo = root / "hub" / f"models--{repo_id.replace('/', '--')}"
    snap = repo / "snapshots" / revision
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    return snap


def build(root: Path | None = None, *, quiet: bool = False) -> Path:
    """Build the stand-in under ``root`` (once; later calls return at once) and return ``root``."""
    root = Path(root) if root is not None else default_root()

    def write(tmp: Path) -> None:
        import torch
        from transformers import BertConfig, BertForMaskedLM

        from mixlib.models import packaged_model_dir

        snap = hub_snapshot(tmp, REPO_ID, REVISION)
        torch.manual_seed(SEED)
        model = BertForMaskedLM(BertConfig(**CONFIG))
        unzero(model)
        model.save_pretrained(snap, safe_serialization=True)
        del model
        src = packaged_model_dir()
        for name in TOKENIZER_FILES:
            shutil.copyfile(src / name, snap / name)

    return build_tree(root, _complete, write, what=REPO_ID, quiet=quiet)


def hf_env(root: Path, model: str) -> dict[str, str]:
    """Environment variables under which the hub cache at ``root`` is the only one, offline, and ``model`` the default."""
    return {
        "HF_HOME": str(root),
        "HF_HUB_CACHE": str(root / "hub"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "MIXLIB_MODEL": model,
    }


def env(root: Path | None = None) -> dict[str, str]:
    """Environment variables under which ``load_encoder()`` (no argument) resolves to the stand-in."""
    return hf_env(build(root), REPO_ID)


def command_line(argv: list[str] | None, env_of, description: str, root_variable: str) -> int:
    """``--print-env`` (shell ``export`` lines) or the stand-in's folder, after building it with ``env_of(root)``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--root", type=Path, default=None, help=f"folder to build into (default: ${root_variable} or the user cache)")
    parser.add_argument("--print-env", action="store_true", help="print the environment variables as shell `export` lines")
    args = parser.parse_args(argv)
    variables = env_of(args.root)
    if args.print_env:
        for k, v in variables.items():
            print(f"export {k}={shlex.quote(v)}")
    else:
        print(variables["HF_HOME"])
    return 0


def main(argv: list[str] | None = None) -> int:
    return command_line(argv, env, __doc__.split("\n\n")[0], "MIXLIB_STANDIN_DIR")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    raise SystemExit(main())
