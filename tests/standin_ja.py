"""Stand-ins for the Japanese BERTs that run offline: their code path (MeCab, WordPiece, 12 layers), not their numbers.

tohoku-nlp/bert-base-japanese-v3 cannot be downloaded here, so mixlib's Japanese path (the extra ``mixlib[ja]``,
``BertJapaneseTokenizer``, Japanese punctuation and vocabulary types, the CLI's Japanese labels) would never run.
This module builds, like ``tests/standin.py`` does for bert-base-uncased, three models in one Hugging Face hub
cache layout, each laid out as its hub repository is (config.json naming ``BertJapaneseTokenizer``,
tokenizer_config.json, vocab.txt, the weights):

``tohoku-nlp/bert-base-japanese-v3``
    bert-base-japanese-v3's configuration (12 layers, 12 heads, hidden size 768, intermediate 3072, 512
    positions, MLM head) with **random weights** (seeded), and a real ``BertJapaneseTokenizer``: MeCab with
    unidic-lite, then WordPiece, as the model's own tokenizer_config.json says. Its vocabulary is built here from
    the book's own Japanese text (the notebooks' Markdown and ``book/*.md``): the special tokens, 10
    ``[unused]`` entries, every character seen (and every mark of :data:`mixlib.japanese.PUNCTUATION`, as a
    real vocabulary has them) alone and as a ``##`` piece, then the MeCab words seen at least
    twice, most frequent first, up to :data:`VOCAB_MAX` entries (the real model has 32,768).
``tohoku-nlp/bert-base-japanese-char-v3``
    The character-level sibling: MeCab, then single characters (``subword_tokenizer_type: character``); a small
    configuration (2 layers, 4 heads, 64 dimensions): only its loading and tokenization are tested.
``cl-tohoku/bert-base-japanese-whole-word-masking``
    The older model, whose tokenizer_config.json names no MeCab dictionary (it was trained with the IPA
    dictionary, transformers 4's default); small, like the char model.

With ``HF_HUB_OFFLINE=1``, ``HF_HOME=<root>`` and ``HF_HUB_CACHE=<root>/hub`` (:func:`env`),
``mixlib.load_encoder("tohoku-nlp/bert-base-japanese-v3")`` resolves to the stand-in (source ``"cache"``).
It lives outside the repository (default ``platformdirs.user_cache_dir("mixlib")/standin-ja-<rev>``; override
with ``$MIXLIB_STANDIN_JA_DIR``), about 350 MB, built in about 7 s on 2 cores, and is rebuilt when the recipe or the
book's text changes (older builds are removed then). Nothing asserts its numbers.

Command line::

    python tests/standin_ja.py --print-env     # build if needed, print the env vars (shell syntax)
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import standin  # noqa: E402  (tests/standin.py: the tree builder shared with the English stand-in)

REPO = Path(__file__).resolve().parents[1]
MODEL = "tohoku-nlp/bert-base-japanese-v3"
CHAR_MODEL = "tohoku-nlp/bert-base-japanese-char-v3"
WWM_MODEL = "cl-tohoku/bert-base-japanese-whole-word-masking"
#: bert-base-japanese-v3's published configuration: bert-base's sizes (as tests/standin.py's), its tokenizer class,
#: and the vocabulary size of the vocabulary built here (set when the model is written).
CONFIG = {**{k: v for k, v in standin.CONFIG.items() if k != "vocab_size"}, "tokenizer_class": "BertJapaneseTokenizer"}
#: the two models whose only test is loading and tokenization
SMALL = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128}
#: tokenizer_config.json as the hub repositories have them
TOKENIZER_CONFIGS = {
    MODEL: {"do_lower_case": False, "word_tokenizer_type": "mecab", "subword_tokenizer_type": "wordpiece",
            "mecab_kwargs": {"mecab_dic": "unidic_lite"}},
    CHAR_MODEL: {"do_lower_case": False, "word_tokenizer_type": "mecab", "subword_tokenizer_type": "character",
                 "mecab_kwargs": {"mecab_dic": "unidic_lite"}},
    WWM_MODEL: {"do_lower_case": False, "word_tokenizer_type": "mecab", "subword_tokenizer_type": "wordpiece"},
}
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
N_UNUSED = 10
VOCAB_MAX = 8000
SEED = 0
RECIPE_VERSION = 1


def book_text() -> str:
    """The book's own Japanese prose: every notebook's Markdown cells and book/*.md, in file-name order."""
    parts = []
    for nb in sorted((REPO / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        parts += ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    parts += [md.read_text(encoding="utf-8") for md in sorted((REPO / "book").glob("*.md"))]
    return "\n".join(parts)


def _words(text: str) -> list[str]:
    """MeCab (unidic-lite) words of every line, exactly as BertJapaneseTokenizer's word step makes them."""
    from transformers.models.bert_japanese.tokenization_bert_japanese import MecabTokenizer

    mecab = MecabTokenizer(do_lower_case=False, mecab_dic="unidic_lite")
    return [w for line in text.splitlines() if line.strip() for w in mecab.tokenize(line)]


def vocabularies(text: str | None = None) -> tuple[list[str], list[str]]:
    """(the WordPiece vocabulary, the character vocabulary) built from the book's text; deterministic."""
    from mixlib.japanese import PUNCTUATION_CHARS

    words = _words(book_text() if text is None else text)
    chars = collections.Counter(c for w in words for c in w)
    for c in PUNCTUATION_CHARS:  # a real vocabulary holds every punctuation mark, seen in the book or not
        chars[c] += 0 if c in chars else 1
    counts = collections.Counter(words)
    head = [*SPECIALS, *(f"[unused{i}]" for i in range(N_UNUSED))]
    by_freq = sorted(chars, key=lambda c: (-chars[c], c))
    char_vocab = head + by_freq
    wordpiece = head + by_freq + [f"##{c}" for c in by_freq]
    seen = set(wordpiece)
    for w, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(wordpiece) >= VOCAB_MAX:
            break
        if n >= 2 and w not in seen:
            wordpiece.append(w)
            seen.add(w)
    return wordpiece, char_vocab


def _revision(vocab: list[str], char_vocab: list[str]) -> str:
    key = [RECIPE_VERSION, SEED, CONFIG, SMALL, TOKENIZER_CONFIGS, vocab, char_vocab]
    return hashlib.sha1(json.dumps(key, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _cache_parent() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("mixlib"))


def default_root(revision: str) -> Path:
    env = os.environ.get("MIXLIB_STANDIN_JA_DIR", "").strip()
    if env:
        return Path(env).expanduser().resolve()
    return _cache_parent() / f"standin-ja-{revision[:12]}"


def _snapshot(root: Path, repo_id: str, revision: str) -> Path:
    return root / "hub" / f"models--{repo_id.replace('/', '--')}" / "snapshots" / revision


def _complete(root: Path, revision: str) -> bool:
    for repo_id in TOKENIZER_CONFIGS:
        snap = _snapshot(root, repo_id, revision)
        refs = root / "hub" / f"models--{repo_id.replace('/', '--')}" / "refs" / "main"
        need = ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json")
        if not (all((snap / f).is_file() for f in need) and refs.is_file() and refs.read_text().strip() == revision):
            return False
    return True


def _write_model(tmp: Path, repo_id: str, revision: str, vocab: list[str], config: dict) -> None:
    import torch
    from transformers import BertConfig, BertForMaskedLM

    snap = standin.hub_snapshot(tmp, repo_id, revision)
    config = {**config, "vocab_size": len(vocab)}
    torch.manual_seed(SEED)
    model = BertForMaskedLM(BertConfig(**config))
    standin.unzero(model, config)
    model.save_pretrained(snap, safe_serialization=True)
    # save_pretrained drops tokenizer_class from config.json's defaults? keep the hub repository's file as it is
    saved = json.loads((snap / "config.json").read_text(encoding="utf-8"))
    saved["tokenizer_class"] = "BertJapaneseTokenizer"
    (snap / "config.json").write_text(json.dumps(saved, indent=2), encoding="utf-8")
    (snap / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
    (snap / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIGS[repo_id], indent=2), encoding="utf-8")


def build(root: Path | None = None, *, quiet: bool = False) -> Path:
    """Build the three stand-ins under ``root`` (once; later calls return at once) and return ``root``."""
    vocab, char_vocab = vocabularies()
    revision = _revision(vocab, char_vocab)
    default = root is None and not os.environ.get("MIXLIB_STANDIN_JA_DIR", "").strip()
    root = Path(root) if root is not None else default_root(revision)

    def write(tmp: Path) -> None:
        _write_model(tmp, MODEL, revision, vocab, CONFIG)
        _write_model(tmp, CHAR_MODEL, revision, char_vocab, {**CONFIG, **SMALL})
        _write_model(tmp, WWM_MODEL, revision, vocab, {**CONFIG, **SMALL})
        (tmp / "revision.txt").write_text(revision)

    built = standin.build_tree(root, lambda r: _complete(r, revision), write, what=f"{MODEL} (and two more)", quiet=quiet)
    if default:  # an edited chapter makes a new vocabulary: older builds (350 MB each) go
        for old in root.parent.glob("standin-ja-*"):
            if old != root and old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
    return built


def revision_of(root: Path) -> str:
    return (Path(root) / "revision.txt").read_text().strip()


def env(root: Path | None = None) -> dict[str, str]:
    """Environment variables under which ``load_encoder("tohoku-nlp/bert-base-japanese-v3")`` resolves to the stand-in."""
    return standin.hf_env(build(root), MODEL)


def main(argv: list[str] | None = None) -> int:
    return standin.command_line(argv, env, __doc__.split("\n\n")[0], "MIXLIB_STANDIN_JA_DIR")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
