"""mixlib.data: tokenisation with validation, deterministic [MASK]ing, token categories."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import mixlib
from mixlib.data import PAD_CATEGORY, category_names, mask_tokens, token_categories, tokenize
from mixlib.plots import CATEGORY_ORDER

TEXTS = [
    "The quick brown fox jumps over the lazy dog near the river bank today.",
    "Tokyo is the capital of Japan, and Kyoto was the old capital for a thousand years.",
    "Hi.",
]


def _ordinary(tok, batch):
    """Non-special, non-padding positions, decided from the token ids (not from the tokenizer's mask)."""
    special = torch.tensor(tok.all_special_ids)
    return batch["attention_mask"].bool() & ~torch.isin(batch["input_ids"], special)


def test_mask_tokens_rate_and_where(tiny_enc):
    tok = tiny_enc.tokenizer
    plain = tokenize(tiny_enc, TEXTS, max_length=128)
    batch = mask_tokens(tiny_enc, TEXTS, rate=0.12, seed=0)
    assert torch.equal(batch["attention_mask"], plain["attention_mask"])
    changed = batch["input_ids"] != plain["input_ids"]
    assert torch.equal(changed, batch["masked"])
    assert (batch["input_ids"][changed] == tok.mask_token_id).all()
    ordinary = _ordinary(tok, plain)
    assert not (changed & ~ordinary).any(), "only ordinary tokens may be masked"
    for i in range(len(TEXTS)):
        n = int(ordinary[i].sum())
        assert int(changed[i].sum()) == max(1, int(0.12 * n)), i  # the official code's count
    assert int(changed[2].sum()) == 1  # "Hi." has 2 ordinary tokens: still one mask


def test_mask_count_floor_default_and_round_option(tiny_enc):
    from mixlib.data import mask_count

    # the official code: mask_num = max(1, int(length * 0.12))
    for n in range(1, 200):
        assert mask_count(n) == max(1, int(n * 0.12)), n
        assert mask_count(n, count="round") == max(1, int(np.floor(n * 0.12 + 0.5))), n
    assert (mask_count(30), mask_count(30, count="round")) == (3, 4)
    # a text with 30 ordinary tokens: 3 masks by default, 4 with count="round"
    text = " ".join(["cat"] * 30)
    n = int(_ordinary(tiny_enc.tokenizer, tokenize(tiny_enc, [text]))[0].sum())
    assert n == 30
    assert int(mask_tokens(tiny_enc, [text])["masked"].sum()) == 3
    assert int(mask_tokens(tiny_enc, [text], count="round")["masked"].sum()) == 4
    with pytest.raises(ValueError, match="count"):
        mask_tokens(tiny_enc, [text], count="ceil")
    with pytest.raises(ValueError, match="count"):
        mask_count(10, count="nearest")


def test_mask_tokens_deterministic_and_seeded(tiny_enc):
    a = mask_tokens(tiny_enc, TEXTS, seed=0)
    b = mask_tokens(tiny_enc, TEXTS, seed=0)
    c = mask_tokens(tiny_enc, TEXTS, seed=1)
    assert torch.equal(a["input_ids"], b["input_ids"])
    assert not torch.equal(a["masked"], c["masked"])
    # a sequence's masks do not depend on what else is in the batch
    alone = mask_tokens(tiny_enc, TEXTS[:1], seed=0)
    n = alone["input_ids"].shape[1]
    assert torch.equal(alone["input_ids"][0], a["input_ids"][0, :n])


def test_mask_tokens_rate_statistics(tiny_enc):
    text = " ".join(f"word{i}" for i in range(100))
    batch = mask_tokens(tiny_enc, [text], rate=0.3, seed=4, max_length=512)
    n = int(_ordinary(tiny_enc.tokenizer, tokenize(tiny_enc, [text]))[0].sum())
    assert int(batch["masked"].sum()) == int(0.3 * n)


def test_mask_tokens_usable_by_decompose(tiny_enc):
    batch = mask_tokens(tiny_enc, TEXTS)
    m = mixlib.decompose(tiny_enc, batch, progress=False)
    assert (m.categories[batch["masked"].numpy()] == "[MASK]").all()


def test_pairs(tiny_enc):
    tok = tiny_enc.tokenizer
    batch = mask_tokens(tiny_enc, [("Is it raining?", "No, it is sunny."), ("Yes.", "Good.")], seed=0)
    ids, tt, am = batch["input_ids"][0], batch["token_type_ids"][0], batch["attention_mask"][0]
    n = int(am.sum())
    seps = torch.nonzero(ids[:n] == tok.sep_token_id).flatten().tolist()
    assert ids[0] == tok.cls_token_id and len(seps) == 2 and seps[-1] == n - 1
    assert (tt[: seps[0] + 1] == 0).all() and (tt[seps[0] + 1 : n] == 1).all()
    assert int(batch["masked"][0].sum()) >= 1
    with pytest.raises(ValueError, match=r"texts\[1\] is a single text but texts\[0\] is a sentence pair.*not both"):
        tokenize(tiny_enc, [("a", "b"), "c"])
    with pytest.raises(ValueError, match=r"texts\[2\] is a sentence pair but texts\[0\] is a single text"):
        tokenize(tiny_enc, ["a", "b", ("c", "d")])
    with pytest.raises(TypeError, match="pair"):
        tokenize(tiny_enc, [("a", "b"), ("c", "d", "e")])
    with pytest.raises(ValueError, match="empty sentence"):
        tokenize(tiny_enc, [("a", " ")])


def test_truncation_warns(tiny_enc):
    long = " ".join(["word"] * 300)
    with pytest.warns(UserWarning, match="1 of 2 text.*truncated to 128"):
        batch = mask_tokens(tiny_enc, [long, "short."])
    assert batch["input_ids"].shape[1] == 128
    assert batch["input_ids"][0, -1] == tiny_enc.tokenizer.sep_token_id  # still ends with [SEP]
    with pytest.warns(UserWarning, match="truncated to 512"):
        out = tokenize(tiny_enc, [" ".join(["word"] * 700)])
    assert out["input_ids"].shape == (1, 512)
    with pytest.warns(UserWarning, match="truncated"):
        pairs = tokenize(tiny_enc, [(long, long)], max_length=64)
    assert pairs["input_ids"].shape[1] == 64


def test_bad_inputs(tiny_enc):
    with pytest.raises(ValueError, match="empty"):
        tokenize(tiny_enc, [])
    with pytest.raises(ValueError, match="empty"):
        mask_tokens(tiny_enc, [])
    with pytest.raises(TypeError, match=r"texts\[1\].*str"):
        mask_tokens(tiny_enc, ["ok", None])
    with pytest.raises(TypeError, match=r"texts\[0\]"):
        tokenize(tiny_enc, [b"bytes"])
    with pytest.raises(ValueError, match=r"texts\[1\] is empty"):
        tokenize(tiny_enc, ["ok", "   "])
    with pytest.raises(TypeError, match="list of strings"):
        tokenize(tiny_enc, {"a": 1})
    for rate in (0, 1, 1.5, -0.1, "0.1", True):
        with pytest.raises(ValueError, match="rate"):
            mask_tokens(tiny_enc, TEXTS, rate=rate)
    with pytest.raises(ValueError, match="seed"):
        mask_tokens(tiny_enc, TEXTS, seed=-1)
    with pytest.raises(ValueError, match="max_length"):
        mask_tokens(tiny_enc, TEXTS, max_length=1000)
    with pytest.raises(TypeError, match="max_length"):
        tokenize(tiny_enc, TEXTS, max_length=12.5)


def test_single_string_is_one_text(tiny_enc):
    a = tokenize(tiny_enc, "The cat sat.")
    b = tokenize(tiny_enc, ["The cat sat."])
    assert torch.equal(a["input_ids"], b["input_ids"])


def test_token_categories(tiny_enc):
    tok = tiny_enc.tokenizer
    batch = tokenize(tiny_enc, ["Well, the cat sat.", "Hi"])
    ids = batch["input_ids"].clone()
    ids[0, 2] = tok.mask_token_id
    cats = token_categories(tiny_enc, ids, batch["attention_mask"])
    toks = tok.convert_ids_to_tokens(ids[0].tolist())
    expected = []
    for t in toks:
        expected.append({"[CLS]": "[CLS]", "[SEP]": "[SEP]", "[MASK]": "[MASK]", ".": "句読点", ",": "句読点"}.get(t, "その他"))
    assert cats[0].tolist() == expected
    n1 = int(batch["attention_mask"][1].sum())
    assert (cats[1, n1:] == PAD_CATEGORY).all() and cats[1, 0] == "[CLS]"
    # without a mask, the pad id marks padding; a tokenizer works in place of the encoder
    assert (token_categories(tok, ids) == cats).all()
    assert token_categories(tiny_enc, ids[0]).shape == (ids.shape[1],)
    assert category_names() == tuple(CATEGORY_ORDER)
    with pytest.raises(ValueError, match="shape"):
        token_categories(tiny_enc, ids, batch["attention_mask"][:, :2])


# -- data/analogy_en.tsv (chapter 3) -------------------------------------------------------


def test_analogy_en_file_format_and_single_tokens(packaged_enc):
    import csv
    from collections import Counter

    from mixlib.paths import data_path

    with open(data_path("analogy_en.tsv"), encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert rows[0] == ["relation", "a", "b"]
    body = rows[1:]
    assert all(len(r) == 3 for r in body)
    per_rel = Counter(r[0] for r in body)
    assert set(per_rel) == {"capital", "gender", "past"} and min(per_rel.values()) >= 30, per_rel
    assert len({tuple(r) for r in body}) == len(body), "a pair is listed twice"
    for rel in per_rel:
        words = [w for r in body if r[0] == rel for w in r[1:]]
        assert len(set(words)) == len(words), f"{rel}: a word appears in two pairs (questions would be ambiguous)"
    words = {w for r in body for w in r[1:]}
    assert all(w.isascii() and w.isalpha() and w.islower() for w in words)
    vocab = packaged_enc.tokenizer.get_vocab()
    assert not sorted(w for w in words if w not in vocab), "every word must be one whole-word token"


def _reference(tok, texts, max_length):
    """The tokenizer itself on the whole texts (what tokenize did before issue 53): the numbers must not move."""
    pairs = isinstance(texts[0], tuple)
    args = ([a for a, _ in texts], [b for _, b in texts]) if pairs else (texts,)
    with mixlib.data.special_tokens_as_text(tok):
        out = tok(*args, truncation="longest_first", max_length=max_length, padding="longest", return_tensors="pt")
    return out


def test_long_lines_are_tokenized_piece_by_piece_with_the_same_result(tiny_enc, monkeypatch):
    """Issue 53: a 6.4 MB line cost stream-mixing 1 GB, because every text was tokenized in full to warn about
    truncation. A long sentence is now read in pieces (the tokenizer never sees more than a piece, plus the prefix
    the model keeps), with exactly the tokens, lengths and truncation of the whole text."""
    monkeypatch.setattr(mixlib.data, "LONG_CHARS", 300)
    monkeypatch.setattr(mixlib.data, "LONG_CHARS_PER_TOKEN", 2)  # a piece: 300 characters here
    rng = np.random.default_rng(0)
    words = ["the", "cat", "unbelievable", "Tokyo,", "ran.", "x", "running", "「東京」", "。", "  spaced"]

    def text(n_words):
        return " ".join(rng.choice(words, size=n_words))

    tok = tiny_enc.tokenizer
    seen = []
    call = type(tok).__call__

    def recording(self, *args, **kw):
        seen.extend(len(a) for arg in args for a in (arg if isinstance(arg, list) else [arg]) if isinstance(a, str))
        return call(self, *args, **kw)

    monkeypatch.setattr(type(tok), "__call__", recording)
    long, longer = text(3000), text(4000)
    cases = [
        [long, "short one.", text(40)],  # single texts, one long
        [(long, "short partner."), ("a.", "b.")],  # a pair, its first sentence long
        [("short first.", longer), (text(20), text(25))],  # its second long
        [(long, longer), (longer, long)],  # both long, either way round
        [(text(3000), text(10))] * 2,
    ]
    for texts in cases:
        seen.clear()
        with pytest.warns(UserWarning, match=r"truncated to 64 tokens"):
            got = tokenize(tiny_enc, texts, max_length=64)
        assert max(seen) < 2 * 300 + 200, max(seen)  # never a whole long line
        want = _reference(tok, texts, 64)
        for key in ("input_ids", "attention_mask", "token_type_ids"):
            assert torch.equal(got[key], want[key]), (key, texts[0][:1])
    # the warning still gives the whole text's length, counted piece by piece
    full = len(call(tok, long, add_special_tokens=True)["input_ids"])
    with pytest.warns(UserWarning, match=rf"longest: {full} tokens"):
        tokenize(tiny_enc, [long], max_length=64)


def test_a_long_line_is_never_cut_where_a_tokenizer_does_not_split(tiny_enc):
    """Adversarial test (issue 53): Python's \\s matches characters BERT deletes (U+0085) or keeps inside a word
    (U+001F); a long line cut there gave other tokens (66 instead of 11) silently."""
    tok = tiny_enc.tokenizer
    odd = ("xxxxxxxx" + "\x01" * 4100 + "\x1f") * 14 + " real words\x85here\u2028and more words。「東京」。Tokyo follow now"
    for texts in ([odd, "short text"], [(odd, "a partner."), ("a.", "b.")]):
        for max_length in (8, 16):
            with pytest.warns(UserWarning, match="truncated"):
                got = tokenize(tiny_enc, texts, max_length=max_length)
            want = _reference(tok, texts, max_length)
            assert torch.equal(got["input_ids"], want["input_ids"]), (max_length, tok.convert_ids_to_tokens(got["input_ids"][0]))
    full = len(tok(odd)["input_ids"])
    with pytest.warns(UserWarning, match=rf"longest: {full} tokens"):
        tokenize(tiny_enc, [odd], max_length=8)


def test_a_chinese_line_without_spaces_is_read_in_pieces_too(tiny_enc, monkeypatch):
    """Adversarial test (issue 53): a line with no space (Chinese, 600,000 characters) was tokenized whole. BERT's
    normalizer sets every ideograph apart, so its tokenizer can be cut after any ideograph."""
    tok = tiny_enc.tokenizer
    line = "的是了我不人在他有这" * 3000 + "ですか？abc"
    seen = []
    call = type(tok).__call__

    def recording(self, *args, **kw):
        seen.extend(len(a) for arg in args for a in (arg if isinstance(arg, list) else [arg]) if isinstance(a, str))
        return call(self, *args, **kw)

    full = len(tok(line)["input_ids"])  # the whole line at once, as before
    monkeypatch.setattr(type(tok), "__call__", recording)
    with pytest.warns(UserWarning, match=rf"longest: {full} tokens"):
        got = tokenize(tiny_enc, [line, "short."], max_length=32)
    assert max(seen) <= 2 * mixlib.data.LONG_CHARS, max(seen)
    assert torch.equal(got["input_ids"], _reference(tok, [line, "short."], 32)["input_ids"])
    assert mixlib.data._cut_of(tok) is mixlib.data._CUT_CJK


def test_a_pair_truncated_to_nothing_of_one_sentence_says_so(tiny_enc):
    """Issue 53: pair truncation that deleted a whole sentence said nothing; it names the text (mixlib.texts turns
    texts[i] into the file's line)."""
    pairs = [("A fine first sentence here.", "And a second one, longer than the first."), ("a", "b")]
    with pytest.warns(UserWarning) as caught:
        tokenize(tiny_enc, pairs, max_length=4)  # [CLS] x [SEP] [SEP]: room for one token of the two sentences
    lost = [str(w.message) for w in caught if "left nothing" in str(w.message)]
    assert lost == [f"texts[{i}]: truncating the pair to max_length=4 tokens left nothing of its first sentence; "
                    "give a larger max_length." for i in (0, 1)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tokenize(tiny_enc, pairs, max_length=64)  # no truncation, no warning


def test_truncate_text_keeps_the_longest_beginning(packaged_enc):
    """Checked against a scan over every beginning of the text (the brute-force answer). The text has a word whose
    beginnings take more tokens than the whole word ("everyw" against "everywhere")."""
    from mixlib.data import truncate_text

    tok = packaged_enc.tokenizer
    text = "Unbelievably, the transformers' self-attention layers mix tokens everywhere."
    n_all = len(tok.tokenize(text))
    assert truncate_text(packaged_enc, text, n_all) == text and truncate_text(tok, text, n_all + 5) == text
    for n in (1, 2, 5, n_all - 1):
        got = truncate_text(tok, text, n)
        fits = [k for k in range(len(text) + 1) if len(tok.tokenize(text[:k])) <= n]
        assert text.startswith(got) and len(tok.tokenize(got)) <= n
        assert got == text[: max(fits)].rstrip()  # the longest beginning, though counts do not grow steadily


def test_truncate_text_on_japanese_like_text_and_errors():
    from mixlib.data import truncate_text

    class Chars:  # one token per character, spaces dropped (as MeCab drops them)
        def tokenize(self, text):
            return [c for c in text if not c.isspace()]

    assert truncate_text(Chars(), "みずは ひゃくどで", 3) == "みずは"
    assert truncate_text(Chars(), "みずは ひゃくどで", 4) == "みずは ひ"
    class Pairs:  # two tokens per character: not even the first character fits in one token
        def tokenize(self, text):
            return [p for c in text for p in (c, "##" + c)]

    assert truncate_text(Pairs(), "あい", 1) == "" and truncate_text(Pairs(), "あい", 3) == "あ"
    with pytest.raises(ValueError, match="n_tokens=0"):
        truncate_text(Chars(), "あ", 0)
    with pytest.raises(TypeError, match="one str"):
        truncate_text(Chars(), ("あ", "い"), 1)
