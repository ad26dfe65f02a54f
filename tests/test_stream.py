"""mixlib.stream: chunked, sharded, resumable Parquet output whose merge equals one in-memory run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import mixlib
from mixlib.stream import _at_line, merge_mixing, parse_shard, stream_mixing
from mixlib.texts import read_texts
from mixlib.widgets import load_sentence_pairs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    pairs = load_sentence_pairs(9)
    lines = ["# a comment line", ""] + [f"{a}\t{b}" for a, b in pairs[:7]] + ["Two sentences.\tIn a pair.", f"{pairs[8][0]}\t{pairs[8][1]}"]
    path = tmp_path_factory.mktemp("corpus") / "texts.txt"
    path.write_text("\ufeff" + "\n".join(lines) + "\n", encoding="utf-8")
    texts = read_texts(path)
    assert len(texts) == 9 and texts[0] == pairs[0] and texts[7] == ("Two sentences.", "In a pair.")
    return path, texts


def test_merge_of_shards_equals_one_in_memory_run(tiny_enc, corpus, tmp_path):
    path, texts = corpus
    out = tmp_path / "run"
    r0 = stream_mixing(tiny_enc, path, out, chunk_size=2, shard="0/2", seed=3)
    r1 = stream_mixing(tiny_enc, path, out, chunk_size=2, shard=(1, 2), seed=3)
    assert r0.written == (0, 2, 4) and r1.written == (1, 3)
    merged = merge_mixing(out)
    assert merged["n_sequences"] == 9 and merged["model"] == tiny_enc.name

    m = mixlib.decompose(tiny_enc, mixlib.mask_tokens(tiny_enc, texts, seed=3), vectors=False)
    pd.testing.assert_frame_equal(merged["table"], mixlib.mixing_table(m), check_exact=False, atol=1e-4, check_names=False)
    pd.testing.assert_frame_equal(merged["summary"], mixlib.mixing_summary(m), check_exact=False, atol=1e-4, check_names=False)


def test_rows_and_resume(tiny_enc, corpus, tmp_path):
    import pyarrow.parquet as pq

    path, texts = corpus
    out = tmp_path / "run"
    first = stream_mixing(tiny_enc, path, out, chunk_size=4)
    assert first.written == (0, 1, 2) and first.n_sequences == 9
    df = pq.read_table(out / "chunk-0000001.parquet").to_pandas()
    assert set(df["seq"]) == {4, 5, 6, 7} and set(df["layer"]) == set(range(tiny_enc.n_layers))
    assert df["ratio"].between(0, 1).all() and df["token"].iloc[0] == "[CLS]"
    # an interrupted run: one chunk missing, one truncated, a killed writer's temporary file
    (out / "chunk-0000000.parquet").unlink()
    (out / "chunk-0000002.parquet").write_bytes(b"PAR1 truncated")
    (out / ".chunk-0000002.parquet.abc.tmp").write_bytes(b"partial")
    again = stream_mixing(tiny_enc, path, out, chunk_size=4)
    assert again.written == (0, 2) and again.skipped == (1,)
    assert not list(out.glob(".*.tmp"))
    with pytest.raises(ValueError, match="other options"):
        stream_mixing(tiny_enc, path, out, chunk_size=4, seed=1)


def test_bad_input(tiny_enc, tmp_path):
    for bad in ("1/1", "2", "a/b", "0/0", "-1/3"):
        with pytest.raises(ValueError, match="shard"):
            parse_shard(bad)
    bad = tmp_path / "bad.txt"
    bad.write_text("a\tb\tc\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.txt, line 1: expected one text"):
        stream_mixing(tiny_enc, bad, tmp_path / "o1")
    with pytest.raises(ValueError, match="no stream.json"):
        merge_mixing(tmp_path)
    with pytest.raises(ValueError, match="chunk_size"):
        stream_mixing(tiny_enc, bad, tmp_path / "o", chunk_size=0)


def test_a_bad_line_is_named_by_its_line_in_the_file(tiny_enc, tmp_path):
    """Issue 20: a line of zero-width spaces far into the file failed naming texts[37], its place in a chunk."""
    lines = [f"Sentence number {i}." for i in range(60)]
    lines[49] = "\u200b\u200b"
    path = tmp_path / "t.txt"
    path.write_text("# corpus\n" + "\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"t.txt, line 51: .*nothing to tokenize"):
        stream_mixing(tiny_enc, path, tmp_path / "o", chunk_size=16)
    # an error the library raises inside a chunk names the file's line, not texts[j]
    err = _at_line(ValueError("texts[2] has no ordinary token to mask."), path, [4, 9, 17])
    assert str(err) == f"{path}, line 17: has no ordinary token to mask."
    other = ValueError("something else")
    assert _at_line(other, path, [1]) is other
