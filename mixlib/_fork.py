"""Point a copy of the book at its own repository: ``python -m mixlib._fork https://github.com/OWNER/NAME``.

A lecturer's fork publishes its own site and opens its own chapters in Colab. The repository's URL is defined
once, in :mod:`mixlib._repo` (``REPO_URL``, and ``SITE_URL``, where GitHub Pages publishes it), and copied
where a file cannot import it: ``_config.yml`` (the book's buttons and ``html.baseurl``), ``CITATION.cff``,
the README's Colab badges, the book pages that show a link, and every chapter's first cell
(:data:`mixlib._repo.INSTALL_CELL`, which clones the repository on Colab). ``tests/test_repo.py`` fails when
any copy differs from ``_repo.py``. This command rewrites every copy from the new URL, writes the install cell
of the new ``_repo.py`` into every chapter, and regenerates the Colab edition (``python -m mixlib._edition``),
so that ``make test`` passes on the fork as it does here.

Run with the current URL, it only writes the current install cell into every chapter (after a change of
``INSTALL_CELL``) and regenerates the edition. ``--check`` writes nothing and exits 1 when something would
change.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from mixlib import _repo

ROOT = Path(__file__).resolve().parent.parent
GITHUB = re.compile(r"https://github\.com/([A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))/([A-Za-z0-9._-]{1,100})")


def parse_repo_url(url: str) -> tuple[str, str]:
    """``https://github.com/OWNER/NAME`` (a trailing ``/`` or ``.git`` is dropped) -> ``(owner, name)``.

    Raises ValueError, in one line saying what to give, for anything else (another host, a path below the
    repository, a missing name).
    """
    clean = url.strip().rstrip("/").removesuffix(".git")
    m = GITHUB.fullmatch(clean)
    if not m or m.group(2) in {".", ".."}:
        raise ValueError(f"{url!r} is not a GitHub repository URL; give one like https://github.com/OWNER/NAME "
                         "(the Colab links and the Pages site need a repository on github.com).")
    return m.group(1), m.group(2)


def pages_url(owner: str, name: str) -> str:
    """Where GitHub Pages publishes a repository's site (a project site; the owner's host name is lower case)."""
    if name.lower() == f"{owner.lower()}.github.io":
        return f"https://{owner.lower()}.github.io/"
    return f"https://{owner.lower()}.github.io/{name}/"


def _text_files(root: Path) -> list[Path]:
    """The files that hold a copy of the repository's URL or site (the Colab edition is regenerated instead)."""
    files = [root / "mixlib" / "_repo.py", root / "_config.yml", root / "CITATION.cff", root / "README.md",
             root / "mixlib" / "wikipedia.py"]
    files += sorted((root / "book").rglob("*.md"))
    files += sorted((root / "notebooks").glob("*.ipynb"))
    return [f for f in files if f.is_file()]


def _first_cell_source(nb: dict) -> str:
    src = nb["cells"][0]["source"]
    return "".join(src) if isinstance(src, list) else src


def plan(root: Path, url: str, site: str | None = None) -> dict[Path, str]:
    """The new text of every file that changes (nothing is written)."""
    owner, name = parse_repo_url(url)
    new_repo = f"https://github.com/{owner}/{name}"
    new_site = site or pages_url(owner, name)
    if not re.fullmatch(r"https://[^\s\"'<>]+/", new_site):
        raise ValueError(f"--site {new_site!r}: give the site's https URL ending in '/'.")
    old_repo, old_site = _repo.REPO_URL, _repo.SITE_URL
    old_slug = old_repo.removeprefix("https://github.com/")
    replacements = [(old_repo, new_repo), (f"colab.research.google.com/github/{old_slug}/",
                                           f"colab.research.google.com/github/{owner}/{name}/"), (old_site, new_site)]
    texts: dict[Path, str] = {}
    for path in _text_files(root):
        text = path.read_text(encoding="utf-8")
        for old, new in replacements:
            text = text.replace(old, new)
        texts[path] = text
    # the install cell of the new _repo.py, written into every chapter as its first cell
    new_repo_py = root / "mixlib" / "_repo.py"
    namespace: dict = {"__name__": "mixlib._repo"}
    exec(compile(texts[new_repo_py], str(new_repo_py), "exec"), namespace)  # the repository's own module, rewritten
    cell = namespace["INSTALL_CELL"]
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        nb = json.loads(texts[path])
        if _first_cell_source(nb) != cell:
            nb["cells"][0]["source"] = cell.splitlines(keepends=True)
            texts[path] = json.dumps(nb, ensure_ascii=False, indent=1) + "\n"
    return {path: text for path, text in texts.items() if text != path.read_text(encoding="utf-8")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mixlib._fork", description=__doc__.split("\n\n")[0])
    ap.add_argument("url", help="the fork's repository, https://github.com/OWNER/NAME")
    ap.add_argument("--site", help="where its site is published (default: GitHub Pages, https://owner.github.io/NAME/)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if any file would change")
    ap.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        changes = plan(args.root, args.url, args.site)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for path in changes:
        print(f"{'would change' if args.check else 'changed'}: {path.relative_to(args.root)}")
    if args.check:
        return 1 if changes else 0
    for path, text in changes.items():
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    # the Colab edition, from the chapters and the new _repo.py (a fresh interpreter imports the rewritten module)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(args.root), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "mixlib._edition"], cwd=args.root, env=env)
    if done.returncode != 0:
        print("error: the Colab edition could not be regenerated (above); run `make colab` after fixing it",
              file=sys.stderr)
        return done.returncode
    print(f"{len(changes)} file(s) changed; the Colab edition regenerated. Now run `make test`, then commit.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
