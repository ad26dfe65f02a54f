"""Install mixlib into a running Colab runtime without replacing anything the runtime already has.

The notebooks' first cell (:data:`mixlib._repo.INSTALL_CELL`) clones the repository, then runs this
file as a separate process with the kernel's own interpreter::

    python <clone>/mixlib/_colab.py <clone>

Chapter 13 runs it once more with ``--extra ja`` (through :func:`mixlib.japanese.install_on_colab`) to add the
extra ``mixlib[ja]`` (fugashi and the MeCab dictionaries) by the same rules: the extra's requirements join
mixlib's, and pip is asked for ``<clone>[ja]``.

It imports nothing but the standard library and ``packaging`` (Colab has it; pip's own copy otherwise),
so it runs before mixlib is installed and whatever state the runtime is in. The steps:

1. **Too old?** Every requirement of mixlib (``<clone>/pyproject.toml``) that the runtime already
   has installed must admit the installed version. If one does not (an ipywidgets or transformers
   older than the range), nothing is installed: one line names the package, its version, the range
   and what to do, and the exit status is 2.
2. **Already there?** When mixlib is installed in editable mode from this clone and every requirement is
   met, there is nothing to do: no pip, so a second run works offline.
3. **What would pip change?** ``pip install --dry-run --report``, with every installed distribution
   pinned as a constraint (so pip looks for a plan that keeps them all), lists what pip would install.
   If that list still contains a distribution the runtime already has (other than mixlib itself),
   nothing is installed: one line names it (exit status 2). Replacing a package the kernel has already
   imported is what makes Colab ask for a restart, and a replaced ipywidgets is what makes widgets vanish.
4. **Install exactly that list**, quietly and with ``--no-deps``, so that nothing else can move; then
   check again that nothing installed before has changed and that every requirement is met.
5. **One line** saying what was installed.

pip runs without the environment variables that would change what it installs (``PIP_NO_DEPS``,
``PIP_UPGRADE``, ``PIP_TARGET``...), and builds mixlib without build isolation when the runtime's
setuptools meets the build requirement (Colab's does), so that the build needs no download.
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
    from packaging.version import InvalidVersion, Version
except ImportError:  # pragma: no cover - depends on the runtime
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.version import InvalidVersion, Version

try:
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10
    from pip._vendor import tomli as tomllib

#: the distribution this script installs (re-installing it over an earlier clone is expected)
SELF = "mixlib"
EXIT_REFUSED = 2
EXIT_PIP_FAILED = 1
#: pip settings from the environment that would change what gets installed, or where: cleared for pip
PIP_OVERRIDES = ("PIP_NO_DEPS", "PIP_UPGRADE", "PIP_UPGRADE_STRATEGY", "PIP_FORCE_REINSTALL", "PIP_IGNORE_INSTALLED",
                 "PIP_TARGET", "PIP_PREFIX", "PIP_ROOT", "PIP_USER", "PIP_REQUIREMENT", "PIP_EDITABLE", "PIP_NO_INDEX",
                 "PIP_DRY_RUN", "PIP_REPORT")
#: what to do when the runtime itself is at fault (a fresh runtime has Colab's versions: make test-colab)
FRESH_RUNTIME = "「ランタイム → ランタイムを接続解除して削除」で新しいランタイムにして、このセルからやり直す"


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


def requirements(clone: str, extra: str | None = None) -> list[str]:
    """mixlib's run-time requirements, from ``<clone>/pyproject.toml``, plus those of ``extra`` (``"ja"``) when given."""
    with open(os.path.join(clone, "pyproject.toml"), "rb") as fh:
        project = tomllib.load(fh)["project"]
    reqs = list(project["dependencies"])
    if extra is not None:
        extras = project.get("optional-dependencies", {})
        if extra not in extras:
            raise ValueError(f"mixlib has no extra {extra!r}; it has {sorted(extras)}.")
        reqs += extras[extra]
    return reqs


def _lowest(req: Requirement) -> Version | None:
    """The smallest version a requirement admits from below (``>=7.7`` -> 7.7), or None."""
    lows = [Version(spec.version.rstrip(".*")) for spec in req.specifier
            if spec.operator in (">=", ">", "~=", "==") and spec.version.rstrip(".*")[:1].isdigit()]
    return max(lows) if lows else None


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
        Empty when every installed requirement is satisfied (missing ones are pip's to add). The advice
        for a package below the range stays inside its major version (``'ipywidgets>=7.7,<8'``): an
        unbounded ``>=`` would move Colab's ipywidgets to 8, which is what this installer exists to avoid.

    Examples
    --------
    >>> too_old(["ipywidgets>=7.7", "numpy>=1.24"], {"ipywidgets": "7.6.5", "numpy": "2.1.3"})[0][:80]
    'ipywidgets 7.6.5 は古すぎる（mixlib には ipywidgets>=7.7 が必要）: 「ランタイム → ランタイムを接続解除して削除」で'
    """
    problems = []
    for text in reqs:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue
        have = installed.get(canonical(req.name))
        if have is None:
            continue
        wanted = f"{req.name}{req.specifier}"
        try:
            version = Version(have)
        except InvalidVersion:
            problems.append(f"{req.name} の版 '{have}' は読めない（PEP 440 の形でない）ので、mixlib が要る {wanted} に"
                            f"合うか判断できない: {FRESH_RUNTIME}")
            continue
        if req.specifier.contains(version, prereleases=True):
            continue
        low = _lowest(req)
        if low is not None and version < low:
            bounded = f"{req.name}>={low},<{low.major + 1}"
            problems.append(f"{req.name} {have} は古すぎる（mixlib には {wanted} が必要）: {FRESH_RUNTIME}。"
                            f"それでも古いなら !pip install -q '{bounded}' を実行し、「ランタイム → セッションを再起動する」"
                            "のあと、このセルをもう一度実行する")
        else:
            problems.append(f"{req.name} {have} は mixlib が要る範囲 {wanted} に合わない: {FRESH_RUNTIME}")
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


#: seconds one pip call may take (the cell gives the whole installer 1800)
PIP_TIMEOUT = 800


def _pip(args: list[str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    env = {k: v for k, v in os.environ.items() if k not in PIP_OVERRIDES}
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=PIP_TIMEOUT)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 124, "", f"pip did not finish in {PIP_TIMEOUT} s (a slow or stalled network?)")


def _fail(proc: subprocess.CompletedProcess, what: str) -> int:
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
    print(f"{tail}\nmixlib を入れられなかった（{what}; pip の出力の最後を上に示した）。", file=sys.stderr)
    return EXIT_PIP_FAILED


def constraints(installed: dict[str, str]) -> str:
    """A pip constraints file that pins every installed distribution (mixlib and unreadable versions aside)."""
    lines = []
    for name, version in sorted(installed.items()):
        try:
            Version(version)
        except InvalidVersion:
            continue
        if name != SELF:
            lines.append(f"{name}=={version}\n")
    return "".join(lines)


def editable_from(clone: str) -> bool:
    """Whether mixlib is installed in editable mode from ``clone`` (PEP 610 ``direct_url.json``)."""
    try:
        direct = json.loads(metadata.distribution(SELF).read_text("direct_url.json") or "{}")
    except (metadata.PackageNotFoundError, ValueError):
        return False
    from urllib.parse import urlparse
    from urllib.request import url2pathname

    url = urlparse(direct.get("url", ""))  # percent-encoded: a clone path with a space is file:///content/my%20book
    return bool(direct.get("dir_info", {}).get("editable")) and url.scheme == "file" and \
        os.path.realpath(url2pathname(url.path)) == os.path.realpath(clone)


def _build_flags(clone: str, installed: dict[str, str]) -> list[str]:
    """``--no-build-isolation`` when the runtime meets mixlib's build requirements (no download for the build)."""
    with open(os.path.join(clone, "pyproject.toml"), "rb") as fh:
        build = tomllib.load(fh).get("build-system", {}).get("requires", [])
    for text in build:
        req = Requirement(text)
        have = installed.get(canonical(req.name))
        try:
            if have is None or not req.specifier.contains(Version(have), prereleases=True):
                return []
        except InvalidVersion:
            return []
    return ["--no-build-isolation"]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    extra = None
    if len(args) == 3 and args[1] == "--extra":
        extra = args.pop()
        args.pop()
    if len(args) != 1 or not os.path.isfile(os.path.join(args[0], "pyproject.toml")):
        print(f"usage: python {os.path.basename(__file__)} CLONE [--extra NAME]  (CLONE: the repository folder with "
              f"pyproject.toml; NAME: an optional extra such as ja; got {args!r})", file=sys.stderr)
        return EXIT_REFUSED
    clone = os.path.abspath(args[0])
    installed = installed_versions()
    try:
        reqs = requirements(clone, extra)
    except ValueError as err:
        print(err, file=sys.stderr)
        return EXIT_REFUSED
    target = clone if extra is None else f"{clone}[{extra}]"

    problems = too_old(reqs, installed)
    if problems:
        print("何も入れていない: " + "; ".join(problems), file=sys.stderr)
        return EXIT_REFUSED
    missing = [r for r in reqs if canonical(Requirement(r).name) not in installed]
    if not missing and editable_from(clone):
        print(f"mixlib {installed[SELF]} はもう入っている（このクローンから。何も入れていない）。")
        return 0

    build = _build_flags(clone, installed)
    with tempfile.TemporaryDirectory() as tmp:
        pins = os.path.join(tmp, "installed.txt")
        with open(pins, "w", encoding="utf-8") as fh:
            fh.write(constraints(installed))
        report_path = os.path.join(tmp, "report.json")
        proc = _pip(["install", "--quiet", "--dry-run", "--report", report_path, "-c", pins, *build, "-e", target])
        if proc.returncode != 0:
            return _fail(proc, "pip が Colab にあるものを替えずに入れる組み合わせを見つけられなかった")
        with open(report_path, encoding="utf-8") as fh:
            report = json.load(fh)
    new, replaced = plan(report, installed)
    if replaced:
        moved = ", ".join(f"{n} {have} → {want}" for n, have, want in replaced)
        print(f"何も入れていない: pip が Colab にあるものを替えようとした（{moved}）。"
              f"この本が必要とする範囲とランタイムの版が合わない: {FRESH_RUNTIME}", file=sys.stderr)
        return EXIT_REFUSED

    proc = _pip(["install", "--quiet", "--no-deps", *build, "-e", target,
                 *(f"{n}=={v}" for n, v in new if canonical(n) != SELF)])
    if proc.returncode != 0:
        return _fail(proc, "pip install が失敗した")
    after = installed_versions()
    moved = [f"{n} {v} → {after.get(n, 'なし')}" for n, v in installed.items() if n != SELF and after.get(n) != v]
    unmet = too_old(reqs, after) + [r for r in reqs if canonical(Requirement(r).name) not in after]
    if moved or unmet:
        print(f"入れたあとの確認で食い違いが見つかった（替わったもの: {', '.join(moved) or 'なし'}; "
              f"満たされない要件: {', '.join(unmet) or 'なし'}）: {FRESH_RUNTIME}", file=sys.stderr)
        return EXIT_PIP_FAILED
    print(summary(new))
    return 0


if __name__ == "__main__":
    sys.exit(main())
