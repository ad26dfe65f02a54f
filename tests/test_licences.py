"""The licences and the citation say the same thing everywhere.

The code is MIT (LICENSE, pyproject.toml); the text and figures of the book and data/ are CC BY 4.0
(README.md, the book's front page, the site's footer, data/README.md); CITATION.cff names both, and its
version, repository and site are mixlib's own.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

import mixlib
from mixlib._repo import REPO_URL, SITE_URL

pytestmark = pytest.mark.torch_free

ROOT = Path(__file__).resolve().parent.parent
CODE_LICENCE = "MIT"
TEXT_LICENCE = "CC BY 4.0"
TEXT_LICENCE_SPDX = "CC-BY-4.0"
TEXT_LICENCE_URL = "https://creativecommons.org/licenses/by/4.0/"


def _read(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def _readme_licence_section() -> str:
    m = re.search(r"^## Licen[cs]e\b.*?(?=^## |\Z)", _read("README.md"), flags=re.M | re.S)
    assert m, "README.md has no '## Licence' section"
    return m.group(0)


def test_the_code_licence_agrees_in_license_pyproject_readme_and_citation():
    licence_file = _read("LICENSE")
    assert licence_file.splitlines()[0] == f"{CODE_LICENCE} License"
    assert "Permission is hereby granted, free of charge" in licence_file
    project = tomllib.loads(_read("pyproject.toml"))["project"]
    assert project["license"] == {"text": CODE_LICENCE}
    section = _readme_licence_section()
    assert re.search(rf"\b{CODE_LICENCE}\b", section) and "LICENSE" in section
    cff = yaml.safe_load(_read("CITATION.cff"))
    assert CODE_LICENCE in cff["license"]


def test_the_text_licence_is_stated_in_the_readme_front_page_footer_data_and_citation():
    assert TEXT_LICENCE in _readme_licence_section() and TEXT_LICENCE_URL in _readme_licence_section()
    intro = _read("book/intro.md")
    assert TEXT_LICENCE in intro and TEXT_LICENCE_URL in intro
    footer = yaml.safe_load(_read("_config.yml"))["html"]["extra_footer"]
    assert TEXT_LICENCE in footer and TEXT_LICENCE_URL in footer and CODE_LICENCE in footer
    assert TEXT_LICENCE_SPDX in yaml.safe_load(_read("CITATION.cff"))["license"]


def test_every_data_file_has_its_source_and_licence_in_data_readme():
    readme = _read("data/README.md")
    files = sorted(p.name for p in (ROOT / "data").iterdir() if p.is_file() and p.name != "README.md")
    assert files, "data/ is empty"
    for name in files:
        row = re.search(rf"^\| `{re.escape(name)}` \|([^|\n]+)\|([^|\n]+)\|", readme, flags=re.M)
        assert row, f"data/README.md's table has no row for {name}"
        assert row.group(1).strip() and row.group(2).strip(), f"{name}: its source or licence is empty"
        section = re.search(rf"^## `{re.escape(name)}`.*?(?=^## |\Z)", readme, flags=re.M | re.S)
        assert section, f"data/README.md has no section for {name}"
        assert re.search(r"^- \*\*Licence\.\*\* \S", section.group(0), flags=re.M), f"{name}: no Licence line"
        assert re.search(r"^- \*\*Provenance\.\*\* \S", section.group(0), flags=re.M), f"{name}: no Provenance line"
    listed = set(re.findall(r"^\| `([^`]+)` \|", readme, flags=re.M))
    assert listed == set(files), f"rows for files that are not in data/: {sorted(listed - set(files))}"


def _bib_title(key: str) -> str:
    bib = _read("book/references.bib")
    entry = re.search(rf"@\w+\{{{key},(.*?)\n\}}", bib, flags=re.S)
    assert entry, key
    title = re.search(r"title\s*=\s*\{(.*)\},?\s*$", entry.group(1), flags=re.M).group(1)
    return re.sub(r"[{}]", "", title)


def test_citation_cff_is_mixlibs_own_and_cites_the_two_papers():
    cff = yaml.safe_load(_read("CITATION.cff"))
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    for key in ("message", "title", "authors", "license", "references"):
        assert cff.get(key), f"CITATION.cff lacks {key}"
    assert cff["version"] == tomllib.loads(_read("pyproject.toml"))["project"]["version"] == mixlib.__version__
    assert cff["repository-code"] == REPO_URL
    assert cff["url"] == SITE_URL
    titles = {ref["title"] for ref in cff["references"]}
    for key in ("kobayashi2021nlp", "kobayashi2021incorporating", "maeda2024nlp"):
        assert _bib_title(key) in titles, f"CITATION.cff does not cite {key} ({_bib_title(key)!r})"
    for ref in cff["references"]:
        assert ref["authors"] and ref["year"] and ref["type"] == "conference-paper", ref["title"]
