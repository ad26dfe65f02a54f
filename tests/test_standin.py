"""The paper model's branch, executed offline with a stand-in for bert-base-uncased.

``tests/standin.py`` builds a random-weight model with bert-base-uncased's
configuration (and MLM head) into a Hugging Face cache outside the repository;
with its environment, ``load_encoder("bert-base-uncased")`` resolves to it. Here:
the stand-in is what ``load_encoder`` and ``AutoModelForMaskedLM`` load, and the
four CLI subcommands run on it to completion and write their tables and figures
(small options). The numbers are meaningless; nothing asserts them. Every
notebook on the stand-in is ``make test-paper`` (its own CI stage).

Everything runs in subprocesses: huggingface_hub reads HF_HOME / HF_HUB_CACHE /
HF_HUB_OFFLINE once, at import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import standin

REPO = Path(__file__).resolve().parents[1]
#: ``make test-paper`` sets it; ``make test`` leaves these out (a 12-layer model on 2 cores takes minutes).
ENABLED = os.environ.get("MIXLIB_TEST_PAPER", "").strip() == "1"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ENABLED, reason="the paper-model stand-in runs in `make test-colab` (CI) and `make test-paper` (MIXLIB_TEST_PAPER=1)"),
]


@pytest.fixture(scope="module")
def standin_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_ENDPOINT", "MIXLIB_MODEL", "MIXLIB_FAST")}
    env.update(standin.env())
    env["PYTHONPATH"] = str(REPO)
    env.setdefault("MPLBACKEND", "Agg")
    return env


def _python(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_the_standin_lives_outside_the_repository(standin_env):
    root = Path(standin_env["HF_HOME"]).resolve()
    assert REPO not in root.parents and root != REPO
    snap = root / "hub" / "models--bert-base-uncased" / "snapshots" / standin.REVISION
    assert (snap / "model.safetensors").is_file() and (snap / "vocab.txt").is_file()


def test_load_encoder_resolves_to_the_standin(standin_env):
    code = textwrap.dedent(
        """
        import json, torch, mixlib
        from mixlib.models import packaged_model_dir
        from transformers import AutoModelForMaskedLM, AutoTokenizer
        enc = mixlib.load_encoder()  # no name: $MIXLIB_MODEL = bert-base-uncased
        mlm = AutoModelForMaskedLM.from_pretrained("bert-base-uncased", local_files_only=True)
        packaged = AutoTokenizer.from_pretrained(str(packaged_model_dir()), local_files_only=True)
        same_weights = torch.equal(mlm.bert.encoder.layer[11].output.dense.weight, enc.module(11, "ffn_out").weight)
        print("CARD", json.dumps({
            "name": enc.name, "source": enc.source, "fell_back": enc.fell_back, "caption": enc.describe(),
            "sizes": [enc.n_layers, enc.n_heads, enc.d_model, enc.config.intermediate_size, enc.vocab_size],
            "mlm": type(mlm).__name__, "same_weights": same_weights,
            "same_vocab": enc.tokenizer.get_vocab() == packaged.get_vocab(),
        }, ensure_ascii=False))
        """
    )
    proc = _python(["-c", code], standin_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[mixlib]" not in proc.stdout  # no fallback line
    card = json.loads(next(line[5:] for line in proc.stdout.splitlines() if line.startswith("CARD ")))
    assert card["name"] == "bert-base-uncased" and card["source"] == "cache" and not card["fell_back"]
    assert card["caption"] == "bert-base-uncased（12層・12ヘッド・768次元）"
    assert card["sizes"] == [12, 12, 768, 3072, 30522]
    assert card["mlm"] == "BertForMaskedLM" and card["same_weights"] and card["same_vocab"]


def _texts(tmp_path: Path) -> Path:
    """Sentence pairs, as the paper's input (a header file, like data/sentence_pairs.tsv)."""
    f = tmp_path / "pairs.tsv"
    f.write_text(
        "sentence_a\tsentence_b\n"
        "The cat sat on the mat.\tA quick brown fox jumps over the lazy dog.\n"
        "Where did you go yesterday?\tI went to the old library.\n"
        "She reads a book every night.\tThe train was late again this morning.\n",
        encoding="utf-8",
    )
    return f


#: command -> (small options, files that must be written)
COMMANDS = {
    "mixing": (
        ["--texts", "{texts}", "--max-length", "32", "--batch-size", "4"],
        ["mixing_ratio_by_layer.csv", "summary.csv", "paper_vs_ours_by_layer.csv", "paper_vs_ours_summary.csv",
         "mixing_ratio_by_layer.png", "norms_by_layer.png", "run.json"],
    ),
    "stretch": ([], ["psi_by_head.csv", "psi_qkv_mean_by_head.png", "run.json"]),
    "clusters": (
        ["--k", "12", "--upper-k", "3", "--top", "3"],
        ["cluster_summary.csv", "top_clusters_by_head.csv", "type_map.csv", "type_map.png", "psi_by_cluster.png", "run.json"],
    ),
    "positional": (
        ["--n", "16", "--layer", "11"],
        ["cos_histogram.csv", "top_pairs.csv", "pca.png", "cos_histogram.png", "position_attention_layer11.png", "run.json"],
    ),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_cli_runs_on_the_paper_model(command, standin_env, tmp_path):
    options, expected = COMMANDS[command]
    texts = _texts(tmp_path)
    out = tmp_path / "out"
    args = ["-m", "mixlib", command, "--model", "bert-base-uncased", "--device", "cpu", "--no-fallback", "--out", str(out)]
    args += [o.format(texts=texts) for o in options]
    proc = _python(args, standin_env)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    assert "[mixlib]" not in proc.stdout + proc.stderr
    missing = [name for name in expected if not (out / name).is_file() or (out / name).stat().st_size == 0]
    assert not missing, f"{command} did not write {missing}; it wrote {sorted(p.name for p in out.iterdir()) if out.is_dir() else []}"
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert run["model"] == "bert-base-uncased" and run["source"] == "cache" and run["n_layers"] == 12
    if command == "mixing":
        assert run["paper_diff"] is True  # the paper-vs-ours branch ran
