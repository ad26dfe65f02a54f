"""mixlib.stream: chunked, sharded, resumable Parquet output whose merge equals one in-memory run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from pathlib import Path

import mixlib
from mixlib.stream import _tmp_owner, check_chunks, merge_mixing, parse_shard, stream_mixing, writer_lock
from mixlib.texts import at_line, read_texts
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
    # an interrupted run: one chunk missing, one truncated, a killed writer's temporary file; a live writer's
    # temporary file (another shard, this machine) and one from another machine are left alone (issue 20)
    (out / "chunk-0000000.parquet").unlink()
    (out / "chunk-0000002.parquet").write_bytes(b"PAR1 truncated")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    killed = out / f".chunk-0000002.parquet.{_tmp_owner(pid=int(dead.stdout))}.abc.tmp"
    live = out / f".chunk-0000003.parquet.{_tmp_owner(pid=os.getppid())}.def.tmp"
    elsewhere = out / f".chunk-0000004.parquet.{_tmp_owner(host='other-machine', pid=int(dead.stdout))}.ghi.tmp"
    for f in (killed, live, elsewhere):
        f.write_bytes(b"partial")
    again = stream_mixing(tiny_enc, path, out, chunk_size=4)
    assert again.written == (0, 2) and again.skipped == (1,)
    assert sorted(out.glob(".*.tmp")) == sorted([live, elsewhere])
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
    err = at_line(ValueError("texts[2] has no ordinary token to mask."), path, [4, 9, 17])
    assert str(err) == f"{path}, line 17: has no ordinary token to mask."
    other = ValueError("something else")
    assert at_line(other, path, [1]) is other


@pytest.fixture(scope="module")
def run8(tiny_enc, corpus, tmp_path_factory):
    """A whole run of the 9-text corpus into 5 chunks (2 shards), kept read-only: tests copy it."""
    path, _ = corpus
    out = tmp_path_factory.mktemp("run8") / "run"
    stream_mixing(tiny_enc, path, out, chunk_size=2, shard="0/2", seed=1)
    stream_mixing(tiny_enc, path, out, chunk_size=2, shard="1/2", seed=1)
    return out


def _copy(run, tmp_path, name="run"):
    import shutil

    return Path(shutil.copytree(run, tmp_path / name))


def test_merge_refuses_a_partial_run_unless_asked(run8, tmp_path):
    """Issue 20: with two chunk files deleted, merge reported three quarters of the data as the whole run."""
    whole = merge_mixing(run8)
    assert not whole["partial"] and whole["coverage"] == {"texts_merged": 9, "texts_in_file": 9, "chunks_missing": []}
    out = _copy(run8, tmp_path)
    (out / "chunk-0000001.parquet").unlink()
    (out / "chunk-0000002.parquet").unlink()
    with pytest.raises(ValueError, match=r"2 of 5 chunk files are missing \(chunks 1-2: 4 of 9 texts\).*--allow-partial"):
        merge_mixing(out)
    part = merge_mixing(out, allow_partial=True)
    assert part["partial"] and part["n_sequences"] == 5
    assert part["coverage"] == {"texts_merged": 5, "texts_in_file": 9, "chunks_missing": [1, 2]}


def test_merge_refuses_foreign_renamed_and_duplicated_chunks(tiny_enc, corpus, run8, tmp_path):
    path, _ = corpus
    other = tmp_path / "other"  # the same texts with another --rate: its chunks are foreign to run8
    stream_mixing(tiny_enc, path, other, chunk_size=2, rate=0.3, seed=1, shard="0/5")
    out = _copy(run8, tmp_path)
    (out / "chunk-0000000.parquet").write_bytes((other / "chunk-0000000.parquet").read_bytes())
    with pytest.raises(ValueError, match=r"chunk-0000000.parquet comes from another run"):
        merge_mixing(out)
    out = _copy(run8, tmp_path, "dup")  # chunk 1 copied over chunk 3: its sequences would be counted twice
    (out / "chunk-0000003.parquet").write_bytes((out / "chunk-0000001.parquet").read_bytes())
    with pytest.raises(ValueError, match=r"chunk-0000003.parquet holds chunk 1 \(sequences 2..3\).*counted twice"):
        merge_mixing(out)
    out = _copy(run8, tmp_path, "extra")  # a chunk past the end of the file
    (out / "chunk-0000009.parquet").write_bytes((out / "chunk-0000001.parquet").read_bytes())
    with pytest.raises(ValueError, match=r"chunk-0000009.parquet holds chunk 1"):
        merge_mixing(out)
    out = _copy(run8, tmp_path, "copied")  # a file manager's copy next to the original
    (out / "chunk-0000001 (1).parquet").write_bytes((out / "chunk-0000001.parquet").read_bytes())
    with pytest.raises(ValueError, match=r"chunk-0000001 \(1\).parquet is not named as stream-mixing names its files"):
        merge_mixing(out)
    out = _copy(run8, tmp_path, "eight")  # the same chunk under a name with one more digit
    (out / "chunk-00000001.parquet").write_bytes((out / "chunk-0000001.parquet").read_bytes())
    with pytest.raises(ValueError, match=r"chunk-00000001.parquet is not named as stream-mixing names its files"):
        merge_mixing(out)
    out = _copy(run8, tmp_path, "edited")  # the record edited, not the chunks: blame the record
    meta = json.loads((out / "stream.json").read_text(encoding="utf-8"))
    (out / "stream.json").write_text(json.dumps({**meta, "seed": 7}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"stream.json does not describe its chunk files: all 5 of them come from one run"):
        merge_mixing(out)
    (out / "stream.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")  # nested too deep for json
    with pytest.raises(ValueError, match=r"stream.json cannot be read as JSON \(RecursionError\)"):
        merge_mixing(out)
    out = _copy(run8, tmp_path, "cut")
    (out / "chunk-0000004.parquet").write_bytes(b"PAR1 cut short")
    with pytest.raises(ValueError, match=r"chunk-0000004.parquet is unreadable"):
        check_chunks(out)


def test_a_run_is_tied_to_its_model_weights_and_text_file(tiny_enc, corpus, run8, tmp_path):
    """Another model's weights (an ablated head) or an edited text file cannot resume into, or be merged with, a run."""
    import copy

    import torch

    path, _ = corpus
    out = _copy(run8, tmp_path)
    (out / "chunk-0000004.parquet").unlink()
    ablated = copy.copy(tiny_enc)
    object.__setattr__(ablated, "model", copy.deepcopy(tiny_enc.model))
    with torch.no_grad():
        next(ablated.model.parameters()).mul_(0.5)
    with pytest.raises(ValueError, match=r"weights_sha256: .* recorded, .* given"):
        stream_mixing(ablated, path, out, chunk_size=2, seed=1)
    edited = tmp_path / path.name
    edited.write_text(path.read_text(encoding="utf-8").replace("Two sentences.", "Two other sentences."), encoding="utf-8")
    with pytest.raises(ValueError, match=r"texts_sha256: "):
        stream_mixing(tiny_enc, edited, out, chunk_size=2, seed=1)
    assert not (out / "chunk-0000004.parquet").exists()
    res = stream_mixing(tiny_enc, path, out, chunk_size=2, seed=1)  # the run itself resumes
    assert res.written == (4,) and res.skipped == (0, 1, 2, 3)
    meta = json.loads((out / "stream.json").read_text(encoding="utf-8"))
    assert meta["n_texts"] == 9 and len(meta["weights_sha256"]) == 64


def test_one_writer_per_shard(tiny_enc, corpus, tmp_path):
    """Issue 20: a second run into a folder being written deleted the first's temporary file."""
    path, _ = corpus
    out = tmp_path / "run"
    out.mkdir()
    with writer_lock(out, (0, 2)):
        with pytest.raises(ValueError, match=r"another stream-mixing is writing shard 0/2 into"):
            stream_mixing(tiny_enc, path, out, chunk_size=2, shard="0/2")
        res = stream_mixing(tiny_enc, path, out, chunk_size=2, shard="1/2")  # another shard runs side by side
        assert res.written == (1, 3)


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_outputs_follow_the_umask(tiny_enc, corpus, tmp_path, umask):
    """Issue 20: files were written 0600 and folders 0700 whatever the umask, so another user could not merge them."""
    import stat

    from mixlib import cli

    path, _ = corpus
    old = os.umask(umask)
    try:
        out = tmp_path / "run"
        stream_mixing(tiny_enc, path, out, chunk_size=4)
        merged = tmp_path / "merged"
        assert cli.main(["merge", "--chunks", str(out), "--out", str(merged)]) == 0
        cli._write_atomic(out / "run.json", "{}")
    finally:
        os.umask(old)
    files = [*out.glob("chunk-*.parquet"), out / "stream.json", out / "run.json", *merged.iterdir()]
    assert len(files) >= 7
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o666 & ~umask, f
    for d in (out, merged):
        assert stat.S_IMODE(d.stat().st_mode) == 0o777 & ~umask, d


def test_a_file_edited_during_the_run_is_caught_chunk_by_chunk(tiny_enc, tmp_path, monkeypatch):
    """Issue 20 review: a text file overwritten while stream-mixing ran gave chunks of the new texts stamped
    with the old file's fingerprint, and exit 0."""
    import mixlib.mixing

    path = tmp_path / "t.txt"
    # larger than a read buffer (a small file is read whole at once, so an edit after that changes nothing read)
    path.write_text("".join(f"Sentence number {i}, long enough to fill the buffer.\n" for i in range(1200)), encoding="utf-8")
    real = mixlib.mixing.decompose
    calls = []

    def decompose_then_edit(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # after the first chunk is computed, someone saves another version of the file
            path.write_text("".join(f"Another sentence {i}, just as long as the ones before it.\n" for i in range(1100)),
                            encoding="utf-8")
        return real(*args, **kwargs)

    monkeypatch.setattr(mixlib.mixing, "decompose", decompose_then_edit)
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=r"t.txt changed while stream-mixing read it \(chunk 1 on"):
        stream_mixing(tiny_enc, path, out, chunk_size=300)
    assert sorted(p.name for p in out.glob("chunk-*.parquet")) == ["chunk-0000000.parquet"]  # from the checked file


def test_a_damaged_record_is_one_line_and_a_run_without_chunks_can_start_again(tiny_enc, tmp_path, monkeypatch):
    import mixlib.data

    path = tmp_path / "t.txt"
    path.write_text("# texts\nA first text.\nA broken one.\n", encoding="utf-8")

    def refuse(enc, texts, **kwargs):  # a check inside the library that only the tokenizer can make
        raise ValueError("texts[1] has no ordinary token to mask (only special tokens after tokenization).")

    with monkeypatch.context() as m:
        m.setattr(mixlib.data, "mask_tokens", refuse)
        out = tmp_path / "run"
        with pytest.raises(ValueError, match=r"t.txt, line 3: has no ordinary token to mask"):
            stream_mixing(tiny_enc, path, out, chunk_size=4)
    assert (out / "stream.json").exists() and not list(out.glob("chunk-*.parquet"))
    path.write_text("A first text.\nA second one.\n", encoding="utf-8")  # fixed: the chunk-less record is replaced
    assert stream_mixing(tiny_enc, path, out, chunk_size=4).written == (0,)
    record = json.loads((out / "stream.json").read_text(encoding="utf-8"))
    for damage, what in [([], "damaged or was edited"), ({**record, "chunk_size": 0}, r"chunk_size: 0"),
                         ({**record, "n_texts": "2"}, r"n_texts: '2'"), ({"model": "m"}, "older mixlib")]:
        (out / "stream.json").write_text(json.dumps(damage), encoding="utf-8")
        for call in (lambda: merge_mixing(out), lambda: stream_mixing(tiny_enc, path, out, chunk_size=4)):
            with pytest.raises(ValueError, match=what):
                call()


def test_special_tokens_are_text_and_recorded_and_warnings_name_lines(tiny_enc, tmp_path):
    """Issue 20 review: the library read '[MASK]' in a text as the mask token while the CLI read it as text, and
    stream.json did not say which; a truncation warning named texts[j], its place in a chunk."""
    import warnings

    path = tmp_path / "t.txt"
    path.write_text("A text with [MASK] in it.\n" + "a long one " * 30 + "\nShort.\n", encoding="utf-8")
    out = tmp_path / "run"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stream_mixing(tiny_enc, path, out, chunk_size=2, max_length=16)
    assert any("e.g. line 2 of" in str(w.message) for w in caught), [str(w.message) for w in caught]
    assert json.loads((out / "stream.json").read_text(encoding="utf-8"))["keep_special_tokens"] is False
    import pyarrow.parquet as pq

    tokens = pq.read_table(out / "chunk-0000000.parquet", columns=["seq", "token"]).to_pandas()
    assert "mask" in set(tokens[tokens.seq == 0].token)  # '[MASK]' read as '[', 'mask', ']'
    with pytest.raises(ValueError, match=r"keep_special_tokens: False recorded, True given"):
        stream_mixing(tiny_enc, path, out, chunk_size=2, max_length=16, keep_special_tokens=True)


def test_a_killed_runs_leftovers_never_block_the_folder(tiny_enc, corpus, tmp_path, capsys):
    """Issue 53: a stray .stream.json.*.tmp blocked its folder for good; a killed Ray driver left .ray-input/
    (a copy of every text) for good. Both belong to the next run of either engine, which removes them."""
    from mixlib import cli
    from mixlib.stream import STAGING, is_leftover

    path, _ = corpus
    out = tmp_path / "run"
    out.mkdir()
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    record_tmp = out / f".stream.json.{_tmp_owner(pid=dead)}.x1.tmp"  # killed while writing its first record
    record_tmp.write_text("{")
    staged = out / STAGING / _tmp_owner(pid=dead)  # a killed Ray driver's staged texts
    staged.mkdir(parents=True)
    (staged / "chunk-0000000.json").write_text('{"texts": ["a secret"], "lines": [1]}')
    live = out / STAGING / _tmp_owner(pid=os.getppid())  # another driver on this machine, still running
    live.mkdir()
    assert all(is_leftover(p.name) for p in out.iterdir())
    assert cli.check_stream_out(str(out)) == out  # not "holds files but no stream.json"
    stream_mixing(tiny_enc, path, out, chunk_size=4)
    assert not record_tmp.exists() and not staged.exists() and live.is_dir()
    assert sorted(p.name for p in out.glob("chunk-*.parquet")) == [f"chunk-000000{k}.parquet" for k in range(3)]
    assert not is_leftover("notes.txt") and not is_leftover(".chunk-1.parquet")


def test_the_ray_workers_get_every_mixlib_variable():
    """Issue 53: Ray forwarded MIXLIB_CACHE_DIR, which nothing reads, instead of the MIXLIB_* the README promises."""
    from mixlib.stream_ray import forwarded_env

    env = {"MIXLIB_CACHE": "/c", "MIXLIB_ROOT": "/r", "MIXLIB_MODEL": "m", "HF_HOME": "/h", "HOME": "/home/u", "PATH": "/bin"}
    assert forwarded_env(env) == {"MIXLIB_CACHE": "/c", "MIXLIB_ROOT": "/r", "MIXLIB_MODEL": "m", "HF_HOME": "/h"}
