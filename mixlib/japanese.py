"""Japanese BERT-family encoders: their MeCab tokenizers, punctuation and vocabulary types.

The Tohoku University models (``tohoku-nlp/bert-base-japanese-v3`` and its
character-level sibling ``tohoku-nlp/bert-base-japanese-char-v3``, the older
``cl-tohoku/bert-base-japanese-whole-word-masking``) tokenize in two steps with
transformers' ``BertJapaneseTokenizer``: MeCab (through ``fugashi``, with a
dictionary installed as a Python package) splits a text into words, then
WordPiece (or single characters) splits the words. Those packages are the extra
``mixlib[ja]``; this module checks for them *before* anything is loaded, so that
a missing one is one line naming the extra, never a traceback from transformers.

Which dictionary
----------------
A model's ``tokenizer_config.json`` names its MeCab dictionary in
``mecab_kwargs.mecab_dic`` (v2 and v3: ``unidic_lite``). The first models
(``cl-tohoku/bert-base-japanese``, ``...-whole-word-masking``, ``...-char`` and
their ``-whole-word-masking`` siblings) name none: they were trained with the IPA
dictionary, transformers 4's default. transformers 5 changed the default to
``unidic_lite``, which splits words differently from the model's training, with
no warning. :func:`tokenizer_kwargs` gives such a model ``ipadic`` back.

Token categories
----------------
:data:`PUNCTUATION` is what :func:`mixlib.token_categories` counts as 句読点 for a
Japanese tokenizer (see :func:`is_japanese`); :data:`TYPES` and
:func:`token_type` are the vocabulary types of Maeda et al.'s Table 3 for a
Japanese vocabulary.
"""

from __future__ import annotations

import importlib.util
import json
import re
import unicodedata
from pathlib import Path
from typing import Any

__all__ = ["to_hiragana", "mecab_words", "EXTRA", "MODELS", "MODEL_DICTIONARIES", "MissingExtra", "PUNCTUATION", "PUNCTUATION_CHARS", "punctuation_ids",
           "is_japanese_name", "TYPES", "is_japanese", "token_type", "tokenizer_kwargs",
           "check_installed", "needs_japanese_tokenizer", "install_on_colab", "feature_sets", "WEEKDAYS", "PARTICLES",
           "AUXILIARIES", "ONBIN_STEMS"]

#: How to install what the Japanese tokenizers need.
EXTRA = 'pip install -e ".[ja]" in the book\'s clone (mixlib is not on PyPI)'
#: Japanese encoders known to work (hub ids; the first is the default Japanese choice) -> the MeCab dictionary
#: each was trained with (what its tokenizer needs besides fugashi).
MODEL_DICTIONARIES = {
    "tohoku-nlp/bert-base-japanese-v3": "unidic_lite",
    "tohoku-nlp/bert-base-japanese-char-v3": "unidic_lite",
    "cl-tohoku/bert-base-japanese-whole-word-masking": "ipadic",
    "tohoku-nlp/bert-base-japanese-v2": "unidic_lite",
    "tohoku-nlp/bert-large-japanese-v2": "unidic_lite",
    "cl-tohoku/bert-base-japanese-v3": "unidic_lite",
    "cl-tohoku/bert-base-japanese-char-v3": "unidic_lite",
    "cl-tohoku/bert-base-japanese": "ipadic",
    # the rest of the Tohoku family, under both organisation names (tohoku-nlp is cl-tohoku's current name)
    "tohoku-nlp/bert-base-japanese": "ipadic",
    "tohoku-nlp/bert-base-japanese-whole-word-masking": "ipadic",
    "tohoku-nlp/bert-base-japanese-char": "ipadic",
    "tohoku-nlp/bert-base-japanese-char-whole-word-masking": "ipadic",
    "cl-tohoku/bert-base-japanese-char": "ipadic",
    "cl-tohoku/bert-base-japanese-char-whole-word-masking": "ipadic",
    "tohoku-nlp/bert-base-japanese-char-v2": "unidic_lite",
    "cl-tohoku/bert-base-japanese-v2": "unidic_lite",
    "cl-tohoku/bert-base-japanese-char-v2": "unidic_lite",
    "tohoku-nlp/bert-large-japanese": "unidic_lite",
    "tohoku-nlp/bert-large-japanese-char": "unidic_lite",
    "tohoku-nlp/bert-large-japanese-char-v2": "unidic_lite",
    "cl-tohoku/bert-large-japanese": "unidic_lite",
    "cl-tohoku/bert-large-japanese-v2": "unidic_lite",
    "cl-tohoku/bert-large-japanese-char": "unidic_lite",
    "cl-tohoku/bert-large-japanese-char-v2": "unidic_lite",
}
MODELS = tuple(MODEL_DICTIONARIES)
#: The dictionary a MeCab tokenizer_config.json without ``mecab_kwargs`` was trained with (transformers 4's default).
LEGACY_DICTIONARY = "ipadic"
#: mecab_dic -> the Python package that holds it (``None``: MeCab's system dictionary, chosen by mecab_option).
DICTIONARY_PACKAGES = {"ipadic": "ipadic", "unidic_lite": "unidic_lite", "unidic": "unidic"}

#: Japanese punctuation counted as 句読点 (after Kobayashi et al.'s period and comma): the ideographic comma and full
#: stop, corner brackets, the middle dot, the ellipsis, ! and ?, in full-width, half-width and ASCII forms. The
#: tokenizers apply NFKC first, so a text's ！ reaches the vocabulary as "!" and … as "..."; all forms are listed.
PUNCTUATION = (
    "、", "。", "「", "」", "『", "』", "・", "…", "！", "？", "，", "．",  # full-width
    "､", "｡", "｢", "｣", "･",  # half-width
    ".", ",", "!", "?", "...",  # what NFKC makes of ．，！？…
)


#: The characters of :data:`PUNCTUATION`: a Japanese vocabulary entry made only of them, alone or as a ``##``
#: continuation (MeCab with ipadic joins a run of symbols into one word, which WordPiece then splits: ``！！」``
#: becomes ``!`` ``##!`` ``##」``), is punctuation.
PUNCTUATION_CHARS = frozenset("".join(PUNCTUATION))


def punctuation_ids(tokenizer: Any) -> set[int]:
    """Ids of every vocabulary entry that is :data:`PUNCTUATION_CHARS` only, with or without a leading ``##``."""
    ids = set()
    for token, i in tokenizer.get_vocab().items():
        body = token[2:] if token.startswith("##") else token
        if body and set(body) <= PUNCTUATION_CHARS:
            ids.add(int(i))
    return ids


#: Katakana (ァ … ヶ) to hiragana (ぁ … ゖ): the same letters 0x60 code points lower.
_KATA_TO_HIRA = {c: c - 0x60 for c in range(ord("ァ"), ord("ヶ") + 1)}


def _unidic_lite_tagger(where: str) -> Any:
    """MeCab with unidic-lite, as bert-base-japanese-v3's tokenizer runs it (MissingExtra where it is not installed)."""
    _require("unidic_lite", where)
    import fugashi
    import unidic_lite

    return fugashi.Tagger(f'-d "{unidic_lite.DICDIR}" -r "{Path(unidic_lite.DICDIR) / "mecabrc"}"')


def mecab_words(text: str) -> list[str]:
    """``text`` split into words by MeCab with unidic-lite, the first step of bert-base-japanese-v3's tokenizer
    (needs ``mixlib[ja]`` but no model: chapter 13 shows the split even where the model cannot be loaded)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}.")
    text = unicodedata.normalize("NFKC", text)  # as the tokenizer does before MeCab (normalize_text)
    return [w.surface for w in _unidic_lite_tagger("mecab_words")(text)]


def to_hiragana(text: str, *, tagger: Any = None) -> str:
    """``text`` written in hiragana, word by word as MeCab (unidic-lite) reads it: 「東京の大学で学んだ。」 →
    「とうきょうのだいがくでまなんだ。」.

    A word is replaced by its kana spelling (UniDic's ``kana`` field: は and を stay は and を, as they are
    written, not as they are pronounced), turned from katakana into hiragana; a word without one (punctuation,
    Latin letters, digits MeCab does not read) is kept as it is. Spaces are dropped, as MeCab drops them.
    Chapter 13 uses it as a control: the same modern sentences in the script the 百人一首 are written in.
    Needs ``mixlib[ja]`` (fugashi and unidic-lite); ``tagger``: a ``fugashi.Tagger`` to reuse.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}.")
    tagger = tagger or _unidic_lite_tagger("to_hiragana")
    out = []
    for word in tagger(text):
        kana = getattr(word.feature, "kana", None)
        out.append(kana.translate(_KATA_TO_HIRA) if kana and kana != "*" else word.surface)
    return "".join(out)


def is_japanese_name(name: str) -> bool:
    """A known Japanese model (:data:`MODELS`), or a hub id that says it is one (``japanese`` in its name)."""
    return name in MODEL_DICTIONARIES or "japanese" in name.lower()


class MissingExtra(ImportError):
    """A package of the extra ``mixlib[ja]`` is not installed (the message says which and how to install it)."""


def is_japanese(tokenizer: Any) -> bool:
    """True for transformers' ``BertJapaneseTokenizer`` (MeCab, Sudachi or Juman++ words, then subwords)."""
    tok = getattr(tokenizer, "tokenizer", tokenizer)  # an Encoder or a tokenizer
    return any(c.__name__ == "BertJapaneseTokenizer" for c in type(tok).__mro__)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or half-removed install
        return False


def needs_japanese_tokenizer(config: Any) -> bool:
    """True when a model's config names ``BertJapaneseTokenizer`` (the Tohoku models' config.json does)."""
    name = getattr(config, "tokenizer_class", None) if not isinstance(config, dict) else config.get("tokenizer_class")
    return isinstance(name, str) and name.startswith("BertJapanese")


def tokenizer_kwargs(tokenizer_config: dict[str, Any], where: str = "the model") -> dict[str, Any]:
    """Check that what a ``BertJapaneseTokenizer`` config needs is installed; the keyword arguments to load it with.

    Parameters
    ----------
    tokenizer_config : dict
        The model's ``tokenizer_config.json``.
    where : str
        The model, for messages.

    Returns
    -------
    dict
        ``{"mecab_kwargs": {"mecab_dic": "ipadic"}}`` for a MeCab tokenizer that names no dictionary (the models
        trained with transformers 4's default), else ``{}``.

    Raises
    ------
    MissingExtra
        fugashi or the dictionary package is not installed (one line naming ``mixlib[ja]``).
    ValueError
        A word tokenizer other than MeCab (Sudachi, Juman++), which the extra does not cover.
    """
    word = tokenizer_config.get("word_tokenizer_type", "basic")
    if not tokenizer_config.get("do_word_tokenize", True) or word == "basic":
        return {}
    if word != "mecab":
        tools = {"sudachi": "sudachipy and sudachidict_core", "jumanpp": "Juman++ and rhoknp"}.get(word, repr(word))
        raise ValueError(f"{where}'s tokenizer splits words with {word!r}, which needs {tools}; mixlib[ja] covers "
                         "MeCab models only (e.g. tohoku-nlp/bert-base-japanese-v3): install those packages yourself.")
    extra: dict[str, Any] = {}
    mecab = tokenizer_config.get("mecab_kwargs")
    if mecab is None:
        mecab = {"mecab_dic": LEGACY_DICTIONARY}
        extra = {"mecab_kwargs": dict(mecab)}
    _require(mecab.get("mecab_dic", "unidic_lite"), where)  # unidic_lite: transformers 5's default without the key
    return extra


def _require(dictionary: str | None, where: str) -> None:
    """MissingExtra (one line, saying how to install it) unless fugashi and ``dictionary``'s package are installed."""
    need = ["fugashi"] + ([DICTIONARY_PACKAGES[dictionary]] if dictionary in DICTIONARY_PACKAGES else [])
    missing = [m for m in need if not _installed(m)]
    if missing:
        names = " and ".join(m.replace("_", "-") for m in missing)
        how = EXTRA if "unidic" not in missing else (
            "pip install unidic, then python -m unidic download (the full UniDic, not part of mixlib[ja])"
            + (f"; and {EXTRA} for fugashi" if "fugashi" in missing else ""))
        raise MissingExtra(f"{where} tokenizes Japanese with MeCab, which needs {names} (not installed): {how}")


def read_tokenizer_config(path_or_name: str) -> dict[str, Any]:
    """A model's ``tokenizer_config.json`` from a local folder or the local Hugging Face cache ({} where it has none)."""
    folder = Path(path_or_name).expanduser()
    if folder.is_dir():
        file = folder / "tokenizer_config.json"
    else:
        from huggingface_hub import try_to_load_from_cache

        try:
            hit = try_to_load_from_cache(path_or_name, "tokenizer_config.json")
        except ValueError:  # not a hub id (e.g. a path that does not exist): nothing cached under it
            return {}
        file = Path(hit) if isinstance(hit, str) else None
    if file is None or not file.is_file():
        return {}
    try:
        found = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:  # a ValueError: an OSError would read as "not in the cache" and fall back
        raise ValueError(f"{file} cannot be read as JSON ({err}); save or download the model again.") from err
    return found if isinstance(found, dict) else {}


def check_installed(name: str) -> None:
    """For a known Japanese hub id, fail before any download when fugashi or that model's dictionary is missing."""
    if name in MODEL_DICTIONARIES:
        _require(MODEL_DICTIONARIES[name], repr(name))


#: The modules mixlib[ja] provides (fugashi, and the two dictionaries of the Tohoku models).
EXTRA_MODULES = ("fugashi", "unidic_lite", "ipadic")
#: Seconds the installer may take on Colab (it downloads the dictionaries, about 60 MB).
INSTALL_TIMEOUT = 1800


def install_on_colab(clone: str | Path | None = None, *, run: Any = None) -> bool:
    """Add mixlib[ja] to a Colab runtime with the book's installer (``mixlib/_colab.py --extra ja``).

    The installer is the one the notebooks' first cell uses: it installs what the extra needs that the
    runtime lacks and refuses, in one line, to replace anything the runtime has. Nothing happens when
    fugashi and both dictionaries are importable already (a second run, or a machine that has them).

    Parameters
    ----------
    clone : path, optional
        The repository folder holding ``pyproject.toml`` (default: the one this mixlib is installed from,
        editable, as the first cell installs it).
    run : callable, optional
        ``subprocess.run`` (a test passes a stand-in).

    Returns
    -------
    bool
        True when something was installed, False when everything was already there.

    Raises
    ------
    MissingExtra
        The installer refused or failed: its one line, and what to do.
    """
    import subprocess
    import sys

    if all(_installed(m) for m in EXTRA_MODULES):
        return False
    clone = Path(clone) if clone is not None else Path(__file__).resolve().parent.parent
    if not (clone / "pyproject.toml").is_file():
        raise MissingExtra(f"{clone} holds no pyproject.toml (mixlib is not installed from the book's clone): {EXTRA}")
    run = subprocess.run if run is None else run
    cmd = [sys.executable, str(clone / "mixlib" / "_colab.py"), str(clone), "--extra", "ja"]
    try:
        done = run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise MissingExtra(f"installing mixlib[ja] did not finish in {INSTALL_TIMEOUT} s (check the network, then run "
                           "the cell again)") from None
    said = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        raise MissingExtra(f"mixlib[ja] was not installed: {said.splitlines()[-1] if said else 'no output'}")
    importlib.invalidate_caches()  # the new packages are importable in this kernel without a restart
    print(said)
    return True


# ---------------------------------------------------------------------------
# vocabulary types (Maeda et al.'s Table 3, for a Japanese vocabulary)
# ---------------------------------------------------------------------------

#: Token types of a Japanese vocabulary, in the order used for codes, tables and tie-breaking.
TYPES: tuple[str, ...] = ("漢字", "ひらがな", "カタカナ", "混在", "ラテン文字", "その他の文字", "サブワード", "数字", "記号",
                          "特殊", "タグ")

#: Marks that belong to the script around them: the prolonged-sound mark, iteration marks.
_HIRA_MARKS = {"ゝ", "ゞ"}
_KATA_MARKS = {"ー", "ヽ", "ヾ"}
#: kanji-side marks: iteration and closing marks, the ideographic zero, and the small ヶ/ヵ of counters (ヶ月, ヵ国)
_KANJI_MARKS = {"々", "〻", "〆", "〇", "ヶ", "ヵ"}


def _script(c: str) -> str:
    """kanji, hira, kata, latin, digit, hira_mark (ゝゞ), kata_mark (ー ヽ ヾ), other (letters of other scripts), or sym."""
    if c in _HIRA_MARKS:
        return "hira_mark"
    if c in _KATA_MARKS:
        return "kata_mark"
    if c in _KANJI_MARKS:
        return "kanji"
    cat = unicodedata.category(c)
    if cat[0] == "N":
        return "digit"
    if cat[0] in "PSZC":
        return "sym"
    name = unicodedata.name(c, "")
    if name.startswith(("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH")):
        return "kanji"
    if name.startswith("HIRAGANA"):
        return "hira"
    if name.startswith(("KATAKANA", "HALFWIDTH KATAKANA")):
        return "kata"
    if "LATIN" in name:
        return "latin"
    return "other"


#: Reserved placeholder tokens, which no pretraining text contains: ``[unused7]``, and ``<unused7>`` in the Tohoku
#: vocabularies.
_RESERVED = re.compile(r"^(?:\[unused\d+\]|<unused\d+>)$")


def token_type(token: str | None, tags: set[str] | frozenset[str] = frozenset(), special: set[str] | frozenset[str] = frozenset()) -> str:
    """The type of one token of a Japanese vocabulary, by these rules, in order (first match wins):

    1. **タグ** – the tokenizer's ``[CLS]``, ``[SEP]``, ``[MASK]``, ``[UNK]`` (given as ``tags``).
    2. **特殊** – ``[PAD]`` (in ``special``), the reserved placeholders ``[unused<digits>]`` and ``<unused<digits>>``
       (the form of the Tohoku vocabularies) and the empty string.
    3. **サブワード** – a WordPiece continuation: ``##`` and at least one character (``##的``, ``##る``).
    4. **数字** – every character a Unicode number: ``2024``, ``３``, ``½`` (漢数字 such as 三 are 漢字).
    5. **記号** – every character punctuation, a symbol or a space: ``、`` ``。`` ``「`` ``!`` ``→``.
    6. By script, after setting aside the marks that follow the script around them (``ー``, ``ゝ``, ``ヽ`` ...;
       alone, ``ゝ`` ``ゞ`` are ひらがな and ``ー`` ``ヽ`` ``ヾ`` カタカナ; ``々`` ``〻`` ``〆`` ``〇`` and the counters' small
       ``ヶ`` ``ヵ`` count as kanji, so ``ヶ月`` is 漢字), when every remaining character is of one script:
       **漢字** (``日本``, ``々``), **ひらがな** (``ます``, ``ちょっと``), **カタカナ** (``データ``, ``ー``), **ラテン文字** (Latin
       letters, digits allowed: ``BERT``, ``mp3``), **その他の文字** (Greek, Cyrillic, Hangul ...: ``α``).
    7. **混在** – everything else: kanji with kana (``食べ``, ``お茶``), digits with kanji (``3月``), Latin with kana.

    Why these types: a MeCab-then-WordPiece vocabulary holds kanji words (``日本``, ``研究``), kana function
    words and endings (``ます``, ``ない``), katakana loanwords, words that mix kanji and kana (MeCab keeps
    okurigana with the stem: ``食べ``, ``言っ``), Latin words and acronyms, ``##`` pieces (in a Japanese
    vocabulary mostly single characters, which is how an unknown word is spelled out), digits, symbols and the
    special tokens. So 混在 is a type of its own, not a residue, and 漢数字 count as 漢字 (they are written and
    embedded as kanji). The rules are fixed string rules (no dictionary): the same token always gets the same type.

    Counts: on the offline stand-in's vocabulary (``tests/standin_ja.py``: 5,091 entries from this book's own
    text, 2026-11-27) the rules give 漢字 1,415, サブワード 1,066, ラテン文字 1,023 (the book's code words),
    混在 654, ひらがな 309, 記号 287, カタカナ 215, 数字 102, 特殊 11, その他の文字 5, タグ 4. The real
    32,768-entry vocabulary cannot be downloaded here; ``python -m mixlib clusters --model
    tohoku-nlp/bert-base-japanese-v3`` writes its counts (``token_types.csv``) and every token's type
    (``tokens.csv``).

    Examples
    --------
    >>> [token_type(t) for t in ["日本", "ます", "データ", "食べ", "BERT", "##的", "2024", "、", "[unused3]"]]
    ['漢字', 'ひらがな', 'カタカナ', '混在', 'ラテン文字', 'サブワード', '数字', '記号', '特殊']
    """
    if not token:
        return "特殊"
    if token in tags:
        return "タグ"
    if token in special or _RESERVED.match(token):  # [unused7], and <unused7> in the Tohoku vocabularies
        return "特殊"
    if token.startswith("##") and len(token) > 2:
        return "サブワード"
    scripts = {_script(c) for c in token}
    if scripts == {"digit"}:
        return "数字"
    if scripts == {"sym"}:
        return "記号"
    marks = scripts & {"hira_mark", "kata_mark"}
    letters = scripts - marks
    if not letters:  # marks alone: ゝ is hiragana, ー and ヽ katakana
        return "ひらがな" if marks == {"hira_mark"} else "カタカナ"
    if letters == {"kanji"}:
        return "漢字"
    if letters == {"hira"}:
        return "ひらがな"
    if letters == {"kata"}:
        return "カタカナ"
    if letters in ({"latin"}, {"latin", "digit"}):
        return "ラテン文字"
    if letters == {"other"}:
        return "その他の文字"
    return "混在"


# ---------------------------------------------------------------------------
# feature sets for the psi search (chapter 13), the counterparts of chapter 11's English lists
# ---------------------------------------------------------------------------

#: 曜日: the seven day names as MeCab (unidic) splits 月曜日 (月曜 / 日).
WEEKDAYS = ("月曜", "火曜", "水曜", "木曜", "金曜", "土曜", "日曜")
#: 助詞: case, binding, adverbial, conjunctive and sentence-final particles and the nominalising の, one form each, as
#: MeCab (unidic) leaves them (ので and のに come out as の / で and の / に, so they are not listed).
PARTICLES = ("が", "を", "に", "へ", "と", "で", "から", "より", "まで", "は", "も", "の", "や", "か", "ね", "よ", "ば", "て",
             "けれど", "しか", "だけ", "ほど", "など", "こそ", "さえ")
#: 助動詞: auxiliaries in the forms MeCab (unidic) leaves them (ました -> まし / た, なかった -> なかっ / た, だった -> だっ / た).
#: The volitional forms stay inside their word (書こう, ましょう, でしょう, だろう are one token each), so う and よう are not
#: listed. Some forms are also other words (で, ない, なく): the set is the vocabulary entries, not their uses.
AUXILIARIES = ("た", "だ", "だっ", "です", "でし", "ます", "まし", "ませ", "ましょう", "でしょう", "だろう", "ない", "なかっ",
               "なく", "れる", "られる", "られ", "せる", "させる", "させ", "たい", "たかっ", "らしい", "べき")
#: 音便形: verb stems before た／て that changed their sound (書く -> 書い, 読む -> 読ん, 言う -> 言っ), which MeCab
#: splits off (書いた -> 書い / た). Unlike chapter 11's English set (several forms of the same verbs), this is one form
#: across many verbs.
ONBIN_STEMS = ("書い", "聞い", "歩い", "働い", "置い", "泳い", "急い", "読ん", "飲ん", "遊ん", "呼ん", "住ん", "選ん", "学ん",
               "死ん", "行っ", "言っ", "思っ", "持っ", "使っ", "作っ", "立っ", "待っ", "取っ", "帰っ", "入っ", "知っ", "買っ",
               "会っ", "払っ", "習っ", "送っ", "残っ", "変わっ", "始まっ", "終わっ", "違っ", "撮っ", "座っ", "走っ")


def feature_sets(tokenizer: Any) -> dict[str, list[int]]:
    """The Japanese token sets of the feature search, as ids of ``tokenizer``'s vocabulary.

    ``年だけ`` is every vocabulary entry of four digits from 1000 to 2099 (as chapter 11's English set), then
    ``曜日`` (:data:`WEEKDAYS`), ``助詞`` (:data:`PARTICLES`), ``助動詞`` (:data:`AUXILIARIES`) and ``音便形``
    (:data:`ONBIN_STEMS`). Only whole entries count (``##`` pieces are other tokens); entries the vocabulary lacks
    are left out, so a set may be smaller than its list (or empty, with a small vocabulary).
    """
    vocab = tokenizer.get_vocab()
    years = sorted(t for t in vocab if t.isdigit() and t.isascii() and len(t) == 4 and 1000 <= int(t) <= 2099)
    words = {"年だけ": years, "曜日": list(WEEKDAYS), "助詞": list(PARTICLES), "助動詞": list(AUXILIARIES),
             "音便形": list(ONBIN_STEMS)}
    return {name: [vocab[t] for t in toks if t in vocab] for name, toks in words.items()}
