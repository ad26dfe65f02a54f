"""Where the book's repository lives: one constant, checked against ``_config.yml``.

``_config.yml`` (``repository.url``) drives the book's Colab and repository
buttons; every notebook's first cell clones the same URL on Colab.
``tests/test_repo.py`` checks that the three agree, so changing the URL means
changing it here, in ``_config.yml`` and in the notebooks' first cell together.
"""

from __future__ import annotations

__all__ = ["REPO_URL", "REPO_BRANCH", "colab_url"]

#: The public repository of the book (clone URL without ``.git``).
REPO_URL = "https://github.com/nlp-course-ja/mixbook"
#: The branch the book is built from and Colab opens.
REPO_BRANCH = "main"


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
