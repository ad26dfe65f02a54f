"""`make test-colab`: the book in a replica of Google Colab's default runtime.

Colab's runtime is published as a package list (``.ci/colab/pip-freeze.txt``, a copy of Google's
``googlecolab/backend-info`` file; ``tests/test_colab_runtime.py`` keeps it equal to
``../shared/colab/pip-freeze.txt`` where that exists). Four steps, each timed:

1. **Replica.** A fresh virtual environment (``--venv``) holding Colab's version of every package the
   book touches: the runtime's packages that the install cell must leave alone (:data:`GUARDED`),
   mixlib's requirements that Colab ships, and the notebook machinery (kernel, nbclient, pytest). Each
   comes from the freeze file, and so do their dependencies (the whole file is the constraint set), so
   nothing here is typed by hand. What cannot be had here is substituted and printed: this machine's
   Python (3.11; Colab has 3.13) and its CPU torch file (Colab's ``torch @ https://download.pytorch.org/...``
   wheel is for 3.13). pip's wheel cache is reused, so a second run downloads nothing.
2. **The install cell, as Colab runs it.** :data:`mixlib._repo.INSTALL_CELL` runs in the replica's
   IPython (``InteractiveShell.run_cell``), with a stand-in ``google.colab`` module, cloning a local git
   repository that holds a snapshot of this working tree, with none of this machine's pip settings (its
   local wheel folders and indexes): pip fetches from PyPI as on Colab. Its output must be one line.
   Then it runs again (fetch and reset; "already installed", no pip) and once more without a network
   (``unshare -rn``, the repository URL on GitHub): the old clone is kept and nothing is installed.
   Then chapter 13's own step: :func:`mixlib.japanese.install_on_colab` adds the extra ``mixlib[ja]``
   (fugashi and two MeCab dictionaries) with the same installer.
3. **The check** (:func:`verdict`): the stage fails if the cell or the extra changed the version of, or
   removed, anything the runtime already had, or if a :data:`GUARDED` package is missing; it prints what
   each added.
4. **The book in the replica**: ``tests/test_widgets.py``, every chapter in fast mode and the student edition
   (``make assign``) of chapters 0 and 10 untouched, with mixlib imported from the clone. By default the chapters run on the offline stand-in for bert-base-uncased
   (``tests/standin.py``, the model Colab sessions use), together with ``tests/test_standin.py``: so this
   stage also runs every ``IS_PAPER_MODEL`` branch, which is why CI runs it instead of
   ``make test-paper``. ``--model packaged`` runs the chapters on all-MiniLM-L6-v2 instead.

Usage::

    python .ci/colab_replica.py [--venv .venv-colab] [--model standin|packaged] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FREEZE = ROOT / ".ci" / "colab" / "pip-freeze.txt"
sys.path.insert(0, str(ROOT))  # the working tree's mixlib: no install needed for what this script uses
from mixlib._colab import canonical  # noqa: E402 - PEP 503 names, as the installer compares them

#: What Colab ships that the book's first cell must never move (the issue's list). The check covers
#: every package the replica had; these must also be present in it.
GUARDED = ("torch", "numpy", "pandas", "scipy", "scikit-learn", "matplotlib", "seaborn", "ipython", "ipykernel",
           "traitlets", "ipywidgets", "transformers", "huggingface-hub", "tokenizers", "safetensors", "pyarrow",
           "altair", "plotly")
#: The notebook machinery the chapters run on (Colab's versions): kernel, widgets, executor, test runner.
MACHINERY = ("ipykernel", "ipython", "jupyter-client", "jupyter-core", "nbclient", "nbformat", "traitlets",
             "ipywidgets", "widgetsnbextension", "jupyterlab-widgets", "matplotlib-inline", "pytest", "pip")
#: Not Colab's: the test harness only (two pytest workers on two cores).
HARNESS = ("pytest-xdist",)
#: Colab's torch cannot be had here (a CPU wheel for Python 3.13 from download.pytorch.org): this
#: machine's CPU torch file for Python 3.11 stands in for it.
TORCH_HERE = "2.13.0"
#: Colab's pins that torch 2.13.0 cannot live with, left free (printed): torch 2.13 requires
#: setuptools>=77.0.3, Colab has 75.2.0 (its torch 2.11 does not ask for it).
FREED_FOR_TORCH = ("setuptools",)


def parse_freeze(text: str) -> tuple[dict[str, tuple[str, str]], list[tuple[str, str]]]:
    """Pins of a ``pip freeze`` listing, and the lines that cannot be installed from a registry.

    Returns
    -------
    pins : dict
        canonical name -> (name as written, version), for every ``name==version`` line.
    skipped : list of (line, reason)
        ``name @ URL`` lines (Colab's own files, git checkouts, torch's CPU wheels) and anything else.
    """
    pins, skipped = {}, []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        if m:
            pins[canonical(m.group(1))] = (m.group(1), m.group(2))
        else:
            reason = "a direct reference (a file or URL of Colab's own)" if " @ " in line else "not name==version"
            skipped.append((line, reason))
    return pins, skipped


def torch_line(skipped: list[tuple[str, str]]) -> str:
    """Colab's torch line (``torch @ https://...torch-2.11.0%2Bcpu-cp313-...whl``), for the report."""
    return next((line for line, _ in skipped if canonical(line.split(" @ ")[0]) == "torch"), "torch (not listed)")


def mixlib_requirements() -> list[str]:
    """Canonical names of mixlib's run-time requirements (``pyproject.toml``)."""
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    return [canonical(re.match(r"[A-Za-z0-9._-]+", d).group(0)) for d in deps]


def touched(pins: dict[str, tuple[str, str]]) -> list[str]:
    """The packages the replica is built from: guarded ones, mixlib's requirements and the machinery,
    each as ``name==Colab's version`` where Colab has it (torch: this machine's file)."""
    names = dict.fromkeys([*GUARDED, *MACHINERY, *(n for n in mixlib_requirements() if n in pins)])
    specs = []
    for name in names:
        if name == "torch":
            specs.append(f"torch=={TORCH_HERE}")
        elif name in pins:
            specs.append(f"{pins[name][0]}=={pins[name][1]}")
        else:
            raise SystemExit(f"error: {name} is not in Colab's package list {FREEZE}: remove it from GUARDED/MACHINERY")
    return specs


def snapshot(python: Path) -> dict[str, str]:
    """canonical name -> version of every distribution in an environment (``pip list``)."""
    out = subprocess.run([str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
                         check=True, capture_output=True, text=True).stdout
    return {canonical(d["name"]): d["version"] for d in json.loads(out)}


def verdict(before: dict[str, str], after: dict[str, str], guarded=GUARDED) -> tuple[list[str], list[str]]:
    """What the install cell did to the runtime.

    Parameters
    ----------
    before, after : dict of str to str
        canonical name -> version, before and after the cell (:func:`snapshot`).
    guarded : iterable of str
        Packages the runtime must have had (a replica without one is not Colab's).

    Returns
    -------
    failures : list of str
        One line per changed, removed or missing package; empty when the cell replaced nothing.
    added : list of str
        ``name version`` of each package the cell added.
    """
    failures = [f"{name} is not in the replica: it cannot check that the cell leaves it alone"
                for name in guarded if canonical(name) not in before]
    for name, version in sorted(before.items()):
        if name not in after:
            failures.append(f"{name} {version} was removed by the install cell")
        elif after[name] != version:
            failures.append(f"{name} was changed by the install cell: {version} -> {after[name]}")
    added = [f"{name} {version}" for name, version in sorted(after.items()) if name not in before]
    return failures, added


def snapshot_repo(dest: Path) -> Path:
    """A git repository at ``dest`` holding this working tree (tracked and new files, not ignored ones),
    committed on the book's branch: what the install cell clones instead of GitHub."""
    from mixlib._repo import REPO_BRANCH  # noqa: PLC0415 - the working tree's mixlib (no install needed)

    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false"]
    listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    for args in (["init", "-q", "-b", REPO_BRANCH], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run([*git, *args], cwd=dest, check=True, capture_output=True)
    return dest


#: Runs in the replica: the install cell through IPython, as on Colab (argv: cell file).
CELL_RUNNER = textwrap.dedent('''
    import sys, types
    google = sys.modules.setdefault("google", types.ModuleType("google"))
    colab = types.ModuleType("google.colab")   # the stand-in: the cell only asks whether it is imported
    sys.modules["google.colab"] = google.colab = colab
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    result = shell.run_cell(open(sys.argv[1], encoding="utf-8").read(), store_history=True)
    sys.exit(0 if result.success else 1)  # IPython has shown the error as a notebook would
''')


def _pip(python: Path, *args: str) -> None:
    """``pip install -q ARGS`` in the replica; on failure its output (without this machine's notes on
    missing local index folders) and exit. ``--no-compile``: pip compiles on one core; the replica's packages are
    compiled on all of them once they are in (:func:`main`)."""
    proc = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-compile", *args],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if not ln.startswith("WARNING: Location")]
        print("\n".join(lines[-40:]))
        raise SystemExit(f"error: pip could not build the replica (exit {proc.returncode})")


def _would_install(python: Path, tmp: Path) -> list[str]:
    """Canonical names of what ``pip install -e <this tree>`` would install in the replica (a dry run)."""
    report = tmp / "report.json"
    proc = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", "--dry-run",
                           "--report", str(report), "-e", str(ROOT)], capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr[-3000:])
        raise SystemExit("error: pip could not work out what mixlib's install needs")
    return [canonical(item["metadata"]["name"]) for item in json.loads(report.read_text())["install"]]


def _step(title: str):
    print(f"\n-- {title}", flush=True)
    return time.perf_counter()


def _done(t0: float, timings: dict, title: str) -> None:
    timings[title] = time.perf_counter() - t0
    print(f"   ({timings[title]:.0f} s)", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--venv", type=Path, default=ROOT / ".venv-colab", help="the replica (re-created)")
    ap.add_argument("--model", choices=("standin", "packaged"), default="standin",
                    help="what the chapters run on: the bert-base-uncased stand-in (default) or all-MiniLM-L6-v2")
    ap.add_argument("--workers", type=int, default=2, help="pytest workers (0: none)")
    ap.add_argument("--no-tests", action="store_true", help="stop after the check (steps 1-3)")
    args = ap.parse_args(argv)
    args.venv = args.venv.absolute()  # the cell and the tests run in other folders
    timings: dict[str, float] = {}
    pins, skipped = parse_freeze(FREEZE.read_text(encoding="utf-8"))

    t0 = _step(f"1. replica of Colab's runtime in {args.venv}")
    colab_python = (ROOT / ".ci" / "colab" / "os-info.txt").read_text(encoding="utf-8").split("Python ")[1].split()[0]
    print(f"   substituted: Python {colab_python} (Colab) -> {sys.version.split()[0]} ({sys.executable})")
    print(f"   substituted: {torch_line(skipped)} (Colab) -> torch=={TORCH_HERE}, this machine's CPU wheel")
    print(f"   left out: {len(skipped)} lines of Colab's list that name a file or URL of Colab's own "
          f"({', '.join(sorted(canonical(line.split(' @ ')[0]) for line, _ in skipped))})")
    for name in FREED_FOR_TORCH:
        print(f"   substituted: {name}=={pins[name][1]} (Colab) -> what torch=={TORCH_HERE} requires")
    specs = touched(pins)
    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "colab-constraints.txt"
        constraints.write_text("".join(f"{n}=={v}\n" for k, (n, v) in pins.items()
                                       if not k.startswith("torch") and k not in FREED_FOR_TORCH))
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(args.venv)], check=True)
        py = args.venv / "bin" / "python"
        _pip(py, f"pip=={pins['pip'][1]}")
        _pip(py, "-c", str(constraints), *specs, *HARNESS)
        # what mixlib's install would pull in that Colab ships (sentence-transformers, under the packaged
        # model): Colab has it before the cell runs, so the replica must too, at Colab's version
        for _ in range(5):
            pulled = [f"{pins[k][0]}=={pins[k][1]}" for k in _would_install(py, Path(tmp)) if k in pins]
            if not pulled:
                break
            print(f"   also Colab's, because mixlib's install would pull it in: {', '.join(pulled)}")
            _pip(py, "-c", str(constraints), *pulled)
            specs += pulled
    print(f"   Colab's versions of {len(specs)} packages and what they need: " + ", ".join(specs))
    print(f"   harness (not Colab's): {', '.join(HARNESS)}")
    # compiled on every core (pip, above, was told not to: it compiles on one), before anything is timed; a file a
    # package ships for other Pythons fails here as it does under pip, and is never imported
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run([str(py), "-m", "compileall", "-q", "-j", "0", purelib], capture_output=True)
    _done(t0, timings, "replica")

    t0 = _step("2. the install cell, as Colab runs it (IPython, google.colab stand-in, a local clone)")
    before = snapshot(py)
    work = Path(tempfile.mkdtemp(prefix="colab-replica-"))
    origin = snapshot_repo(work / "origin")
    clone = work / "content" / "mixbook"
    clone.parent.mkdir(parents=True)
    from mixlib._repo import INSTALL_CELL, REPO_DIR_ENV, REPO_URL_ENV  # noqa: PLC0415

    (work / "cell.py").write_text(INSTALL_CELL, encoding="utf-8")
    (work / "runner.py").write_text(CELL_RUNNER, encoding="utf-8")
    # Colab has none of this machine's pip settings (local wheel folders and indexes, a torch cap): the cell's
    # pip sees none either, and fetches from PyPI as on Colab (pip's cache still serves what it has seen).
    # Only how to reach PyPI is kept (this machine's network needs its CA bundle) and where pip's cache is.
    keep = ("PIP_CERT", "PIP_CLIENT_CERT", "PIP_PROXY", "PIP_DEFAULT_TIMEOUT", "PIP_RETRIES", "PIP_CACHE_DIR")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MIXLIB_MODEL") and not (k.startswith("PIP_") and k not in keep)}
    ca = env.get("PIP_CERT") or os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("SSL_CERT_FILE")
    if ca:
        env["PIP_CERT"] = ca
    env.update({"PATH": f"{args.venv / 'bin'}{os.pathsep}{env['PATH']}", REPO_URL_ENV: origin.as_uri(),
                REPO_DIR_ENV: str(clone), "HF_HUB_OFFLINE": "1", "GIT_CONFIG_GLOBAL": str(work / "gitconfig"),
                "PIP_CONFIG_FILE": os.devnull})

    def cell(title: str, expect: list[str], *, prefix: tuple[str, ...] = (), **extra: str) -> bool:
        """Run the cell once; its output must be exactly the lines that start as ``expect`` says."""
        proc = subprocess.run([*prefix, str(py), str(work / "runner.py"), str(work / "cell.py")], cwd=clone.parent,
                              env={**env, **extra}, capture_output=True, text=True, timeout=900)
        shown = [line for line in proc.stdout.splitlines() if line.strip()]
        print(f"   {title}: the cell printed")
        print("\n".join(f"   | {line}" for line in shown + proc.stderr.splitlines()))
        if proc.returncode != 0:
            print(f"error: the install cell failed in the replica ({title})")
            return False
        if len(shown) != len(expect) or not all(line.startswith(e) for line, e in zip(shown, expect)):
            print(f"error: the cell must print {len(expect)} line(s) starting {expect}; it printed {len(shown)}")
            return False
        return True

    if not cell("first run", ["mixlib 0.1.0 を入れた"]):
        return 1
    _done(t0, timings, "install cell")
    first = snapshot(py)
    t0 = _step("2b. the cell again: online (fetch and reset), then offline (no network: the old clone is kept)")
    if not cell("second run", ["mixlib 0.1.0 はもう入っている"]):
        return 1
    if subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0:
        # a repository on the network that cannot be reached, as on a Colab that lost its connection
        offline = {REPO_URL_ENV: "https://github.com/nlp-course-ja/mixbook"}
        if not cell("offline run", ["更新できなかったので、前に入れた版のまま進む:", "mixlib 0.1.0 はもう入っている"],
                    prefix=("unshare", "-rn"), **offline):
            return 1
    else:
        print("   the offline run was not tried: `unshare -rn` (a network namespace without a network) is not available")
    _done(t0, timings, "cell again")

    t0 = _step("2c. chapter 13's Japanese extra, as the chapter adds it on Colab (mixlib.japanese.install_on_colab)")
    again = snapshot(py)
    proc = subprocess.run([str(py), "-c", "import mixlib.japanese as j; j.install_on_colab()"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=1800)
    shown = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    print("\n".join(f"   | {line}" for line in shown))
    if proc.returncode != 0 or len(shown) != 1 or not shown[0].startswith("mixlib 0.1.0 を入れた"):
        print("error: adding mixlib[ja] in the replica must succeed and print one line")
        return 1
    _done(t0, timings, "extra ja")

    t0 = _step("3. the check: nothing the runtime had was changed")
    after = snapshot(py)
    failures, added = verdict(before, first)
    failures += [f"on running the cell again: {line}" for line in verdict(first, again, guarded=())[0]]
    ja_failures, ja_added = verdict(again, after, guarded=())
    failures += [f"on adding mixlib[ja]: {line}" for line in ja_failures]
    print(f"   the cell added {len(added)}: {', '.join(added)}")
    print(f"   mixlib[ja] added {len(ja_added)}: {', '.join(ja_added)}")
    for line in failures:
        print(f"   FAIL: {line}")
    if failures:
        return 1
    print(f"   unchanged: all {len(before)} packages of the replica, among them {', '.join(f'{n} {before[n]}' for n in GUARDED)}")
    _done(t0, timings, "check")

    rc = 0
    if not args.no_tests:
        t0 = _step(f"4. tests/test_widgets.py, every chapter and the student edition of chapters 0 and 10 in fast mode in the replica (model: {args.model})")
        tests = ["tests/test_widgets.py", "tests/test_notebooks.py::test_notebook_runs_in_fast_mode",
                 "tests/test_assign.py::test_the_untouched_student_edition_runs_and_every_check_says_unanswered"]
        test_env = {**env, "MIXLIB_FAST": "1", "TOKENIZERS_PARALLELISM": "false", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
        # the student edition as committed (notebooks/student/; tests/test_edition.py keeps it up to date)
        test_env["MIXLIB_STUDENT_EDITION"] = str(ROOT / "notebooks" / "student")
        if args.model == "standin":
            out = subprocess.run([str(py), "tests/standin.py", "--print-env"], cwd=ROOT, env=test_env, check=True,
                                 capture_output=True, text=True).stdout
            for line in out.splitlines():  # export NAME=VALUE (shell-quoted)
                name, _, value = shlex.split(line.removeprefix("export "))[0].partition("=")
                test_env[name] = value
            test_env["MIXLIB_TEST_PAPER"] = "1"
            tests.insert(0, "tests/test_standin.py")
        where = subprocess.run([str(py), "-c", "import mixlib; print(mixlib.__file__)"], cwd=work, env=test_env,
                               check=True, capture_output=True, text=True).stdout.strip()
        print(f"   mixlib imported from {where}")
        if not Path(where).is_relative_to(clone):
            print("error: mixlib does not come from the clone the install cell made")
            return 1
        xdist = ["-n", str(args.workers), "--dist", "worksteal"] if args.workers else []  # tests/conftest.py: LONG_FIRST
        rc = subprocess.run([str(args.venv / "bin" / "pytest"), *xdist, "-p", "no:cacheprovider", "--durations=15",
                             *tests], cwd=ROOT, env=test_env).returncode
        _done(t0, timings, "book in the replica")
    shutil.rmtree(work, ignore_errors=True)
    print("\ntimings: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))
    return rc


if __name__ == "__main__":
    sys.exit(main())
