"""Colab's first cell, run as Colab would run it.

Every notebook starts with :data:`mixlib._repo.INSTALL_CELL`. Here it runs in a
fresh virtual environment that sees what Colab preinstalls (torch, transformers,
pandas, IPython ... : this machine's packages, through a ``.pth`` file, outside the
environment so that pip can never change them) but not mixlib; a stand-in
``google.colab`` module makes the cell think it is on Colab; the repository URL
(``MIXBOOK_REPO_URL``) points at a local git repository holding a snapshot of this
working tree, and the clone goes to a temporary folder (``MIXBOOK_DIR``). The cell
goes through IPython's own ``run_cell``, in a separate interpreter.

Checked: mixlib imports from the clone and loads the packaged encoder; chapter 00
then runs top to bottom (fast mode); torch is the same before and after, and pip
installed no torch; running the cell twice is harmless; an older clone is brought up
to date when the repository has moved on. Nothing is downloaded: pip finds every
dependency already installed. (Marked slow: about a minute on an idle 2-core machine.)

Quick tests run the cell through IPython's input transformer with a recording
``subprocess.run``: outside Colab it does nothing; on Colab it clones, then on a second run
fetches and resets, with the URL from ``MIXBOOK_REPO_URL``, no shell, no password prompt and a
time limit; a failed update keeps the old clone; a refusal, a failed clone or a step that hangs
stops the notebook with one line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import types
from pathlib import Path

import pytest

from mixlib._repo import INSTALL_CELL, REPO_BRANCH, REPO_DIR_ENV, REPO_URL, REPO_URL_ENV

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / ".ci"))
import colab_replica  # noqa: E402 - the snapshot repository, shared with make test-colab
GIT = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "init.defaultBranch=main",
       "-c", "commit.gpgsign=false"]

# Runs inside the fresh environment: argv = [mode, cell file, clone dir, result file, (notebook)].
RUNNER = textwrap.dedent('''
    import importlib.util, json, os, sys, time, types
    from importlib.metadata import version

    mode, cell_file, clone, result_file = sys.argv[1:5]
    result = {"mixlib_before": importlib.util.find_spec("mixlib") is not None,
              "torch_before": version("torch")}
    google = sys.modules.setdefault("google", types.ModuleType("google"))
    colab = types.ModuleType("google.colab")           # the stand-in: the cell only asks whether it is imported
    colab.output = types.SimpleNamespace(enable_custom_widget_manager=lambda: None)
    sys.modules["google.colab"] = google.colab = colab

    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    cell = open(cell_file, encoding="utf-8").read()
    runs = 2 if mode == "twice" else 1
    result["seconds"] = {}
    for i in range(runs):
        t0 = time.perf_counter()
        outcome = shell.run_cell(cell, store_history=True)
        outcome.raise_error()
        result["seconds"][f"cell {i + 1}"] = round(time.perf_counter() - t0, 1)

    t0 = time.perf_counter()
    import mixlib
    import torch

    result["mixlib_file"] = mixlib.__file__
    result["torch_after"] = version("torch")
    result["torch_file"] = torch.__file__
    result["data_path"] = str(mixlib.data_path("sentence_pairs.tsv"))
    if len(sys.argv) > 5:  # the packaged encoder, then the rest of a chapter cell by cell in the same shell
        enc = mixlib.load_encoder("all-MiniLM-L6-v2", device="cpu")
        result["encoder"] = enc.describe()
        result["seconds"]["import and load"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        nb = json.load(open(sys.argv[5], encoding="utf-8"))
        code = [c for c in nb["cells"] if c["cell_type"] == "code"][1:]
        for c in code:
            src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            shell.run_cell(src, store_history=True).raise_error()
        result["chapter_cells"] = len(code)
        result["seconds"]["chapter"] = round(time.perf_counter() - t0, 1)
    json.dump(result, open(result_file, "w"))
''')


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def colab(tmp_path_factory):
    """A fresh environment, a repository to clone from, and a way to run the cell in it."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    base = tmp_path_factory.mktemp("colab")

    # 1. the repository: a snapshot of this working tree (tracked and new files, not ignored ones)
    origin = colab_replica.snapshot_repo(base / "origin")

    # 2. "Colab's preinstalled packages": this environment's site-packages minus mixlib, as a site
    #    directory outside the new environment (pip does not uninstall or change what is outside it)
    site = Path(sysconfig.get_paths()["purelib"])
    preinstalled = base / "preinstalled"
    preinstalled.mkdir()
    for entry in site.iterdir():
        if "mixlib" in entry.name.lower():
            continue  # the editable install of this checkout: Colab does not have it
        (preinstalled / entry.name).symlink_to(entry)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    venv_site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                    check=True, capture_output=True, text=True).stdout.strip())
    (venv_site / "colab_preinstalled.pth").write_text(f"import site; site.addsitedir({str(preinstalled)!r})\n")
    pip = venv / "bin" / "pip"
    pip.write_text(f'#!/bin/sh\nexec "{py}" -m pip "$@"\n')
    pip.chmod(0o755)

    content = base / "content"  # Colab's working folder
    content.mkdir()
    clone = content / "mixbook"
    cell = base / "cell.py"
    cell.write_text(INSTALL_CELL, encoding="utf-8")
    runner = base / "runner.py"
    runner.write_text(RUNNER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MIXLIB_ROOT", "VIRTUAL_ENV", "MIXLIB_MODEL")}
    env.update({
        "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        REPO_URL_ENV: origin.as_uri(),
        REPO_DIR_ENV: str(clone),
        "HF_HUB_OFFLINE": "1",
        "MIXLIB_MODEL": "all-MiniLM-L6-v2",
        "MIXLIB_FAST": "1",
        "MIXLIB_CACHE": str(base / "cache"),
        "MPLBACKEND": "Agg",
        "PIP_NO_INDEX": "1",  # everything mixlib needs is "preinstalled": pip must not download anything
        # build with the preinstalled setuptools instead of fetching one (pip reads this variable as the
        # value of build_isolation: "0" turns isolation off)
        "PIP_NO_BUILD_ISOLATION": "0",
        "GIT_CONFIG_GLOBAL": str(base / "gitconfig"),
    })

    def run(mode: str, notebook: Path | None = None) -> dict:
        result = base / f"result-{mode}.json"
        argv = [str(py), str(runner), mode, str(cell), str(clone), str(result)] + ([str(notebook)] if notebook else [])
        proc = subprocess.run(argv, cwd=content, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"the install cell failed ({mode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        return {**json.loads(result.read_text()), "stdout": proc.stdout, "stderr": proc.stderr}

    return types.SimpleNamespace(base=base, origin=origin, clone=clone, venv=venv, venv_site=venv_site, py=py, env=env, run=run)


def _run_cell(monkeypatch, *, colab: bool, git_rc: int = 0, returncode: int = 0, stdout: str = "") -> tuple[list, dict]:
    """Run the cell with a recording ``subprocess.run``: each command's argv and environment is recorded
    instead of run; git "exits" with ``git_rc`` (and says so on stderr), the installer with ``returncode``
    after printing ``stdout``."""
    if colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the cell may add the clone to sys.path
    calls: list = []

    def run(argv, **kw):
        calls.append(list(argv))
        assert kw["timeout"] > 0 and kw["env"]["GIT_TERMINAL_PROMPT"] == "0" and "shell" not in kw
        if argv[0] == "git":
            if "clone" in argv and not git_rc:
                (Path(argv[-1]) / ".git").mkdir(parents=True)  # what a clone leaves
            return subprocess.CompletedProcess(argv, git_rc, "", "fatal: could not read from remote\n" if git_rc else "")
        return subprocess.CompletedProcess(argv, returncode, stdout, "")

    monkeypatch.setattr(subprocess, "run", run)
    from IPython.core.inputtransformer2 import TransformerManager

    ns: dict = {}
    code = TransformerManager().transform_cell(INSTALL_CELL)  # as IPython would (the cell has no magics now)
    exec(compile(code, "<install cell>", "exec"), ns)  # noqa: S102 - the cell under test
    return calls, ns


GIT_SPEED = ["git", "-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=30"]


def test_outside_colab_the_cell_does_nothing(monkeypatch):
    calls, ns = _run_cell(monkeypatch, colab=False)
    assert calls == [] and "REPO_URL" not in ns


def test_on_colab_the_cell_clones_then_updates(monkeypatch, tmp_path, capsys):
    clone = tmp_path / "my mixbook"  # a space: one argument, no shell
    monkeypatch.setenv(REPO_DIR_ENV, str(clone))
    monkeypatch.delenv(REPO_URL_ENV, raising=False)
    calls, ns = _run_cell(monkeypatch, colab=True, stdout="mixlib 0.1.0 を入れた（…）。\n")
    installer = [sys.executable, str(clone / "mixlib" / "_colab.py"), str(clone)]  # the kernel's own interpreter
    partial = f"{clone}.partial"  # cloned beside it, renamed when complete
    assert calls == [[*GIT_SPEED, "clone", "-q", "--depth", "1", "--branch", REPO_BRANCH, REPO_URL, partial], installer]
    assert (clone / ".git").is_dir() and not os.path.exists(partial)
    assert sys.path[0] == str(clone)
    assert capsys.readouterr().out == "mixlib 0.1.0 を入れた（…）。\n"  # the installer's one line, nothing else
    # an earlier clone: fetched and reset, not cloned again
    monkeypatch.setenv(REPO_URL_ENV, "https://example.invalid/fork")
    calls, _ = _run_cell(monkeypatch, colab=True)
    assert calls == [[*GIT_SPEED, "-C", str(clone), "fetch", "-q", "--depth", "1", "https://example.invalid/fork", REPO_BRANCH],
                     ["git", "-C", str(clone), "reset", "-q", "--hard", "FETCH_HEAD"], installer]


def test_on_colab_an_update_that_fails_keeps_the_old_clone(monkeypatch, tmp_path, capsys):
    clone = tmp_path / "mixbook"
    (clone / ".git").mkdir(parents=True)
    monkeypatch.setenv(REPO_DIR_ENV, str(clone))
    calls, _ = _run_cell(monkeypatch, colab=True, git_rc=128, stdout="mixlib 0.1.0 はもう入っている（…）。")
    assert [c[0] for c in calls] == ["git", sys.executable]  # no reset after a failed fetch; the installer still runs
    out = capsys.readouterr().out.splitlines()
    assert out == ["更新できなかったので、前に入れた版のまま進む: fatal: could not read from remote",
                   "mixlib 0.1.0 はもう入っている（…）。"]


def test_on_colab_a_refusal_stops_the_notebook(monkeypatch, tmp_path, capsys):
    """The installer's refusal (exit 2, one line) ends the cell with an exception (a "run all" stops there)
    that IPython shows as one line, not a traceback."""
    monkeypatch.setenv(REPO_DIR_ENV, str(tmp_path / "mixbook"))
    line = "何も入れていない: ipywidgets 7.6.5 は古すぎる（…）"
    with pytest.raises(Exception, match="mixlib を入れられなかった") as stop:
        _run_cell(monkeypatch, colab=True, returncode=2, stdout=line)
    assert stop.value._render_traceback_() == ["mixlib を入れられなかった（理由は上に示した）。"]
    assert capsys.readouterr().out.strip() == line
    assert str(tmp_path / "mixbook") not in sys.path


def test_on_colab_a_failed_clone_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv(REPO_DIR_ENV, str(tmp_path / "mixbook"))
    with pytest.raises(Exception, match="を取得できなかった: fatal: could not read from remote") as stop:
        _run_cell(monkeypatch, colab=True, git_rc=128)
    assert len(stop.value._render_traceback_()) == 1


def test_on_colab_a_step_that_hangs_is_stopped(monkeypatch, tmp_path):
    monkeypatch.setenv(REPO_DIR_ENV, str(tmp_path / "mixbook"))
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))

    def hang(argv, **kw):
        raise subprocess.TimeoutExpired(argv, kw["timeout"])

    monkeypatch.setattr(subprocess, "run", hang)
    with pytest.raises(Exception, match="git が 300 秒で終わらなかった") as stop:
        exec(compile(INSTALL_CELL, "<install cell>", "exec"), {})  # noqa: S102
    assert len(stop.value._render_traceback_()) == 1


def _origin(tmp_path: Path, files: dict[str, str]) -> str:
    """A tiny repository with one commit on the book's branch; its file:// URL (so that --depth works)."""
    origin = tmp_path / "origin"
    origin.mkdir()
    subprocess.run([*GIT, "init", "-q", "-b", REPO_BRANCH, str(origin)], check=True)
    for name, text in files.items():
        (origin / name).write_text(text)
    subprocess.run([*GIT, "-C", str(origin), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(origin), "commit", "-q", "-m", "one"], check=True)
    return origin.as_uri()


def _run_cell_with_git(monkeypatch):
    """The cell with the real git; the installer only recorded."""
    real = subprocess.run
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr(sys, "path", list(sys.path))

    def run(argv, **kw):
        if argv[0] == "git":
            return real(argv, **kw)
        return subprocess.CompletedProcess(argv, 0, "mixlib を入れた。", "")

    monkeypatch.setattr(subprocess, "run", run)
    exec(compile(INSTALL_CELL, "<install cell>", "exec"), {})  # noqa: S102 - the cell under test


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_an_interrupted_clone_never_blocks_the_next_run(monkeypatch, tmp_path, capsys):
    """Issue 53: a first clone stopped by the stop button (or the 300 s limit) left .git/shallow.lock, and every later
    run failed the same way with no hint. Both kinds of leftover now give way to the next run."""
    url = _origin(tmp_path, {"pyproject.toml": "[project]\nname = 'x'\n"})
    monkeypatch.setenv(REPO_URL_ENV, url)
    # 1. what this cell leaves when its first clone is killed: a .partial folder, removed and cloned again
    clone = tmp_path / "mixbook"
    monkeypatch.setenv(REPO_DIR_ENV, str(clone))
    (tmp_path / "mixbook.partial" / ".git").mkdir(parents=True)
    (tmp_path / "mixbook.partial" / ".git" / "shallow.lock").write_text("")
    _run_cell_with_git(monkeypatch)
    assert (clone / "pyproject.toml").is_file() and not (tmp_path / "mixbook.partial").exists()
    # 2. what the cell before this one left (a clone killed inside its folder), or a killed update: stale locks
    old = tmp_path / "old"
    subprocess.run([*GIT, "init", "-q", str(old)], check=True)
    (old / ".git" / "shallow.lock").write_text("")
    (old / ".git" / "index.lock").write_text("")
    monkeypatch.setenv(REPO_DIR_ENV, str(old))
    _run_cell_with_git(monkeypatch)
    out = capsys.readouterr().out
    assert (old / "pyproject.toml").is_file(), out  # fetched and reset: the worktree is there
    assert "更新できなかった" not in out
    # 3. a folder that is not a clone is never cloned over: one line says what to do
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    monkeypatch.setenv(REPO_DIR_ENV, str(other))
    with pytest.raises(Exception, match=f"git の複製ではないファイルを含む.*{REPO_DIR_ENV}") as stop:
        _run_cell_with_git(monkeypatch)
    assert len(stop.value._render_traceback_()) == 1 and (other / "notes.txt").read_text() == "mine"


def test_install_cell_defaults_to_the_public_repository():
    assert f'os.environ.get("{REPO_URL_ENV}", "{REPO_URL}")' in INSTALL_CELL
    assert 'os.path.join(REPO_DIR, "mixlib", "_colab.py")' in INSTALL_CELL and "google.colab" in INSTALL_CELL
    assert not any(line.lstrip().startswith("!") for line in INSTALL_CELL.splitlines())  # no shell lines


@pytest.mark.slow
def test_the_cell_installs_mixlib_and_chapter_00_runs(colab):
    assert not colab.clone.exists()
    edition = ROOT / "notebooks" / "colab" / "00_environment.ipynb"  # what Colab opens: the chapter's Colab edition
    first_cell = "".join(json.loads(edition.read_text(encoding="utf-8"))["cells"][0]["source"])
    assert first_cell == INSTALL_CELL and first_cell.startswith("#@title ")  # folded under its title, as in the notebook
    first = colab.run("twice", notebook=edition)
    assert first["mixlib_before"] is False  # the fresh environment had no mixlib
    assert Path(first["mixlib_file"]).is_relative_to(colab.clone)  # imported from the clone
    assert first["torch_after"] == first["torch_before"]
    assert not Path(first["torch_file"]).is_relative_to(colab.venv)  # still the preinstalled torch
    assert not any(p.name.startswith("torch") for p in colab.venv_site.iterdir())  # pip installed no torch
    assert "all-MiniLM-L6-v2" in first["encoder"]
    assert Path(first["data_path"]).is_relative_to(colab.clone)
    assert first["chapter_cells"] >= 5
    assert _git("rev-parse", "HEAD", cwd=colab.clone) == _git("rev-parse", "HEAD", cwd=colab.origin)
    print("seconds:", first["seconds"])
    # installed for good: a new interpreter (a restarted kernel) imports mixlib without the cell
    proc = subprocess.run([str(colab.py), "-c", "import mixlib; print(mixlib.__file__)"], cwd=colab.base,
                          env=colab.env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()).is_relative_to(colab.clone)


@pytest.mark.slow
def test_an_older_clone_is_brought_up_to_date(colab):
    if not colab.clone.exists():
        colab.run("once")
    old = _git("rev-parse", "HEAD", cwd=colab.clone)
    (colab.origin / "data" / "NEWER.txt").write_text("a later commit\n")
    (colab.clone / "README.md").write_text("edited on Colab\n")  # the clone is the book's copy: overwritten
    _git("add", "data/NEWER.txt", cwd=colab.origin)
    _git("commit", "-q", "-m", "later", cwd=colab.origin)
    new = _git("rev-parse", "HEAD", cwd=colab.origin)
    assert new != old
    again = colab.run("once")
    assert _git("rev-parse", "HEAD", cwd=colab.clone) == new
    assert (colab.clone / "data" / "NEWER.txt").is_file()
    assert (colab.clone / "README.md").read_text(encoding="utf-8") == (colab.origin / "README.md").read_text(encoding="utf-8")
    assert again["torch_after"] == again["torch_before"]
    assert "更新できなかった" not in again["stdout"]
    print("seconds:", again["seconds"])
