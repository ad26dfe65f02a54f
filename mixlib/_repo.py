"""Where the book's repository lives, and the notebooks' Colab install cell.

``_config.yml`` (``repository.url``) drives the book's Colab and repository
buttons; every notebook's first cell (:data:`INSTALL_CELL`) clones the same URL
on Colab. ``tests/test_repo.py`` checks that the three agree, so changing the
URL means running ``python -m mixlib._fork NEW_URL`` (``make fork URL=...``), which rewrites
it here, in ``_config.yml`` and in every other copy, writes the new cell into every notebook and regenerates
the Colab edition. ``tests/test_colab_cell.py`` runs the cell as Colab would.
"""

from __future__ import annotations

__all__ = ["REPO_URL", "REPO_BRANCH", "REPO_URL_ENV", "REPO_DIR_ENV", "COLAB_DIR", "INSTALL_CELL", "INSTALL_TITLE", "SITE_URL",
           "COLAB_EDITION_DIR", "STUDENT_EDITION_DIR", "STUDENT_SITE_DIR", "colab_url"]

#: The public repository of the book (clone URL without ``.git``).
REPO_URL = "https://github.com/nlp-course-ja/mixbook"
#: The branch the book is built from and Colab opens.
REPO_BRANCH = "main"
#: Where the book's site is published (GitHub Pages of :data:`REPO_URL`; ``_config.yml``'s ``html.baseurl``): the
#: Colab edition links the glossary, the references and the essay pages there.
SITE_URL = "https://nlp-course-ja.github.io/mixbook/"
#: The Colab edition of the chapters (``python -m mixlib._edition`` writes it): what Colab opens.
COLAB_EDITION_DIR = "notebooks/colab"
#: Where the student edition lives (:mod:`mixlib._assign`): the Colab edition without solutions, committed like it,
#: so that a lecturer can hand out a Colab link to it (``colab_url(name, STUDENT_EDITION_DIR)``).
STUDENT_EDITION_DIR = "notebooks/student"
#: Where the site without solutions (``make book-student``) is published, under :data:`SITE_URL`.
STUDENT_SITE_DIR = "student/"
#: Environment variable that replaces :data:`REPO_URL` in the install cell (a fork, a mirror, a local clone).
REPO_URL_ENV = "MIXBOOK_REPO_URL"
#: Environment variable that replaces :data:`COLAB_DIR`, where the install cell puts the clone.
REPO_DIR_ENV = "MIXBOOK_DIR"
#: Where the install cell puts the clone on Colab.
COLAB_DIR = "/content/mixbook"

#: Cell 1 of every notebook (tagged ``remove-cell``, so the book does not show it). On Colab only, it
#: clones the repository, or brings an earlier clone up to date (``git fetch`` + ``reset --hard``:
#: the clone is the book's copy, not a place for one's own edits), then runs ``mixlib/_colab.py`` from
#: the clone with the kernel's interpreter: it installs mixlib (editable) and what mixlib needs that the
#: runtime lacks, and refuses, in one line, to replace anything the runtime already has (torch,
#: ipywidgets 7, ...). The cell prints that one line; on a refusal it stops with an exception that IPython
#: shows as one line (``_render_traceback_``), so the rest of a "run all" does not run. git and the
#: installer run without a shell (a URL or folder with spaces is one argument), git never asks for a
#: password (``GIT_TERMINAL_PROMPT=0``: a wrong or private URL fails at once) and gives up on a stalled
#: transfer, and each step has a time limit. Running the cell again is harmless, offline too (the clone
#: stays as it was, and the installer sees mixlib already installed from it). An interrupted step (the stop
#: button, a time limit) never blocks the next run: the first clone goes into ``<dir>.partial`` and is
#: renamed only when complete (a leftover is removed), and the lock files a killed git leaves in an existing
#: clone are removed before it is updated. Outside Colab it does nothing.
#: The install cell's title: Colab folds the cell under it (``#@title`` with the cell's ``"cellView": "form"``),
#: in the notebooks as in their Colab editions; the site removes the cell (``remove-cell``).
INSTALL_TITLE = "準備：Colab でだけ mixlib とデータを入れる（最初に実行する）"
INSTALL_CELL = f"""\
#@title {INSTALL_TITLE}
# Colab で開いたときだけ、このリポジトリ（mixlib とデータ）を入れる。Colab にあるもの（torch など）は替えない。
# 何度実行してもよい（前に入れたものは最新にする）。別の複製を使うときは環境変数 {REPO_URL_ENV} に URL を入れる。
import os, sys
if "google.colab" in sys.modules:
    import subprocess

    class Stop(Exception):  # stops "run all" here, shown as its one line (no traceback)
        _render_traceback_ = lambda self: [str(self)]

    def run(*cmd, timeout=300):  # no shell, no password prompt, no endless wait
        env = {{**os.environ, "GIT_TERMINAL_PROMPT": "0"}}
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise Stop(f"{{cmd[0]}} が {{timeout}} 秒で終わらなかった（ネットワークを確かめて、このセルをもう一度実行する）。") from None

    REPO_URL = os.environ.get("{REPO_URL_ENV}", "{REPO_URL}")
    REPO_DIR = os.environ.get("{REPO_DIR_ENV}", "{COLAB_DIR}")
    GIT = ["git", "-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=30"]
    if os.path.isdir(os.path.join(REPO_DIR, ".git")):
        for lock in ("shallow.lock", "index.lock"):  # left by a git that the stop button or a time limit killed
            if os.path.exists(os.path.join(REPO_DIR, ".git", lock)):
                os.remove(os.path.join(REPO_DIR, ".git", lock))
        got = run(*GIT, "-C", REPO_DIR, "fetch", "-q", "--depth", "1", REPO_URL, "{REPO_BRANCH}")
        if got.returncode == 0:
            got = run("git", "-C", REPO_DIR, "reset", "-q", "--hard", "FETCH_HEAD")
        if got.returncode != 0:
            print("更新できなかったので、前に入れた版のまま進む:", (got.stderr.strip().splitlines() or ["?"])[-1])
    elif os.path.exists(REPO_DIR) and os.listdir(REPO_DIR):
        raise Stop(f"{{REPO_DIR}} は git の複製ではないファイルを含む: 消すか、環境変数 {REPO_DIR_ENV} で別の場所を指定する。")
    else:  # cloned beside it and renamed at the end: an interrupted clone never looks like one
        import shutil

        PARTIAL = REPO_DIR.rstrip("/") + ".partial"
        shutil.rmtree(PARTIAL, ignore_errors=True)  # what an interrupted clone left
        got = run(*GIT, "clone", "-q", "--depth", "1", "--branch", "{REPO_BRANCH}", REPO_URL, PARTIAL)
        if got.returncode != 0:
            shutil.rmtree(PARTIAL, ignore_errors=True)
            raise Stop(f"{{REPO_URL}} を取得できなかった: {{(got.stderr.strip().splitlines() or ['?'])[-1]}}")
        os.replace(PARTIAL, REPO_DIR)
    done = run(sys.executable, os.path.join(REPO_DIR, "mixlib", "_colab.py"), REPO_DIR, timeout=1800)
    print((done.stdout + done.stderr).strip())
    if done.returncode != 0:
        raise Stop("mixlib を入れられなかった（理由は上に示した）。")
    if REPO_DIR not in sys.path:
        sys.path.insert(0, REPO_DIR)"""


def colab_url(notebook: str, folder: str = COLAB_EDITION_DIR) -> str:
    """The Colab link that opens a chapter's Colab edition (``notebooks/colab/<notebook>``) from the repository.

    Colab renders no MyST, so it opens the edition generated from the chapter (:mod:`mixlib._edition`), not the
    chapter's source in ``notebooks/``.

    Parameters
    ----------
    notebook : str
        The chapter's file name, e.g. ``"10_mixing.ipynb"``.
    folder : str
        :data:`COLAB_EDITION_DIR` (the default), or :data:`STUDENT_EDITION_DIR` for the student edition.

    Returns
    -------
    str

    Examples
    --------
    >>> colab_url("00_environment.ipynb")
    'https://colab.research.google.com/github/nlp-course-ja/mixbook/blob/main/notebooks/colab/00_environment.ipynb'
    """
    if not notebook.endswith(".ipynb") or "/" in notebook:
        raise ValueError(f"notebook={notebook!r}: expected a chapter's file name ending in .ipynb, e.g. '10_mixing.ipynb'.")
    if folder not in (COLAB_EDITION_DIR, STUDENT_EDITION_DIR):
        raise ValueError(f"folder={folder!r}: expected {COLAB_EDITION_DIR!r} or {STUDENT_EDITION_DIR!r}.")
    owner_repo = REPO_URL.removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{owner_repo}/blob/{REPO_BRANCH}/{folder}/{notebook}"
