"""The Colab edition: what Colab opens, generated from the book's chapters (``python -m mixlib._edition``).

Colab opens a notebook from GitHub and renders its Markdown as CommonMark with LaTeX: it renders no MyST. The
book's chapters (``notebooks/NN_*.ipynb``) are written in MyST for the site, so this module writes, for each one,
``notebooks/colab/NN_*.ipynb``, where

* every ``{glue:text}`` value becomes this run's value: a paragraph that shows glued values becomes a folded cell
  (``#@title 本文（この実行の数で）``) that calls :func:`mixlib.glue.prose` with the paragraph, each value written
  ``{{key:spec}}``; Run all shows the paragraph with the numbers of the student's own run (bert-base-uncased on
  Colab, not the site's packaged model);
* roles become text and links: ``{term}`` → the glossary on the site, ``{cite}`` → author and year linked to the
  references page, ``{doc}`` → the other chapter's Colab edition (or the site's page), ``{ref}`` → the
  exercise's or section's name;
* directives become Markdown: an exercise a heading (``### 演習 ex-08-1``), its solution a folded ``<details>``
  block, an admonition a quotation with its title;
* the install cell and every cell the site folds or hides are folded (``#@title`` and ``"cellView": "form"``),
  so the notebook opens on the chapter's title; a note under the title says what the edition is.

Code cells are the chapter's own, unchanged but for the ``#@title`` line. The site's launch button and the
README's badges open this edition (:func:`mixlib._repo.colab_url`). ``tests/test_edition.py`` regenerates it and
compares; ``tests/test_notebooks.py`` runs it. Nothing here is needed on Colab itself.

Usage::

    python -m mixlib._edition            # write notebooks/colab/ (and the student edition, notebooks/student/)
    python -m mixlib._edition --check    # exit 1 and name the files that differ from what would be written
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ._repo import (COLAB_EDITION_DIR, INSTALL_CELL, INSTALL_TITLE, SITE_URL, STUDENT_EDITION_DIR, STUDENT_SITE_DIR,
                    colab_url)
from .glue import PLACEHOLDER

__all__ = ["Book", "EditionError", "read_book", "convert_markdown", "convert_notebook", "build", "main",
           "prose_cell", "prose_template", "PROSE_TITLE", "FOLD_TAGS"]

ROOT = Path(__file__).resolve().parent.parent
#: tags of the cells the site hides or folds: folded in the Colab edition
FOLD_TAGS = ("remove-cell", "remove-input", "hide-input", "hide-cell")
#: the title of a folded cell that shows a paragraph with this run's values
PROSE_TITLE = "本文（この実行の数で）"
#: the title of the folded install cell
#: the title of a folded cell whose first line is not a comment
FOLD_TITLE = "図と表を作るコード（▶ を押すと中が見える）"
#: the note under the chapter's title ({site}: the chapter's page on the site)
EDITION_NOTE = ("> **Colab 版**　この章の本のページ（[サイト]({site})）から生成したノートブックである。"
                "メニューの「ランタイム」→「すべてのセルを実行」で上から順に実行する。{prose}"
                "折りたたんだセルは、▶ やタイトルを押すと中のコードが見える。")
_NOTE_HERE = "> \x00EDITION_NOTE\x00"  # a quote line, as the note is: the blocks split where they did
#: the sentence of the note for a chapter whose prose shows computed values (only then: a chapter without such
#: paragraphs would send the student looking for cells it does not have)
PROSE_NOTE = ("本文のうち数や結論を述べる段落は、"
              "折りたたんだ「本文（この実行の数で）」のセルが **この実行で計算した値で** 表示するので、実行するまではセルのタイトルだけが見える"
              "（サイトの数は、本のビルド環境のモデルのもの）。")

ROLE = re.compile(r"\{([a-z][\w:-]*)\}`([^`]*)`")
ROLE_OR_CODE = re.compile(ROLE.pattern + r"|`[^`]*`")
DIRECTIVE_OPEN = re.compile(r"^(?P<fence>:{3,}|`{3,})\{(?P<name>[\w:-]+)\}\s*(?P<arg>.*)$")
OPTION = re.compile(r"^:(?P<key>[\w-]+):\s*(?P<value>.*)$")
TARGET = re.compile(r"^\((?P<label>[\w.-]+)\)=\s*$")
FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})")
#: a string in code that can be a glue key: a literal, or an f-string whose {…} parts stand for any word characters
#: (a key glued in a loop over names is named somewhere; tests/test_edition.py runs the edition and finds any gap)
GLUED = re.compile(r"""f?["']([A-Za-z_{][\w{}]*)["']""")


class EditionError(ValueError):
    """The chapters hold something the Colab edition cannot express (the message says where and what to do)."""


# -- what the whole book knows: titles, glossary anchors, references, labels --------------------------------------


@dataclass(frozen=True)
class Book:
    """What a chapter's roles refer to, read from the book's sources."""

    #: docname ("notebooks/08_bert", "book/glossary") -> its title
    titles: dict[str, str]
    #: glossary term -> its id on the site's glossary page
    terms: dict[str, str]
    #: bibliography key -> "Devlin et al. 2019"
    cites: dict[str, str]
    #: label ("ex-08-6", "ch10-token-maps") -> (docname, how a reference to it reads)
    labels: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: converting for the student edition (:mod:`mixlib._assign`): links go to the student edition and the site
    #: without solutions, never to a page that shows one
    student: bool = False

    @property
    def colab_folder(self) -> str:
        return STUDENT_EDITION_DIR if self.student else COLAB_EDITION_DIR


def cell_text(cell: dict) -> str:
    """A cell's source as one string (nbformat stores it as a string or a list of lines)."""
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _markdown_cells(nb: dict) -> list[str]:
    return [cell_text(c) for c in nb["cells"] if c["cell_type"] == "markdown"]


def _title(markdown: str) -> str:
    m = re.search(r"^# (.+)$", markdown, re.M)
    if not m:
        raise EditionError("no '# title' line")
    return m.group(1).strip()


def glossary_ids(glossary_md: str) -> dict[str, str]:
    """Each glossary term's id on the site's glossary page, as Sphinx gives it (``sphinx.util.nodes.make_id``):
    ``term-`` and the term where that makes an ASCII id (``term-WordPiece``), else ``term-0``, ``term-1`` … in the
    order of the page. ``.ci/check_site.py`` checks every such link against the built page."""
    from sphinx.util.nodes import _make_id

    m = re.search(r"^```\{glossary\}[^\n]*\n(.*?)^```\s*$", glossary_md, re.S | re.M)
    if not m:
        raise EditionError("book/glossary.md: no ```{glossary} block")
    ids: dict[str, str] = {}
    used: set[str] = set()
    serial = 0
    for line in m.group(1).splitlines():
        if not line.strip() or line[0].isspace() or line.startswith(":"):
            continue  # a definition line, a blank line or an option
        term = line.strip()
        node_id = _make_id(f"term-{term}")
        if node_id == "term":
            node_id = None
        while node_id is None or node_id in used:
            node_id, serial = f"term-{serial}", serial + 1
        used.add(node_id)
        ids[term] = node_id
    return ids


def _cite_names(bib_path: Path) -> dict[str, str]:
    from pybtex.database import parse_file

    names = {}
    for key, entry in parse_file(str(bib_path), bib_format="bibtex").entries.items():
        people = entry.persons.get("author") or entry.persons.get("editor") or []
        last = [" ".join(p.last_names).replace("{", "").replace("}", "") for p in people]
        ja = any(not name.isascii() for name in last)  # 小林悟郎ら, 山本悠士・松崎拓也
        two, many = ("・", "ら") if ja else (" & ", " et al.")
        who = (last[0] if len(last) == 1 else f"{last[0]}{two}{last[1]}" if len(last) == 2
               else f"{last[0]}{many}" if last else entry.fields.get("title", key))
        names[key] = f"{who} {entry.fields.get('year', '')}".strip()
    return names


def read_book(root: Path = ROOT) -> Book:
    """Read titles, glossary anchors, references and labels from the book's sources."""
    titles: dict[str, str] = {}
    labels: dict[str, tuple[str, str]] = {}
    for page in sorted((root / "book").glob("*.md")):
        titles[f"book/{page.stem}"] = _title(page.read_text(encoding="utf-8"))
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        doc = f"notebooks/{path.stem}"
        cells = _markdown_cells(json.loads(path.read_text(encoding="utf-8")))
        titles[doc] = _title(cells[0])
        for text in cells:
            for m in re.finditer(r"^:label:\s*(ex-[\w-]+)\s*$", text, re.M):
                labels[m.group(1)] = (doc, f"演習 {m.group(1)}")
            for m in re.finditer(r"^\(([\w.-]+)\)=\s*\n#+ (.+)$", text, re.M):
                labels[m.group(1)] = (doc, f"「{m.group(2).strip()}」の節")
    terms = glossary_ids((root / "book" / "glossary.md").read_text(encoding="utf-8"))
    return Book(titles=titles, terms=terms, cites=_cite_names(root / "book" / "references.bib"), labels=labels)


# -- MyST -> CommonMark ------------------------------------------------------------------------------------------


def site_url(doc: str, anchor: str = "", student: bool = False) -> str:
    """The site's page for a docname (``book/glossary`` → ``…/book/glossary.html``); with ``student``, the page of
    the site without solutions (``make book-student``, published under ``student/``)."""
    return f"{SITE_URL}{STUDENT_SITE_DIR if student else ''}{doc}.html" + (f"#{anchor}" if anchor else "")


def _doc_link(target: str, doc: str, book: Book) -> str:
    name = str(Path(Path(doc).parent, target)).replace("\\", "/")
    name = re.sub(r"[^/]+/\.\./", "", name)
    if name not in book.titles:
        raise EditionError(f"{{doc}}`{target}` in {doc}: no such page")
    if name.startswith("notebooks/"):
        return f"[{book.titles[name]}]({colab_url(Path(name).name + '.ipynb', book.colab_folder)})"
    return f"[{book.titles[name]}]({site_url(name, student=book.student)})"


def _surname(who: str) -> str:
    """The first author's name as prose writes it: "Kobayashi" of "Kobayashi et al.", "小林" of "小林悟郎ら"."""
    first = re.split(r" et al\.| & |ら|・", who)[0]
    return first[:2] if not first.isascii() else first


def _role(name: str, content: str, doc: str, book: Book, before: str = "") -> str:
    if name == "glue:text":
        key, _, spec = content.partition(":")
        if "::" in content or not re.fullmatch(r"[A-Za-z_]\w*", key):
            raise EditionError(f"{doc}: {{glue:text}}`{content}`: only a key of this notebook, with a format spec")
        return "{{" + key + (f":{spec}" if _ else "") + "}}"
    if name == "term":
        m = re.fullmatch(r"(.*?)\s*<(.+)>", content, re.S)
        shown, term = (m.group(1), m.group(2)) if m else (content, content)
        if term not in book.terms:
            raise EditionError(f"{doc}: {{term}}`{content}`: not in book/glossary.md")
        return f"[{shown}]({site_url('book/glossary', book.terms[term], book.student)})"
    if name == "cite":
        keys = [k.strip() for k in content.split(",")]
        unknown = [k for k in keys if k not in book.cites]
        if unknown:
            raise EditionError(f"{doc}: {{cite}}`{content}`: {unknown} not in book/references.bib")
        refs = site_url("book/references", student=book.student)
        if len(keys) == 1:  # 小林ら {cite}`kobayashi2021nlp`: the prose names the authors, the citation adds the year
            who, _, year = book.cites[keys[0]].rpartition(" ")
            if _surname(who) in before[-12:] and year.isdigit():
                return f"（[{year}]({refs})）"
        return "（" + "；".join(f"[{book.cites[k]}]({refs})" for k in keys) + "）"
    if name == "doc":
        return _doc_link(content, doc, book)
    if name in ("ref", "numref"):
        label = re.sub(r"^.*<(.+)>$", r"\1", content)
        if label not in book.labels:
            raise EditionError(f"{doc}: {{{name}}}`{content}`: no such label")
        where, reads = book.labels[label]
        if where == doc:
            return reads
        chapter = int(Path(where).name[:2])
        return f"[第 {chapter} 章]({colab_url(Path(where).name + '.ipynb', book.colab_folder)})の{reads}"
    raise EditionError(f"{doc}: the role {{{name}}} has no Colab form")


def _roles(text: str, doc: str, book: Book) -> str:
    """Replace every role outside code (fenced blocks and code spans keep their text)."""
    out, in_fence = [], ""
    for line in text.split("\n"):
        m = FENCE.match(line.lstrip("> "))
        if in_fence:
            if m and m.group("fence")[0] == in_fence[0] and len(m.group("fence")) >= len(in_fence):
                in_fence = ""
        elif m:
            in_fence = m.group("fence")
        else:
            line = re.sub(r" ?(\{cite\}`[^`]*`) ?", r"\1", line)  # the site's spaces around a citation, not Colab's
            line = re.sub(r"演習 ?(\{ref\}`ex-)", r"\1", line)  # 演習 {ref}`ex-04-5`: the reference says 演習 itself
            line = ROLE_OR_CODE.sub(lambda r: _role(r.group(1), r.group(2), doc, book, r.string[:r.start()])
                                    if r.group(1) else r.group(0), line)
        out.append(line)
    return "\n".join(out)


def _directive(name: str, arg: str, options: dict[str, str], body: str, doc: str) -> str:
    if name == "exercise":
        label = options.get("label")
        if not label:
            raise EditionError(f"{doc}: an exercise without :label:")
        return f"### 演習 {label}" + (f"（{arg}）" if arg else "") + f"\n\n{body}"
    if name == "solution":
        return (f"<details>\n<summary>解答例（{arg}。まず自分で解いてから開く）</summary>\n\n{body}\n\n</details>")
    if name == "admonition":
        lines = [f"**{arg}**", "", *body.split("\n")]
        return "\n".join(f"> {line}".rstrip() for line in lines)
    raise EditionError(f"{doc}: the directive {{{name}}} has no Colab form")


def segments(text: str) -> list[tuple[bool, str]]:
    """Split MyST into (is_directive, text) pieces at top level: a directive is one piece with its body."""
    lines = text.split("\n")
    out: list[tuple[bool, str]] = []
    plain: list[str] = []
    i = 0
    while i < len(lines):
        m = DIRECTIVE_OPEN.match(lines[i])
        if not m:
            plain.append(lines[i])
            i += 1
            continue
        fence = m.group("fence")
        close = re.compile(r"^%s{%d,}\s*$" % (re.escape(fence[0]), len(fence)))
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        if j == len(lines):
            raise EditionError(f"a {m.group('name')} directive that is never closed: {lines[i]!r}")
        if plain:
            out.append((False, "\n".join(plain)))
            plain = []
        out.append((True, "\n".join(lines[i:j + 1])))
        i = j + 1
    if plain:
        out.append((False, "\n".join(plain)))
    return out


def parse_directive(text: str) -> tuple[str, str, dict[str, str], str]:
    """A directive piece of :func:`segments` as (name, argument, options, body)."""
    lines = text.split("\n")
    m = DIRECTIVE_OPEN.match(lines[0])
    body = lines[1:-1]
    options = {}
    while body and (o := OPTION.match(body[0])):
        options[o.group("key")] = o.group("value").strip()
        body = body[1:]
    return m.group("name"), m.group("arg").strip(), options, "\n".join(body)


def _convert_directive(text: str, doc: str, book: Book) -> str:
    name, arg, options, body = parse_directive(text)
    return _directive(name, arg, options, convert_markdown(body.strip("\n"), doc, book), doc)


def _wide(ch: str) -> bool:
    import unicodedata

    return unicodedata.east_asian_width(ch) in "WF"


def join_cjk_lines(text: str) -> str:
    """Join a paragraph's lines where both sides are Japanese: a browser shows a line break inside a paragraph as a
    space, which Japanese text does not have (``部分語に⏎分ける`` reads ``部分語に 分ける``). Code, display math,
    headings, tables and the start of a list item or a quotation are left as they are."""
    out: list[str] = []
    fence = math = False
    for line in text.split("\n"):
        body = line.lstrip("> ")
        depth = line[: len(line) - len(body)].count(">")  # how deep in a quotation
        starts_block = not body or body[0] in "-*+#|<$`:!" or re.match(r"\d+\. ", body) or body.startswith("[")
        if (out and not fence and not math and not starts_block and _wide(body[0]) and out[-1].strip()
                and _wide(out[-1].rstrip()[-1]) and not out[-1].lstrip("> ").startswith(("#", "|"))
                and out[-1][: len(out[-1]) - len(out[-1].lstrip("> "))].count(">") == depth):
            out[-1] = out[-1].rstrip() + body
            continue
        out.append(line)
        if FENCE.match(body):
            fence = not fence
        elif body.startswith("$$") and not fence:
            math = not math if body.strip() == "$$" or not (body.endswith("$$") and len(body.strip()) > 2) else math
    return "\n".join(out)


def convert_markdown(text: str, doc: str, book: Book) -> str:
    """A markdown cell's MyST as CommonMark; glued values as ``{{key:spec}}`` (filled in by :func:`mixlib.glue.prose`)."""
    if "{{" in text:
        raise EditionError(f"{doc}: '{{{{' in the markdown (it marks a glued value in the Colab edition)")
    pieces = []
    for is_directive, piece in segments(text):
        if is_directive:
            pieces.append(_convert_directive(piece, doc, book))
        else:
            piece = "\n".join(line for line in piece.split("\n") if not TARGET.match(line))
            pieces.append(_roles(piece, doc, book))
    return join_cjk_lines("\n".join(pieces))


# -- cells ---------------------------------------------------------------------------------------------------------


def blocks(markdown: str) -> list[tuple[str, str]]:
    """Split CommonMark into ("md" | "prose" | "heading", text) blocks at its top level (markdown-it's line map);
    a block that shows a glued value is "prose". A ``<details>`` … ``</details>`` region is one block."""
    from markdown_it import MarkdownIt

    lines = markdown.split("\n")
    spans: list[tuple[int, int, str]] = []
    for tok in MarkdownIt("commonmark").enable("table").parse(markdown):
        if tok.level == 0 and tok.map and tok.nesting in (1, 0):
            start, end = tok.map
            kind = "heading" if tok.type == "heading_open" else "md"
            if spans and start < spans[-1][1]:
                continue
            spans.append((start, end, kind))
    merged: list[tuple[int, int, str]] = []
    open_details = None
    for start, end, kind in spans:
        text = "\n".join(lines[start:end])
        if open_details is not None:
            if "</details>" in text:
                merged.append((open_details, end, "md"))
                open_details = None
            continue
        if text.lstrip().startswith("<details>") and "</details>" not in text:
            open_details = start
            continue
        merged.append((start, end, kind))
    if open_details is not None:
        raise EditionError("a <details> block that is never closed")
    out = []
    for start, end, kind in merged:
        text = "\n".join(lines[start:end]).strip("\n")
        if PLACEHOLDER.search(text):
            if kind == "heading":
                raise EditionError(f"a glued value in a heading: {text!r}")
            kind = "prose"
        out.append((kind, text))
    return out


#: how a Japanese sentence (or a line that introduces what follows) ends
SENTENCE_END = tuple("。．！？：:」）)")


def _ends_sentence(block: str) -> bool:
    text = block.rstrip()
    return not text.startswith("$$") and (text.endswith(SENTENCE_END) or text[:1] in "|<>-*#" or text[:2].rstrip(".").isdigit())


def group(blocks: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Join a markdown cell's blocks into cells: a run of blocks without values stays Markdown, a block with values
    (and the blocks next to it that share its sentence: ``…ベクトルは`` / ``$$…$$`` / ``である。{{x}}…``) goes into one
    prose cell; headings always stay Markdown (Colab's table of contents)."""
    out: list[list] = []  # [kind, [blocks]]
    for kind, block in blocks:
        if kind == "prose":
            pulled: list[str] = []
            if out and out[-1][0] == "md":
                run = out[-1][1]
                # a sentence that runs into this block: a paragraph that does not end, maybe with display math after it
                k = len(run)
                if k and run[-1].startswith("$$") and k > 1 and not _ends_sentence(run[-2]) and not run[-2].startswith("#"):
                    k -= 2
                elif k and not _ends_sentence(run[-1]) and not run[-1].startswith("#") and not run[-1].startswith("$$"):
                    k -= 1
                pulled, run[k:] = run[k:], []
                if not run:
                    out.pop()
            if out and out[-1][0] == "prose":
                out[-1][1].extend([*pulled, block])
            else:
                out.append(["prose", [*pulled, block]])
        elif out and out[-1][0] == "prose" and kind != "heading" and not _ends_sentence(out[-1][1][-1]):
            out[-1][1].append(block)  # the prose's sentence goes on into this block
        elif out and out[-1][0] == "md":
            out[-1][1].append(block)
        else:
            out.append(["md", [block]])
    return [(kind, "\n\n".join(parts)) for kind, parts in out]


def _cell_id(base: str, n: int) -> str:
    return base if n == 0 else f"{base}-{n}"


def _md_cell(text: str, cid: str) -> dict:
    return {"cell_type": "markdown", "id": cid, "metadata": {}, "source": _lines(text)}


def _code_cell(src: str, cid: str, metadata: dict) -> dict:
    return {"cell_type": "code", "execution_count": None, "id": cid, "metadata": metadata, "outputs": [],
            "source": _lines(src)}


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def prose_cell(markdown: str, cid: str, later: tuple[str, ...] = ()) -> dict:
    """A folded cell that shows ``markdown`` with this run's values (:func:`mixlib.glue.prose`); ``later``: the keys
    that only a later cell glues (the paragraph says so where they go, instead of asking to run the cells above)."""
    if '"""' in markdown or markdown.endswith("\\"):
        raise EditionError(f'a paragraph with """ or a final backslash cannot go into prose(r"""…"""): {markdown[:80]!r}')
    tail = _PROSE_TAIL if not later else f'\n""", later={tuple(later)!r})'
    return _code_cell(f"{_PROSE_HEAD}{markdown}{tail}", cid, {"cellView": "form"})


_PROSE_HEAD = f'#@title {PROSE_TITLE}\nfrom mixlib.glue import prose\n\nprose(r"""\n'
_PROSE_TAIL = '\n""")'


def prose_template(source: str) -> str | None:
    """The paragraph a prose cell's source shows (its ``{{key:spec}}`` left in), or ``None`` for any other cell."""
    if not source.startswith(_PROSE_HEAD):
        return None
    if source.endswith(_PROSE_TAIL):
        return source[len(_PROSE_HEAD):-len(_PROSE_TAIL)]
    m = re.search(r'\n""", later=\((?:\'\w+\',? ?)+\)\)$', source)  # later=('a',) or later=('a', 'b')
    return source[len(_PROSE_HEAD):m.start()] if m else None


def _fold(cell: dict) -> dict:
    src = "".join(cell["source"])
    if not src.startswith("#@title "):  # the install cell comes folded already
        first = src.split("\n", 1)[0]
        title = first.lstrip("# ").strip() if first.startswith("# ") else FOLD_TITLE
        src = f"#@title {title}\n{src}"
    return {**cell, "metadata": {**cell["metadata"], "cellView": "form"}, "source": _lines(src)}


def convert_notebook(nb: dict, doc: str, book: Book) -> dict:
    """The Colab edition of one chapter (a notebook dict in, a new one out)."""
    cells: list[dict] = []
    def keys_of(c: dict) -> set[str]:  # the keys a code cell can glue, as patterns
        return {re.sub(r"\\\{[^}]*\\\}", r"\\w+", re.escape(k)) for k in GLUED.findall("".join(c["source"]))}

    glued = set().union(*(keys_of(c) for c in nb["cells"] if c["cell_type"] == "code"))
    above: set[str] = set()  # the keys the code cells so far can glue
    has_prose = False  # whether a paragraph shows computed values (the note under the title says so only then)
    for index, cell in enumerate(nb["cells"]):
        src = cell_text(cell)
        cid = cell.get("id") or f"cell{index}"
        if cell["cell_type"] == "code":
            above |= keys_of(cell)
            code = {"cell_type": "code", "execution_count": None, "id": cid, "metadata": copy.deepcopy(cell.get("metadata", {})),
                    "outputs": [], "source": _lines(src)}
            tags = code["metadata"].get("tags", [])
            cells.append(_fold(code) if src == INSTALL_CELL or any(t in FOLD_TAGS for t in tags) else code)
            continue
        if cell["cell_type"] != "markdown":
            cells.append(copy.deepcopy(cell))
            continue
        try:
            text = convert_markdown(src, doc, book)
        except EditionError as err:
            raise EditionError(f"{doc}, cell {index}: {err}") from None
        if index == next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"):
            title, _, rest = text.partition("\n")
            text = f"{title}\n\n{_NOTE_HERE}\n{rest}"  # the note is written once the chapter's prose cells are known
        for n, (kind, block) in enumerate(group(blocks(text))):
            if kind == "prose":
                early = [k for k, _ in PLACEHOLDER.findall(block) if not any(re.fullmatch(p, k) for p in glued)]
                if early:
                    raise EditionError(f"{doc}, cell {index}: the prose shows {early}, which no code cell glues")
                later = tuple(dict.fromkeys(k for k, _ in PLACEHOLDER.findall(block) if not any(re.fullmatch(p, k) for p in above)))
                cells.append(prose_cell(block, _cell_id(cid, n), later))
                has_prose = True
            else:
                cells.append(_md_cell(block, _cell_id(cid, n)))
    note = EDITION_NOTE.format(site=site_url(doc, student=book.student), prose=PROSE_NOTE if has_prose else "")
    for cell in cells:  # the title's cell: markdown, or a prose cell when the first paragraph shows a value
        src = cell["source"]
        cell["source"] = src.replace(_NOTE_HERE, note) if isinstance(src, str) else [line.replace(_NOTE_HERE, note) for line in src]
    out = {k: copy.deepcopy(v) for k, v in nb.items() if k != "cells"}
    out["cells"] = cells
    out["metadata"] = {**out.get("metadata", {}), "colab": {"provenance": [], "toc_visible": True}}
    return out


# -- the whole edition ---------------------------------------------------------------------------------------------


def _dump(nb: dict) -> str:
    return json.dumps(nb, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def build(root: Path = ROOT, *, student: bool = True) -> dict[Path, str]:
    """Every chapter's Colab edition: path under ``notebooks/colab/`` → the file's text; with ``student``, the
    student edition too (:mod:`mixlib._assign`), under ``notebooks/student/``."""
    book = read_book(root)
    out = {}
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        out[root / COLAB_EDITION_DIR / path.name] = _dump(convert_notebook(nb, f"notebooks/{path.stem}", book))
    if student:
        from mixlib import _assign

        out.update({root / STUDENT_EDITION_DIR / name: text for name, text in _assign.build(root, book).items()})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mixlib._edition", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if notebooks/colab/ or notebooks/student/ is not what the chapters give")
    ap.add_argument("--root", type=Path, default=ROOT, help="the book's repository (default: this one)")
    args = ap.parse_args(argv)
    try:
        files = build(args.root)
    except EditionError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    folders = [args.root / COLAB_EDITION_DIR, args.root / STUDENT_EDITION_DIR]
    stale = sorted(p for folder in folders if folder.is_dir() for p in folder.glob("*.ipynb") if p not in files)
    differ = [p for p, text in files.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    if args.check:
        for p in differ + stale:
            print(f"{p.relative_to(args.root)} is not what `make colab` writes from the chapters", file=sys.stderr)
        return 1 if differ or stale else 0
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    for p in stale:
        p.unlink()
    for p in differ:
        p.write_text(files[p], encoding="utf-8")
    for folder in folders:
        mine = [p for p in files if p.parent == folder]
        print(f"{folder.relative_to(args.root)}/: {len(mine)} notebooks, {sum(p in differ for p in mine)} rewritten, "
              f"{sum(p.parent == folder for p in stale)} removed")
    return 0


# -- the site's launch button -------------------------------------------------------------------------------------


def launch_to_edition(app, pagename: str, templatename: str, context: dict, doctree) -> None:  # noqa: ARG001
    """Point a chapter page's Colab launch button at the chapter's Colab edition (sphinx-book-theme builds it for
    the source in ``notebooks/``, which Colab cannot render); on the site without solutions (Sphinx's
    ``mixbook_colab_folder`` set to ``notebooks/student``), at its student edition."""
    if not pagename.startswith("notebooks/"):
        return
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []) if group.get("label") == "launch-buttons" else []:
            if button.get("text") == "Colab":
                button["url"] = colab_url(f"{Path(pagename).name}.ipynb", app.config.mixbook_colab_folder)


def setup(app) -> dict:
    """Sphinx extension (``_config.yml``): the launch button opens the Colab edition (or the student edition)."""
    app.add_config_value("mixbook_colab_folder", COLAB_EDITION_DIR, "html", types=[str])
    app.connect("html-page-context", launch_to_edition, priority=600)  # after sphinx-book-theme's buttons (501)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    sys.exit(main())
