"""The Colab edition (``notebooks/colab/``, :mod:`mixlib._edition`): in sync with the chapters, no raw MyST, solutions
folded, the install cell and the site's folded cells folded, and each part of the conversion on its own.

Running it (every number of the prose appears, computed by that run) is ``tests/test_notebooks.py``: the fast-mode
run of every chapter runs its Colab edition.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mixlib import _edition as edition
from mixlib._repo import COLAB_EDITION_DIR, INSTALL_CELL, SITE_URL, STUDENT_EDITION_DIR, colab_url

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "notebooks").glob("*.ipynb"))
EDITION = ROOT / COLAB_EDITION_DIR


def _nb(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _src(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


#: what raw MyST looks like once CommonMark has rendered it: a role before a code span, a directive's fence, a
#: colon fence, a directive option, a target, a glue role
MYST_IN_HTML = re.compile(
    r"\{[a-z][\w:-]*\}<code>"                                 # {term}`…` -> {term}<code>…</code>
    r"|<code class=\"language-\{[\w:-]+\}"                    # ```{admonition} -> a code block of language {admonition}
    r"|(?:^|>|\n):::"                                         # :::{exercise} ... :::
    r"|(?:^|>|\n):(?:label|class|name|width|align):"          # :label: ex-08-1
    r"|(?:^|>|\n)\([\w.-]+\)="                                # (label)=
    r"|\{glue|\{\{\w",                                        # a glue role or an unfilled value
    re.M)


def myst_left(markdown: str) -> list[str]:
    """The raw MyST a CommonMark renderer (markdown-it-py, as Colab renders Markdown) leaves in ``markdown``."""
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(markdown)
    return [m.group(0) for m in MYST_IN_HTML.finditer(html)]


def _markdowns(nb: dict) -> list[str]:
    return [_src(c) for c in nb["cells"] if c["cell_type"] == "markdown"]


# -- the edition on disk ---------------------------------------------------------------------------------------


def test_edition_is_what_the_chapters_give():
    """Regenerate and compare: a chapter changed without `make colab` fails here, naming the file. Both editions:
    the Colab edition and the student edition (notebooks/student/, :mod:`mixlib._assign`)."""
    files = edition.build(ROOT)
    for folder in (EDITION, ROOT / STUDENT_EDITION_DIR):
        assert sorted(p.name for p in files if p.parent == folder) == [p.name for p in SOURCES]
        stale = [p.name for p, text in files.items() if p.parent == folder
                 and (not p.is_file() or p.read_text(encoding="utf-8") != text)]
        extra = sorted({p.name for p in folder.glob("*.ipynb")} - {p.name for p in SOURCES})
        where = folder.relative_to(ROOT)
        assert not stale and not extra, f"{where}/ is out of date ({stale or extra}): run `make colab` and commit"


def test_check_command_names_a_stale_file(tmp_path):
    """`python -m mixlib._edition --check` exits 1 and names the file when the edition is not the chapters'."""
    for name in ("notebooks", "book"):
        subprocess.run(["cp", "-r", str(ROOT / name), str(tmp_path / name)], check=True)
    run = [sys.executable, "-m", "mixlib._edition", "--root", str(tmp_path)]
    assert subprocess.run([*run, "--check"], capture_output=True).returncode == 0
    stale = tmp_path / COLAB_EDITION_DIR / "08_bert.ipynb"
    stale.write_text(stale.read_text(encoding="utf-8").replace("穴埋め", "穴うめ"), encoding="utf-8")
    out = subprocess.run([*run, "--check"], capture_output=True, text=True)
    assert out.returncode == 1 and "notebooks/colab/08_bert.ipynb" in out.stderr, out.stderr
    assert subprocess.run(run, capture_output=True).returncode == 0
    assert subprocess.run([*run, "--check"], capture_output=True).returncode == 0
    # a chapter the edition cannot express: one line naming the chapter and the cell, exit 2, nothing written
    chapter = tmp_path / "notebooks" / "08_bert.ipynb"
    chapter.write_text(chapter.read_text(encoding="utf-8").replace("{term}`エンコーダ`", "{term}`無い語`", 1), encoding="utf-8")
    before = stale.read_text(encoding="utf-8")
    out = subprocess.run(run, capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.startswith("error: notebooks/08_bert, cell ") and "無い語" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and stale.read_text(encoding="utf-8") == before


def test_sources_hold_the_myst_the_edition_removes():
    """The check below can fail: the chapters themselves hold hundreds of raw MyST tokens for Colab."""
    found = sum(len(myst_left(text)) for path in SOURCES for text in _markdowns(_nb(path)))
    assert found >= 700, found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_no_raw_myst(path):
    """Every markdown cell, and every paragraph a prose cell shows, rendered as CommonMark: no MyST left."""
    nb = _nb(EDITION / path.name)
    left = {}
    for i, cell in enumerate(nb["cells"]):
        text = _src(cell)
        if cell["cell_type"] == "code" and edition.prose_template(text) is not None:
            text = edition.PLACEHOLDER.sub("1.0", edition.prose_template(text))
        elif cell["cell_type"] != "markdown":
            continue
        if myst_left(text):
            left[i] = myst_left(text)
    assert not left, f"{path.name}: raw MyST in cells {left}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_solutions_folded_and_code_cells_kept(path):
    """Each solution sits inside <details> (no solution code in plain view); the code cells are the chapter's,
    in order, folded where the site folds them; the notebook opens on the chapter's title."""
    from markdown_it import MarkdownIt

    source, nb = _nb(path), _nb(EDITION / path.name)
    n_solutions = sum(_src(c).count(":::{solution}") for c in source["cells"] if c["cell_type"] == "markdown")
    details, unfolded = 0, []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        depth = 0
        for tok in MarkdownIt("commonmark").parse(_src(cell)):
            if tok.type == "html_block":
                depth += tok.content.count("<details>") - tok.content.count("</details>")
                details += tok.content.count("<details>")
            elif tok.type == "fence" and depth == 0 and re.search(r"^ans_\w+ = (?!None)", tok.content, re.M):
                unfolded.append(tok.content[:60])
    prose_details = sum(_src(c).count("<details>") for c in nb["cells"] if c["cell_type"] == "code"
                        and edition.prose_template(_src(c)) is not None)
    assert details + prose_details == n_solutions, (details, prose_details, n_solutions)
    assert not unfolded, f"{path.name}: answer code in plain view: {unfolded}"

    kept = [c for c in nb["cells"] if c["cell_type"] == "code" and edition.prose_template(_src(c)) is None]
    originals = [c for c in source["cells"] if c["cell_type"] == "code"]
    assert len(kept) == len(originals)
    for new, old in zip(kept, originals):
        folded = new["metadata"].get("cellView") == "form"
        titled = folded and not _src(old).startswith("#@title ")  # the install cell arrives with its title
        body = _src(new).split("\n", 1)[1] if titled else _src(new)
        assert body == _src(old), f"{path.name}: code cell {old.get('id')} changed"
        should = _src(old) == INSTALL_CELL or any(t in edition.FOLD_TAGS for t in old["metadata"].get("tags", []))
        assert folded == should and (not folded or _src(new).startswith("#@title ")), (path.name, old.get("id"))
    assert _src(nb["cells"][0]).startswith(f"#@title {edition.INSTALL_TITLE}\n") and nb["cells"][0]["metadata"]["cellView"] == "form"
    assert _src(nb["cells"][1]).startswith("# "), "the first thing shown is the chapter's title"
    assert nb["metadata"]["colab"]["toc_visible"] is True


def test_links_point_to_the_edition_and_the_site():
    nb = _nb(EDITION / "08_bert.ipynb")
    text = "\n".join(_src(c) for c in nb["cells"])
    assert colab_url("10_mixing.ipynb") in text and "/notebooks/colab/10_mixing.ipynb" in colab_url("10_mixing.ipynb")
    assert f"{SITE_URL}book/glossary.html#term-" in text and f"{SITE_URL}book/references.html" in text
    assert f"({SITE_URL}notebooks/08_bert.html)" in text  # the note under the title


# -- the conversion, piece by piece -----------------------------------------------------------------------------

BOOK = edition.Book(titles={"notebooks/12_positional": "単語と位置", "book/beyond": "この先へ", "notebooks/08_bert": "BERT"},
                    terms={"エンコーダ": "term-6", "WordPiece": "term-WordPiece"},
                    cites={"devlin2019bert": "Devlin et al. 2019", "wu2016google": "Wu et al. 2016"},
                    labels={"ex-08-6": ("notebooks/08_bert", "演習 ex-08-6"), "ex-12-1": ("notebooks/12_positional", "演習 ex-12-1"),
                            "sec-a": ("notebooks/08_bert", "「地図」の節")})


def _convert(text: str) -> str:
    return edition.convert_markdown(text, "notebooks/08_bert", BOOK)


def test_roles_become_text_and_links():
    glossary, refs = f"{SITE_URL}book/glossary.html", f"{SITE_URL}book/references.html"
    assert _convert("{term}`エンコーダ` と {term}`部分語 <WordPiece>`") == (
        f"[エンコーダ]({glossary}#term-6) と [部分語]({glossary}#term-WordPiece)")
    assert _convert("BERT {cite}`devlin2019bert,wu2016google` は") == (
        f"BERT（[Devlin et al. 2019]({refs})；[Wu et al. 2016]({refs})）は")
    assert _convert("{doc}`12_positional` と {doc}`../book/beyond`") == (
        f"[単語と位置]({colab_url('12_positional.ipynb')}) と [この先へ]({SITE_URL}book/beyond.html)")
    assert _convert("{ref}`ex-08-6`、{ref}`ex-12-1`、{ref}`sec-a`") == (
        f"演習 ex-08-6、[第 12 章]({colab_url('12_positional.ipynb')})の演習 ex-12-1、「地図」の節")
    assert _convert("（演習 {ref}`ex-08-6` で）") == "（演習 ex-08-6 で）"  # the prose's own 演習 is not doubled
    assert _convert("値 {glue:text}`x:.2f` と {glue:text}`verdict`") == "値 {{x:.2f}} と {{verdict}}"
    assert _convert("コードの中 `{term}` と\n```python\nx = '{cite}`a`'\n```") == "コードの中 `{term}` と\n```python\nx = '{cite}`a`'\n```"


def test_directives_become_markdown():
    src = ("(sec-a)=\n## 地図\n\n```{admonition} 学習目標\n:class: tip\n- 一つ\n```\n\n:::{exercise}\n:label: ex-08-9\n"
           "問い {term}`エンコーダ`\n:::\n\n:::{solution} ex-08-9\n:class: dropdown\n答え\n```python\nans = 1\n```\n:::")
    assert _convert(src) == (
        "## 地図\n\n> **学習目標**\n>\n> - 一つ\n\n### 演習 ex-08-9\n\n"
        f"問い [エンコーダ]({SITE_URL}book/glossary.html#term-6)\n\n<details>\n<summary>解答例（ex-08-9。まず自分で解いてから開く）</summary>"
        "\n\n答え\n```python\nans = 1\n```\n\n</details>")


@pytest.mark.parametrize("text, message", [
    ("{term}`無い語`", "not in book/glossary.md"),
    ("{cite}`nobody2020`", "not in book/references.bib"),
    ("{doc}`99_none`", "no such page"),
    ("{ref}`ex-99-1`", "no such label"),
    ("{math}`x`", "no Colab form"),
    ("```{figure} a.png\n```", "no Colab form"),
    ("{{ name }}", "'{{' in the markdown"),
    ("{glue:text}`other.ipynb::key`", "only a key of this notebook"),
    (":::{exercise}\n本文", "never closed"),
])
def test_what_has_no_colab_form_is_an_error(text, message):
    with pytest.raises(edition.EditionError, match=re.escape(message)):
        _convert(text)


def test_paragraphs_with_values_become_prose_cells():
    nb = {"cells": [
        {"cell_type": "code", "id": "a", "metadata": {}, "source": 'g("n", 3)\ng(f"acc_{rel}", 0.5)', "outputs": [], "execution_count": None},
        {"cell_type": "markdown", "id": "b", "metadata": {},
         "source": "# 題\n\n序文。\n\n## 結果\n\n数は {glue:text}`n` 個。\n\n正解率 {glue:text}`acc_past:.2f`。\n\n値のない段落。"},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    out = edition.convert_notebook(nb, "notebooks/08_bert", BOOK)
    kinds = [(c["cell_type"], c["metadata"].get("cellView")) for c in out["cells"]]
    assert kinds == [("code", None), ("markdown", None), ("code", "form"), ("markdown", None)]
    md, prose, tail = (_src(c) for c in out["cells"][1:])
    assert md.startswith("# 題\n\n> **Colab 版**") and md.endswith("序文。\n\n## 結果")
    assert prose == f'#@title {edition.PROSE_TITLE}\nfrom mixlib.glue import prose\n\nprose(r"""\n数は {{{{n}}}} 個。\n\n正解率 {{{{acc_past:.2f}}}}。\n""")'
    assert edition.prose_template(prose) == "数は {{n}} 個。\n\n正解率 {{acc_past:.2f}}。" and edition.prose_template(tail) is None
    assert tail == "値のない段落。"
    assert edition.PROSE_NOTE in md  # the note under the title points to the prose cells ...
    plain = {**nb, "cells": [nb["cells"][0], {**nb["cells"][1], "source": "# 題\n\n序文。\n\n値のない段落。"}]}
    note = _src(edition.convert_notebook(plain, "notebooks/08_bert", BOOK)["cells"][1])
    assert note.startswith("# 題\n\n> **Colab 版**") and edition.PROSE_NOTE not in note  # ... only where there are some
    assert "\x00" not in note and "すべてのセルを実行" in note
    nb["cells"][1]["source"] = "値 {glue:text}`never`。"
    with pytest.raises(edition.EditionError, match=r"\['never'\], which no code cell glues"):
        edition.convert_notebook(nb, "notebooks/08_bert", BOOK)


def test_a_paragraph_that_announces_a_later_value_says_so():
    """A value that only a later cell glues: the prose cell lists it (later=...), so the paragraph says a later cell
    computes it instead of asking to run the cells above; a value glued above is not listed."""
    nb = {"cells": [
        {"cell_type": "code", "id": "a", "metadata": {}, "source": 'g("n", 3)', "outputs": [], "execution_count": None},
        {"cell_type": "markdown", "id": "b", "metadata": {}, "source": "# 題\n\n数は {glue:text}`n` 個、次のセルで {glue:text}`m` 回数える。"},
        {"cell_type": "code", "id": "c", "metadata": {}, "source": 'g("m", 5)', "outputs": [], "execution_count": None},
        {"cell_type": "markdown", "id": "d", "metadata": {}, "source": "数えた {glue:text}`m` 回。"},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    out = edition.convert_notebook(nb, "notebooks/08_bert", BOOK)
    proses = [_src(c) for c in out["cells"] if edition.prose_template(_src(c)) is not None]
    announce, after = proses[0], proses[-1]
    assert len(proses) == 2 and "数えた" in after
    assert announce.endswith('\n""", later=(\'m\',))') and after.endswith('\n""")')
    assert edition.prose_template(announce) == "数は {{n}} 個、次のセルで {{m}} 回数える。"
    assert edition.prose_template(announce.replace("later=('m',)", "later=('m', 'n')")) == edition.prose_template(announce)


def test_glossary_ids_are_the_sites(tmp_path):
    """The term anchors the edition links equal the ids Sphinx gives the glossary page (a one-page build)."""
    pytest.importorskip("myst_parser")
    (tmp_path / "src").mkdir()
    text = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    (tmp_path / "src" / "index.md").write_text(re.sub(r"\{cite\}`[^`]*`", "", text), encoding="utf-8")
    (tmp_path / "src" / "conf.py").write_text("extensions = ['myst_parser']\nlanguage = 'ja'\n"
                                              "myst_enable_extensions = ['dollarmath', 'colon_fence']\n", encoding="utf-8")
    subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html", str(tmp_path / "src"), str(tmp_path / "out")],
                   check=True, capture_output=True)
    html = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    site = {re.sub(r"<[^>]+>", "", term).strip(): node_id
            for node_id, term in re.findall(r'<dt id="(term-[^"]+)">(.*?)<a class="headerlink"', html, re.S)}
    ours = edition.glossary_ids(text)
    assert len(ours) > 50 and ours == site


def test_a_citation_after_the_authors_names_only_the_year():
    refs = f"{SITE_URL}book/references.html"
    book = edition.Book(titles={}, terms={}, cites={"kobayashi2021nlp": "小林悟郎ら 2021", "devlin2019bert": "Devlin et al. 2019"})
    convert = lambda text: edition.convert_markdown(text, "notebooks/08_bert", book)  # noqa: E731
    assert convert("小林ら {cite}`kobayashi2021nlp` に倣う") == f"小林ら（[2021]({refs})）に倣う"
    assert convert("Devlin ら {cite}`devlin2019bert` は") == f"Devlin ら（[2019]({refs})）は"
    assert convert("BERT {cite}`devlin2019bert` は") == f"BERT（[Devlin et al. 2019]({refs})）は"


def test_japanese_lines_of_a_paragraph_are_joined():
    """A line break inside a Japanese paragraph shows as a space; code, math, lists, tables and headings keep theirs."""
    join = edition.join_cjk_lines
    assert join("部分語に\n分ける。") == "部分語に分ける。"
    assert join("- 一つめの項目は\n  続く。\n- 二つめ") == "- 一つめの項目は続く。\n- 二つめ"
    assert join("> 引用の\n> 続き") == "> 引用の続き"
    kept = ["英語の\nword で", "語の\n`code` で", "式は\n$$\nx\n$$\nである", "## 見出し\n本文", "| 表 |\n| 表 |",
            "```python\n# 日本\n# 語\n```", "一行\n\n段落", "語の\n- 項目", "> 引用\n本文"]
    for text in kept:
        assert join(text) == text, text


def test_a_sentence_that_runs_into_a_value_goes_with_it():
    """「…ベクトルは」 / display math / 「である。{{x}}…」 is one sentence: one prose cell, not cut by a cell's title."""
    blocks = [("heading", "### 入力"), ("md", "位置のベクトルは"), ("md", "$$\nh\n$$"), ("prose", "である。値は {{x}}。"),
              ("md", "独立した段落。"), ("prose", "値 {{y}} は"), ("md", "$$\nz\n$$"), ("md", "となる。"), ("md", "次の段落。")]
    assert edition.group(blocks) == [
        ("md", "### 入力"), ("prose", "位置のベクトルは\n\n$$\nh\n$$\n\nである。値は {{x}}。"), ("md", "独立した段落。"),
        ("prose", "値 {{y}} は\n\n$$\nz\n$$\n\nとなる。"), ("md", "次の段落。")]
    assert edition.group([("md", "前の段落。"), ("md", "$$\nq\n$$"), ("prose", "ここで {{x}}。")]) == [
        ("md", "前の段落。\n\n$$\nq\n$$"), ("prose", "ここで {{x}}。")]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_every_folded_cell_says_what_it_does(path):
    """Colab shows a folded cell as its #@title line only: each carries its own title (its first line, a comment),
    never the generic one the edition falls back to for a cell that does not start with a comment."""
    generic = [i for i, c in enumerate(_nb(EDITION / path.name)["cells"])
               if c["cell_type"] == "code" and _src(c).startswith(f"#@title {edition.FOLD_TITLE}")]
    assert not generic, (f"{path.name}: folded cells {generic} have no title of their own: start each with a comment "
                         "that says what it draws or computes")
