"""Where the book's files are: the repository's ``data/`` directory.

Notebooks run from ``notebooks/`` (the book build, pytest, JupyterLab) or from a
clone on Colab; ``data_path`` finds ``data/`` the same way in all of them.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["repo_root", "data_dir", "data_path"]


def repo_root() -> Path:
    """The repository root: ``$MIXLIB_ROOT``, else the parent of the installed (editable) package,
    else the first parent of the working directory that holds ``data/`` and ``mixlib/``."""
    env = os.environ.get("MIXLIB_ROOT")
    if env:
        return Path(env).expanduser().resolve()
    here = Path(__file__).resolve().parent.parent
    if (here / "data").is_dir():
        return here
    cwd = Path.cwd().resolve()
    for p in (cwd, *cwd.parents):
        if (p / "data").is_dir() and (p / "mixlib").is_dir():
            return p
    raise FileNotFoundError(
        "Cannot find the repository's data/ directory. Run from a clone of the repository "
        "(pip install -e .), or set MIXLIB_ROOT to the clone's path."
    )


def data_dir() -> Path:
    return repo_root() / "data"


def data_path(name: str) -> Path:
    """Path of a file shipped in ``data/``; a clear error if it is missing."""
    p = data_dir() / name
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist; the files in data/ are listed in data/README.md.")
    return p
