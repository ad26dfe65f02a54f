"""The student edition: every chapter as a Colab notebook without its solutions (``make assign``).

A lecturer who assigns a chapter's exercises hands out this edition instead of the Colab edition that the book's
badges open (:mod:`mixlib._edition`), which shows each worked solution in a folded ``<details>``. It is the Colab
edition of the chapter with every ``{solution}`` block removed before conversion, and nothing else changed: the
install cell first, the chapter's text and code, each exercise's statement and its self-check cell (the student's
``ans_… = None`` and one ``check_answer`` call, which never shows the expected value). The note under the title
says that it is the student edition.

    python -m mixlib._assign                 # writes notebooks/student/NN_*.ipynb (as `make colab` does)
    python -m mixlib._assign --out DIR       # the same notebooks into DIR (to upload to a course's LMS)

The edition is committed in ``notebooks/student/`` beside the Colab edition (``make colab`` writes both, and
``tests/test_edition.py`` fails when either is stale), so a lecturer can hand out a link that opens a chapter's
student edition in Colab (:func:`mixlib._repo.colab_url` with ``STUDENT_EDITION_DIR``). Its links to other
chapters open their student editions, and its links to the site go to the site without solutions
(``make book-student``, published under ``student/``).

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
import dataclasses
import json
import re
import sys
from pathlib import Path

from mixlib import _edition
from mixlib._repo import STUDENT_EDITION_DIR, colab_url
from mixlib.exercise._cells import CHECK_HEADER

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(STUDENT_EDITION_DIR)

#: added to the Colab edition's note under each chapter's title
STUDENT_NOTE = ("> **学生版**　課題として配るための版で、演習の解答例を除いてある。最初に「ファイル」→「ドライブにコピーを保存」し、"
                "そのコピーで解く（GitHub から開いたままでは、書いたものが保存されない）。答えは各演習の自己チェックのセルに書き、"
                "実行して確かめる（正解の値は表示されない）。採点ではノートブックを上から実行し直すので、実行で決まる数や語"
                "（モデルやデータから計算する値）は書き写さず、コードで計算して入れる。説明や理由を求める演習には、自己チェックのセルの下に"
                "「記述」のセルがあるので、そこに書く。提出するときは「ファイル」→「ダウンロード」→「.ipynb をダウンロード」で保存し、授業の指示どおりに提出する。")


#: the class that marks an exercise with a written part (``:class: open-answer`` under its ``:label:``)
OPEN_CLASS = "open-answer"
#: the first line of the cell for an exercise's written part; the grader finds the cell by it (metadata can be lost)
WRITTEN_HEADING = re.compile(r"^#{1,6}[ \t]*記述[ \t]+(ex-\d\d-\d+)[ \t]*$", re.M)
#: what the written cell says before the student writes (both lines are dropped when the text is collected)
WRITTEN_HINT = ("*この演習のうち自己チェックで確かめない部分（説明・理由・判断や、式・比べた数）は、このセルに書く。"
                "ダブルクリックして、下の行を自分の答えに書き換える（見出しの行は消さない。別のセルに書いた文は集められない）。"
                "採点では先生が読む（自動採点の点には入らない）。*")
WRITTEN_PLACEHOLDER = "（ここに書く）"


def open_exercises(nb: dict) -> dict[str, str]:
    """The chapter's exercises marked ``:class: open-answer``: label -> the exercise's statement (MyST)."""
    out = {}
    for text in _edition._markdown_cells(nb):
        for name, _, options, body in (_edition.parse_directive(p) for is_d, p in _edition.segments(text) if is_d):
            if name == "exercise" and OPEN_CLASS in options.get("class", "").split():
                if "label" not in options:
                    raise _edition.EditionError(f"an exercise marked {OPEN_CLASS} without :label:")
                out[options["label"]] = body.strip()
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
    """Insert each open exercise's written cell right after its self-check cell."""
    for label in labels:
        at = next((i for i, c in enumerate(out["cells"]) if c["cell_type"] == "code"
                   and (m := CHECK_HEADER.match(_edition.cell_text(c))) and m.group(1) == label), None)
        if at is None:
            raise _edition.EditionError(f"{doc}: the open-answer exercise {label} has no self-check cell to put its 記述 cell under")
        out["cells"].insert(at + 1, written_cell(label))


def solutions_and_rest(nb: dict) -> tuple[list[str], str]:
    """The bodies of a chapter's ``{solution}`` blocks, and the chapter's text without them."""
    solutions, rest = [], []
    for cell in nb["cells"]:
        src = _edition.cell_text(cell)
        if cell["cell_type"] != "markdown":
            rest.append(src)
            continue
        for is_directive, piece in _edition.segments(src):
            (solutions if is_directive and _edition.parse_directive(piece)[0] == "solution" else rest).append(piece)
    return solutions, "\n".join(rest)


def own_lines(text: str, elsewhere: str) -> set[str]:
    """Lines of ``text`` long enough to be telling (12 characters or more, not a fence or an option) that do not
    occur in ``elsewhere``."""
    lines = {line.strip() for line in text.split("\n")}
    return {line for line in lines if len(line) >= 12 and not line.startswith(("```", ":::", ":")) and line not in elsewhere}


def solution_lines(nb: dict) -> set[str]:
    """The lines of a chapter's solutions that occur nowhere else in it: what must not reach a student."""
    solutions, rest = solutions_and_rest(nb)
    return {line for body in solutions for line in own_lines(body, rest)}


def strip_solutions(markdown: str) -> str:
    """The cell's MyST without its ``{solution}`` directives (an exercise's statement stays)."""
    return "\n".join(piece for is_directive, piece in _edition.segments(markdown)
                     if not (is_directive and _edition.parse_directive(piece)[0] == "solution"))


def student_notebook(nb: dict, doc: str, book: _edition.Book) -> dict:
    """One chapter's student edition: its Colab edition, converted from the chapter without solutions."""
    book = dataclasses.replace(book, student=True)  # its links go to the student edition and the student site
    source = copy.deepcopy(nb)
    for cell in source["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = strip_solutions(_edition.cell_text(cell))
    out = _edition.convert_notebook(source, doc, book)
    marker = "> **Colab 版**"
    for cell in out["cells"]:  # the title's cell holds the edition's note (markdown, or a prose cell)
        text = _edition.cell_text(cell)
        if marker in text:
            text = text.replace(marker, f"{STUDENT_NOTE}\n>\n{marker}", 1)
            cell["source"] = _edition._lines(text) if isinstance(cell["source"], list) else text
            break
    else:
        raise _edition.EditionError(f"{doc}: the edition's note under the title was not found")
    _add_written_cells(out, list(open_exercises(nb)), doc)
    return out


def build(root: Path = ROOT, book: _edition.Book | None = None) -> dict[str, str]:
    """Every chapter's student edition: file name -> the notebook's text."""
    book = book or _edition.read_book(root)
    out = {}
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        out[path.name] = _edition._dump(student_notebook(nb, f"notebooks/{path.stem}", book))
    return out


#: the line at the top of every page of the site without solutions
STUDENT_SITE_NOTE = "学生版のサイト：演習の解答例を除いてある。Colab のボタンは学生版のノートブックを開く。"


def site_config(root: Path = ROOT) -> dict:
    """The book's ``_config.yml`` for the site without solutions (``make book-student``): sphinx-exercise's
    ``hide_solutions``, the Colab button to the student edition, a note on every page, published under
    ``student/`` of the book's site. The executed notebooks come from the book's own execution cache."""
    import yaml

    from mixlib._repo import SITE_URL, STUDENT_SITE_DIR

    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    config["title"] = f"{config['title']}（学生版）"
    config["execute"]["cache"] = str((root / config["execute"]["cache"]).resolve())
    config["html"]["baseurl"] = f"{SITE_URL}{STUDENT_SITE_DIR}"
    sphinx = config["sphinx"]["config"]
    sphinx["hide_solutions"] = True
    sphinx["mixbook_colab_folder"] = STUDENT_EDITION_DIR
    sphinx["html_theme_options"] = {**sphinx.get("html_theme_options", {}), "announcement": STUDENT_SITE_NOTE}
    return config


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mixlib._assign", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help=f"the folder to write (default: {OUT} in the repository)")
    ap.add_argument("--site-config", type=Path, default=None, metavar="FILE",
                    help="write only the configuration of the site without solutions to FILE (make book-student)")
    ap.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.site_config is not None:
        import yaml

        args.site_config.parent.mkdir(parents=True, exist_ok=True)
        args.site_config.write_text(yaml.safe_dump(site_config(args.root), allow_unicode=True, sort_keys=False), encoding="utf-8")
        print(f"{args.site_config}: the book's configuration with hide_solutions, for the site without solutions")
        return 0
    try:
        files = build(args.root)
    except _edition.EditionError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    folder = args.out if args.out is not None else args.root / OUT
    folder.mkdir(parents=True, exist_ok=True)
    if args.out is None:  # the repository's folder: a chapter removed from the book leaves it (--out DIR: nothing removed)
        for old in folder.glob("*.ipynb"):
            if old.name not in files:
                old.unlink()
    for name, text in files.items():
        tmp = folder / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(folder / name)
    print(f"{folder}: {len(files)} student notebooks (the Colab edition without solutions)")
    if args.out is None:
        first = next(iter(files))
        print(f"once committed and pushed, each opens in Colab at a link such as {colab_url(first, STUDENT_EDITION_DIR)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
