"""Reproduce the widget-cell stall that .ci/nbexec_fix.py works around, and show the fix.

Executes a notebook of N `interact` cells R times with nbclient (per-cell timeout T) and
reports the cells whose execute_reply reached nbclient long after the kernel sent it.

    .venv/bin/python .ci/repro_widget_stall.py            # without the fix
    .venv/bin/python .ci/repro_widget_stall.py --fix      # with it
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import nbformat


def notebook(cells: int) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import ipywidgets as widgets\nimport matplotlib.pyplot as plt\nimport numpy as np\n"
        "def f(a, b):\n    plt.plot(np.arange(10) * a + b)\n    plt.show()")]
    nb.cells += [nbformat.v4.new_code_cell(
        f"widgets.interact(f, a=widgets.IntSlider(value={i}, min=0, max=20), b=widgets.IntSlider(value=1, min=0, max=5));")
        for i in range(cells)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fix", action="store_true", help="install .ci/nbexec_fix.py first")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--cells", type=int, default=12)
    ap.add_argument("--timeout", type=int, default=15, help="nbclient per-cell timeout (s)")
    args = ap.parse_args()
    if args.fix:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import nbexec_fix

        nbexec_fix.install()
    from nbclient import NotebookClient

    stalled_runs = 0
    for run in range(args.runs):
        marks: dict[int, list[float]] = {}

        def start(cell, cell_index):
            marks[cell_index] = [time.time()]

        def done(cell, cell_index, execute_reply=None, **_):
            sent = execute_reply["header"]["date"]
            sent = datetime.datetime.fromisoformat(sent) if isinstance(sent, str) else sent
            marks[cell_index] += [time.time(), sent.timestamp()]

        t0 = time.time()
        NotebookClient(notebook(args.cells), timeout=args.timeout, kernel_name="python3",
                       resources={"metadata": {"path": "."}}, on_cell_start=start, on_cell_executed=done).execute()
        stalls = [(i, round(m[1] - m[0], 1), round(m[2] - m[0], 1)) for i, m in marks.items() if len(m) == 3 and m[1] - m[2] > 2]
        stalled_runs += bool(stalls)
        detail = ", ".join(f"cell {i}: received after {r} s, sent after {s} s" for i, r, s in stalls)
        print(f"run {run:2d}: {time.time() - t0:5.1f} s  {detail}", flush=True)
    print(f"{stalled_runs} of {args.runs} runs had a stalled cell ({'with' if args.fix else 'without'} the fix)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
