"""Where the book's repository lives, and the notebooks' Colab install cell.

``_config.yml`` (``repository.url``) drives the book's Colab and repository
buttons; every notebook's first cell (:data:`INSTALL_CELL`) clones the same URL
on Colab. ``tests/test_repo.py`` checks that the three agree, so changing the
URL means changing it here and in ``_config.yml``, then writing the new cell into
every notebook. ``tests/test_colab_cell.py`` runs the cell as Colab would.
"""

from __future__ import annotations

__all__ = ["REPO_URL", "REPO_BRANCH", "REPO_URL_ENV", "REPO_DIR_ENV", "COLAB_DIR", "INSTALL_CELL", "colab_url"]

#: The public repository of the book (clone URL without ``.git``).
REPO_URL = "https://github.com/nlp-course-ja/mixbook"
#: The branch the book is built from and Colab opens.
REPO_BRANCH = "main"
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
#: shows as one line (``_render_traceback_``), so the rest of a "run all" does not run. Running it again
#: is harmless. Outside Colab it does nothing. IPython runs its ``!`` lines in a shell, after replacing
#: ``{NAME}`` by the value of the Python variable NAME.
INSTALL_CELL = f"""\
# Colab で開いたときだけ、このリポジトリ（mixlib とデータ）を入れる。Colab にあるもの（torch など）は替えない。
# 何度実行してもよい（前に入れたものは最新にする）。別の複製を使うときは環境変数 {REPO_URL_ENV} に URL を入れる。
import os, sys
if "google.colab" in sys.modules:
    import subprocess

    class Stop(Exception):  # stops "run all" here, shown as its one line (no traceback)
        _render_traceback_ = lambda self: [str(self)]

    REPO_URL = os.environ.get("{REPO_URL_ENV}", "{REPO_URL}")
    REPO_DIR = os.environ.get("{REPO_DIR_ENV}", "{COLAB_DIR}")
    if os.path.isdir(os.path.join(REPO_DIR, ".git")):
        !git -C {{REPO_DIR}} fetch -q --depth 1 {{REPO_URL}} {REPO_BRANCH} && git -C {{REPO_DIR}} reset -q --hard FETCH_HEAD || echo "更新できなかったので、前に入れた版のまま進む"
    else:
        !git clone -q --depth 1 --branch {REPO_BRANCH} {{REPO_URL}} {{REPO_DIR}}
    if not os.path.isfile(os.path.join(REPO_DIR, "mixlib", "_colab.py")):
        raise Stop(f"{{REPO_URL}} を取得できなかった（上の git のメッセージを見る）。")
    _done = subprocess.run([sys.executable, os.path.join(REPO_DIR, "mixlib", "_colab.py"), REPO_DIR],
                           capture_output=True, text=True)
    print((_done.stdout + _done.stderr).strip())
    if _done.returncode != 0:
        raise Stop("mixlib を入れられなかった（理由と対処は上の 1 行）。")
    if REPO_DIR not in sys.path:
        sys.path.insert(0, REPO_DIR)"""


def colab_url(notebook: str) -> str:
    """The Colab link that opens ``notebooks/<notebook>`` from the repository.

    Parameters
    ----------
    notebook : str
        File name inside ``notebooks/``, e.g. ``"10_mixing.ipynb"``.

    Returns
    -------
    str

    Examples
    --------
    >>> colab_url("00_environment.ipynb")
    'https://colab.research.google.com/github/nlp-course-ja/mixbook/blob/main/notebooks/00_environment.ipynb'
    """
    if not notebook.endswith(".ipynb") or "/" in notebook:
        raise ValueError(f"notebook={notebook!r}: expected a file name in notebooks/ ending in .ipynb, e.g. '10_mixing.ipynb'.")
    owner_repo = REPO_URL.removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{owner_repo}/blob/{REPO_BRANCH}/notebooks/{notebook}"
