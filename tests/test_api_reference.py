"""The mixlib reference (book/reference/): it documents exactly ``mixlib.__all__``, it builds without a warning,
every public function's docstring is complete, and every example in it runs (doctests on the packaged model).

The examples assume ``import mixlib`` and ``enc = mixlib.load_encoder("all-MiniLM-L6-v2")`` (book/reference/index.md
says so); :func:`test_the_examples_run` gives them exactly those two names.
"""

from __future__ import annotations

import ast
import doctest
import inspect
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

import mixlib

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "book" / "reference"
DIRECTIVE = re.compile(r"^\.\. auto(function|class|data):: mixlib\.(\w+)$", flags=re.M)



def _documented() -> list[str]:
    return [m.group(2) for m in DIRECTIVE.finditer((REFERENCE / "api.md").read_text(encoding="utf-8"))]


def test_the_reference_documents_exactly_the_public_api():
    names = _documented()
    assert len(names) == len(set(names)), f"documented twice: {sorted({n for n in names if names.count(n) > 1})}"
    assert set(names) == set(mixlib.__all__), (
        f"in mixlib.__all__ but not in book/reference/api.md: {sorted(set(mixlib.__all__) - set(names))}; "
        f"in the reference but not public: {sorted(set(names) - set(mixlib.__all__))}")
    for m in DIRECTIVE.finditer((REFERENCE / "api.md").read_text(encoding="utf-8")):
        obj = getattr(mixlib, m.group(2))
        kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else "data"
        assert m.group(1) == kind, f"mixlib.{m.group(2)} is a {kind}, documented with auto{m.group(1)}"


def _public_functions() -> list[str]:
    return [n for n in mixlib.__all__ if inspect.isfunction(getattr(mixlib, n))]


def _raises(func) -> bool:
    """Whether the function's own body raises (a ``raise`` statement outside a nested function)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    body = tree.body[0]

    def walk(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Raise):
                return True
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)) and walk(child):
                return True
        return False
    return walk(body)


def _missing(name: str) -> list[str]:
    func = getattr(mixlib, name)
    doc = inspect.getdoc(func) or ""
    sections = set(re.findall(r"^(\w[\w ]*)\n-{3,}$", doc, flags=re.M))
    missing = []
    if inspect.signature(func).parameters and "Parameters" not in sections:
        missing.append("Parameters")
    if "Returns" not in sections:
        missing.append("Returns")
    if _raises(func) and "Raises" not in sections:
        missing.append("Raises")
    examples = doc.split("Examples\n--------", 1)[1] if "Examples" in sections else ""
    if ">>>" not in examples:
        missing.append("Examples")
    if "+SKIP" in doc:
        missing.append("an example that runs (no +SKIP)")
    return missing


@pytest.mark.parametrize("name", _public_functions())
def test_every_public_function_is_documented_in_full(name):
    """Parameters, Returns, Raises (when the function raises) and a short example that runs."""
    missing = _missing(name)
    assert not missing, f"mixlib.{name}'s docstring lacks: {', '.join(missing)}"


@pytest.fixture(scope="module")
def example_globals():
    return {"mixlib": mixlib, "enc": mixlib.load_encoder("all-MiniLM-L6-v2")}


@pytest.mark.parametrize("name", [n for n in mixlib.__all__ if callable(getattr(mixlib, n))])
def test_the_examples_run(name, example_globals):
    """Every ``>>>`` line of the public API's docstrings, run as a doctest (outputs compared, ``...`` allowed)."""
    obj = getattr(mixlib, name)
    tests = doctest.DocTestFinder(recurse=inspect.isclass(obj)).find(obj, f"mixlib.{name}", globs=example_globals)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    for test in tests:
        runner.run(test, out=report.append)
    if inspect.isfunction(obj):
        assert runner.tries > 0, f"mixlib.{name} has no example"
    assert runner.failures == 0, "".join(report)


def _sphinx_config() -> dict:
    """The book's own settings for the reference: its extensions and the autodoc/napoleon options."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["sphinx"]["config"]
    extensions = [e for e in config["extensions"] if e.startswith(("sphinx.ext.", "sphinxarg"))]
    assert {"sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinxarg.ext"} <= set(extensions)
    options = {k: v for k, v in config.items() if k.startswith(("napoleon_", "autodoc_"))}
    return {"extensions": ["myst_parser", *extensions], "language": config["language"], **options}


@pytest.mark.slow
def test_the_reference_builds_without_a_warning_and_lists_every_name(tmp_path):
    """The three pages with the book's settings, ``-W``: every public name and every CLI command has its entry."""
    src = tmp_path / "src"
    src.mkdir()
    for page in ("index", "api", "cli"):
        text = (REFERENCE / f"{page}.md").read_text(encoding="utf-8")
        if page == "index":
            text += "\n```{toctree}\napi\ncli\n```\n"
        (src / f"{page}.md").write_text(text, encoding="utf-8")
    conf = _sphinx_config()
    (src / "conf.py").write_text("".join(f"{k} = {v!r}\n" for k, v in conf.items()), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-W", "--keep-going", "-b", "html", str(src),
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    api = (tmp_path / "out" / "api.html").read_text(encoding="utf-8")
    ids = set(re.findall(r'<dt class="sig sig-object py" id="mixlib\.(\w+)"', api))
    assert ids == set(mixlib.__all__), sorted(set(mixlib.__all__) ^ ids)
    cli = (tmp_path / "out" / "cli.html").read_text(encoding="utf-8")
    from mixlib.cli import build_parser
    commands = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction").choices
    for command in commands:
        assert f"python -m mixlib {command}" in cli, f"the CLI page has no entry for {command}"


def test_the_readme_example_runs(capsys, monkeypatch):
    """The README's Python example (the newcomer's first call of decompose) runs as written and prints its table."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", readme, flags=re.S).group(1)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    exec(compile(code, "README.md", "exec"), {})
    table = capsys.readouterr().out
    assert table.splitlines()[0].split()[:2] == ["category", "全体"], table
    assert len(table.splitlines()) == 2 + mixlib.load_encoder("all-MiniLM-L6-v2").n_layers, table
