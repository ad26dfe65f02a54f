"""The command-line interface: --help, each command's files, and bad input.

Commands run in-process through ``mixlib.cli.main`` on the packaged model (the
encoder is loaded once per process), with small sizes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from mixlib import cli

REPO = Path(__file__).resolve().parents[1]
MODEL = ["--model", "all-MiniLM-L6-v2", "--device", "cpu"]


def test_help_lists_every_command_and_option():
    proc = subprocess.run([sys.executable, "-m", "mixlib", "--help"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0
    for name in ("mixing", "stretch", "clusters", "positional", "MIXLIB_MODEL", "bert, roberta, electra"):
        assert name in proc.stdout
    sub = cli.build_parser()._subparsers._group_actions[0].choices  # noqa: SLF001 - argparse has no public accessor
    help_mixing = sub["mixing"].format_help()
    for opt in ("--texts", "--rate", "--seed", "--max-length", "--batch-size", "--out", "--model", "--device", "--no-fallback"):
        assert opt in help_mixing
    assert "--k" in sub["clusters"].format_help() and "--layer" in sub["positional"].format_help()
    for name, opts in {"stream-mixing": ("--shard", "--chunk-size", "--mask-count", "--texts"), "merge": ("--chunks", "--out"),
                       "maps": ("--perm", "--texts", "--rate"), "mixing": ("--ci", "--n-boot", "--boot-seed", "--conventions"),
                       "stretch": ("--normalize", "--bias")}.items():
        assert name in proc.stdout
        for opt in opts:
            assert opt in sub[name].format_help(), (name, opt)
    assert "--model" not in {o for a in sub["merge"]._actions for o in a.option_strings}  # noqa: SLF001 - merge loads no model


def test_read_texts_layouts(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("# comment\nOne text.\n\nAnother text.\n", encoding="utf-8")
    assert cli.read_texts(plain) == ["One text.", "Another text."]
    plain.write_text("# comment\nFirst half.\tSecond half.\n", encoding="utf-8")
    assert cli.read_texts(plain) == [("First half.", "Second half.")]
    table = tmp_path / "pairs.tsv"
    table.write_text("topic\tsentence_a\tsentence_b\nx\tA one.\tB one.\ny\tA two.\tB two.\n", encoding="utf-8")
    assert cli.read_texts(table) == [("A one.", "B one."), ("A two.", "B two.")]
    shipped = cli.read_texts(REPO / "data" / "sentence_pairs.tsv")
    assert len(shipped) >= 200 and all(isinstance(t, tuple) and len(t) == 2 for t in shipped)
    from mixlib.widgets import load_sentence_pairs

    assert cli.read_texts(REPO / "data" / "sentence_pairs_ja.tsv") == load_sentence_pairs(lang="ja")  # --texts reads it


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "holds no texts"),
        ("a\tb\tc\n", "line 1: expected one text"),
        ("topic\tsentence_a\tsentence_b\nx\tonly a\n", "line 2: expected 3 TAB-separated"),
        # singles and pairs in one file (issue 20: this ended in a TypeError traceback from the library)
        ("The cat sat on the mat.\nI went to Kyoto.\tThen I walked home.\n",
         r"line 2: a sentence pair \(A<TAB>B\), but line 1 is a single text: .*not both"),
        ("# c\nA.\tB.\n\nC.\tD.\nE.\n", r"line 5: a single text, but line 2 is a sentence pair"),
    ],
)
def test_read_texts_bad_files(tmp_path, content, message):
    f = tmp_path / ("t.tsv" if content.startswith("topic") else "t.txt")
    f.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        cli.read_texts(f)


def test_bad_input_exits_2_with_a_message(tmp_path, capsys):
    assert cli.main(["mixing", *MODEL, "--texts", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("The cat sat on the mat.\nI went to Kyoto.\tThen I walked home.\n", encoding="utf-8")
    assert cli.main(["mixing", *MODEL, "--texts", str(mixed), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "line 2" in err and "not both" in err and "Traceback" not in err and err.strip().count("\n") == 0
    mixed.unlink()
    # --out under a file: refused before the model runs (issue 20: it failed only after the analysis)
    afile = tmp_path / "afile"
    afile.write_text("x")
    texts = tmp_path / "t.txt"
    texts.write_text("The cat sat.\n", encoding="utf-8")
    for command in ("mixing", "stream-mixing"):
        assert cli.main([command, *MODEL, "--texts", str(texts), "--out", str(afile / "sub" / "x")]) == 2
        err = capsys.readouterr().err
        assert "afile is a file, so no folder can be made under it" in err and "decompose" not in err
    afile.unlink(), texts.unlink()
    assert cli.main(["clusters", *MODEL, "--k", "40000", "--out", str(tmp_path / "o")]) == 2
    assert "larger than the vocabulary" in capsys.readouterr().err
    assert cli.main(["positional", *MODEL, "--layer", "9", "--out", str(tmp_path / "o")]) == 2
    assert "out of range" in capsys.readouterr().err
    assert cli.main(["mixing", *MODEL]) == 2  # --texts and --out are required
    assert "required" in capsys.readouterr().err
    assert not (tmp_path / "o").exists() and list(tmp_path.iterdir()) == []  # nothing written, no staging folder left


def test_mixing_command_writes_tables_that_match_the_library(tmp_path, packaged_enc):
    import mixlib

    texts = tmp_path / "t.txt"
    lines = ["The cat sat on the mat.\tIt was warm there.", "Paris is the capital.\tOf France, that is.",
             "He went home, then slept.\tThe next day was long."]
    texts.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "mix"
    assert cli.main(["mixing", *MODEL, "--texts", str(texts), "--out", str(out), "--seed", "3"]) == 0
    for f in ("mixing_ratio_by_layer.csv", "norms_by_layer.csv", "summary.csv", "run.json",
              "paper_vs_ours_by_layer.csv", "paper_vs_ours_summary.csv",
              "mixing_ratio_by_layer.png", "norms_by_layer.png"):
        assert (out / f).stat().st_size > 0, f
    side = pd.read_csv(out / "paper_vs_ours_summary.csv", header=[0, 1], index_col=0)
    assert set(side.columns.get_level_values(0)) == {"ours (all-MiniLM-L6-v2)", "paper (bert-base-uncased)"}
    table = pd.read_csv(out / "mixing_ratio_by_layer.csv", index_col="layer")
    batch = mixlib.mask_tokens(packaged_enc, cli.read_texts(texts), rate=0.12, seed=3)
    expected = mixlib.mixing_table(mixlib.decompose(packaged_enc, batch, vectors=False))
    pd.testing.assert_frame_equal(table, expected, check_names=False, atol=1e-6, check_dtype=False)
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert run["model"] == "all-MiniLM-L6-v2" and run["texts"] == 3
    assert max(run["max_reconstruction_error"]) <= 1e-4


def test_stretch_command(tmp_path, packaged_enc):
    import numpy as np

    import mixlib

    out = tmp_path / "st"
    assert cli.main(["stretch", *MODEL, "--out", str(out)]) == 0
    df = pd.read_csv(out / "psi_by_head.csv")
    assert len(df) == packaged_enc.n_layers * packaged_enc.n_heads
    st = mixlib.norm_stretch(packaged_enc, layers=[2])
    row = df[(df["layer"] == 2) & (df["head"] == 5)].iloc[0]
    assert row.psi_qkv_max == pytest.approx(float(np.nanmax(st.psi_qkv[0, 5])), rel=1e-5)
    assert (df.psi_q_max <= df.bound_q_max * (1 + 1e-4)).all()
    assert (out / "psi_qkv_mean_by_head.png").stat().st_size > 0


def test_clusters_command(tmp_path, monkeypatch):
    monkeypatch.setenv("MIXLIB_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "cl"
    assert cli.main(["clusters", *MODEL, "--k", "30", "--upper-k", "3", "--out", str(out)]) == 0
    tokens = pd.read_csv(out / "tokens.csv", keep_default_na=False)
    assert len(tokens) == 30522 and tokens.cluster.between(0, 29).all()
    summary = pd.read_csv(out / "cluster_summary.csv")
    assert summary.iloc[-1, 1:3].tolist() == [30, 30522]  # the Total row: clusters, tokens
    tops = pd.read_csv(out / "top_clusters_by_head.csv")
    assert len(tops) == 6 * 12 * 5
    assert (out / "type_map.png").stat().st_size > 0
    # issue 53: --k 1 or 2 ran the whole k-means, then failed on a top=3 the user never gave
    for k in ("1", "2"):
        assert cli.main(["clusters", *MODEL, "--k", k, "--upper-k", k, "--top", "1", "--out", str(tmp_path / k)]) == 0
        tm = pd.read_csv(tmp_path / k / "type_map.csv", index_col="layer")
        assert tm.shape == (6, 12) and tm.iloc[0, 0].count("'") == 2 * int(k)  # each cell: k type names


def test_positional_command(tmp_path, packaged_enc):
    out = tmp_path / "pos"
    assert cli.main(["positional", *MODEL, "--n", "16", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    W = packaged_enc.word_embeddings()
    P = packaged_enc.position_embeddings()
    cls = packaged_enc.tokenizer.cls_token_id
    direct = float((W[cls] @ P[0]) / (W[cls].norm() * P[0].norm()))
    assert summary["cls_pos0_cos"] == pytest.approx(direct, abs=1e-5)
    hist = pd.read_csv(out / "cos_histogram.csv")
    assert hist["count"].sum() == summary["pairs"] == 30522 * 512
    for f in ("pca.png", "cos_histogram.png", "position_attention_layer0.png"):
        assert (out / f).stat().st_size > 0


def test_paper_comparison_for_the_paper_model_takes_the_difference():
    """The bert-base-uncased branch of the mixing command (it once called compare() with one table)."""
    import numpy as np

    from mixlib import reference

    ours_layers = reference.paper_table() + 1.5
    ours_pooled = reference.paper_summary().fillna(50.0) - 2.0
    by_layer, pooled = cli.paper_comparison(ours_layers, ours_pooled, "bert-base-uncased")
    assert len(by_layer) == 12
    diff = by_layer.xs("diff", axis=1, level=1)
    assert np.allclose(diff.to_numpy(dtype=float), 1.5)
    pdiff = pooled.xs("diff", axis=1, level=1)
    assert np.allclose(pdiff.dropna(how="all").to_numpy(dtype=float)[~np.isnan(pdiff.dropna(how="all").to_numpy(dtype=float))], -2.0)
    other_layers, other_pooled = cli.paper_comparison(ours_layers.iloc[:6], ours_pooled, "some-model")
    assert "diff" not in other_layers.columns.get_level_values(-1)
    assert other_layers.shape[0] == 12 and other_layers["ours (some-model)"].iloc[6:].isna().all().all()


# -- validation before anything is loaded -------------------------------------------------


@pytest.fixture
def no_model(monkeypatch):
    """Fail the test if a command gets as far as loading a model."""

    def refuse(*a, **k):
        raise AssertionError("a model was loaded although an option was bad")

    monkeypatch.setattr("mixlib.models.load_encoder", refuse)


def _texts(tmp_path, content="One text.\tAnother one.\n", name="t.txt"):
    f = tmp_path / name
    f.write_text(content, encoding="utf-8")
    return str(f)


BAD_OPTIONS = [
    (["clusters", "--k", "5", "--upper-k", "7"], "--upper-k 7 is larger than --k 5"),
    (["clusters", "--k", "8", "--top", "9"], "--top 9 is larger than --k 8"),
    (["clusters", "--k", "0"], "argument --k: expected a whole number >= 1, got 0"),
    (["clusters", "--seed", "-1"], "argument --seed: expected a whole number >= 0"),
    (["positional", "--n", "0"], "argument --n: expected a whole number >= 1, got 0"),
    (["positional", "--layer", "-1"], "argument --layer"),
    (["positional", "--n", "twelve"], "expected a whole number, got 'twelve'"),
    (["mixing", "--texts", "TEXTS", "--limit", "0"], "argument --limit: expected a whole number >= 1, got 0"),
    (["mixing", "--texts", "TEXTS", "--limit", "-3"], "argument --limit"),
    (["mixing", "--texts", "TEXTS", "--rate", "1.5"], "strictly between 0 and 1"),
    (["mixing", "--texts", "TEXTS", "--max-length", "2"], "argument --max-length"),
    (["mixing", "--texts", "TEXTS", "--batch-size", "0"], "argument --batch-size"),
    (["stretch", "--device", "gpu"], "--device 'gpu' is not a device"),
    (["stretch", "--model", " "], "--model is empty"),
    (["stretch", "--out", ""], "--out is empty"),
    (["stretch", "--out", "FILE"], "is a file, not a folder"),
    (["stretch", "--out", "FOREIGN"], "already holds files that python -m mixlib did not write"),
]


@pytest.mark.parametrize("argv, message", BAD_OPTIONS, ids=[" ".join(a) for a, _ in BAD_OPTIONS])
def test_every_option_is_checked_before_a_model_is_loaded(argv, message, tmp_path, capsys, no_model):
    (tmp_path / "FILE").write_text("x")
    (tmp_path / "FOREIGN").mkdir()
    (tmp_path / "FOREIGN" / "notes.txt").write_text("mine")
    subs = {"TEXTS": _texts(tmp_path), "FILE": str(tmp_path / "FILE"), "FOREIGN": str(tmp_path / "FOREIGN")}
    argv = [subs.get(a, a) for a in argv]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "o")]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert cli.main([*argv, "--device", "cpu"] if "--device" not in argv else argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err, err  # one line
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
    assert (tmp_path / "FOREIGN" / "notes.txt").read_text() == "mine"


def test_out_is_never_the_working_folder_or_above(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    for value in (".", "..", "sub/..", str(empty)):
        with pytest.raises(cli.UsageError, match="working folder or one of its parents|already holds files"):
            cli.check_out(value)
    assert cli.check_out("new/../fresh") == empty / "fresh"  # the real, absolute path the run writes at


def test_cuda_device_without_cuda_is_bad_input(tmp_path, capsys, no_model):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    assert cli.main(["stretch", "--device", "cuda", "--out", str(tmp_path / "o")]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


def test_texts_inside_out_is_refused(tmp_path, capsys, no_model):
    out = tmp_path / "o"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"command": "mixing"}))
    texts = _texts(out)
    assert cli.main(["mixing", "--texts", texts, "--out", str(out), "--device", "cpu"]) == 2
    assert "lies inside --out" in capsys.readouterr().err


# -- whole outputs or none ----------------------------------------------------------------


def _fake_command(monkeypatch, packaged_enc, body):
    monkeypatch.setattr(cli, "_encoder", lambda args: packaged_enc)
    monkeypatch.setitem(cli.COMMANDS, "stretch", (body, "fake"))


def test_a_failure_leaves_nothing_behind(tmp_path, monkeypatch, capsys, packaged_enc):
    def half_then_fail(args, enc, out):
        out.json("run.json", {"command": "stretch"})
        out.json("part.json", {"x": 1})
        raise ValueError("the second table could not be computed")

    _fake_command(monkeypatch, packaged_enc, half_then_fail)
    out = tmp_path / "deep" / "er" / "o"
    assert cli.main(["stretch", "--device", "cpu", "--out", str(out)]) == 2
    assert "the second table could not be computed" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # not even --out's parents


def test_a_bug_shows_its_traceback_and_leaves_nothing_behind(tmp_path, monkeypatch, packaged_enc):
    def buggy(args, enc, out):
        out.json("run.json", {"command": "stretch"})
        raise TypeError("compare() missing 1 required positional argument: 'paper'")

    _fake_command(monkeypatch, packaged_enc, buggy)
    with pytest.raises(TypeError, match="missing 1 required"):
        cli.main(["stretch", "--device", "cpu", "--out", str(tmp_path / "o")])
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_exits_130_and_leaves_nothing_behind(tmp_path, monkeypatch, capsys, packaged_enc):
    def interrupted(args, enc, out):
        out.json("run.json", {"command": "stretch"})
        raise KeyboardInterrupt

    _fake_command(monkeypatch, packaged_enc, interrupted)
    assert cli.main(["stretch", "--device", "cpu", "--out", str(tmp_path / "o")]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_an_earlier_output_is_replaced_as_a_whole(tmp_path, monkeypatch, packaged_enc):
    def writer(files):
        def run(args, enc, out):
            out.json("run.json", {"command": "stretch"})
            for f in files:
                out.json(f, {"f": f})
        return run

    out = tmp_path / "o"
    _fake_command(monkeypatch, packaged_enc, writer(["a.json", "b.json"]))
    assert cli.main(["stretch", "--device", "cpu", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["a.json", "b.json", "run.json"]
    _fake_command(monkeypatch, packaged_enc, writer(["c.json"]))
    assert cli.main(["stretch", "--device", "cpu", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["c.json", "run.json"]  # no stale a/b from the first run
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]  # no staging or old folders
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["stretch", "--device", "cpu", "--out", str(empty)]) == 0
    assert (empty / "c.json").is_file()


def test_a_killed_runs_staging_folder_is_removed(tmp_path, monkeypatch, packaged_enc):
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(proc.stdout)  # a process id that has exited
    stale = tmp_path / f".o.mixlib-tmp-{dead}-abc123"
    stale.mkdir()
    (stale / "run.json").write_text("{}")
    _fake_command(monkeypatch, packaged_enc, lambda args, enc, out: out.json("run.json", {"command": "stretch"}))
    assert cli.main(["stretch", "--device", "cpu", "--out", str(tmp_path / "o")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]


@pytest.mark.parametrize("signame, status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_during_a_real_run_exits_quietly(tmp_path, signame, status):
    """Ctrl-C (or SIGTERM) during a real command, after the model is loaded: no traceback, nothing written."""
    import signal
    import time

    out = tmp_path / "st"

    def default_sigint() -> None:
        # A pytest-xdist worker ignores SIGINT, and an ignored SIGINT is inherited: Python then installs no
        # KeyboardInterrupt handler in the child. A user's terminal delivers Ctrl-C with the default disposition.
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    proc = subprocess.Popen([sys.executable, "-u", "-m", "mixlib", "stretch", *MODEL, "--out", str(out)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    line = proc.stdout.readline()  # "model: ..." once the encoder is loaded
    assert line.startswith("model:"), line + proc.stderr.read()
    time.sleep(0.5)
    proc.send_signal(getattr(signal, signame))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err
    assert "Traceback" not in err and ("interrupted" if status == 130 else "terminated") in err
    assert list(tmp_path.iterdir()) == []


# -- texts ------------------------------------------------------------------------------------


def test_read_texts_bom_and_the_header_rule(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("\ufeffText\nSecond line.\n", encoding="utf-8")
    assert cli.read_texts(plain) == ["Text", "Second line."]  # no header unless asked: 'Text' is a text
    assert cli.read_texts(plain, header=True) == ["Second line."]
    tsv = tmp_path / "pairs.tsv"
    tsv.write_bytes("\ufefftopic\tsentence_a\tsentence_b\nx\tA.\tB.\n".encode("utf-8"))
    assert cli.read_texts(tsv) == [("A.", "B.")]  # *.tsv: header by default; the BOM does not hide 'topic'
    with pytest.raises(ValueError, match="line 1: expected one text.*pass --header"):
        cli.read_texts(tsv, header=False)
    headless = tmp_path / "headless.tsv"
    headless.write_text("A one.\tB one.\n", encoding="utf-8")
    with pytest.raises(ValueError, match="names no 'sentence_a'.*--no-header"):
        cli.read_texts(headless)
    assert cli.read_texts(headless, header=False) == [("A one.", "B one.")]


def test_literal_special_tokens_are_text_unless_kept(packaged_enc):
    import mixlib

    tok = packaged_enc.tokenizer
    text = ["The [MASK] sat [SEP] on [CLS] mat."]
    special = set(tok.all_special_ids)
    with cli.special_tokens_as_text(tok):
        ids = mixlib.tokenize(packaged_enc, text)["input_ids"][0].tolist()
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id  # the tokenizer's own stay special
    assert not special & set(ids[1:-1])
    assert tok.convert_ids_to_tokens(ids[1:6]) == ["the", "[", "mask", "]", "sat"]
    assert tok.split_special_tokens is False  # restored
    assert mixlib.tokenize(packaged_enc, text)["input_ids"][0].tolist() == ids  # the library's default: the same rule
    kept = mixlib.tokenize(packaged_enc, text, keep_special_tokens=True)["input_ids"][0].tolist()
    assert kept.count(tok.mask_token_id) == 1 and kept.count(tok.sep_token_id) == 2


def test_kept_literal_special_tokens_are_never_masked_nor_counted(packaged_enc):
    """Issue 53: with --keep-special-tokens a literal [SEP]/[CLS] could be chosen for masking, and literal [MASK]s
    counted toward the quota."""
    import mixlib

    tok = packaged_enc.tokenizer
    text = "[SEP] [CLS] [MASK] [MASK] one two three four five six seven eight nine ten [SEP] [CLS]"
    specials = set(tok.all_special_ids)
    for seed in range(40):
        batch = mixlib.mask_tokens(packaged_enc, [text], rate=0.3, seed=seed, keep_special_tokens=True)
        ids, masked = batch["input_ids"][0], batch["masked"][0]
        chosen = mixlib.tokenize(packaged_enc, [text], keep_special_tokens=True)["input_ids"][0][masked]
        assert not specials & set(chosen.tolist()), seed  # only the ten words can be chosen
        assert int(masked.sum()) == 3  # floor(0.3 * 10): the ten words, not the 18 tokens between [CLS] and [SEP]
        assert int((ids == tok.mask_token_id).sum()) == 3 + 2  # the two literal masks stay, unchosen


def test_mixing_reads_literal_masks_as_text(tmp_path, packaged_enc):
    texts = tmp_path / "t.txt"
    texts.write_text("\ufeffA [MASK] is not a mask here.\n", encoding="utf-8")
    for flag, extra in (([], 0), (["--keep-special-tokens"], 1)):
        out = tmp_path / f"o{extra}"
        assert cli.main(["mixing", *MODEL, "--texts", str(texts), "--out", str(out), *flag]) == 0
        run = json.loads((out / "run.json").read_text(encoding="utf-8"))
        assert run["options"]["keep_special_tokens"] is bool(extra)
        table = pd.read_csv(out / "mixing_ratio_by_layer.csv", index_col="layer")
        assert table.shape[0] == 6
    # the library agrees with the run that read [MASK] as text
    import mixlib

    batch = mixlib.mask_tokens(packaged_enc, ["A [MASK] is not a mask here."], rate=0.12, seed=0)  # issue 53: one rule
    assert int((batch["input_ids"] == packaged_enc.tokenizer.mask_token_id).sum()) == int(batch["masked"].sum())
    expected = mixlib.mixing_table(mixlib.decompose(packaged_enc, batch, vectors=False))
    got = pd.read_csv(tmp_path / "o0" / "mixing_ratio_by_layer.csv", index_col="layer")
    pd.testing.assert_frame_equal(got, expected, check_names=False, atol=1e-6, check_dtype=False)


# -- stream-mixing and merge -----------------------------------------------------------------

STREAM_LINES = ["The cat sat on the mat.\tIt was warm there.", "Paris is the capital.\tOf France, that is.",
                "He went home, then slept.\tThe next day was long.", "A short one.\tAnd its partner.",
                "Rain fell all night.\tThe river rose."]


def test_stream_mixing_in_two_shards_then_merge_equals_mixing(tmp_path, capsys, packaged_enc):
    texts = tmp_path / "t.txt"
    texts.write_text("\n".join(STREAM_LINES) + "\n", encoding="utf-8")
    chunks = tmp_path / "chunks"
    opts = ["--texts", str(texts), "--out", str(chunks), "--chunk-size", "2", "--seed", "5", "--rate", "0.2",
            "--mask-count", "round"]
    assert cli.main(["stream-mixing", *MODEL, *opts, "--shard", "0/2"]) == 0
    assert "wrote 2 chunks" in capsys.readouterr().out  # chunks 0 and 2
    assert sorted(p.name for p in chunks.glob("chunk-*.parquet")) == ["chunk-0000000.parquet", "chunk-0000002.parquet"]
    assert cli.main(["stream-mixing", *MODEL, *opts, "--shard", "1/2"]) == 0
    assert cli.main(["stream-mixing", *MODEL, *opts, "--shard", "0/2"]) == 0  # a re-run resumes: nothing to do
    assert "wrote 0 chunks (0 texts), skipped 2" in capsys.readouterr().out
    assert json.loads((chunks / "run.json").read_text(encoding="utf-8"))["command"] == "stream-mixing"
    merged = tmp_path / "merged"
    assert cli.main(["merge", "--chunks", str(chunks), "--out", str(merged)]) == 0
    for f in ("mixing_ratio_by_layer.csv", "summary.csv", "run.json", "mixing_ratio_by_layer.png"):
        assert (merged / f).stat().st_size > 0, f
    assert json.loads((merged / "run.json").read_text(encoding="utf-8"))["n_sequences"] == len(STREAM_LINES)
    whole = tmp_path / "whole"
    assert cli.main(["mixing", *MODEL, "--texts", str(texts), "--out", str(whole), "--seed", "5", "--rate", "0.2",
                     "--mask-count", "round"]) == 0
    for f in ("mixing_ratio_by_layer.csv", "summary.csv"):
        a = pd.read_csv(merged / f, index_col=0)
        b = pd.read_csv(whole / f, index_col=0)
        pd.testing.assert_frame_equal(a, b, check_names=False, atol=1e-4, check_dtype=False)
    assert json.loads((merged / "run.json").read_text(encoding="utf-8"))["partial"] is False

    # issue 20: a chunk file lost -> merge refuses in one line (exit 2) unless --allow-partial, which says so
    (chunks / "chunk-0000001.parquet").unlink()
    capsys.readouterr()
    assert cli.main(["merge", "--chunks", str(chunks), "--out", str(tmp_path / "m2")]) == 2
    err = capsys.readouterr().err
    assert "1 of 3 chunk files are missing (chunks 1: 2 of 5 texts)" in err and err.count("\n") == 1, err
    assert not (tmp_path / "m2").exists()
    assert cli.main(["merge", "--chunks", str(chunks), "--out", str(tmp_path / "m2"), "--allow-partial"]) == 0
    assert "warning: partial merge, 3 of 5 texts" in capsys.readouterr().err
    run = json.loads((tmp_path / "m2" / "run.json").read_text(encoding="utf-8"))
    assert run["partial"] is True and run["coverage"] == {"texts_merged": 3, "texts_in_file": 5, "chunks_missing": [1]}
    assert "3 / 5" in run["caption"]

    # one writer per shard: a second run of a shard being written is refused before the model loads
    from mixlib.stream import writer_lock

    with writer_lock(chunks, (1, 2)):
        assert cli.main(["stream-mixing", *MODEL, *opts, "--shard", "1/2"]) == 2
        got = capsys.readouterr()
        assert "another stream-mixing is writing shard 1/2" in got.err and "model:" not in got.out, got


def test_stream_mixing_options_are_checked_before_a_model_is_loaded(tmp_path, capsys, no_model):
    texts = _texts(tmp_path)
    out = tmp_path / "o"
    for argv, message in [
        (["--shard", "2/2"], "--shard: shard '2/2'"),
        (["--shard", "half"], "not of the form i/n"),
        (["--chunk-size", "0"], "argument --chunk-size"),
        (["--mask-count", "ceil"], "argument --mask-count: invalid choice"),
    ]:
        assert cli.main(["stream-mixing", "--texts", texts, "--out", str(out), "--device", "cpu", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    bad = _texts(tmp_path, "a\tb\tc\n", name="bad.txt")
    assert cli.main(["stream-mixing", "--texts", bad, "--out", str(out), "--device", "cpu"]) == 2
    assert "bad.txt, line 1: expected one text, or two" in capsys.readouterr().err
    # issue 20: a line of zero-width spaces deep in the file failed after 8 chunks, naming texts[37]
    late = _texts(tmp_path, "".join(f"Text {i}.\n" for i in range(549)) + "\u200b\u200b\nLast.\n", name="late.txt")
    assert cli.main(["stream-mixing", "--texts", late, "--out", str(out), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "late.txt, line 550: '\\u200b\\u200b' has nothing to tokenize" in err and err.count("\n") == 1, err
    assert not out.exists()
    out.mkdir()
    from mixlib.stream import FIELDS

    record = {"model": "m", "weights_sha256": "0" * 64, "texts": "t.txt",
              "texts_sha256": hashlib.sha256(Path(texts).read_bytes()).hexdigest(), "n_texts": 1, "chunk_size": 256,
              "rate": 0.12, "seed": 0, "count": "floor", "max_length": 128, "header": False, "keep_special_tokens": False,
              "fields": list(FIELDS)}
    (out / "stream.json").write_text(json.dumps(record))
    (out / "chunk-0000000.parquet").write_bytes(b"a chunk of the recorded run")
    assert cli.main(["stream-mixing", "--texts", texts, "--out", str(out), "--device", "cpu", "--seed", "1"]) == 2
    assert "seed: 0 recorded, 1 given" in capsys.readouterr().err
    for damage in ([], {**record, "chunk_size": 0}, {**record, "n_texts": "1"}):  # a record edited by hand: one line
        (out / "stream.json").write_text(json.dumps(damage))
        assert cli.main(["stream-mixing", "--texts", texts, "--out", str(out), "--device", "cpu"]) == 2
        err = capsys.readouterr().err
        assert "stream.json is damaged or was edited" in err and err.count("\n") == 1, err
        assert cli.main(["merge", "--chunks", str(out), "--out", str(tmp_path / "m")]) == 2
        err = capsys.readouterr().err
        assert "stream.json is damaged or was edited" in err and err.count("\n") == 1, err
    (out / "chunk-0000000.parquet").unlink()
    # merge and the staged commands never replace a chunk folder
    assert cli.main(["merge", "--chunks", str(out), "--out", str(tmp_path / "m")]) == 2
    assert "no chunk-*.parquet" in capsys.readouterr().err
    assert cli.main(["mixing", "--texts", texts, "--out", str(out), "--device", "cpu"]) == 2
    assert "holds the chunk files of stream-mixing" in capsys.readouterr().err
    assert cli.main(["merge", "--chunks", str(tmp_path / "nope"), "--out", str(tmp_path / "m")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_stream_mixing_ctrl_c_keeps_finished_chunks_and_resumes(tmp_path, monkeypatch, capsys, packaged_enc):
    import mixlib.mixing

    monkeypatch.setattr(cli, "_encoder", lambda args: packaged_enc)
    real = mixlib.mixing.decompose
    calls = []

    def interrupt_second(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(mixlib.mixing, "decompose", interrupt_second)
    texts = _texts(tmp_path, "\n".join(STREAM_LINES[:3]) + "\n")
    out = tmp_path / "chunks"
    argv = ["stream-mixing", *MODEL, "--texts", texts, "--out", str(out), "--chunk-size", "1"]
    assert cli.main(argv) == 130
    assert "finished chunk files are kept" in capsys.readouterr().err
    assert [p.name for p in out.glob("chunk-*.parquet")] == ["chunk-0000000.parquet"]
    assert not list(out.glob(".*.tmp"))
    assert cli.main(argv) == 0
    assert "wrote 2 chunks (2 texts), skipped 1" in capsys.readouterr().out
    assert len(list(out.glob("chunk-*.parquet"))) == 3


# -- maps --------------------------------------------------------------------------------------


def test_maps_command_matches_the_library(tmp_path, packaged_enc):
    import numpy as np

    import mixlib
    from mixlib.measures import context_maps, measure_agreement

    texts = tmp_path / "t.txt"
    texts.write_text("\n".join(STREAM_LINES[:3]) + "\n", encoding="utf-8")
    out = tmp_path / "maps"
    assert cli.main(["maps", *MODEL, "--texts", str(texts), "--out", str(out), "--seed", "2", "--perm", "3"]) == 0
    for f in ("agreement.csv", "agreement_rollout.csv", "own_share.csv", "agreement_null.csv", "maps.npz", "run.json"):
        assert (out / f).stat().st_size > 0, f
    batch = mixlib.mask_tokens(packaged_enc, cli.read_texts(texts), rate=0.12, seed=2)
    batch.pop("masked", None)
    cm = context_maps(packaged_enc, batch)
    agreement = pd.read_csv(out / "agreement.csv", header=[0, 1], index_col=0)
    np.testing.assert_allclose(agreement.to_numpy(), measure_agreement(cm, offdiag=True).to_numpy(), atol=1e-4)
    # own share, straight from the definition: one token at a time
    share = pd.read_csv(out / "own_share.csv", index_col="layer")
    lengths = cm.attention_mask.sum(1).tolist()
    for name in ("norm", "alti"):
        for layer in (0, 5):
            vals = [cm.map(name, layer, b)[i, i] / cm.map(name, layer, b)[i].sum() for b, n in enumerate(lengths) for i in range(n)]
            assert share.loc[layer, name] == pytest.approx(float(np.mean(vals)), rel=1e-4)
    with np.load(out / "maps.npz") as z:
        assert z["alti"].shape == tuple(cm["alti"].shape) and (z["input_ids"] == cm.input_ids.numpy()).all()
        np.testing.assert_allclose(z["norm"], cm["norm"].numpy(), atol=1e-5)
    null = pd.read_csv(out / "agreement_null.csv")
    assert len(null) == 6 * 10 and null.p_value.between(0.25, 1).all()  # (1 + k) / (1 + 3)


def test_maps_bad_option_exits_2_before_loading(tmp_path, capsys, no_model):
    assert cli.main(["maps", "--texts", _texts(tmp_path), "--out", str(tmp_path / "o"), "--perm", "-1", "--device", "cpu"]) == 2
    assert "argument --perm" in capsys.readouterr().err
    assert cli.main(["maps", "--texts", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "o"), "--device", "cpu"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_mixing_ci_and_conventions(tmp_path, capsys, packaged_enc):
    import numpy as np

    import mixlib
    from mixlib.mixing import mixing_conventions

    texts = tmp_path / "t.txt"
    texts.write_text("\n".join(STREAM_LINES) + "\n", encoding="utf-8")
    out = tmp_path / "mix"
    assert cli.main(["mixing", *MODEL, "--texts", str(texts), "--out", str(out), "--seed", "1", "--ci", "0.9",
                     "--n-boot", "20", "--boot-seed", "4", "--conventions", "--mask-count", "round"]) == 0
    batch = mixlib.mask_tokens(packaged_enc, cli.read_texts(texts), rate=0.12, seed=1, count="round")
    m = mixlib.decompose(packaged_enc, batch, vectors=False)
    ci = pd.read_csv(out / "mixing_ratio_by_layer_ci.csv", header=[0, 1], index_col=0)
    expected = mixlib.mixing_table(m, ci=0.9, n_boot=20, seed=4)
    np.testing.assert_allclose(ci.to_numpy(), expected.to_numpy(), atol=1e-5)
    assert (ci.xs("low", axis=1, level=1) <= ci.xs("high", axis=1, level=1) + 1e-9).all().all()
    summary_ci = pd.read_csv(out / "summary_ci.csv", header=[0, 1], index_col=0)
    assert summary_ci.shape == (5, 9)
    conv = pd.read_csv(out / "conventions_by_layer.csv", index_col="layer")
    v = mixing_conventions(packaged_enc, batch)
    np.testing.assert_allclose(conv.to_numpy(), v.table().to_numpy(), atol=1e-5)
    # an independent route to the same number: the full LayerNorm step is the book's AttnResLn-N ratio
    ratio = pd.read_csv(out / "mixing_ratio_by_layer.csv", index_col="layer")
    np.testing.assert_allclose(conv["full_ln"], ratio["全体"], atol=1e-3)
    assert (out / "conventions_norms_by_layer.csv").stat().st_size > 0
    conv_ci = pd.read_csv(out / "conventions_by_layer_ci.csv", header=[0, 1], index_col=0)
    np.testing.assert_allclose(conv_ci.to_numpy(), v.table(ci=0.9, n_boot=20, seed=4).to_numpy(), atol=1e-5)
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert run["ci"] == 0.9 and run["n_boot"] == 20 and run["mask_count"] == "round"


def test_mixing_boot_options_need_ci(tmp_path, capsys, no_model):
    texts = _texts(tmp_path)
    for extra, message in [(["--n-boot", "50"], "give --ci LEVEL"), (["--ci", "1.2"], "argument --ci"),
                           (["--ci", "0.9", "--n-boot", "5"], "argument --n-boot"), (["--mask-count", "x"], "invalid choice")]:
        assert cli.main(["mixing", "--texts", texts, "--out", str(tmp_path / "o"), "--device", "cpu", *extra]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# -- stretch --normalize --bias, positional overlap -----------------------------------------------


def test_stretch_normalize_and_bias(tmp_path, packaged_enc):
    import numpy as np
    from scipy.stats import spearmanr

    import mixlib

    out = tmp_path / "st"
    assert cli.main(["stretch", *MODEL, "--normalize", "--bias", "--out", str(out)]) == 0
    rms = pd.read_csv(out / "random_psi_rms.csv", index_col=["layer", "head"])
    assert len(rms) == packaged_enc.n_layers * packaged_enc.n_heads
    dh = packaged_enc.d_head
    W = packaged_enc.model.encoder.layer[2].attention.self.value.weight.detach().double()  # (D, D), rows = outputs
    direct = float(W[5 * dh:(5 + 1) * dh].norm() / dh ** 0.5)  # ||P||_F / sqrt(d') of head 5
    assert rms.loc[(2, 5), "rms_v"] == pytest.approx(direct, rel=1e-5)
    psi = pd.read_csv(out / "psi_by_head.csv").set_index(["layer", "head"])
    norm = pd.read_csv(out / "psi_normalized_by_head.csv", index_col=["layer", "head"])
    np.testing.assert_allclose(norm["psi_v_mean"], psi["psi_v_mean"] / rms["rms_v"], rtol=1e-4)
    rho = pd.read_csv(out / "bias_rank_correlation.csv", index_col=["layer", "head"])
    st = mixlib.norm_stretch(packaged_enc, layers=[1])
    biased = mixlib.norm_stretch(packaged_enc, layers=[1], bias=True)
    a, b = st.get("k")[0, 3], biased.get("k")[0, 3]
    ok = np.isfinite(a) & np.isfinite(b)
    assert rho.loc[(1, 3), "rho_k"] == pytest.approx(spearmanr(a[ok], b[ok]).statistic, abs=1e-6)
    assert rho.to_numpy().max() <= 1 + 1e-9


def test_positional_writes_the_centred_overlap(tmp_path, packaged_enc):
    out = tmp_path / "pos"
    assert cli.main(["positional", *MODEL, "--n", "8", "--seed", "1", "--out", str(out)]) == 0
    share = pd.read_csv(out / "overlap_share.csv", index_col="k")
    D = packaged_enc.d_model
    for k in share.index:  # a random k-dim subspace holds k/D of the variance on average
        assert share.loc[k, "null_mean"] == pytest.approx(k / D, rel=0.25)
    cos = pd.read_csv(out / "overlap_cos.csv", index_col="statistic")["value"]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert cos["mean_abs_cos_raw"] == pytest.approx(summary["mean_abs_cos"], rel=1e-4)


def test_a_second_run_into_the_same_out_is_refused_before_the_model_loads(tmp_path, capsys, no_model):
    """Issue 20: one writer per output folder; issue 53: the lock lives beside --out, whatever the cache."""
    texts = _texts(tmp_path, "One text.\nAnother.\n")
    out = tmp_path / "results" / "mixing"
    first = cli._OneWriter(out)
    try:
        assert (tmp_path / "results" / ".mixing.mixlib-lock").is_file()  # beside --out, by its real path
        for command in (["mixing", "--texts", texts], ["clusters"], ["stream-mixing", "--texts", texts]):
            assert cli.main([*command, "--out", str(out), "--device", "cpu"]) == 2
            err = capsys.readouterr().err
            assert "another python -m mixlib run is writing into it now" in err and err.count("\n") == 1, err
        other = cli._OneWriter(tmp_path / "elsewhere" / "mixing")  # another folder of the same name is free
        other.release(keep_parents=False)
        assert not (tmp_path / "elsewhere").exists()  # the parents it made, removed again
    finally:
        first.release(keep_parents=False)
    again = cli._OneWriter(out)  # released: free again
    again.release(keep_parents=False)
    assert list(tmp_path.iterdir()) == [Path(texts)]  # no lock file, no parents left behind


def test_the_out_lock_does_not_depend_on_the_cache_or_the_link(tmp_path, monkeypatch, capsys, no_model):
    """Issue 53: two runs with different MIXLIB_CACHE (two users) or through a link to the folder see each other."""
    out = tmp_path / "res"
    link = tmp_path / "link"
    link.symlink_to(out, target_is_directory=True)  # dangling until --out is made
    monkeypatch.setenv("MIXLIB_CACHE", str(tmp_path / "cache-a"))
    first = cli._OneWriter(cli.check_out(str(out)))
    try:
        monkeypatch.setenv("MIXLIB_CACHE", str(tmp_path / "cache-b"))
        assert cli.main(["stretch", "--device", "cpu", "--out", str(link)]) == 2
        assert "another python -m mixlib run is writing into it now" in capsys.readouterr().err
    finally:
        first.release()


def test_stream_shards_share_the_folder_and_shut_out_a_replacing_run(tmp_path, capsys, no_model):
    """Issue 53: mixing and stream-mixing racing into one --out both exited 0 and the chunk files were gone."""
    from mixlib.outlock import Busy, OutLock

    out = tmp_path / "chunks"
    shard0 = cli._OneWriter(out, shared=True)
    shard1 = cli._OneWriter(out, shared=True)  # shards write side by side
    try:
        texts = _texts(tmp_path, "One text.\n")
        assert cli.main(["mixing", "--texts", texts, "--out", str(out), "--device", "cpu"]) == 2
        assert "another python -m mixlib run is writing into it now" in capsys.readouterr().err
        shard0.release()
        with pytest.raises(Busy):  # one shard still writes
            OutLock(out)
    finally:
        shard1.release()
    OutLock(out).release()  # the last shard let it go
    assert not list(tmp_path.glob(".*mixlib-lock"))


def test_a_replace_never_deletes_what_the_earlier_run_did_not_write(tmp_path, monkeypatch, capsys, packaged_enc):
    """Issue 53: mixing --out res; stream-mixing --out res/chunks; mixing --out res deleted res/chunks (exit 0)."""
    _fake_command(monkeypatch, packaged_enc, lambda args, enc, out: (out.json("run.json", {"command": "stretch"}),
                                                                    out.json("a.json", {})))
    res = tmp_path / "res"
    assert cli.main(["stretch", "--device", "cpu", "--out", str(res)]) == 0
    assert json.loads((res / "run.json").read_text())["files"] == ["a.json", "run.json"]
    capsys.readouterr()
    # a stream folder (or any --out) inside an output is refused: a later run of the outer folder would replace it
    texts = _texts(tmp_path, "One text.\n")
    for argv in (["stream-mixing", "--texts", texts], ["stretch"]):
        assert cli.main([*argv, "--device", "cpu", "--out", str(res / "chunks")]) == 2
        assert "lies inside" in capsys.readouterr().err
    # whatever got in by other means is never deleted: a subfolder, a file the run did not write, a link
    for name, make in (("chunks", lambda p: (p.mkdir(), (p / "chunk-0000000.parquet").write_text("x"))),
                       ("notes.txt", lambda p: p.write_text("mine")),
                       ("link", lambda p: p.symlink_to(tmp_path / "elsewhere"))):
        make(res / name)
        assert cli.main(["stretch", "--device", "cpu", "--out", str(res)]) == 2
        err = capsys.readouterr().err
        assert "which the earlier run there did not write" in err and name in err and err.count("\n") == 1, err
        assert os.path.lexists(res / name) and (res / "a.json").is_file()
        shutil.rmtree(res / name) if name == "chunks" else (res / name).unlink()
    # an output written before run.json listed its files: plain files only
    run = json.loads((res / "run.json").read_text())
    del run["files"]
    (res / "run.json").write_text(json.dumps(run))
    (res / "sub").mkdir()
    assert cli.main(["stretch", "--device", "cpu", "--out", str(res)]) == 2
    assert "sub/" in capsys.readouterr().err
    (res / "sub").rmdir()
    assert cli.main(["stretch", "--device", "cpu", "--out", str(res)]) == 0


def test_a_replace_rechecks_the_folder_when_it_commits(tmp_path, monkeypatch, capsys, packaged_enc):
    """Something put into --out while the run computed (not by mixlib: the lock shuts mixlib out) is kept."""
    res = tmp_path / "res"
    _fake_command(monkeypatch, packaged_enc, lambda args, enc, out: out.json("run.json", {"command": "stretch"}))
    assert cli.main(["stretch", "--device", "cpu", "--out", str(res)]) == 0

    def meanwhile(args, enc, out):
        out.json("run.json", {"command": "stretch"})
        (res / "late").mkdir()

    _fake_command(monkeypatch, packaged_enc, meanwhile)
    assert cli.main(["stretch", "--device", "cpu", "--out", str(res)]) == 2
    assert "now holds late/" in capsys.readouterr().err
    assert (res / "late").is_dir() and sorted(p.name for p in tmp_path.iterdir()) == ["res"]
    shutil.rmtree(res / "late")

    def stream_arrives(args, enc, out):  # adversarial test: a stream-mixing folder copied onto --out meanwhile
        out.json("run.json", {"command": "stretch"})
        shutil.rmtree(res)
        res.mkdir()
        (res / "run.json").write_text(json.dumps({"command": "stream-mixing"}))
        (res / "stream.json").write_text("{}")
        (res / "chunk-0000000.parquet").write_text("finished work")

    _fake_command(monkeypatch, packaged_enc, stream_arrives)
    assert cli.main(["stretch", "--device", "cpu", "--out", str(res)]) == 2
    assert "now holds the chunk files of stream-mixing" in capsys.readouterr().err
    assert (res / "chunk-0000000.parquet").read_text() == "finished work"
    (res / "stream.json").unlink()  # even without its stream.json, a stream folder is not an output to replace
    with pytest.raises(cli.UsageError, match="chunk files of stream-mixing"):
        cli.check_out(str(res))


def test_a_name_with_glob_characters_touches_no_other_runs_staging(tmp_path, monkeypatch, packaged_enc):
    """Adversarial test (issue 53): --out 'x[1]' globbed '.x1.mixlib-tmp-*' and deleted a live run's staging folder."""
    live = tmp_path / f".x1.mixlib-tmp-{os.getppid()}1-abc"  # a pid that glob-slicing would misread
    live.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".x[1].mixlib-tmp-{int(dead.stdout)}-def"  # the killed run of x[1] itself: removed
    stale.mkdir()
    _fake_command(monkeypatch, packaged_enc, lambda args, enc, out: out.json("run.json", {"command": "stretch"}))
    assert cli.main(["stretch", "--device", "cpu", "--out", str(tmp_path / "x[1]")]) == 0
    assert live.is_dir() and not stale.exists() and (tmp_path / "x[1]" / "run.json").is_file()


def test_parents_made_by_another_run_are_not_ours_to_remove(tmp_path, monkeypatch):
    """Adversarial test (issue 53): two runs into rc/1/a and rc/1/b made the same new parents; the loser removed the
    winner's folders and both failed. A run removes only the folders it made itself, and makes a vanished one again."""
    from mixlib import outlock

    mkdir = Path.mkdir

    def raced(self, *a, **k):
        mkdir(self, *a, **k)
        if self == tmp_path / "rc":
            raise FileExistsError(17, "File exists", str(self))  # the other run made it first

    monkeypatch.setattr(Path, "mkdir", raced)
    first = cli._OneWriter(tmp_path / "rc" / "1" / "a")
    assert first.made == [tmp_path / "rc" / "1"]
    first.release(keep_parents=False)
    assert (tmp_path / "rc").is_dir() and not (tmp_path / "rc" / "1").exists()
    monkeypatch.setattr(Path, "mkdir", mkdir)
    real = outlock.OutLock
    calls = []

    def vanishing(out, **k):  # the parent removed by another run between its mkdir and the lock: made again
        calls.append(out)
        if len(calls) == 1:
            raise FileNotFoundError(2, "No such file or directory")
        return real(out, **k)

    monkeypatch.setattr(outlock, "OutLock", vanishing)
    again = cli._OneWriter(tmp_path / "rc" / "2" / "b")
    assert len(calls) == 2 and again.lock is not None
    again.release(keep_parents=False)


def test_a_link_then_dot_dot_is_read_as_the_system_reads_it(tmp_path, monkeypatch):
    """Adversarial test (issue 53): 'lnk/../x' was normalised as text (./x), not through the link (real/x)."""
    (tmp_path / "real" / "inner").mkdir(parents=True)
    (tmp_path / "lnk").symlink_to(tmp_path / "real" / "inner", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    assert cli.check_out("lnk/../viaparent") == (tmp_path / "real" / "viaparent").resolve()
    assert cli.check_out("new/../fresh") == tmp_path.resolve() / "fresh"


def test_a_failed_first_stream_run_leaves_nothing(tmp_path, monkeypatch, capsys, packaged_enc):
    """Adversarial test (issue 53): a stream-mixing that failed before its first chunk left --out (with its
    stream.json) and the parent folders it made. A folder with a finished chunk is kept for the resume."""
    import mixlib.stream

    texts = _texts(tmp_path, "One text.\nAnother one.\n")

    def no_model(args):
        raise OSError("cannot load 'nosuch/x'")

    monkeypatch.setattr(cli, "_encoder", no_model)
    assert cli.main(["stream-mixing", "--texts", texts, "--device", "cpu", "--out", str(tmp_path / "p1" / "p2" / "s")]) == 2
    monkeypatch.setattr(cli, "_encoder", lambda args: packaged_enc)

    def bad_text(*a, **k):
        raise ValueError("texts[0] has no ordinary token to mask")

    monkeypatch.setattr(mixlib.stream, "mix_chunk", bad_text)
    assert cli.main(["stream-mixing", "--texts", texts, "--device", "cpu", "--out", str(tmp_path / "q1" / "s")]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.txt"]  # no p1/, no q1/s with its stream.json
    capsys.readouterr()
    monkeypatch.undo()
    monkeypatch.setattr(cli, "_encoder", lambda args: packaged_enc)
    written = []
    real_mix = mixlib.stream.mix_chunk

    def one_then_fail(enc, texts_, out, meta, k, *a, **kw):
        if written:
            raise ValueError("texts[1] has no ordinary token to mask")
        written.append(k)
        return real_mix(enc, texts_, out, meta, k, *a, **kw)

    monkeypatch.setattr(mixlib.stream, "mix_chunk", one_then_fail)
    out = tmp_path / "kept" / "s"
    assert cli.main(["stream-mixing", "--texts", texts, "--device", "cpu", "--chunk-size", "1", "--out", str(out)]) == 2
    assert (out / "chunk-0000000.parquet").is_file() and (out / "stream.json").is_file()  # finished work stays
    # a new folder another shard is writing into (it holds the shared lock) is left to that shard
    from mixlib.outlock import OutLock

    monkeypatch.setattr(mixlib.stream, "mix_chunk", bad_text)
    other = tmp_path / "busy" / "s"
    (other.parent).mkdir()
    shard = OutLock(other, shared=True)
    try:
        assert cli.main(["stream-mixing", "--texts", texts, "--device", "cpu", "--out", str(other)]) == 2
        assert (other / "stream.json").is_file()
    finally:
        shard.release()


def test_a_late_ctrl_c_while_python_exits_is_ignored(tmp_path):
    """Adversarial test (issue 53): a Ctrl-C while the interpreter shut down (atexit) printed a traceback, or the
    process died by SIGINT instead of exiting with its status."""
    code = ("import atexit, os, signal, sys, runpy\n"
            "atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), print('after', file=sys.stderr)))\n"
            "sys.argv = ['mixlib', 'stretch', '--k', '3']\n"
            "runpy.run_module('mixlib', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "after" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_an_out_that_is_a_link_is_written_at_its_target(tmp_path, monkeypatch, capsys, packaged_enc):
    """Issue 53: the link was replaced by a real folder and its target kept the stale results."""
    def writer(name):
        return lambda args, enc, out: (out.json("run.json", {"command": "stretch"}), out.json(name, {}))

    target = tmp_path / "runs" / "v1"
    link = tmp_path / "latest"
    link.symlink_to(target, target_is_directory=True)  # dangling: the run makes the target
    _fake_command(monkeypatch, packaged_enc, writer("first.json"))
    assert cli.main(["stretch", "--device", "cpu", "--out", str(link)]) == 0
    _fake_command(monkeypatch, packaged_enc, writer("second.json"))
    assert cli.main(["stretch", "--device", "cpu", "--out", str(link)]) == 0
    assert link.is_symlink() and sorted(p.name for p in target.iterdir()) == ["run.json", "second.json"]
    assert str(target) in capsys.readouterr().out  # the report names where the files are


def test_paths_that_resolve_oddly_fail_in_one_line_before_the_model(tmp_path, capsys, no_model):
    """Issue 53: links that loop, names that are not UTF-8, an --out that cannot be made, each before any work."""
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    bad_name = os.fsdecode(b"caf\xe9")  # Latin-1, not UTF-8
    texts = _texts(tmp_path, "One text.\n")
    cases = [
        (["stretch", "--out", str(loop)], "loops"),
        (["stretch", "--out", str(loop / "sub")], str(loop)),
        (["mixing", "--texts", str(loop), "--out", str(tmp_path / "o")], "loop"),
        (["stretch", "--out", str(tmp_path / bad_name)], "not valid UTF-8"),
        (["mixing", "--texts", str(tmp_path / bad_name), "--out", str(tmp_path / "o")], "not valid UTF-8"),
        (["stretch", "--out", str(tmp_path / ("x" * 230))], "give a shorter one"),
        (["stream-mixing", "--texts", texts, "--out", str(loop)], "loops"),
    ]
    if os.geteuid() != 0:  # root writes anywhere
        cases.append((["stretch", "--out", str(ro / "o")], "not writable"))
    for argv, message in cases:
        assert cli.main([*argv, "--device", "cpu"]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
    ro.chmod(0o755)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop", "ro", "t.txt"]


def test_a_loop_is_caught_by_every_python(tmp_path):
    """Python 3.13 leaves a looping link unresolved where 3.11 raises: both are one line (torch-free: runs on 3.13)."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for value in (loop, loop / "sub", loop / "a" / "b"):
        with pytest.raises(cli.UsageError, match="loop"):
            cli.check_out(str(value))
        with pytest.raises(cli.UsageError, match="loop"):
            cli.check_stream_out(str(value))
    assert cli.check_out(str(tmp_path / "fine")) == tmp_path.resolve() / "fine"


def test_maps_takes_its_limit(tmp_path, packaged_enc):
    """Issue 53: maps --limit N was ignored (every text analysed) while run.json recorded the limit."""
    import numpy as np

    texts = _texts(tmp_path, "One text.\nA second text.\nA third one.\n")
    out = tmp_path / "maps"
    assert cli.main(["maps", *MODEL, "--texts", texts, "--limit", "2", "--out", str(out)]) == 0
    with np.load(out / "maps.npz") as z:
        assert z["input_ids"].shape[0] == 2
    assert json.loads((out / "run.json").read_text())["texts"] == 2


def test_a_second_ctrl_c_while_stopping_is_one_line(tmp_path, monkeypatch, capsys, packaged_enc):
    """Issue 53: a double Ctrl-C showed a traceback; it exits 130 with one line."""
    def interrupted(args, enc, out):
        out.json("run.json", {"command": "stretch"})
        raise KeyboardInterrupt

    discard = cli._Out.discard

    def pressed_again(self):
        import signal

        signal.raise_signal(signal.SIGINT)  # ignored now: the run is stopping
        discard(self)

    import signal

    before = signal.getsignal(signal.SIGINT)
    _fake_command(monkeypatch, packaged_enc, interrupted)
    monkeypatch.setattr(cli._Out, "discard", pressed_again)
    assert cli.main(["stretch", "--device", "cpu", "--out", str(tmp_path / "o")]) == 130
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "interrupted" in err and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGINT) is before  # restored after the run


def test_a_signal_inside_an_import_is_still_an_interruption(tmp_path, monkeypatch, capsys, packaged_enc):
    """Issue 53 (found here): SIGTERM while matplotlib's C extension loaded surfaced as ImportError, a traceback."""
    def importing(args, enc, out):
        try:
            raise cli._Terminated
        except KeyboardInterrupt as err:
            raise ImportError("initialization failed") from err

    _fake_command(monkeypatch, packaged_enc, importing)
    assert cli.main(["stretch", "--device", "cpu", "--out", str(tmp_path / "o")]) == 143
    err = capsys.readouterr().err
    assert "terminated; nothing was written" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_an_error_about_a_text_names_its_line_in_the_file(tmp_path, capsys, packaged_enc, monkeypatch):
    """Issue 20 review: mixing said 'texts[1] has no ordinary token', an index that shifts with comments and headers."""
    import mixlib.data

    def refuse(enc, texts, **kwargs):  # a check inside the library that only the tokenizer can make
        raise ValueError("texts[1] has no ordinary token to mask (only special tokens after tokenization).")

    monkeypatch.setattr(mixlib.data, "mask_tokens", refuse)
    texts = _texts(tmp_path, "# two texts\nThe cat sat on the mat.\n\nA dog.\n")
    for command in ("mixing", "maps"):
        assert cli.main([command, *MODEL, "--texts", texts, "--out", str(tmp_path / command)]) == 2
        err = capsys.readouterr().err
        assert "t.txt, line 4: has no ordinary token to mask" in err and err.count("\n") == 1, err


def test_warnings_are_one_line_naming_the_file_line(tmp_path, capsys, packaged_enc):
    texts = _texts(tmp_path, "# c\nShort.\n" + "a long text " * 20 + "\nShort again.\n")
    assert cli.main(["mixing", *MODEL, "--texts", texts, "--max-length", "8", "--out", str(tmp_path / "o")]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(err) == 1 and err[0].startswith("python -m mixlib mixing: warning: 1 of 3 text(s) are longer"), err
    assert f"e.g. line 3 of {texts}" in err[0]
