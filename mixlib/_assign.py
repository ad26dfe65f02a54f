"""The student edition: every chapter as a Colab notebook without its solutions (``make assign``).

A lecturer who assigns a chapter's exercises hands out this edition instead of the Colab edition that the book's
badges open (:mod:`mixlib._edition`), which shows each worked solution in a folded ``<details>``. It is the Colab
edition of the chapter with every ``{solution}`` block removed before conversion, and nothing else changed: the
install cell first, the chapter's text and code, each exercise's statement and its self-check cell (the student's
``ans_… = None`` and one ``check_answer`` call, which never shows the expected value). The note under the title
says that it is the student edition.

    python -m mixlib._assign                 # writes _build/assign/student/NN_*.ipynb
    python -m mixlib._assign --out DIR

``tests/test_assign.py`` checks that no line of any solution, nor of the references in ``mixlib/exercise/``,
is in the student edition, and that every exercise keeps its statement and its check cell.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

from mixlib import _edition

ROOT = Path(__file__).resolve().parent.parent
OUT = Path("_build") / "assign" / "student"

#: added to the Colab edition's note under each chapter's title
STUDENT_NOTE = ("> **学生版**　課題として配るための版で、演習の解答例を除いてある。答えは各演習の自己チェックのセルに書き、"
                "実行して確かめる（正解の値は表示されない）。採点ではノートブックを上から実行し直すので、答えは数や語を"
                "書き写さず、コードで計算して入れる。提出するときは「ファイル」→「ダウンロード」→「.ipynb をダウンロード」。")


def strip_solutions(markdown: str) -> str:
    """The cell's MyST without its ``{solution}`` directives (an exercise's statement stays)."""
    kept = []
    for is_directive, piece in _edition.segments(markdown):
        m = _edition.DIRECTIVE_OPEN.match(piece.split("\n", 1)[0]) if is_directive else None
        if m and m.group("name") == "solution":
            continue
        kept.append(piece)
    return "\n".join(kept)


def student_notebook(nb: dict, doc: str, book: _edition.Book) -> dict:
    """One chapter's student edition: its Colab edition, converted from the chapter without solutions."""
    source = copy.deepcopy(nb)
    for cell in source["cells"]:
        if cell["cell_type"] == "markdown":
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            cell["source"] = strip_solutions(text)
    out = _edition.convert_notebook(source, doc, book)
    marker = "> **Colab 版**"
    for cell in out["cells"]:  # the title's cell holds the edition's note (markdown, or a prose cell)
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if marker in text:
            text = text.replace(marker, f"{STUDENT_NOTE}\n>\n{marker}", 1)
            cell["source"] = _edition._lines(text) if isinstance(cell["source"], list) else text
            break
    else:
        raise _edition.EditionError(f"{doc}: the edition's note under the title was not found")
    return out


def build(root: Path = ROOT) -> dict[str, str]:
    """Every chapter's student edition: file name -> the notebook's text."""
    book = _edition.read_book(root)
    out = {}
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        out[path.name] = _edition._dump(student_notebook(nb, f"notebooks/{path.stem}", book))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mixlib._assign", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help=f"the folder to write (default: {OUT} in the repository)")
    ap.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        files = build(args.root)
    except _edition.EditionError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    folder = args.out if args.out is not None else args.root / OUT
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.ipynb"):
        if old.name not in files:
            old.unlink()
    for name, text in files.items():
        tmp = folder / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(folder / name)
    print(f"{folder}: {len(files)} student notebooks (the Colab edition without solutions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
