"""The command-line interface: --help, each command's files, and bad input.

Commands run in-process through ``mixlib.cli.main`` on the packaged model (the
encoder is loaded once per process), with small sizes.
"""

from __future__ import annotations

import json
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


def test_read_texts_layouts(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("# comment\nOne text.\n\nFirst half.\tSecond half.\n", encoding="utf-8")
    assert cli.read_texts(plain) == ["One text.", ("First half.", "Second half.")]
    table = tmp_path / "pairs.tsv"
    table.write_text("topic\tsentence_a\tsentence_b\nx\tA one.\tB one.\ny\tA two.\tB two.\n", encoding="utf-8")
    assert cli.read_texts(table) == [("A one.", "B one."), ("A two.", "B two.")]
    shipped = cli.read_texts(REPO / "data" / "sentence_pairs.tsv")
    assert len(shipped) >= 200 and all(isinstance(t, tuple) and len(t) == 2 for t in shipped)


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "holds no texts"),
        ("a\tb\tc\n", "line 1: expected one text"),
        ("topic\tsentence_a\tsentence_b\nx\tonly a\n", "line 2: expected 3 TAB-separated"),
    ],
)
def test_read_texts_bad_files(tmp_path, content, message):
    f = tmp_path / "t.txt"
    f.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        cli.read_texts(f)


def test_bad_input_exits_2_with_a_message(tmp_path, capsys):
    assert cli.main(["mixing", *MODEL, "--texts", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert cli.main(["clusters", *MODEL, "--k", "40000", "--out", str(tmp_path / "o")]) == 2
    assert "larger than the vocabulary" in capsys.readouterr().err
    assert cli.main(["positional", *MODEL, "--layer", "9", "--out", str(tmp_path / "o")]) == 2
    assert "out of range" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["mixing", *MODEL])  # --texts and --out are required


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


def test_an_unexpected_exception_is_a_bug_not_bad_input(tmp_path, monkeypatch):
    """A TypeError inside a command shows its traceback; it is not reported as bad input (exit 2)."""

    def broken(args):
        raise TypeError("compare() missing 1 required positional argument: 'paper'")

    monkeypatch.setitem(cli.COMMANDS, "stretch", (broken, "broken"))
    with pytest.raises(TypeError, match="missing 1 required"):
        cli.main(["stretch", *MODEL, "--out", str(tmp_path / "o")])
