"""``python -m mixlib._fork URL``: a lecturer's fork points every copy of the repository URL at itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mixlib._fork import pages_url, parse_repo_url
from mixlib._repo import REPO_URL, SITE_URL

pytestmark = pytest.mark.torch_free

ROOT = Path(__file__).resolve().parent.parent
FORK = "https://github.com/Sensei-Lab/nlp-2027"


@pytest.mark.parametrize("url, expected", [
    ("https://github.com/Sensei-Lab/nlp-2027", ("Sensei-Lab", "nlp-2027")),
    ("https://github.com/me/mixbook.git", ("me", "mixbook")),
    ("https://github.com/me/mixbook/", ("me", "mixbook")),
])
def test_a_github_repository_url_is_read(url, expected):
    assert parse_repo_url(url) == expected


@pytest.mark.parametrize("url", ["https://gitlab.com/me/mixbook", "https://github.com/me", "github.com/me/mixbook",
                                 "https://github.com/me/mixbook/tree/main", "https://github.com/me/..", ""])
def test_anything_else_is_one_line_saying_what_to_give(url):
    with pytest.raises(ValueError, match="https://github.com/OWNER/NAME") as err:
        parse_repo_url(url)
    assert "\n" not in str(err.value)


def test_the_site_is_the_repositorys_github_pages():
    assert pages_url("Sensei-Lab", "nlp-2027") == "https://sensei-lab.github.io/nlp-2027/"
    assert pages_url("Me", "me.github.io") == "https://me.github.io/"  # a user site is published at the root


def _copy_of_the_repository(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    for rel in ("mixlib/_fork.py", "mixlib/_repo.py"):  # this working tree's, committed or not
        shutil.copy2(ROOT / rel, dest / rel)
    return dest


def _run(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}  # the copy's mixlib, not the installed one
    return subprocess.run([sys.executable, "-m", *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_a_fork_rewrites_every_copy_and_its_checks_pass(tmp_path):
    root = _copy_of_the_repository(tmp_path / "fork")
    bad = _run(root, "mixlib._fork", "https://gitlab.com/x/y", "--root", str(root))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "OWNER/NAME" in bad.stderr
    assert _run(root, "mixlib._fork", REPO_URL, "--check", "--root", str(root)).returncode == 0  # nothing to do

    done = _run(root, "mixlib._fork", FORK, "--root", str(root))
    assert done.returncode == 0, done.stdout + done.stderr
    old_slug = REPO_URL.removeprefix("https://github.com/")
    for path in [*root.glob("*.md"), *root.glob("*.yml"), root / "CITATION.cff", *root.rglob("book/**/*.md"),
                 *root.glob("notebooks/*.ipynb"), *root.glob("notebooks/colab/*.ipynb"), *root.glob("mixlib/*.py")]:
        text = path.read_text(encoding="utf-8")
        assert f"/{old_slug}" not in text and SITE_URL not in text, f"{path.relative_to(root)} still names the original"
    probe = subprocess.run([sys.executable, "-c", "from mixlib._repo import INSTALL_CELL, REPO_URL, SITE_URL; "
                            "import json; print(json.dumps([INSTALL_CELL, REPO_URL, SITE_URL]))"],
                           cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True)
    cell, repo, site = json.loads(probe.stdout)
    assert (repo, site) == (FORK, "https://sensei-lab.github.io/nlp-2027/") and FORK in cell
    for nb in root.glob("notebooks/*.ipynb"):
        assert "".join(json.loads(nb.read_text(encoding="utf-8"))["cells"][0]["source"]) == cell, nb.name
    assert "colab.research.google.com/github/Sensei-Lab/nlp-2027/blob/main/notebooks/colab/10_mixing.ipynb" in \
        (root / "README.md").read_text(encoding="utf-8")
    # the repository's own checks of the URL and the edition pass on the fork
    checks = _run(root, "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "tests/test_repo.py",
                  "tests/test_licences.py", "-k", "url or colab or readme or citation or licence or cell")
    assert checks.returncode == 0, checks.stdout[-3000:]
    assert _run(root, "mixlib._edition", "--check").returncode == 0
    assert _run(root, "mixlib._fork", FORK, "--check", "--root", str(root)).returncode == 0  # done: idempotent

    # with the same URL it writes the current install cell back into a chapter that lost it
    nb_path = root / "notebooks" / "10_mixing.ipynb"
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    nb["cells"][0]["source"] = ["# an old cell\n"]
    nb_path.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    assert _run(root, "mixlib._fork", FORK, "--check", "--root", str(root)).returncode == 1
    assert _run(root, "mixlib._fork", FORK, "--root", str(root)).returncode == 0
    assert "".join(json.loads(nb_path.read_text(encoding="utf-8"))["cells"][0]["source"]) == cell


def test_a_site_of_its_own_is_used_and_a_bad_one_refused():
    """``--site`` for a fork published under another domain; anything but an https URL ending in '/' is refused."""
    from mixlib._fork import plan

    changes = plan(ROOT, FORK, site="https://nlp.example.ac.jp/book/")  # plans only: nothing is written
    config = changes[ROOT / "_config.yml"]
    assert 'baseurl: "https://nlp.example.ac.jp/book/"' in config and f"url: {FORK}" in config
    for bad in ("http://nlp.example.ac.jp/book/", "https://nlp.example.ac.jp/book"):
        with pytest.raises(ValueError, match="--site"):
            plan(ROOT, FORK, site=bad)
