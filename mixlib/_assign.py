"""The student edition: every chapter as a Colab notebook without its solutions (``make assign``).

A lecturer who assigns a chapter's exercises hands out this edition instead of the Colab edition that the book's
badges open (:mod:`mixlib._edition`), which shows each worked solution in a folded ``<details>``. It is the Colab
edition of the chapter with every ``{solution}`` block removed before conversion, and nothing else changed: the
install cell first, the chapter's text and code, each exercise's statement and its self-check cell (the student's
``ans_… = None`` and one ``check_answer`` call, which never shows the expected value). The note under the title
says that it is the student edition.

    python -m mixlib._assign                 # writes _build/assign/student/NN_*.ipynb
    python -m mixlib._assign --out DIR

An exercise that asks for words as well as values ("説明せよ", "なぜか", "示せ") is marked ``:class: open-answer``
in the chapter. Its written part cannot be checked by code, so the student edition adds, right after the
exercise's check cell, a Markdown cell headed ``#### 記述 ex-NN-k`` for the student's text; ``make grade`` collects
that text for the lecturer (:func:`written_answers`), unscored.

``tests/test_assign.py`` checks that no line of any solution, nor of the references in ``mixlib/exercise/``,
is in the student edition, and that every exercise keeps its statement and its check cell.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path

from mixlib import _edition
from mixlib.exercise._cells import CHECK_HEADER

ROOT = Path(__file__).resolve().parent.parent
OUT = Path("_build") / "assign" / "student"

#: added to the Colab edition's note under each chapter's title
STUDENT_NOTE = ("> **学生版**　課題として配るための版で、演習の解答例を除いてある。答えは各演習の自己チェックのセルに書き、"
                "実行して確かめる（正解の値は表示されない）。採点ではノートブックを上から実行し直すので、答えは数や語を"
                "書き写さず、コードで計算して入れる。説明や理由を求める演習には、自己チェックのセルの下に「記述」のセルがあるので、そこに書く。提出するときは「ファイル」→「ダウンロード」→「.ipynb をダウンロード」。")


#: the class that marks an exercise with a written part (``:class: open-answer`` under its ``:label:``)
OPEN_CLASS = "open-answer"
#: the first line of the cell for an exercise's written part; the grader finds the cell by it (metadata can be lost)
WRITTEN_HEADING = re.compile(r"^#{1,6}[ \t]*記述[ \t]+(ex-\d\d-\d+)[ \t]*$", re.M)
#: what the written cell says before the student writes (both lines are dropped when the text is collected)
WRITTEN_HINT = ("*この演習の、言葉で答える部分（説明・理由・判断）は自己チェックでは確かめられない。"
                "このセルをダブルクリックして、下の行を自分の答えに書き換える。採点では先生が読む（点には入らない）。*")
WRITTEN_PLACEHOLDER = "（ここに書く）"


def open_exercises(nb: dict) -> dict[str, str]:
    """The chapter's exercises marked ``:class: open-answer``: label -> the exercise's statement (MyST)."""
    out = {}
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        for is_directive, piece in _edition.segments(text):
            lines = piece.split("\n")
            m = _edition.DIRECTIVE_OPEN.match(lines[0]) if is_directive else None
            if not m or m.group("name") != "exercise":
                continue
            options, body = {}, lines[1:-1]
            while body and (o := _edition.OPTION.match(body[0])):
                options[o.group("key")] = o.group("value").strip()
                body = body[1:]
            if OPEN_CLASS in options.get("class", "").split():
                if "label" not in options:
                    raise _edition.EditionError(f"an exercise marked {OPEN_CLASS} without :label:")
                out[options["label"]] = "\n".join(body).strip()
    return out


def written_cell(label: str) -> dict:
    """The Markdown cell for an exercise's written part, as the student edition has it."""
    text = f"#### 記述 {label}\n\n{WRITTEN_HINT}\n\n{WRITTEN_PLACEHOLDER}"
    return {"cell_type": "markdown", "id": f"written-{label}", "metadata": {"mixbook": {"written": label}},
            "source": _edition._lines(text)}


def written_answers(nb: dict) -> dict[str, str]:
    """What a submitted notebook says in each written cell: label -> the student's text ('' when left as handed
    out). A label whose cell was deleted (or whose heading was changed) is absent. Read, never run."""
    out: dict[str, str] = {}
    for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "markdown":
            continue
        src = cell.get("source", "")
        text = "".join(s for s in src if isinstance(s, str)) if isinstance(src, list) else str(src)
        m = WRITTEN_HEADING.match(text.lstrip())
        if not m:
            continue
        body = text.lstrip()[m.end():].replace(WRITTEN_HINT, "").replace(WRITTEN_PLACEHOLDER, "").strip()
        label = m.group(1)
        out[label] = f"{out[label]}\n\n{body}".strip() if out.get(label) else body  # two cells: both kept
    return out


def _add_written_cells(out: dict, labels: list[str], doc: str) -> None:
    """Insert each open exercise's written cell after its check cell (after its statement where it has none)."""
    for label in labels:
        def src(c: dict) -> str:
            return "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        at = next((i for i, c in enumerate(out["cells"]) if c["cell_type"] == "code"
                   and (m := CHECK_HEADER.match(src(c))) and m.group(1) == label), None)
        if at is None:
            at = next((i for i, c in enumerate(out["cells"]) if c["cell_type"] == "markdown"
                       and re.search(rf"^### 演習 {re.escape(label)}\b", src(c), re.M)), None)
        if at is None:
            raise _edition.EditionError(f"{doc}: the exercise {label} is not in the edition")
        out["cells"].insert(at + 1, written_cell(label))


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
    _add_written_cells(out, list(open_exercises(nb)), doc)
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
