"""A grading run of N generated submissions of one chapter (issue 58): seconds per submission and cores used.

    .venv-grade/bin/python benchmarks/bench_grade.py --chapter 10 -n 20

Each generated submission is the chapter's student edition with the reference solutions filled in, and for a
random third of its exercises a wrong answer put after the solution (an answer made of the wrong type), so the
points vary. The autograder is built first (timed apart) and reused. Run in `.venv-grade` (`make grade-env`);
`make bench` runs it only where otter-grader is installed.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chapter", default="10")
    ap.add_argument("-n", type=int, default=20, help="submissions to generate")
    ap.add_argument("--jobs", type=int, default=None, help="processes (default: the machine's cores)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if importlib.util.find_spec("otter") is None:
        print("otter-grader is not installed in this Python: run `make grade-env`, then "
              ".venv-grade/bin/python benchmarks/bench_grade.py (skipped)")
        return 0
    import nbformat

    from mixlib import _assign, _edition, _grade
    from mixlib.exercise._cells import check_cells, solutions, with_solutions

    chapter = _grade.chapter_of(args.chapter)
    raw = json.loads((ROOT / "notebooks" / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    student = nbformat.reads(_edition._dump(_assign.student_notebook(raw, f"notebooks/{chapter}", _edition.read_book(ROOT))), as_version=4)
    solved = with_solutions(student, solutions(nbformat.read(ROOT / "notebooks" / f"{chapter}.ipynb", as_version=4)))
    labels = list(check_cells(solved))
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        subs, out = Path(tmp) / "submissions", Path(tmp) / "out"
        subs.mkdir()
        for k in range(args.n):
            nb = copy.deepcopy(solved)
            for label in rng.sample(labels, max(1, len(labels) // 3)):
                cell = nb.cells[check_cells(nb)[label]]
                names = [line.split("=")[0].strip() for line in cell.source.splitlines() if line.startswith(("ans_", "my_"))]
                if names:
                    cell.source += f"\n{names[0]} = 'wrong'"
            nbformat.write(nb, subs / f"student{k:02d}.ipynb")
        t0 = time.monotonic()
        _grade.build_autograder(chapter, out, fast=True, log=lambda *a: None)
        build = time.monotonic() - t0
        t0 = time.monotonic()
        rows = _grade.grade(chapter, subs, out, fast=True, jobs=args.jobs, log=lambda *a: None)
        wall = time.monotonic() - t0
    jobs = args.jobs or os.cpu_count()
    totals = sorted(sum(r.points.values()) for r in rows)
    print(f"{chapter}: autograder built and checked in {build:.0f} s; {len(rows)} submissions graded in {wall:.0f} s "
          f"on {jobs} processes ({os.cpu_count()} cores): {wall / len(rows):.1f} s per submission, "
          f"{sum(r.seconds for r in rows) / len(rows):.1f} s each in its own process")
    print(f"totals from {totals[0]:g} to {totals[-1]:g}; problems: {sum(bool(r.problem) for r in rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
