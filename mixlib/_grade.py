"""Grading a chapter's exercises offline with otter-grader (``make grade``, ``make autograder``).

    python -m mixlib._grade autograder 10                 # _build/grade/10_mixing/autograder.zip
    python -m mixlib._grade grade 10 SUBMISSIONS          # a folder or a zip of submitted .ipynb files

**The autograder** of a chapter is built from the grader's own run of the chapter: its student edition
(:mod:`mixlib._assign`) with the reference solutions filled in, run with ``MIXLIB_RECORD`` set so that every
check cell records what it computed (:mod:`mixlib.exercise._grading`). Each exercise becomes an otter question
(an exception-based test file, one test case of one point per part) that grades the part right after the
exercise's check cell. The zip is otter-grader's own (``otter.generate``): ``otter run -a autograder.zip nb``
grades one notebook with it, and Gradescope takes it. Before it is used, the autograder must give the reference
solutions full marks and the untouched student edition 0 on every question, or it is not written.

**Grading** runs each submission in its own process, in parallel on the machine's cores, each with no network
(a network namespace where ``unshare`` is available, and the socket calls refused in the kernel), a time limit
per cell (an endless loop costs its exercise) and per notebook, and its temporary files in the output folder.
It writes ``grades.csv`` (a row per submission: points per exercise, total, what went wrong) and
``feedback/NAME.md`` per student (scores and hints, never an expected value). A file that is not a notebook,
a notebook of another chapter, one that loops, prints megabytes, raises, deletes its answer or tries the network:
each gets its row, and the batch goes on. Nothing is written outside the output folder.

Otter-grader and its dependencies live in the grading environment (``.venv-grade``, made by the make target
with ``pip install -e .[grade]``), never in the student's Colab runtime: installing otter replaces the
ipywidgets 7.7.1 that Colab ships.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import importlib.util
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from mixlib.exercise._cells import CHECK_HEADER  # a check cell's first line: "# 演習 ex-10-3 の自己チェック"
from mixlib.exercise._grading import RECORD_ENV, SCORES_ENV

ROOT = Path(__file__).resolve().parent.parent
OUT = Path("_build") / "grade"
#: seconds one cell of a submission may run before it is stopped (the exercise it belongs to earns nothing)
CELL_LIMIT = 120
#: a submission's whole run may take this many times the grader's own run of the chapter (and at least 120 s)
RUN_FACTOR = 4
MAX_BYTES = 50 * 2**20  # a submitted notebook larger than this is not read
OTTER_VERSION = "7.0.0"
#: the lines the parent reads from a worker's log (what went wrong in a cell), written by the kernel's hook
EVENTS = "events.jsonl"
SCORES = "scores.jsonl"



class GradeError(Exception):
    """What stops the grading command, in one line (bad input is said before any work)."""


# ---------------------------------------------------------------------------------------------- chapters

def chapters(root: Path = ROOT) -> list[str]:
    """The chapters' notebook names (``00_environment`` …)."""
    return sorted(p.stem for p in (root / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def chapter_of(arg: str, root: Path = ROOT) -> str:
    """``10``, ``0`` or ``10_mixing`` → ``10_mixing``; a one-line error otherwise."""
    names = chapters(root)
    if arg in names:
        return arg
    hits = [n for n in names if arg.isdigit() and n.startswith(f"{int(arg):02d}_")]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise GradeError(f"chapter {arg} has {len(hits)} notebooks; name one: {', '.join(hits)}")
    raise GradeError(f"no chapter {arg!r}; give its number or name: {', '.join(names)}")


def _chapter_number(name: str) -> str:
    return name.split("_", 1)[0]


# ----------------------------------------------------------------------------------- the grading kernel

#: the first cell of every notebook the grader runs: per-cell time limit, no network, a log of failed cells
LIMITS_CELL = r'''
import json as _mx_json, os as _mx_os, signal as _mx_signal, socket as _mx_socket
_MX_LIMIT = {cell_limit}
_MX_LOG = {events!r}

class CellTimeLimit(Exception):
    pass

def _mx_alarm(signum, frame):
    raise CellTimeLimit(f"このセルは {{_MX_LIMIT}} 秒で止めた（採点の制限時間）")

def _mx_log(**entry):
    with open(_MX_LOG, "a", encoding="utf-8") as f:
        f.write(_mx_json.dumps(entry, ensure_ascii=False) + "\n")

def _mx_pre(info):
    _mx_signal.alarm(_MX_LIMIT)
    _mx_log(cell=(info.raw_cell or "").lstrip().split("\n", 1)[0][:120])

def _mx_post(result):
    _mx_signal.alarm(0)
    err = result.error_in_exec or result.error_before_exec
    if err is not None:
        _mx_log(error=type(err).__name__, message=str(err).split("\n", 1)[0][:200])

def _mx_no_network(*args, **kwargs):
    raise OSError("採点中はネットワークを使えない")

_mx_connect = _mx_socket.socket.connect

def _mx_local_only(self, address, *args):  # where there is no network namespace: only the loopback
    host = address[0] if isinstance(address, tuple) else ""
    if self.family in (_mx_socket.AF_INET, _mx_socket.AF_INET6) and host not in ("127.0.0.1", "::1", "localhost"):
        _mx_no_network()
    return _mx_connect(self, address, *args)

_mx_signal.signal(_mx_signal.SIGALRM, _mx_alarm)
get_ipython().events.register("pre_run_cell", _mx_pre)
get_ipython().events.register("post_run_cell", _mx_post)
_mx_socket.create_connection = _mx_no_network
_mx_socket.getaddrinfo = _mx_no_network
_mx_socket.socket.connect = _mx_local_only
_mx_socket.socket.connect_ex = _mx_local_only
_mx_log(kernel=_mx_os.getpid())
'''


def _source(cell: dict) -> str:
    """A cell's source as one string (a notebook may store it as a list of lines)."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def prepare(nb: dict, *, cell_limit: int, events: str) -> dict:
    """The submission as the grader runs it: the limits cell first, and each exercise's otter check right after
    its check cell (found by the cell's header, so a lost cell metadata does not matter)."""
    cells = []
    for cell in nb.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            continue
        cell = dict(cell)
        source = cell["source"] = _source(cell)
        meta = dict(cell.get("metadata") or {})
        meta.pop("otter", None)  # a submission cannot choose what is checked
        if cell["cell_type"] == "code":
            cell.setdefault("outputs", [])
            cell.setdefault("execution_count", None)
            m = CHECK_HEADER.match(source.lstrip())
            if m:
                meta["otter"] = {"tests": [m.group(1)]}
        cell["metadata"] = meta
        cell.pop("id", None)
        cells.append(cell)
    limits = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
              "source": LIMITS_CELL.format(cell_limit=int(cell_limit), events=events)}
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": kernelspec, "language_info": {"name": "python"}},
            "cells": [limits, *cells]}


# ------------------------------------------------------------------------------------ screening input

@dataclass
class Row:
    """One submission's line of the grade table."""

    name: str
    path: Path | None
    points: dict[str, float] = field(default_factory=dict)
    messages: dict[str, list[str]] = field(default_factory=dict)
    problem: str = ""  #: for the lecturer's table (English, as the command's other messages)
    note: str = ""  #: for the student's feedback (Japanese)
    seconds: float = 0.0
    #: the text of each written cell (an open-answer exercise's words; :func:`mixlib._assign.written_answers`),
    #: '' where left as handed out; ``None`` when the file could not be read as this chapter's notebook
    written: dict[str, str] | None = None


def screen(path: Path, chapter: str) -> str:
    """Why ``path`` cannot be graded as ``chapter``'s notebook ('' when it can): checked before any run."""
    if path.suffix != ".ipynb":
        return f"not a notebook (.ipynb): {path.name}"
    if path.stat().st_size > MAX_BYTES:
        return f"larger than {MAX_BYTES // 2**20} MB: not read"
    try:
        nb = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return f"not JSON ({type(err).__name__} at byte {getattr(err, 'pos', '?')}): not a notebook"
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        return "JSON, but not a notebook (no list of cells)"
    headers = (CHECK_HEADER.match(_source(c).lstrip()) for c in nb["cells"] if isinstance(c, dict) and c.get("cell_type") == "code")
    numbers = {str(int(m.group(1).split("-")[1])) for m in headers if m}  # ex-03-2 -> "3"
    number = str(int(_chapter_number(chapter)))
    if number not in numbers:
        if others := sorted(numbers - {number}, key=int):
            return f"another chapter's notebook (chapter {', '.join(others)}), not chapter {number}'s"
        return f"no exercise check cell of chapter {number}: not this chapter's student edition"
    return ""


#: names a notebook has no reason to use: the grading code runs in the submission's own kernel (as otter's does), so
#: a notebook that reaches for it may be forging its grade; its row says so and a person looks at it
GRADER_NAMES = ("_grading", "assert_part", "judge_part", "_EXERCISES", "MIXLIB_GRADE", "MIXLIB_RECORD", "otter",
                "scores.jsonl", "events.jsonl", "_mx_", "CellTimeLimit", "Checker", "signal.alarm", "SIGALRM")


def touches_grader(nb: dict) -> list[str]:
    """The grader's names that a submission's code cells use (empty for an honest notebook)."""
    code = "\n".join(_source(c) for c in nb.get("cells", []) if isinstance(c, dict) and c.get("cell_type") == "code")
    return [name for name in GRADER_NAMES if name in code]


def _refusal_ja(why: str) -> str:
    """The student's words for what :func:`screen` said."""
    if why.startswith("not a notebook"):
        return "提出されたファイルがノートブック（.ipynb）でない"
    if why.startswith("larger than"):
        return f"ファイルが {MAX_BYTES // 2**20} MB より大きい"
    if why.startswith(("not JSON", "JSON, but")):
        return "ファイルがノートブックとして読めない（壊れている）"
    if why.startswith("another chapter"):
        return "別の章のノートブックが提出された"
    return "この章の演習の自己チェックのセルが見つからない"


def collect(source: Path, inbox: Path) -> list[tuple[str, Path]]:
    """The submitted files as (name, path), names unique: a folder's files by their path inside it, or a zip's
    (extracted into ``inbox`` by name only, never outside it; a repeated name gets a number)."""
    if not source.exists():
        raise GradeError(f"SUBMISSIONS={source} does not exist: give a folder or a .zip of submitted notebooks")
    if source.is_dir():
        files = [(p.relative_to(source).as_posix(), p) for p in sorted(source.rglob("*"))
                 if p.is_file() and not any(part.startswith(".") for part in p.relative_to(source).parts)]
    elif zipfile.is_zipfile(source):
        inbox.mkdir(parents=True, exist_ok=True)
        files, taken = [], set()
        with zipfile.ZipFile(source) as zf:
            for info in zf.infolist():
                # the zip's path names the submission (an LMS export may name the student by a folder:
                # alice/10_mixing.ipynb), as a folder's relative path does; the file is extracted under a name of
                # its own, never by its path, so nothing leaves the inbox
                parts = [p for p in info.filename.replace("\\", "/").split("/") if p not in ("", ".", "..")]
                if info.is_dir() or not parts or any(p.startswith(".") for p in parts) or "__MACOSX" in parts:
                    continue
                name, k = "/".join(parts), 1
                while name in taken:  # the same path twice in the zip
                    name = f"{'/'.join(parts[:-1] + [Path(parts[-1]).stem])}-{k}{Path(parts[-1]).suffix}"
                    k += 1
                taken.add(name)
                target, k = inbox / _safe(name), 1
                while target.exists():  # two paths that read the same as one file name
                    target = inbox / f"{Path(_safe(name)).stem}-{k}{Path(_safe(name)).suffix}"
                    k += 1
                with zf.open(info) as src, open(target, "wb") as dst:
                    while dst.tell() <= MAX_BYTES and (chunk := src.read(2**20)):
                        dst.write(chunk)
                files.append((name, target))
    else:
        raise GradeError(f"SUBMISSIONS={source} is neither a folder nor a zip file")
    if not files:
        raise GradeError(f"SUBMISSIONS={source} holds no file to grade")
    return files


def _safe(name: str) -> str:
    """A submission's name as one file name (feedback/NAME.md, work/NAME/)."""
    return re.sub(r"[^\w.\-]+", "_", name.replace("/", "__")).strip("._") or "submission"


# ------------------------------------------------------------------------------------------ isolation

def _isolation() -> list[str]:
    """The command prefix that runs a worker with no network and kills its whole process tree with it, or []."""
    cmd = ["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child"]
    if shutil.which("unshare") is None:
        return []
    try:
        ok = subprocess.run([*cmd, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return cmd if ok else []


def _loopback_up() -> None:
    """Inside a new network namespace only the loopback exists, and it is down: the kernel talks over it."""
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0)))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 0x1))  # SIOCSIFFLAGS: IFF_UP


def _grading_env(work: Path, cache: Path, fast: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (RECORD_ENV, SCORES_ENV)}
    # HOME and XDG_CACHE_HOME are the grading's own; the models stay where this machine keeps them (a model fetched
    # beforehand with `hf download` is found there, offline)
    from huggingface_hub import constants

    env.setdefault("HF_HUB_CACHE", constants.HF_HUB_CACHE)
    tmp = work / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env.update(TMPDIR=str(tmp), HOME=str(work), XDG_CACHE_HOME=str(cache), MPLCONFIGDIR=str(cache / "matplotlib"),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYDEVD_DISABLE_FILE_VALIDATION="1", MPLBACKEND="module://matplotlib_inline.backend_inline",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", **{SCORES_ENV: str(work / SCORES)},
               MIXLIB_FAST="1" if fast else "0", JUPYTER_PLATFORM_DIRS="1", PYTHONPATH=str(ROOT))
    return env


# -------------------------------------------------------------------------------- one submission (worker)

def _stall_fix() -> None:
    """The repository's fix for a widget cell that stalls nbclient (.ci/nbexec_fix.py), which make book uses too."""
    sys.path.insert(0, str(ROOT / ".ci"))
    try:
        import nbexec_fix
    except ImportError:  # mixlib installed without the repository: run without it
        return
    nbexec_fix.install()


def _run_one(autograder: Path, submission: Path, work: Path, cell_limit: int) -> int:
    """In the worker process: grade ``submission`` with otter; write ``work/results.json``."""
    if os.environ.get("MIXLIB_GRADE_NETNS") == "1":
        _loopback_up()
    _stall_fix()
    from otter.run import main as otter_run

    nb = json.loads(submission.read_bytes())
    prepared = work / "submission.ipynb"
    prepared.write_text(json.dumps(prepare(nb, cell_limit=cell_limit, events=str(work / EVENTS)), ensure_ascii=False), encoding="utf-8")
    out = work / "otter.log"
    with open(out, "w", encoding="utf-8") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        otter_run(str(prepared), autograder=str(autograder), output_dir=str(work), no_logo=True)
    return 0


def _kill_tree(proc: subprocess.Popen, work: Path) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for line in _lines(work / EVENTS):  # without a pid namespace the kernel is in a session of its own
        if "kernel" in line:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(line["kernel"]), signal.SIGKILL)
    proc.wait()


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            out.append(json.loads(line))
    return out


def grade_one(autograder: Path, manifest: dict, submission: Path, work: Path, cache: Path, *,
              isolation: list[str], cell_limit: int, run_limit: float, name: str | None = None) -> Row:
    """Run one submission in its own process tree; read its scores back. Never raises for the submission's faults."""
    row = Row(name or submission.name, submission)
    suspicious = touches_grader(json.loads(submission.read_bytes()))
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    env = _grading_env(work, cache, manifest["fast"])
    if isolation:
        env["MIXLIB_GRADE_NETNS"] = "1"
    cmd = [*isolation, sys.executable, "-m", "mixlib._grade", "_one", str(autograder), str(submission.resolve()),
           str(work), str(cell_limit)]
    t0 = time.monotonic()
    with open(work / "worker.log", "wb") as log:
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=run_limit)
        except subprocess.TimeoutExpired:
            _kill_tree(proc, work)
            rc = None
    row.seconds = time.monotonic() - t0
    scores = {}
    for entry in _lines(work / SCORES):  # what each question's check wrote as it ran (kept if the run is cut)
        scores[(entry["label"], entry["part"])] = entry
    for label, parts in manifest["questions"].items():
        row.points[label] = 0.0
        row.messages[label] = []
        for part in parts:
            entry = scores.get((label, part))
            if entry and entry["passed"]:
                row.points[label] += 1
            elif entry:
                row.messages[label].append(f"{part}: {entry['message']}" if part else entry["message"])
            else:
                row.messages[label].append(f"{part + ': ' if part else ''}採点されなかった（この演習のセルまで実行が届かなかった）")
    problems = []
    if rc is None:
        problems.append(f"timed out after {run_limit:.0f} s (the points of the exercises graded before are kept)")
        row.note = f"時間切れ：ノートブック全体が {run_limit:.0f} 秒で終わらなかった（それまでに採点した演習の点は残る）"
    elif rc != 0 or not (work / "results.json").exists():
        tail = (work / "worker.log").read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or ["?"]
        problems.append(f"the grader could not run the notebook: {tail[0][:200]}")
        row.note = "採点の途中で止まった：教員に知らせる"
    else:
        problems.extend(_agree_with_otter(row, work / "results.json", manifest))
    errors: dict[str | None, list[tuple[str, str]]] = {}
    for label, err, said in _cell_errors(work / EVENTS):
        errors.setdefault(label, []).append((err, said))
    for label, errs in errors.items():
        names = [e for e, _ in errs]
        counted = ", ".join(f"{e} ×{names.count(e)}" if names.count(e) > 1 else e for e in dict.fromkeys(names))
        problems.append(f"cell errors after the last exercise: {counted}" if label is None
                        else f"cell errors in or before {label}'s check cell: {counted}")
        if label is not None:  # the student is told the first one, where the trouble began
            first, said = errs[0]
            why = "を時間の制限で止めた" if first == "CellTimeLimit" else f"が {first}（{said}）で止まった" if said else f"が {first} で止まった"
            kept = [m for m in row.messages.get(label, []) if "答えの変数がない" not in m]  # it stopped before the answer
            row.messages[label] = [f"この演習のセル（かその前のセル）{why}", *kept]
    if suspicious:
        problems.append(f"uses the grader's own names ({', '.join(suspicious)}): check this notebook by hand")
    row.problem = "; ".join(problems)
    return row


def _cell_errors(events: Path) -> list[tuple[str | None, str, str]]:
    """(exercise, exception name, its message) for each cell that raised: the exercise whose check cell raised, or
    the next check cell's after a cell that raised before it (None after the last exercise)."""
    out, pending, current = [], [], None
    for entry in _lines(events):
        if "cell" in entry:
            m = CHECK_HEADER.match(entry["cell"])
            current = m.group(1) if m else None
            if m:
                out.extend((current, *err) for err in pending)
                pending = []
        elif "error" in entry:
            err = (entry["error"], entry.get("message", ""))
            if current:
                out.append((current, *err))
            else:
                pending.append(err)
    out.extend((None, *err) for err in pending)
    return out


def _agree_with_otter(row: Row, results: Path, manifest: dict) -> list[str]:
    """otter's own results.json must give the same points as the progressive scores (else the row says so)."""
    data = json.loads(results.read_text(encoding="utf-8"))
    otter_points: dict[str, float] = {}
    for test in data.get("tests", []):
        name = str(test.get("name", ""))
        label = name.split(" - ")[0].split(" ")[0]
        if label in manifest["questions"]:
            otter_points[label] = otter_points.get(label, 0.0) + float(test.get("score") or 0)
    return [f"otter and mixlib disagree on {label} ({otter_points.get(label, 0.0):g} vs {pts:g}): grade it by hand"
            for label, pts in row.points.items() if abs(otter_points.get(label, 0.0) - pts) > 1e-9]


# --------------------------------------------------------------------------------------- the autograder

def _source_hash(chapter: str, root: Path, fast: bool) -> str:
    """What the recorded references depend on: the chapter, all of mixlib, the data, the model and the libraries.
    An autograder built under another of these is built again (its expected values would be another run's)."""
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256(json.dumps([chapter, fast, os.environ.get("MIXLIB_MODEL", ""), os.environ.get("MIXLIB_JA_MODEL", "")]).encode())
    for name in ("torch", "transformers", "numpy", "scikit-learn", "otter-grader"):
        with contextlib.suppress(PackageNotFoundError):
            h.update(f"{name}=={version(name)}".encode())
    h.update((root / "notebooks" / f"{chapter}.ipynb").read_bytes())
    for p in sorted((root / "mixlib").rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode() + p.read_bytes())
    for p in sorted((root / "data").rglob("*")):
        if p.is_file():
            h.update(f"{p.relative_to(root).as_posix()}:{p.stat().st_size}".encode())
    return h.hexdigest()[:16]


def _test_file(label: str, parts: list[str], spec: dict) -> str:
    cases = "\n".join(
        f"@test_case(name={(label + ' ' + part).strip()!r}, points=1, hidden=False)\n"
        f"def test_{k}(env):\n    assert_part(SPEC, {part!r}, env)\n"
        for k, part in enumerate(parts)
    )
    return (f'"""Exercise {label}: written by python -m mixlib._grade autograder; the grader\'s reference is in SPEC."""\n'
            "import json\n\nfrom otter.test_files import test_case\n\nfrom mixlib.exercise._grading import assert_part\n\n"
            f"OK_FORMAT = False\n\nname = {label!r}\npoints = {float(len(parts))}\n"
            f"SPEC = json.loads({json.dumps(spec, ensure_ascii=False)!r})\n\n\n{cases}")


def _execute(nb: dict, env: dict[str, str], cwd: Path, cell_limit: int) -> None:
    """Run a notebook of the grader's own (the reference run); a cell error is an error of the book."""
    import nbformat
    from nbclient import NotebookClient

    _stall_fix()
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    try:
        NotebookClient(nbformat.from_dict(nb), timeout=cell_limit, kernel_name="python3",
                       resources={"metadata": {"path": str(cwd)}}).execute(env=env, stderr=subprocess.DEVNULL)
        # the kernel's own environment; its stderr (a notice about TCP on every start) is not the lecturer's business
    except (CellExecutionError, CellTimeoutError) as err:
        lines = str(err).splitlines()  # nbclient's message: a line, a rule, the cell's source, a rule, the traceback
        rule = next((k for k, line in enumerate(lines) if line.startswith("-----")), len(lines))
        cell = next((line for line in lines[rule + 1:] if line.strip()), "?")
        what = f"{err.ename}: {err.evalue}" if isinstance(err, CellExecutionError) else "a cell timed out"
        raise GradeError(f"the grader's own run of the chapter failed in the cell starting {cell.strip()[:80]!r} "
                         f"({what.splitlines()[0][:200]}); it must run here before its submissions can be graded") from None


def build_autograder(chapter: str, out: Path, *, fast: bool, root: Path = ROOT, cell_limit: int = CELL_LIMIT,
                     log=print) -> Path:
    """Write ``out/autograder.zip`` and ``out/manifest.json`` for ``chapter`` (kept when up to date)."""
    import nbformat

    from mixlib import _assign, _edition
    from mixlib.exercise import _EXERCISES
    from mixlib.exercise._cells import check_call, check_cells, own_names, solutions, with_solutions
    from mixlib.exercise._grading import spec_for

    zip_path, manifest_path = out / "autograder.zip", out / "manifest.json"
    digest = _source_hash(chapter, root, fast)
    if zip_path.exists() and manifest_path.exists():
        if json.loads(manifest_path.read_text(encoding="utf-8")).get("source") == digest:
            return zip_path
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    path = root / "notebooks" / f"{chapter}.ipynb"
    student = _assign.student_notebook(json.loads(path.read_text(encoding="utf-8")), f"notebooks/{chapter}", _edition.read_book(root))
    student_nb = nbformat.reads(_edition._dump(student), as_version=4)
    checks = check_cells(student_nb)
    if not checks:
        raise GradeError(f"chapter {chapter} has no exercise with a self-check: nothing to grade")
    reference = with_solutions(student_nb, solutions(nbformat.read(path, as_version=4)))
    work = out / "build"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "student.ipynb").write_text(_edition._dump(student), encoding="utf-8")
    (work / "reference.ipynb").write_text(nbformat.writes(reference), encoding="utf-8")
    env = _grading_env(work, out / ".cache", fast)
    env[RECORD_ENV] = str(work / "record.jsonl")
    log(f"{chapter}: the grader's own run of the chapter with the reference solutions ({'fast' if fast else 'full'} mode)")
    try:
        _execute(reference, env, work, cell_limit * 5)
    except GradeError as err:
        raise GradeError(f"{chapter}: {err}") from None
    records, models = {}, []
    for entry in _lines(work / "record.jsonl"):
        if "model" in entry:  # a model the chapter loaded (mixlib.models)
            models.append(f"{entry['model']} ({entry['source']})")
        else:
            records.setdefault(entry["label"], entry)  # the check cell's own call (a solution may call it again)
    models = list(dict.fromkeys(models))
    questions, tests = {}, work / "tests"
    tests.mkdir()
    for label, i in checks.items():
        if label not in records:
            raise GradeError(f"{chapter}: the reference run never reached {label}'s check")
        ex = _EXERCISES[label]
        parts = [p.name for p in ex.parts]
        _, answer, data = check_call(student_nb.cells[i].source)
        spec = spec_for(label, answer, data, own_names(data), records[label])
        (tests / f"{label}.py").write_text(_test_file(label, parts, spec), encoding="utf-8")
        questions[label] = parts
    seconds = time.monotonic() - t0
    config = {"lang": "python", "show_stdout": False, "show_hidden": False, "debug": False,
              "print_summary": True, "zips": False, "log_level": "WARNING"}
    (work / "otter_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    (work / "requirements.txt").write_text(_grading_requirements(root), encoding="utf-8")
    from otter.generate import main as otter_generate

    tmp_zip = out / ".autograder.zip.tmp"
    with contextlib.redirect_stdout(io.StringIO()):
        otter_generate(tests_dir=str(tests), output_path=str(tmp_zip), config=str(work / "otter_config.json"),
                       requirements=str(work / "requirements.txt"), no_environment=True)
    manifest = {"chapter": chapter, "fast": fast, "models": models, "source": digest, "questions": questions,
                "reference_seconds": round(seconds, 1), "otter": OTTER_VERSION}
    # the autograder must give the reference full marks and the untouched student edition nothing
    iso = _isolation()
    run_limit = max(120.0, RUN_FACTOR * seconds)
    log(f"{chapter}: checking the autograder on the reference solutions and on the untouched student edition")
    checks_to_run = (("reference", work / "reference.ipynb", True), ("student", work / "student.ipynb", False))
    with ThreadPoolExecutor(2) as pool:  # the two runs side by side
        rows = list(pool.map(lambda c: grade_one(tmp_zip, manifest, c[1], work / f"check-{c[0]}", out / ".cache", isolation=iso,
                                                 cell_limit=cell_limit, run_limit=run_limit), checks_to_run))
    for (name, _, want_full), row in zip(checks_to_run, rows):
        total, full = sum(row.points.values()), sum(len(p) for p in questions.values())
        if (want_full and total != full) or (not want_full and total != 0) or row.problem:
            wrong = {k: v for k, v in row.messages.items() if v} if want_full else {k: v for k, v in row.points.items() if v}
            tmp_zip.unlink(missing_ok=True)
            raise GradeError(f"{chapter}: the autograder gives the {name} notebook {total:g}/{full} "
                             f"({row.problem or wrong}); it is not written")
    tmp_zip.replace(zip_path)
    manifest_path.write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
    log(f"{zip_path}: {len(questions)} exercises, {sum(len(p) for p in questions.values())} points "
        f"(reference run {seconds:.0f} s; the reference scores full marks, the student edition 0)")
    log(f"{chapter}: {_models_line(manifest)}")
    return zip_path


def open_statements(chapter: str, root: Path = ROOT) -> dict[str, str]:
    """The chapter's open-answer exercises (``:class: open-answer``): label -> its statement, as the Colab edition
    reads (roles become text and links)."""
    from mixlib import _assign, _edition

    nb = json.loads((root / "notebooks" / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    opens = _assign.open_exercises(nb)
    if not opens:
        return {}
    book = _edition.read_book(root)
    return {label: _edition.convert_markdown(text, f"notebooks/{chapter}", book) for label, text in opens.items()}


def _fenced(text: str) -> str:
    """``text`` in a fence longer than any run of backticks or tildes in it: shown as written, never as Markdown."""
    longest = max((len(m) for m in re.findall(r"`+|~+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def write_written(rows: list[Row], opens: dict[str, str], out: Path) -> None:
    """``open_answers/ex-NN-k.md``: an open-answer exercise's statement, then every submission's text for it."""
    folder = out / "open_answers"
    folder.mkdir(exist_ok=True)
    for label, statement in opens.items():
        lines = [f"# {label} の記述", "", "採点の対象ではない（点は自動採点の部分だけ）。提出された文をそのまま、提出ごとに並べた。", "",
                 "## 問題", "", statement, ""]
        for row in rows:
            lines.append(f"## {row.name}")
            lines.append("")
            if row.written is None:
                lines.append("（採点できなかった提出物：grades.csv の problem を見る）")
            elif label not in row.written:
                lines.append("（記述のセルが見つからない：消されたか、見出し「記述 " + label + "」が書き換えられた）")
            elif not row.written[label]:
                lines.append("（未記入）")
            else:
                lines.append(_fenced(row.written[label]))
            lines.append("")
        (folder / f"{label}.md").write_text("\n".join(lines), encoding="utf-8")


def _models_line(manifest: dict) -> str:
    mode = "fast mode (MIXLIB_FAST=1)" if manifest["fast"] else "full mode"
    models = ", ".join(manifest.get("models") or []) or "no pretrained model"
    return (f"graded in {mode} with {models}: an answer typed by hand matches only if the student used the same "
            "(set MIXLIB_MODEL, or --full, to grade as they ran)")


def _grading_requirements(root: Path) -> str:
    """What Gradescope's image installs: the book's pins that the chapters import, otter and mixlib itself."""
    from mixlib import _repo

    skip = ("jupyter-book", "sphinx", "myst-nb", "jupyter-cache", "sphinxcontrib", "sphinx-", "jupyterlab",
            "pytest", "hypothesis", "playwright", "ray[")
    pins = [line.split("#")[0].strip() for line in (root / "requirements.txt").read_text(encoding="utf-8").splitlines()]
    pins = [p for p in pins if p and not p.startswith(skip)]
    return "\n".join([*pins, f"otter-grader=={OTTER_VERSION}", f"mixlib @ git+{_repo.REPO_URL}"]) + "\n"


# -------------------------------------------------------------------------------------------- the batch

def write_outputs(rows: list[Row], manifest: dict, out: Path, opens: dict[str, str] | None = None) -> Path:
    """``grades.csv`` and ``feedback/NAME.md``: points, totals and hints; never an expected value. With ``opens``
    (the open-answer exercises), also ``open_answers/`` and a ``written`` column: how many were written."""
    opens = opens or {}
    labels = list(manifest["questions"])
    full = {label: float(len(parts)) for label, parts in manifest["questions"].items()}
    csv_path = out / "grades.csv"
    tmp = out / ".grades.csv.tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["submission", *labels, "total", "max", "written", "seconds", "problem"])
        for row in rows:
            written = sum(1 for k in opens if (row.written or {}).get(k))
            w.writerow([row.name, *(f"{row.points.get(k, 0):g}" for k in labels), f"{sum(row.points.values()):g}",
                        f"{sum(full.values()):g}", f"{written}/{len(opens)}" if opens and row.written is not None else "",
                        f"{row.seconds:.1f}",
                        row.problem])
    tmp.replace(csv_path)
    feedback = out / "feedback"
    feedback.mkdir(exist_ok=True)
    for row in rows:
        lines = [f"# {manifest['chapter']} の採点：{row.name}", "",
                 f"合計 {sum(row.points.values()):g} / {sum(full.values()):g} 点", ""]
        if row.note:
            lines += [f"採点の注意：{row.note}", ""]
        for label in labels:
            lines.append(f"- {label}：{row.points.get(label, 0):g} / {full[label]:g}")
            lines += [f"  - {m}" for m in row.messages.get(label, [])]
            if label in opens and row.written is not None:  # a file that was not graded: its note says why
                lines.append("  - 記述：提出された。先生が読む（点には入らない）" if row.written.get(label)
                             else "  - 記述：書かれていない（「記述」のセルに書く。点には入らないが、先生が読む）")
        (feedback / f"{_safe(row.name)}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if opens:
        write_written(rows, opens, out)
    return csv_path


def batch_dir(out: Path, submissions: Path) -> Path:
    """Where one batch's results go: a folder of the chapter's output named after the submissions' folder or zip,
    so grading another batch (a section, the late ones) never overwrites this one's table or feedback."""
    return out / _safe(submissions.resolve().stem if submissions.is_file() else submissions.resolve().name)


def grade(chapter: str, submissions: Path, out: Path, *, fast: bool = True, jobs: int | None = None,
          cell_limit: int = CELL_LIMIT, run_limit: float | None = None, log=print) -> list[Row]:
    """Grade every submission of ``chapter`` in ``submissions`` (a folder or a zip) into ``batch_dir(out, …)``;
    the chapter's autograder (built once, kept while up to date) is in ``out``."""
    batch = batch_dir(out, submissions)
    if batch.name in ("build", "work", "inbox", "feedback") or batch.name.startswith("."):
        raise GradeError(f"SUBMISSIONS={submissions}: name its folder or zip something other than {batch.name!r}")
    staged = out / f".{batch.name}.new"
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    files = collect(submissions, staged / "inbox")
    autograder = build_autograder(chapter, out, fast=fast, cell_limit=cell_limit, log=log)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    rows, todo = [], []
    for name, path in files:
        why = screen(path, chapter)
        if why:
            rows.append(Row(name, path, points=dict.fromkeys(manifest["questions"], 0.0), problem=why,
                            note=f"採点できなかった：{_refusal_ja(why)}。この章の学生版を「ファイル」→「ダウンロード」→「.ipynb をダウンロード」で保存して、もう一度提出する"))
        else:
            todo.append((name, path))
    iso = _isolation()
    if not iso:
        log("note: unshare is not available here: the kernel's socket calls are refused, but there is no network namespace")
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo) or 1))
    limit = run_limit if run_limit is not None else max(120.0, RUN_FACTOR * manifest["reference_seconds"])
    log(f"grading {len(todo)} of {len(files)} files ({len(rows)} refused before running) on {jobs} "
        f"{'process' if jobs == 1 else 'processes'}, {cell_limit} s per cell, {limit:.0f} s per notebook")
    t0 = time.monotonic()
    with ThreadPoolExecutor(jobs) as pool:
        done = list(pool.map(lambda item: grade_one(autograder, manifest, item[1], staged / "work" / _safe(item[0]),
                                                    out / ".cache", isolation=iso, cell_limit=cell_limit, run_limit=limit,
                                                    name=item[0]), todo))
    from mixlib._assign import written_answers

    for row in done:  # the written parts are read from the file as submitted, never run
        row.written = written_answers(json.loads(row.path.read_bytes()))
    rows.extend(done)
    rows.sort(key=lambda r: r.name)
    write_outputs(rows, manifest, staged, open_statements(chapter))
    shutil.rmtree(batch, ignore_errors=True)  # this batch graded again: its new results replace its old ones
    staged.replace(batch)
    wall = time.monotonic() - t0
    log(f"{batch / 'grades.csv'}: {len(rows)} {'row' if len(rows) == 1 else 'rows'}, feedback in {batch / 'feedback'}/")
    if todo:
        log(f"{len(todo)} {'notebook' if len(todo) == 1 else 'notebooks'} graded in {wall:.0f} s on {jobs} "
            f"{'process' if jobs == 1 else 'processes'} side by side: {wall / len(todo):.1f} s of wall time per notebook "
            f"(each run took {sum(r.seconds for r in done) / len(done):.1f} s on average)")
    log(f"{chapter}: {_models_line(manifest)}")
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_one"]:  # the worker: python -m mixlib._grade _one ZIP NOTEBOOK WORKDIR CELL_LIMIT
        return _run_one(Path(argv[1]), Path(argv[2]), Path(argv[3]), int(argv[4]))
    ap = argparse.ArgumentParser(prog="python -m mixlib._grade", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    a = sub.add_parser("autograder", help="build (or reuse) a chapter's otter autograder zip")
    g = sub.add_parser("grade", help="grade a folder or zip of submitted notebooks")
    for p in (a, g):
        p.add_argument("chapter", help="the chapter: its number (10) or notebook name (12_positional)")
        p.add_argument("--out", type=Path, default=None, help=f"the output folder (default: {OUT}/CHAPTER)")
        p.add_argument("--full", action="store_true", help="grade in the chapters' full mode (default: fast mode)")
    g.add_argument("submissions", type=Path, help="a folder or a .zip of the submitted .ipynb files")
    g.add_argument("--jobs", type=int, default=None, help="processes in parallel (default: the machine's cores)")
    for p in (a, g):
        p.add_argument("--cell-limit", type=int, default=CELL_LIMIT,
                       help=f"seconds one cell may run (default {CELL_LIMIT}; more with --full, where a BERT chapter's cells take minutes)")
    g.add_argument("--run-limit", type=float, default=None, help="seconds one notebook may run")
    args = ap.parse_args(argv)
    try:
        chapter = chapter_of(args.chapter)
        out = args.out if args.out is not None else ROOT / OUT / chapter
        if args.cell_limit < 1:
            raise GradeError(f"--cell-limit must be at least 1 second, not {args.cell_limit}")
        if args.command == "grade":
            if args.jobs is not None and args.jobs < 1:
                raise GradeError(f"--jobs must be at least 1, not {args.jobs}")
            if not args.submissions.exists():
                raise GradeError(f"SUBMISSIONS={args.submissions} does not exist: give a folder or a .zip of submitted notebooks")
        if importlib.util.find_spec("otter") is None:
            raise GradeError("otter-grader is not installed in this Python: run `make grade` or `make autograder`, "
                             "which set up .venv-grade")
        if args.command == "autograder":
            build_autograder(chapter, out, fast=not args.full, cell_limit=args.cell_limit)
        else:
            grade(chapter, args.submissions, out, fast=not args.full, jobs=args.jobs, cell_limit=args.cell_limit,
                  run_limit=args.run_limit)
    except GradeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
