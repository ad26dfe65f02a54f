"""Texts for the analyses: validated tokenisation, [MASK]ing, token categories.

Analysis A (:mod:`mixlib.mixing`) feeds BERT with texts in which 12% of the
ordinary tokens are replaced by ``[MASK]``, as in pre-training (Kobayashi et
al.'s official code masks ``max(1, floor(0.12 n))`` of a sequence's ``n``
ordinary tokens; :func:`mask_tokens` does the same by default), and reports its numbers per token category (their Fig. 2):
``[CLS]``, ``[SEP]``, ``[MASK]``, punctuation (``.`` and ``,``) and the rest.

* :func:`tokenize` -- texts or sentence pairs -> a padded batch of tensors,
  with clear errors for bad input and a warning when something is truncated.
* :func:`mask_tokens` -- the same, with a deterministic 12% of each
  sequence's ordinary tokens (counted as the official code does,
  :func:`mask_count`) replaced by the mask token.
* :func:`token_categories` -- the category of every token of a batch.

Sentence pairs ``(a, b)`` become ``[CLS] a [SEP] b [SEP]`` with
``token_type_ids`` 0 for the first segment and 1 for the second (for RoBERTa,
``<s> a </s></s> b </s>``: its tokenizer's own pair format).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from .texts import has_content

__all__ = ["PAD_CATEGORY", "PUNCTUATION", "MASK_COUNTS", "tokenize", "truncate_text", "mask_count", "mask_tokens",
           "token_categories", "category_names", "special_tokens_as_text"]

#: Category given to padding positions (never counted in any statistic).
PAD_CATEGORY = "[PAD]"
#: The punctuation category of the paper: the period and the comma (a Japanese tokenizer's is
#: :data:`mixlib.japanese.PUNCTUATION`).
PUNCTUATION = (".", ",")
#: Prefixes that subword vocabularies put in front of a word-initial piece.
_WORD_PREFIXES = ("Ġ", "▁")


def category_names() -> tuple[str, ...]:
    """The five token categories in display order: ``[CLS]``, ``[SEP]``, ``[MASK]``, 句読点, その他."""
    from .plots import CATEGORY_ORDER

    return tuple(CATEGORY_ORDER)


def _tokenizer_of(enc_or_tokenizer: Any) -> Any:
    return getattr(enc_or_tokenizer, "tokenizer", enc_or_tokenizer)


def _max_positions(enc_or_tokenizer: Any) -> int:
    """The longest input the model accepts (512 for BERT-base)."""
    n = getattr(enc_or_tokenizer, "max_positions", None)
    if n is None:
        n = getattr(_tokenizer_of(enc_or_tokenizer), "model_max_length", 512)
    return int(min(int(n), 512)) if n else 512


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------


def _check_texts(texts: Any) -> tuple[list[Any], bool]:
    """Validate ``texts``; return the list and whether it holds sentence pairs."""
    if isinstance(texts, str):
        texts = [texts]
    if isinstance(texts, Mapping) or not isinstance(texts, Sequence) and not hasattr(texts, "__iter__"):
        raise TypeError(
            f"texts must be a list of strings or of (str, str) sentence pairs; got {type(texts).__name__}."
        )
    texts = list(texts)
    if not texts:
        raise ValueError("texts is empty; give at least one string (or one (str, str) sentence pair).")
    first = texts[0]
    pairs = isinstance(first, (tuple, list))

    def is_pair(item: Any) -> bool:
        return isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(s, str) for s in item)

    for i, item in enumerate(texts):
        if (isinstance(item, str) and pairs) or (is_pair(item) and not pairs and isinstance(first, str)):
            kind = ("a sentence pair", "a single text") if pairs else ("a single text", "a sentence pair")
            raise ValueError(f"texts[{i}] is {kind[1]} but texts[0] is {kind[0]}: one batch holds either single "
                             "texts or (str, str) sentence pairs, not both; analyse them in two calls.")
        if pairs:
            if not is_pair(item):
                raise TypeError(
                    f"texts[{i}] is {item!r} ({type(item).__name__}); texts[0] is a sentence pair, so every item "
                    "must be a pair (str, str). Mixing single texts and pairs in one batch is not allowed."
                )
            if not has_content(item[0]) or not has_content(item[1]):
                raise ValueError(f"texts[{i}] has an empty sentence (or one of only zero-width or control characters); "
                                 "both sentences of a pair must contain something to tokenize.")
        else:
            if not isinstance(item, str):
                raise TypeError(
                    f"texts[{i}] is a {type(item).__name__} ({item!r:.60}); every item must be a str "
                    "(or every item a (str, str) sentence pair)."
                )
            if not has_content(item):
                raise ValueError(f"texts[{i}] is empty (or only whitespace, zero-width or control characters); "
                                 "every text must contain something to tokenize.")
    return texts, pairs


def check_atol(atol: Any) -> float:
    """The self-checks' tolerance: a positive, finite number (NaN would make every check fail and blame the
    model, infinity would switch the checks off)."""
    if isinstance(atol, bool) or not isinstance(atol, (int, float, np.integer, np.floating)) \
            or not math.isfinite(atol) or atol <= 0:
        raise ValueError(f"atol={atol!r} is not allowed: the self-checks' tolerance must be a positive, finite "
                         "number (default 1e-4).")
    return float(atol)


def _check_max_length(max_length: Any, limit: int) -> int:
    if not isinstance(max_length, (int, np.integer)) or isinstance(max_length, bool):
        raise TypeError(f"max_length must be an int; got {type(max_length).__name__}.")
    max_length = int(max_length)
    if not 4 <= max_length <= limit:
        raise ValueError(f"max_length={max_length} is out of range: the model accepts 4..{limit} tokens per sequence.")
    return max_length


# ---------------------------------------------------------------------------
# tokenisation
# ---------------------------------------------------------------------------


def tokenize(enc: Any, texts: Any, *, max_length: int | None = None, return_special_tokens_mask: bool = False,
             keep_special_tokens: bool = False) -> dict[str, torch.Tensor]:
    """Tokenise texts (or sentence pairs) into one padded batch.

    Parameters
    ----------
    enc : Encoder or tokenizer
        The encoder whose tokenizer is used.
    texts : list of str, or list of (str, str)
        One text per sequence, or one sentence pair per sequence
        (``[CLS] a [SEP] b [SEP]``). A single ``str`` is treated as ``[str]``.
    max_length : int, optional
        Longest sequence in tokens, special tokens included. Default: what the
        model accepts (512 for BERT). Longer input is truncated with a
        :class:`UserWarning` that says how many texts were cut (pairs are cut
        from the longer sentence first; a pair cut to nothing of one sentence
        is a warning of its own). A very long text (more than
        ``max(LONG_CHARS, LONG_CHARS_PER_TOKEN * max_length)`` characters) is
        read piece by piece, cut where no token can change, so that memory
        follows ``max_length`` rather than the longest line; the tokens are
        those of the whole text.
    return_special_tokens_mask : bool, default False
        Also return ``special_tokens_mask`` (1 at ``[CLS]``/``[SEP]``/padding).
    keep_special_tokens : bool, default False
        How ``[MASK]``, ``[SEP]``, ``[CLS]`` ... *written in a text* are read.
        By default they are plain text (``[MASK]`` becomes ``[``, ``mask``,
        ``]`` for BERT; :func:`special_tokens_as_text`), the one rule of every
        mixlib function and command (``python -m mixlib ... --keep-special-tokens``
        is the same switch); True reads them as the special tokens. The
        ``[CLS]``/``[SEP]`` the tokenizer adds are special either way.

    Returns
    -------
    dict of str to torch.Tensor
        ``input_ids`` and ``attention_mask`` ``(B, N)`` (int64), plus
        ``token_type_ids`` when the tokenizer makes them; padded on the right to
        the longest sequence.

    Raises
    ------
    ValueError
        ``texts`` is empty, an item is empty, or ``max_length`` is out of range.
    TypeError
        An item is not a str (or not a pair of str).

    Examples
    --------
    >>> batch = mixlib.tokenize(enc, ["The cat sat.", "A dog ran away."])
    >>> batch["input_ids"].shape  # (B, N)
    torch.Size([2, 7])
    >>> enc.tokenizer.convert_ids_to_tokens(batch["input_ids"][0])
    ['[CLS]', 'the', 'cat', 'sat', '.', '[SEP]', '[PAD]']
    >>> batch["attention_mask"][0].tolist()
    [1, 1, 1, 1, 1, 1, 0]
    """
    tok = _tokenizer_of(enc)
    texts, pairs = _check_texts(texts)
    limit = _max_positions(enc)
    max_length = limit if max_length is None else _check_max_length(max_length, limit)
    args: tuple[Any, ...] = ([a for a, _ in texts], [b for _, b in texts]) if pairs else (texts,)

    with special_tokens_as_text(tok, not keep_special_tokens):
        return _tokenize(tok, texts, args, max_length, return_special_tokens_mask)


#: A sentence longer than ``max(LONG_CHARS, LONG_CHARS_PER_TOKEN * max_length)`` characters is tokenized piece by
#: piece (:func:`_bounded`): memory follows ``max_length``, not the longest line of a corpus.
LONG_CHARS = 4096
LONG_CHARS_PER_TOKEN = 16
#: Tokens kept beyond ``max_length`` in a capped sentence, so that the tokenizer's own truncation decides.
_SPARE = 8
# where a long sentence may be cut without changing a token: before a run of ASCII spaces (WordPiece splits there;
# byte-level BPE attaches the space to the next word; other characters Python calls space are not spaces to every
# tokenizer: BERT deletes U+0085 and keeps U+001F inside a word), or after a Japanese full stop followed by a
# letter or digit (so that no run of punctuation is split)
_CUT = re.compile(r"(?<! ) |(?<=[。！？])(?=[^\W_])")
# a WordPiece tokenizer whose normalizer sets every CJK ideograph apart (BERT's handle_chinese_chars) also splits
# after each ideograph: a Chinese line without spaces can be cut there too
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
_CUT_CJK = re.compile(_CUT.pattern + f"|(?<=[{_CJK}])")


def _cut_of(tok: Any) -> re.Pattern:
    """Where ``tok`` splits for sure: :data:`_CUT`, and after every ideograph for BERT's own normalizer."""
    normalizer = getattr(getattr(tok, "backend_tokenizer", None), "normalizer", None)
    return _CUT_CJK if type(normalizer).__name__ == "BertNormalizer" and getattr(normalizer, "handle_chinese_chars", False) else _CUT


def _pieces(text: str, size: int, cut: re.Pattern = _CUT) -> Iterator[str]:
    """``text`` in consecutive pieces of at least ``size`` characters, each cut where ``cut`` allows."""
    start = 0
    while len(text) - start > size:
        m = cut.search(text, start + size)
        if m is None:
            break
        yield text[start : m.start()]
        start = m.start()
    yield text[start:]


def _bounded(tok: Any, text: str, size: int) -> list[tuple[int, int]]:
    """``(end, tokens)`` after each piece of a long ``text``: its prefix ``text[:end]`` has ``tokens`` tokens (no special
    ones), the first tokens of the whole text; the last entry is the whole text's exact count."""
    marks, end, count = [], 0, 0
    for piece in _pieces(text, size, _cut_of(tok)):
        end += len(piece)
        count += len(tok(piece, add_special_tokens=False, verbose=False)["input_ids"])
        marks.append((end, count))
    return marks


def _capped(marks: list[tuple[int, int]], least: int) -> tuple[int, int]:
    """The shortest prefix ``(end, tokens)`` with more than ``least`` tokens (else the whole text)."""
    return next((m for m in marks if m[1] > least), marks[-1])


def _tokenize(tok: Any, texts: list, args: tuple, max_length: int, return_special_tokens_mask: bool) -> dict[str, torch.Tensor]:
    # A long sentence is replaced by a prefix cut between tokens that still holds more than max_length + _SPARE
    # of its tokens: the model sees the same tokens, and the tokenizer never holds a whole 6 MB line. Its exact
    # length (counted piece by piece) goes into the warning. In a pair of two long sentences the prefixes keep the
    # order of the full lengths, which is all that longest_first truncation looks at once both are cut.
    size = max(LONG_CHARS, LONG_CHARS_PER_TOKEN * max_length)
    columns = [list(col) for col in args]
    extra = [0] * len(texts)  # tokens of the full texts beyond their prefixes
    for i in range(len(texts)):
        marks = [_bounded(tok, col[i], size) if len(col[i]) > size else None for col in columns]
        if all(m is None for m in marks):
            continue
        cut = [_capped(m, max_length + _SPARE) if m is not None else None for m in marks]
        if len(columns) == 2 and all(m is not None for m in marks):
            (na, nb), (ca, cb) = (marks[0][-1][1], marks[1][-1][1]), (cut[0][1], cut[1][1])
            if na == nb:
                continue  # equal full lengths: the whole pair, as the tokenizer would read it anyway
            longer = 0 if na > nb else 1
            if cut[longer][1] <= cut[1 - longer][1]:
                cut[longer] = _capped(marks[longer], cut[1 - longer][1])
        for col, m, c in zip(columns, marks, cut):
            if m is not None:
                col[i] = col[i][: c[0]]
                extra[i] += m[-1][1] - c[1]
    # lengths without truncation, to warn about what truncation removes
    full = tok(*columns, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
    lengths = [len(ids) + more for ids, more in zip(full, extra)]
    too_long = [i for i, n in enumerate(lengths) if n > max_length]
    if too_long:
        warnings.warn(
            f"{len(too_long)} of {len(texts)} text(s) are longer than max_length={max_length} tokens "
            f"(longest: {max(lengths)} tokens, e.g. texts[{too_long[0]}]) and were truncated to {max_length} tokens.",
            UserWarning,
            stacklevel=3,
        )
    out = tok(
        *columns,
        add_special_tokens=True,
        truncation="longest_first" if too_long else False,
        max_length=max_length,
        padding="longest",
        return_tensors="pt",
        return_special_tokens_mask=return_special_tokens_mask or (len(columns) == 2 and bool(too_long)),
        verbose=False,
    )
    if len(columns) == 2 and too_long:
        _warn_lost_sentences(out, too_long, max_length)
    keys = ["input_ids", "attention_mask", "token_type_ids"] + (["special_tokens_mask"] if return_special_tokens_mask else [])
    return {k: out[k].long() for k in keys if k in out}


def _warn_lost_sentences(out: Any, rows: list[int], max_length: int) -> None:
    """One warning per truncated pair that kept no token of one of its sentences (naming it: ``texts[i]``).

    Read from the tokens the tokenizer added (``special_tokens_mask``), the same for every tokenizer: the first
    sentence is the run of ordinary tokens after the first added one, the second the run before the last
    (``[CLS] a [SEP] b [SEP]``, ``<s> a </s></s> b </s>``).
    """
    for i in rows:
        added = out["special_tokens_mask"][i][out["attention_mask"][i].bool()].tolist()
        marks = [j for j, a in enumerate(added) if a]
        kept = (marks[1] - marks[0] - 1, marks[-1] - marks[-2] - 1)
        for which, n in zip(("first", "second"), kept):
            if n == 0:
                warnings.warn(f"texts[{i}]: truncating the pair to max_length={max_length} tokens left nothing of its "
                              f"{which} sentence; give a larger max_length.", UserWarning, stacklevel=4)


#: How :func:`mask_tokens` turns ``rate * n`` into a count: ``"floor"`` (the official code) or ``"round"``.
MASK_COUNTS = ("floor", "round")


def truncate_text(enc: Any, text: str, n_tokens: int) -> str:
    """The longest beginning of ``text`` that the tokenizer splits into at most ``n_tokens`` tokens.

    The cut is made in the text, not in the token list, so the result is a plain string any tokenizer reads again
    as it was split (turning tokens back into text would put spaces between Japanese words, which changes how MeCab
    splits them, or write ``[UNK]`` as text). Beginnings are tried from the longest down (a token count does not
    grow steadily with the characters, so bisection could stop at a shorter one); where one more character adds two
    tokens, the result has fewer than ``n_tokens``. Chapter 13 cuts modern sentences to the poems' lengths with it
    (a control whose lengths are equal by construction).

    Parameters
    ----------
    enc : Encoder or tokenizer
        Anything with the tokenizer's ``tokenize`` (special tokens are not counted).
    text : str
        The text to cut.
    n_tokens : int
        Most tokens the result may have; at least 1.

    Returns
    -------
    str
        ``text`` itself when it has at most ``n_tokens`` tokens; otherwise its longest beginning that does, with
        trailing whitespace removed ("" when not even the first character does).

    Raises
    ------
    TypeError
        ``text`` is not a str.
    ValueError
        ``n_tokens`` is not an int >= 1.

    Examples
    --------
    >>> mixlib.truncate_text(enc, "The cat sat on the mat.", 3)
    'The cat sat'
    >>> mixlib.truncate_text(enc, "The cat sat.", 10)  # short enough already: unchanged
    'The cat sat.'
    """
    tok = _tokenizer_of(enc)
    if not isinstance(text, str):
        raise TypeError(f"text is {type(text).__name__}; give one str.")
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, (int, np.integer)) or n_tokens < 1:
        raise ValueError(f"n_tokens={n_tokens!r} is not allowed: give an int >= 1.")
    if len(tok.tokenize(text)) <= n_tokens:
        return text
    # counts do not grow steadily with the characters ("every" is one token, "everyw" three, "everywhere" one),
    # so no bisection: try the beginnings from the longest down
    for k in range(len(text) - 1, 0, -1):
        if len(tok.tokenize(text[:k])) <= n_tokens:
            return text[:k].rstrip()
    return ""


def mask_count(n: int, rate: float = 0.12, count: str = "floor") -> int:
    """How many of ``n`` ordinary tokens :func:`mask_tokens` masks.

    ``"floor"``: ``max(1, floor(rate * n))``, as Kobayashi et al.'s official
    code (``max(1, int(length * 0.12))``); ``"round"``: ``max(1, round(rate * n))``
    with halves rounded up (mixlib's rule before issue 9; masks more: about
    ``rate`` on average instead of a little less).

    Parameters
    ----------
    n : int
        Number of ordinary (non-special, non-padding) tokens in the sequence.
    rate : float, default 0.12
        Share of them to mask.
    count : {"floor", "round"}, default "floor"
        How ``rate * n`` becomes a whole number (:data:`MASK_COUNTS`).

    Returns
    -------
    int
        The number of tokens to mask, at least 1.

    Raises
    ------
    ValueError
        ``count`` is neither ``"floor"`` nor ``"round"``.

    Examples
    --------
    >>> mixlib.mask_count(30), mixlib.mask_count(30, count="round")
    (3, 4)
    >>> mixlib.mask_count(5)  # never fewer than one
    1
    """
    if count not in MASK_COUNTS:
        raise ValueError(f"count={count!r} is not allowed; use 'floor' (the official code's rule) or 'round'.")
    exact = float(rate) * int(n)
    k = math.floor(exact) if count == "floor" else math.floor(exact + 0.5)
    return max(1, int(k))


def mask_tokens(enc: Any, texts: Any, rate: float = 0.12, seed: int = 0, max_length: int = 128, *, count: str = "floor",
                first_index: int = 0, keep_special_tokens: bool = False) -> dict[str, torch.Tensor]:
    """Tokenise texts and replace a fixed share of each sequence's tokens by the mask token.

    BERT is pre-trained on text where 15% of the tokens are selected and 80% of
    those (12% of all) become ``[MASK]``; Kobayashi et al. feed it text with
    12% masked. Here, in each sequence, :func:`mask_count` of its ``n``
    ordinary (non-special, non-padding) tokens -- by default
    ``max(1, floor(rate * n))``, the count of the official code -- are chosen
    uniformly without replacement and replaced by ``tokenizer.mask_token_id``.
    Which tokens are chosen cannot match the official code (it draws with
    Python's ``random`` over a different data set); only the count does.
    Because of the floor, fewer than ``rate`` of the tokens are masked on
    average (about 11% for the book's sentence pairs with ``rate=0.12``);
    ``count="round"`` masks ``max(1, round(rate * n))`` instead.

    The choice for sequence ``i`` depends only on ``(seed, i)`` and the
    sequence itself (``numpy.random.default_rng([seed, i])``): the same call
    always masks the same tokens, whatever else is in the batch.

    Parameters
    ----------
    enc : Encoder or tokenizer
    texts : list of str, or list of (str, str)
        Texts or sentence pairs (see :func:`tokenize`).
    rate : float, default 0.12
        Share of ordinary tokens to mask, in (0, 1).
    seed : int, default 0
    max_length : int, default 128
        Longest sequence in tokens (the paper's setting); longer input is
        truncated with a warning.
    count : {"floor", "round"}, default "floor"
        How ``rate * n`` becomes a number of tokens (see :func:`mask_count`).
    first_index : int, default 0
        Number of the first text in a larger corpus: text ``i`` of this call
        uses the random stream ``(seed, first_index + i)``, so a corpus masked
        in chunks (:mod:`mixlib.stream`) gets the same masks as in one call.
    keep_special_tokens : bool, default False
        ``[MASK]``, ``[SEP]`` ... written in a text are plain text (the default,
        as everywhere in mixlib; see :func:`tokenize`), or with True the
        special tokens -- which are then never chosen for masking and do not
        count among the ``n`` ordinary tokens.

    Returns
    -------
    dict of str to torch.Tensor
        ``input_ids`` (with the masks), ``attention_mask``, ``token_type_ids``
        (when the tokenizer makes them), each ``(B, N)``, and ``masked``, a
        bool ``(B, N)`` tensor that is True where a token was replaced. The
        dict can be passed to :func:`mixlib.decompose` as it is.

    Raises
    ------
    ValueError
        Bad ``rate``, ``count``, ``max_length`` or texts (see :func:`tokenize`),
        or a sequence with no ordinary token left to mask.

    Examples
    --------
    >>> batch = mixlib.mask_tokens(enc, ["The cat sat on the mat."], rate=0.12, seed=0)
    >>> sorted(batch)
    ['attention_mask', 'input_ids', 'masked', 'token_type_ids']
    >>> enc.tokenizer.convert_ids_to_tokens(batch["input_ids"][0])
    ['[CLS]', 'the', 'cat', 'sat', 'on', 'the', '[MASK]', '.', '[SEP]']
    >>> int(batch["masked"].sum())
    1
    """
    tok = _tokenizer_of(enc)
    if isinstance(rate, bool) or not isinstance(rate, (float, int, np.floating, np.integer)) or not 0.0 < float(rate) < 1.0:
        raise ValueError(f"rate={rate!r} is not allowed: give the share of tokens to mask as a float in (0, 1), e.g. 0.12.")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed={seed!r} is not allowed: give a non-negative int.")
    mask_count(1, rate, count)  # validates count before any work
    if isinstance(first_index, bool) or not isinstance(first_index, (int, np.integer)) or first_index < 0:
        raise ValueError(f"first_index={first_index!r} is not allowed: give a non-negative int.")
    mask_id = getattr(tok, "mask_token_id", None)
    if mask_id is None:
        raise ValueError(f"the tokenizer of {getattr(enc, 'name', type(tok).__name__)} has no mask token; mask_tokens needs one.")
    batch = tokenize(enc, texts, max_length=max_length, return_special_tokens_mask=True,
                     keep_special_tokens=keep_special_tokens)
    special = batch.pop("special_tokens_mask").bool()
    ids = batch["input_ids"].clone()
    special |= torch.isin(ids, torch.tensor(sorted(set(tok.all_special_ids)), dtype=ids.dtype))  # kept literal ones too
    ordinary = batch["attention_mask"].bool() & ~special  # (B, N)
    masked = torch.zeros_like(ordinary)
    for i in range(ids.shape[0]):
        candidates = torch.nonzero(ordinary[i]).flatten().numpy()
        if candidates.size == 0:
            raise ValueError(f"texts[{i}] has no ordinary token to mask (only special tokens after tokenization).")
        k = min(candidates.size, mask_count(candidates.size, rate, count))
        rng = np.random.default_rng([int(seed), int(first_index) + i])
        chosen = torch.from_numpy(np.sort(rng.choice(candidates, size=k, replace=False)))
        ids[i, chosen] = int(mask_id)
        masked[i, chosen] = True
    batch["input_ids"] = ids
    batch["masked"] = masked
    return batch


# ---------------------------------------------------------------------------
# categories
# ---------------------------------------------------------------------------


def _punctuation_ids(tok: Any) -> set[int]:
    from . import japanese

    if japanese.is_japanese(tok):  # every entry of its punctuation characters, ## continuations included
        return japanese.punctuation_ids(tok)
    unk = getattr(tok, "unk_token_id", None)
    ids: set[int] = set()
    for p in PUNCTUATION:
        for prefix in ("", *_WORD_PREFIXES):
            i = tok.convert_tokens_to_ids(prefix + p)
            if i is not None and i != unk:
                ids.add(int(i))
    return ids


def token_categories(enc: Any, input_ids: Any, attention_mask: Any = None) -> np.ndarray:
    """The category of every token, as in Kobayashi et al.'s Fig. 2.

    Parameters
    ----------
    enc : Encoder or tokenizer
        The encoder (or tokenizer) that made ``input_ids``.
    input_ids : array-like of int, (B, N) or (N,)
        Token ids, e.g. ``batch["input_ids"]`` of :func:`mixlib.tokenize` or :func:`mixlib.mask_tokens`.
    attention_mask : array-like, same shape, optional
        Positions where it is 0 get :data:`PAD_CATEGORY`. Without it, the
        tokenizer's pad id marks padding.

    Returns
    -------
    numpy.ndarray of str, same shape as ``input_ids``
        ``"[CLS]"``, ``"[SEP]"``, ``"[MASK]"`` (the tokenizer's cls/sep/mask
        tokens, whatever they are spelled, e.g. ``<s>`` for RoBERTa),
        ``"句読点"`` (``.`` or ``,``, with or without a word-start marker; for a Japanese tokenizer,
        every entry made of :data:`mixlib.japanese.PUNCTUATION`'s characters -- 、。「」『』・… ！？ and their
        other forms -- alone or as a ``##`` continuation: :func:`mixlib.japanese.punctuation_ids`),
        ``"その他"`` (everything else, ``[UNK]`` included) or ``"[PAD]"``.

    Raises
    ------
    ValueError
        ``input_ids`` is not 1- or 2-dimensional, or ``attention_mask`` has another shape.

    Examples
    --------
    >>> batch = mixlib.mask_tokens(enc, ["The cat sat, then ran.", "A dog."])
    >>> cats = mixlib.token_categories(enc, batch["input_ids"], batch["attention_mask"])
    >>> cats.shape  # (B, N)
    (2, 9)
    >>> cats[1].tolist()
    ['[CLS]', 'その他', '[MASK]', '句読点', '[SEP]', '[PAD]', '[PAD]', '[PAD]', '[PAD]']
    """
    tok = _tokenizer_of(enc)
    cls_name, sep_name, mask_name, punct_name, other_name = category_names()
    ids = torch.as_tensor(np.asarray(input_ids) if not isinstance(input_ids, torch.Tensor) else input_ids).long().cpu()
    if ids.dim() not in (1, 2):
        raise ValueError(f"input_ids must have shape (B, N) or (N,); got {tuple(ids.shape)}.")
    cats = np.full(tuple(ids.shape), other_name, dtype=object)
    np_ids = ids.numpy()
    cats[np.isin(np_ids, list(_punctuation_ids(tok)))] = punct_name
    for tid, name in ((tok.cls_token_id, cls_name), (tok.sep_token_id, sep_name), (tok.mask_token_id, mask_name)):
        if tid is not None:
            cats[np_ids == int(tid)] = name
    if attention_mask is not None:
        am = torch.as_tensor(np.asarray(attention_mask) if not isinstance(attention_mask, torch.Tensor) else attention_mask).cpu().numpy()
        if am.shape != np_ids.shape:
            raise ValueError(f"attention_mask has shape {am.shape} but input_ids has {np_ids.shape}.")
        cats[am == 0] = PAD_CATEGORY
    elif tok.pad_token_id is not None:
        cats[np_ids == int(tok.pad_token_id)] = PAD_CATEGORY
    return cats.astype(str)


@contextmanager
def special_tokens_as_text(tokenizer: Any, enabled: bool = True) -> Iterator[None]:
    """While active, the tokenizer reads ``[MASK]``, ``[SEP]``, ``[CLS]`` ... in the input as plain text.

    Hugging Face tokenizers turn the literal string ``[MASK]`` in a text into
    the mask token; a corpus that mentions ``[MASK]`` would then be analysed
    with masks nobody chose. This sets the tokenizer's ``split_special_tokens``
    (``[MASK]`` becomes ``[``, ``mask``, ``]`` for BERT) and restores it on
    exit; the ``[CLS]``/``[SEP]`` that the tokenizer adds itself stay special.
    It checks that the setting takes effect and raises ``ValueError`` if this
    tokenizer ignores it.
    """
    if not enabled:
        yield
        return
    old = getattr(tokenizer, "split_special_tokens", None)
    if old is None:
        raise ValueError(f"the tokenizer {type(tokenizer).__name__} cannot read special tokens as text "
                         "(no split_special_tokens); upgrade transformers or pass --keep-special-tokens.")
    tokenizer.split_special_tokens = True
    try:
        literal = " ".join(t for t in (tokenizer.mask_token, tokenizer.sep_token, tokenizer.cls_token) if t)
        ids = tokenizer(literal, add_special_tokens=False)["input_ids"]
        specials = set(tokenizer.all_special_ids)
        if any(i in specials for i in ids):
            raise ValueError(f"the tokenizer {type(tokenizer).__name__} still reads {literal!r} as special tokens; "
                             "upgrade transformers or pass --keep-special-tokens.")
        yield
    finally:
        tokenizer.split_special_tokens = old
