"""Where the book's files are: the repository's ``data/`` directory.

Notebooks run from ``notebooks/`` (the book build, pytest, JupyterLab) or from a
clone on Colab; ``data_path`` finds ``data/`` the same way in all of them.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["repo_root", "data_dir", "data_path", "follow_umask", "pid_alive"]


def _how_to_get_the_data() -> str:
    from ._repo import REPO_URL

    return (f"The book's data files (data/) are not part of the mixlib package: get them with "
            f"`git clone {REPO_URL}` and `pip install -e mixbook` (or run from inside the clone), "
            "or set MIXLIB_ROOT to the clone's folder.")


def _is_clone(p: Path) -> bool:
    return (p / "data").is_dir() and (p / "mixlib").is_dir() and (p / "pyproject.toml").is_file()


def repo_root() -> Path:
    """The repository root: ``$MIXLIB_ROOT``, else the parent of the installed (editable) package,
    else the first parent of the working directory that holds ``data/`` and ``mixlib/``.

    Raises
    ------
    FileNotFoundError
        No clone is found (e.g. mixlib was installed from a wheel): the message says how to get the data.
    """
    env = os.environ.get("MIXLIB_ROOT", "").strip()
    if env:
        root = Path(env).expanduser().resolve()
        if not (root / "data").is_dir():
            raise FileNotFoundError(f"MIXLIB_ROOT={env} has no data/ folder; it must name a clone of the repository. "
                                    + _how_to_get_the_data())
        return root
    here = Path(__file__).resolve().parent.parent
    if _is_clone(here):
        return here
    cwd = Path.cwd().resolve()
    for p in (cwd, *cwd.parents):
        if _is_clone(p):
            return p
    raise FileNotFoundError(f"mixlib is installed at {here / 'mixlib'}, outside a clone of the repository, and no "
                            f"clone holds the working folder {cwd}. " + _how_to_get_the_data())


def data_dir() -> Path:
    return repo_root() / "data"


def data_path(name: str) -> Path:
    """Path of a file shipped in ``data/``; a clear error if it is missing (or if there is no clone).

    Parameters
    ----------
    name : str
        The file's name inside ``data/`` (``data/README.md`` describes them), e.g. ``"sentence_pairs.tsv"``.

    Returns
    -------
    pathlib.Path
        The file's absolute path in the repository's ``data/`` folder (:func:`repo_root`).

    Raises
    ------
    FileNotFoundError
        ``data/`` holds no such file (the message lists those it holds), or no clone of the repository is found
        (mixlib installed from a wheel, ``$MIXLIB_ROOT`` without ``data/``).

    Examples
    --------
    >>> p = mixlib.data_path("sentence_pairs.tsv")
    >>> p.name, p.parent.name, p.is_file()
    ('sentence_pairs.tsv', 'data', True)
    """
    folder = data_dir()
    p = folder / name
    if not p.exists():
        shipped = sorted(f.name for f in folder.iterdir() if f.is_file() and not f.name.startswith("."))
        raise FileNotFoundError(f"{p} does not exist; data/ holds {', '.join(shipped)} (described in data/README.md).")
    return p


def _umask() -> int:
    """The process's umask (read from /proc where it can be, so that no other thread sees it change)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def follow_umask(path: str | os.PathLike) -> None:
    """Give a file or folder made by ``tempfile`` (0600 / 0700) the mode an ordinary one would have under the umask.

    Outputs are written under temporary names and renamed into place; without
    this, another user of a shared folder could not read (or ``merge``) them.
    """
    base = 0o777 if Path(path).is_dir() else 0o666
    os.chmod(path, base & ~_umask())


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (a writer whose leftovers must not be removed)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
