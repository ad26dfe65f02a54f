"""`jupyter-book` with the notebook-execution wake-up fix installed (see .ci/nbexec_fix.py).

Used by `make book` exactly like the `jupyter-book` command:
    python .ci/build_book.py build . --builder html -W --keep-going
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nbexec_fix  # noqa: E402

nbexec_fix.install()

from jupyter_book.cli.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
