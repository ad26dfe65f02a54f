"""Install mixlib into a running Colab runtime without replacing anything the runtime already has.

The notebooks' first cell (:data:`mixlib._repo.INSTALL_CELL`) clones the repository, then runs this
file as a separate process with the kernel's own interpreter::

    python <clone>/mixlib/_colab.py <clone>

It imports nothing but the standard library and ``packaging`` (Colab has it; pip's own copy otherwise),
so it runs before mixlib is installed and whatever state the runtime is in. Four steps:

1. **Too old?** Every requirement of mixlib (``<clone>/pyproject.toml``) that the runtime already
   has installed must admit the installed version. If one does not (an ipywidgets or transformers
   older than the range), nothing is installed: one line names the package, its version, the range
   and what to do, and the exit status is 2.
2. **What would pip change?** ``pip install --dry-run --report`` lists what pip would install. If that
   list contains a distribution the runtime already has (other than mixlib itself), nothing is
   installed: one line names it (exit status 2). Replacing a package the kernel has already imported
   is what makes Colab ask for a restart, and a replaced ipywidgets is what makes widgets vanish.
3. **Install exactly that list**, quietly and with ``--no-deps``, so that nothing else can move.
4. **One line** saying what was installed.

A failure of pip itself (no network, a broken clone) prints pip's last lines and exits with status 1.
The pure parts (:func:`too_old`, :func:`plan`, :func:`summary`) are unit-tested in
``tests/test_colab_runtime.py``; ``make test-colab`` runs the whole cell in a replica of Colab's runtime.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from importlib import metadata

try:  # Colab ships packaging; pip vendors a copy everywhere else
    from packaging.requirements import Requirement
    from packaging.version import Version
except ImportError:  # pragma: no cover - depends on the runtime
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.version import Version

try:
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10
    from pip._vendor import tomli as tomllib

#: the distribution this script installs (re-installing it over an earlier clone is expected)
SELF = "mixlib"
EXIT_REFUSED = 2
EXIT_PIP_FAILED = 1


def canonical(name: str) -> str:
    """PEP 503 normalised distribution name (``Jupyter_Client`` -> ``jupyter-client``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_versions() -> dict[str, str]:
    """Canonical name -> version of every distribution this interpreter sees (first on sys.path wins)."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonical(name), dist.version)
    return found


def requirements(clone: str) -> list[str]:
    """mixlib's run-time requirements, from ``<clone>/pyproject.toml``."""
    with open(os.path.join(clone, "pyproject.toml"), "rb") as fh:
        return list(tomllib.load(fh)["project"]["dependencies"])


def too_old(reqs: list[str], installed: dict[str, str]) -> list[str]:
    """One message per requirement whose installed version is outside its range.

    Parameters
    ----------
    reqs : list of str
        PEP 508 requirement strings (``"ipywidgets>=7.7"``).
    installed : dict of str to str
        Canonical name -> installed version (:func:`installed_versions`).

    Returns
    -------
    list of str
        Empty when every installed requirement is satisfied (missing ones are pip's to add).

    Examples
    --------
    >>> too_old(["ipywidgets>=7.7", "numpy>=1.24"], {"ipywidgets": "7.6.5", "numpy": "2.1.3"})
    ["ipywidgets 7.6.5 は古すぎる（mixlib には ipywidgets>=7.7 が必要）: !pip install -q 'ipywidgets>=7.7' を実行し、「ランタイム → セッションを再起動」してから、このセルをもう一度実行する"]
    """
    problems = []
    for text in reqs:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue
        have = installed.get(canonical(req.name))
        if have is None or req.specifier.contains(Version(have), prereleases=True):
            continue
        wanted = f"{req.name}{req.specifier}"
        low = not any(s.operator in ("<", "<=") and Version(have) >= Version(s.version) for s in req.specifier)
        problems.append(f"{req.name} {have} は{'古すぎる' if low else '新しすぎる'}（mixlib には {wanted} が必要）: "
                        f"!pip install -q '{wanted}' を実行し、「ランタイム → セッションを再起動」してから、"
                        "このセルをもう一度実行する")
    return problems


def plan(report: dict, installed: dict[str, str]) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    """Split pip's ``--report`` into what is new and what would replace an installed distribution.

    Parameters
    ----------
    report : dict
        pip's installation report (``pip install --dry-run --report``): ``report["install"]`` lists
        ``{"metadata": {"name", "version"}, ...}``.
    installed : dict of str to str
        Canonical name -> version already in the runtime.

    Returns
    -------
    new : list of (name, version)
        Distributions the runtime does not have (mixlib itself included).
    replaced : list of (name, installed version, version pip wants)
        Distributions pip would change. mixlib itself is never counted here (a re-run re-installs it).
    """
    new, replaced = [], []
    for item in report.get("install", []):
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        have = installed.get(canonical(name))
        if have is None or canonical(name) == SELF:
            new.append((name, version))
        else:
            replaced.append((name, have, version))
    return new, replaced


def summary(new: list[tuple[str, str]]) -> str:
    """The cell's one line of output after a successful install."""
    own = [f"{n} {v}" for n, v in new if canonical(n) == SELF]
    rest = [f"{n} {v}" for n, v in sorted(new, key=lambda nv: canonical(nv[0])) if canonical(n) != SELF]
    added = f"新たに入れたもの: {', '.join(rest)}" if rest else "ほかに入れたものはない"
    return f"{(own or ['mixlib'])[0]} を入れた（{added}。Colab にあったものは何も替えていない）。"


def _pip(args: list[str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    return subprocess.run(cmd, capture_output=True, text=True)


def _fail(proc: subprocess.CompletedProcess, what: str) -> int:
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
    print(f"{tail}\nmixlib を入れられなかった（{what}; pip の出力の最後を上に示した）。", file=sys.stderr)
    return EXIT_PIP_FAILED


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not os.path.isfile(os.path.join(args[0], "pyproject.toml")):
        print(f"usage: python {os.path.basename(__file__)} CLONE  (CLONE: the repository folder with pyproject.toml; "
              f"got {args!r})", file=sys.stderr)
        return EXIT_REFUSED
    clone = os.path.abspath(args[0])
    installed = installed_versions()

    problems = too_old(requirements(clone), installed)
    if problems:
        print("何も入れていない: " + "; ".join(problems), file=sys.stderr)
        return EXIT_REFUSED

    with tempfile.TemporaryDirectory() as tmp:
        report_path = os.path.join(tmp, "report.json")
        proc = _pip(["install", "--quiet", "--dry-run", "--report", report_path, "-e", clone])
        if proc.returncode != 0:
            return _fail(proc, "pip が必要なものを決められなかった")
        with open(report_path, encoding="utf-8") as fh:
            report = json.load(fh)
    new, replaced = plan(report, installed)
    if replaced:
        moved = ", ".join(f"{n} {have} → {want}" for n, have, want in replaced)
        print(f"何も入れていない: pip が Colab にあるものを替えようとした（{moved}）。"
              "この本が要る範囲とランタイムの版が合わない。リポジトリの issue で知らせてほしい", file=sys.stderr)
        return EXIT_REFUSED

    pins = [f"{n}=={v}" for n, v in new if canonical(n) != SELF]
    proc = _pip(["install", "--quiet", "--no-deps", "-e", clone, *pins])
    if proc.returncode != 0:
        return _fail(proc, "pip install が失敗した")
    print(summary(new))
    return 0


if __name__ == "__main__":
    sys.exit(main())
