"""Command-line interface: the analyses' numbers and figures without notebooks.

::

    python -m mixlib mixing     --model NAME --texts FILE --out DIR
    python -m mixlib stretch    --model NAME --out DIR
    python -m mixlib clusters   --model NAME --out DIR [--k 1000]
    python -m mixlib positional --model NAME --out DIR
    python -m mixlib maps       --model NAME --texts FILE --out DIR [--perm N]
    python -m mixlib stream-mixing --model NAME --texts FILE --out CHUNKS [--shard i/n]
    python -m mixlib merge      --chunks CHUNKS --out DIR

Each command writes CSV tables (UTF-8, one header row), PNG figures with
Japanese labels and ``run.json`` (the model and the options) into ``--out``,
prints what it wrote, and exits 0.

A careful tool:

* every option is checked before a model is loaded or anything is computed;
  bad input exits 2 with one line that says what was wrong (never a
  traceback); Ctrl-C exits 130; any other exception is a bug and shows its
  traceback;
* outputs appear whole or not at all: a run writes into a hidden temporary
  folder next to ``--out`` and moves it into place at the end; a failure or
  an interruption leaves nothing behind. ``--out`` must be a new or empty
  folder, or the output of an earlier run, replaced only when it holds
  nothing but the files that run wrote (its run.json lists them); a
  symbolic link is followed, and the run writes at its target;
* one writer per output: the lock of ``--out`` (:mod:`mixlib.outlock`, a file
  beside the folder) is held from before the model loads until the files
  are in place; ``stream-mixing`` holds it shared, so that its shards run
  side by side while a replacing command is refused.

``stream-mixing`` is the exception to the last rule, on purpose: it is meant
for corpora too large for one run, so it writes one Parquet file per chunk of
texts straight into ``--out`` (each file whole or absent, written under a
temporary name and renamed), and a later run with the same options -- after
Ctrl-C, or another ``--shard`` on another machine -- skips the chunks that are
already there. ``merge`` turns such a folder into the tables of ``mixing``
without loading a model.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from .japanese import MissingExtra
from .paths import follow_umask, pid_alive


def special_tokens_as_text(tokenizer: Any, enabled: bool = True) -> Any:
    """:func:`mixlib.data.special_tokens_as_text` (kept here for callers of the CLI module)."""
    from .data import special_tokens_as_text as context

    return context(tokenizer, enabled)

__all__ = ["main", "build_parser", "read_texts", "paper_comparison", "special_tokens_as_text", "UsageError"]

EPILOG = """\
examples:
  python -m mixlib mixing --model bert-base-uncased --texts data/sentence_pairs.tsv --out out/mixing
  python -m mixlib stretch --model roberta-base --out out/stretch
  python -m mixlib clusters --model all-MiniLM-L6-v2 --k 1000 --out out/clusters
  python -m mixlib positional --out out/positional
  python -m mixlib maps --texts data/sentence_pairs.tsv --limit 50 --perm 100 --out out/maps
  python -m mixlib stream-mixing --texts corpus.txt --shard 0/4 --out out/chunks   (and 1/4, 2/4, 3/4 elsewhere)
  python -m mixlib merge --chunks out/chunks --out out/mixing-corpus

--model: a hub id, a local model directory, or all-MiniLM-L6-v2 (packaged, offline).
Default: $MIXLIB_MODEL, else bert-base-uncased; offline, the packaged model is used
instead (one line says so) unless --no-fallback is given.
Supported families: post-LayerNorm BERT-family encoders (bert, roberta, electra).

--out: a new or empty folder, or the folder of an earlier run (replaced when it holds only
that run's files). Files appear only when the command succeeds; nothing is left behind otherwise.
stream-mixing instead adds chunk files to --out one by one and resumes there
(Ctrl-C keeps the finished chunks); merge reads them (--chunks) without a model.
Exit status: 0 done, 2 bad input (one line on stderr), 130 interrupted (Ctrl-C), 143 terminated.
"""

TEXTS_HELP = """\
--texts: a UTF-8 file (a byte-order mark is ignored), read by the same rules
in mixing, maps and stream-mixing (mixlib.texts). Lines end at LF or CRLF.
Blank lines and lines starting with '#' are skipped. Without a header, each
line is one text or 'A<TAB>B' (a sentence pair), one kind for the whole file.
With a header (--header; the default for files ending in .tsv, --no-header turns it
off), the first line names TAB-separated columns and the texts are read from
the 'sentence_a' and 'sentence_b' columns (pairs) or from the 'text' column;
other columns are ignored. A text with nothing to tokenize (only zero-width or
control characters) is an error naming its line, found before the model loads.
"""
SPECIAL_HELP = """\
Literal special tokens such as [MASK], [SEP], [CLS] in the text are read as
ordinary text unless --keep-special-tokens is given (then they are special,
never masked, and not counted among the tokens the mask rate applies to);
mixlib.tokenize and mixlib.mask_tokens follow the same rule.
"""

PAPER_MODEL = "bert-base-uncased"
STREAM_META = "stream.json"  # mixlib.stream.META: marks a folder of stream-mixing chunk files
_TMP_TAG = ".mixlib-tmp-"  # hidden folders next to --out: .<name>.mixlib-tmp-<pid>-<random>


class UsageError(ValueError):
    """Bad input to the command line (exit status 2, one line on stderr)."""


def _bad(message: str) -> NoReturn:
    raise UsageError(message)


# ---------------------------------------------------------------------------
# input
# ---------------------------------------------------------------------------


def read_texts(path: str | Path, *, header: bool | None = None) -> list[str | tuple[str, str]]:
    """The texts of ``--texts`` (:func:`mixlib.texts.read_texts`: the one reader of every command).

    Errors are :class:`ValueError` with one line naming the file and the line.
    """
    from .texts import read_texts as read

    return read(Path(path).expanduser(), header=header)


# ---------------------------------------------------------------------------
# output: a staging folder moved into place at the end
# ---------------------------------------------------------------------------


def _run_record(folder: Path) -> dict[str, Any] | None:
    """The run.json of an earlier run's output folder (it names a command); None for any other folder."""
    try:
        run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return run if isinstance(run, dict) and run.get("command") in COMMANDS else None


def _is_mixlib_output(folder: Path) -> bool:
    """True when ``folder`` was written by an earlier run (its run.json names a command)."""
    return _run_record(folder) is not None


def _not_its_own(out: Path) -> list[str]:
    """What ``out`` (an earlier run's output) holds besides the files that run wrote: what a replace would delete.

    The files are those its run.json lists (``files``); an output from before that list was kept may hold
    plain files only. Subfolders (a stream-mixing folder put inside it), links and anything else count; a
    stream-mixing folder (its chunk files are never "that run's output" to replace) counts whole.
    """
    run = _run_record(out) or {}
    if run.get("command") == "stream-mixing" or (out / STREAM_META).exists() or any(out.glob("chunk-*.parquet")):
        return ["the chunk files of stream-mixing"]
    own = set(run["files"]) if isinstance(run.get("files"), list) else None
    extra = []
    with os.scandir(out) as entries:
        for e in entries:
            if not e.is_file(follow_symlinks=False) or (own is not None and e.name not in own and e.name != "run.json"):
                extra.append(e.name + ("/" if e.is_dir(follow_symlinks=False) else ""))
    return sorted(extra)


def _remove_stale_staging(out: Path, parent: Path) -> None:
    """Remove staging folders of ``--out`` in ``parent`` left by runs that were killed (their process is gone)."""
    prefix = f".{out.name}{_TMP_TAG}"
    for p in parent.glob(glob.escape(prefix) + "*"):  # a name such as x[1] is not a pattern
        if not p.name.startswith(prefix):
            continue
        pid = p.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)


def _shown(path: Path | str) -> str:
    """A path for a message, whatever bytes its name holds."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _check_utf8(value: str, what: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        _bad(f"{what} {_shown(value)}: the name is not valid UTF-8, and run.json (UTF-8) records it; rename it.")


def real_out(value: str, opt: str = "--out") -> Path:
    """``--out`` as the real, absolute path it points at (symbolic links followed: the run writes at the target).

    A link that loops, or a name that is not UTF-8, is refused in one line (:class:`UsageError`).
    """
    if not value or not value.strip():
        _bad(f"{opt} is empty; give the folder to write into, e.g. {opt} results/mixing.")
    given = Path(value).expanduser()
    _check_utf8(str(given), opt)
    out = _resolved(given, opt)  # links first, then "..", as the system reads the path ("a/b/.." -> "a")
    _check_utf8(str(out), f"{opt} {_shown(given)} is")
    if out == out.parent:
        _bad(f"{opt} {_shown(given)} is the root folder; give a folder of its own, e.g. {opt} results/mixing.")
    if len(os.fsencode(out.name)) > 200:
        _bad(f"{opt}: the folder's name is {len(os.fsencode(out.name))} bytes long; give a shorter one (at most 200).")
    for above in out.parents:  # a later run of the outer folder's command would delete this one
        if (above / STREAM_META).is_file() or _is_mixlib_output(above):
            _bad(f"{opt} {_shown(given)} lies inside {_shown(above)}, the output of an earlier python -m mixlib run, "
                 "which a run into that folder replaces; give a folder outside it.")
    return out


def _resolved(path: Path, opt: str) -> Path:
    """``path`` with its links followed; a link that loops is bad input, in one line."""
    try:
        real = path.resolve()
        looping = next((q for q in (real, *real.parents) if q.is_symlink()), None)  # left unresolved: a loop (3.13)
    except (RuntimeError, OSError) as err:
        _bad(f"{opt} {_shown(path)}: a symbolic link on the way loops or cannot be followed ({_one_line(err)}); "
             "fix or remove the link.")
    if looping is not None:
        _bad(f"{opt} {_shown(path)}: the symbolic link {_shown(looping)} loops; fix or remove the link.")
    return real


def _check_can_create(out: Path) -> None:
    """``--out`` can be made: its nearest existing ancestor is a folder this user may write into (checked
    before the model loads, so that a run never computes for nothing)."""
    above = out.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        _bad(f"--out {out}: {above} is a file, so no folder can be made under it; give another folder.")
    if not os.access(above, os.W_OK | os.X_OK):
        _bad(f"--out {out}: {above} is not writable by this user; give a folder you may write into.")


def check_out(value: str) -> Path:
    """Validate ``--out``: a new or empty folder, or an earlier run's output; raises :class:`UsageError`.

    Returns the real path the run writes at (:func:`real_out`).
    """
    out = real_out(value)
    if out.exists() and not out.is_dir():
        _bad(f"--out {out} is a file, not a folder; give a new or empty folder.")
    if (out / STREAM_META).exists():
        _bad(f"--out {out} holds the chunk files of stream-mixing, which this run would replace; give another folder.")
    if out.is_dir() and any(out.iterdir()):
        if not _is_mixlib_output(out):
            _bad(f"--out {out} already holds files that python -m mixlib did not write; give a new or empty folder "
                 "(an earlier run's output folder is replaced when it holds only that run's files).")
        extra = _not_its_own(out)
        if extra:
            _bad(f"--out {out} holds {', '.join(extra[:3])}{' ...' if len(extra) > 3 else ''}, which the earlier run "
                 "there did not write and a replace would delete; move it out, or give another --out.")
    cwd = Path.cwd().resolve()
    if out == cwd or out in cwd.parents:
        _bad(f"--out {out} is the working folder or one of its parents; give a folder of its own, e.g. --out results/mixing.")
    _check_can_create(out)
    return out


class _OneWriter:
    """The lock of ``--out`` (:class:`mixlib.outlock.OutLock`, a file beside it), held from before the model loads
    until the output is in place: a second writer of the same folder is refused in one line.

    --out's missing parent folders are made here (the lock lives in the parent); :meth:`release` removes
    those it made when the run wrote nothing (``keep_parents=False``).
    """

    def __init__(self, out: Path, *, shared: bool = False) -> None:
        from .outlock import Busy, OutLock

        self.made: list[Path] = []  # deepest first: the folders this run made (another run may make some too)
        self.existed = out.exists()
        for attempt in range(3):
            try:
                self._make_parents(out)
                self.lock = OutLock(out, shared=shared)
                return
            except Busy:
                self._unmake()
                _bad(f"--out {out}: another python -m mixlib run is writing into it now; wait for it to finish, "
                     "or give another --out.")
            except FileNotFoundError:  # a parent removed meanwhile by another run that gave up: make it again
                if attempt == 2:
                    raise
            except OSError as err:
                self._unmake()
                _bad(f"--out {out} cannot be made there ({_one_line(err)}); give another folder.")

    def _make_parents(self, out: Path) -> None:
        missing = []
        above = out.parent
        while not above.exists():
            missing.append(above)
            above = above.parent
        for folder in reversed(missing):
            try:
                folder.mkdir()
            except FileExistsError:
                continue  # another run made it: not ours to remove
            self.made.insert(0, folder)

    def _unmake(self) -> None:
        for folder in self.made:  # deepest first, only while empty
            try:
                folder.rmdir()
            except OSError:
                break
        self.made = []

    def release(self, *, keep_parents: bool = True) -> None:
        lock, self.lock = getattr(self, "lock", None), None
        if lock is not None:
            lock.release()
        if not keep_parents:
            self._unmake()

    def discard_new_folder(self, out: Path) -> None:
        """After a failed stream-mixing run into a folder it made: remove the folder and its parents, unless a chunk
        file is there (finished work, kept for the resume) or another shard is writing into it."""
        lock = getattr(self, "lock", None)
        if self.existed or lock is None or any(out.glob("chunk-*.parquet")) or not lock.alone():
            return
        shutil.rmtree(out, ignore_errors=True)
        self.release(keep_parents=False)


class _Out:
    """Files of one run: written into a staging folder, moved to ``--out`` by :meth:`commit`."""

    def __init__(self, out: Path) -> None:
        self.out = out
        anchor = out.parent
        while not anchor.is_dir():  # stage in the nearest existing folder; create --out's parents only on success
            anchor = anchor.parent
        _remove_stale_staging(out, anchor)
        self.dir = Path(tempfile.mkdtemp(prefix=f".{out.name}{_TMP_TAG}{os.getpid()}-", dir=anchor))
        follow_umask(self.dir)  # it becomes --out: a folder as mkdir would make it
        self.names: list[str] = []

    def path(self, name: str) -> Path:
        self.names.append(name)
        return self.dir / name

    def csv(self, name: str, df: Any, **kw: Any) -> None:
        df.to_csv(self.path(name), encoding="utf-8", **kw)

    def json(self, name: str, obj: Any) -> None:
        self.path(name).write_text(json.dumps(obj, ensure_ascii=False, indent=2), encoding="utf-8")

    def fig(self, name: str, fig: Any) -> None:
        import matplotlib.pyplot as plt

        try:
            fig.savefig(self.path(name), bbox_inches="tight")
        finally:
            plt.close(fig)

    def commit(self) -> None:
        """Move the staging folder into place (replacing an earlier run's output folder as a whole).

        Ctrl-C and SIGTERM are held back until the moves are done, so that an interruption cannot
        fall between moving the old output aside and moving the new one in.
        """
        signals = {signal.SIGINT, signal.SIGTERM}
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
        try:
            self._move_into_place()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def _record_files(self) -> None:
        """List the run's files in its run.json: a later run replaces exactly these, never anything else."""
        run_json = self.dir / "run.json"
        if run_json.is_file():
            run = json.loads(run_json.read_text(encoding="utf-8"))
            run["files"] = sorted(set(self.names))
            run_json.write_text(json.dumps(run, ensure_ascii=False, indent=2), encoding="utf-8")

    def _move_into_place(self) -> None:
        out = self.out
        self._record_files()
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.is_dir() and any(out.iterdir()):
            if not _is_mixlib_output(out):  # something appeared there while we computed
                _bad(f"--out {out} now holds files that python -m mixlib did not write; nothing was written.")
            extra = _not_its_own(out)
            if extra:
                _bad(f"--out {out} now holds {', '.join(extra[:3])}, which the earlier run there did not write; "
                     "nothing was written (move it out, or give another --out).")
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}{_TMP_TAG}{os.getpid()}-old-", dir=out.parent))
            os.replace(out, old / "previous")
            try:
                os.replace(self.dir, out)
            except OSError:
                os.replace(old / "previous", out)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(self.dir, out)  # onto a missing or empty folder: one rename
        self.dir = out

    def discard(self) -> None:
        if self.dir != self.out:
            shutil.rmtree(self.dir, ignore_errors=True)

    def report(self, t0: float) -> None:
        print(f"wrote {len(self.names)} files to {self.out} in {time.perf_counter() - t0:.1f}s:")
        for name in self.names:
            print(f"  {self.out / name}")


# ---------------------------------------------------------------------------
# options
# ---------------------------------------------------------------------------


def _int(lo: int, what: str = "") -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number{what}, got {text!r}") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {lo}{what}, got {value}")
        return value

    return parse


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number strictly between 0 and 1 (e.g. 0.12), got {text}")
    return value


def _check_device(value: str) -> None:
    from .models import resolve_device

    try:
        resolve_device(value)
    except RuntimeError:
        _bad(f"--device {value!r} is not a device; use auto, cpu, cuda or cuda:N.")
    except ValueError as err:
        _bad(f"--device {value!r}: {err}")


def check_stream_out(value: str) -> Path:
    """Validate ``--out`` of stream-mixing: a new or empty folder, or one that already holds its chunk files (resume).

    Returns the real path (:func:`real_out`). What a killed run leaves (its lock and temporary files, the Ray
    engine's staged texts) does not make a folder foreign: the next run removes it.
    """
    from .stream import is_leftover

    out = real_out(value)
    if out.exists() and not out.is_dir():
        _bad(f"--out {out} is a file, not a folder; give a new or empty folder, or an earlier stream-mixing folder.")
    if out.is_dir() and not (out / STREAM_META).exists() and any(not is_leftover(f.name) for f in out.iterdir()):
        _bad(f"--out {out} holds files but no {STREAM_META}, so it is not a stream-mixing folder; "
             "give a new or empty folder (or the folder of an earlier stream-mixing run to resume it).")
    cwd = Path.cwd().resolve()
    if out == cwd or out in cwd.parents:
        _bad(f"--out {out} is the working folder or one of its parents; give a folder of its own, e.g. --out results/chunks.")
    _check_can_create(out)
    return out


def _check_engine_args(args: argparse.Namespace) -> None:
    """--engine ray: Ray installed and the cluster reachable, now (before the model loads), each in one line."""
    if args.engine != "ray":
        for opt, value, default in (("--address", args.address, None), ("--workers", args.workers, 2),
                                    ("--cpus-per-worker", args.cpus_per_worker, 1),
                                    ("--gpus-per-worker", args.gpus_per_worker, 0.0)):
            if value != default:
                _bad(f"{opt} is for --engine ray; add --engine ray, or leave {opt} out.")
        return
    from .stream_ray import check_address, need_ray

    if not args.gpus_per_worker >= 0:
        _bad(f"--gpus-per-worker {args.gpus_per_worker}: give a number >= 0.")
    try:
        need_ray()
        check_address(args.address)
    except (ImportError, ConnectionError, ValueError) as err:
        _bad(str(err))


def _check_stream_args(args: argparse.Namespace) -> None:
    import hashlib

    from .stream import check_record, parse_shard, writer_lock
    from .texts import header_default, iter_texts

    args.out = check_stream_out(args.out)
    _check_engine_args(args)
    try:
        args.shard = "{}/{}".format(*parse_shard(args.shard))
    except ValueError as err:
        _bad(f"--shard: {err}")
    texts = Path(args.texts).expanduser()
    if args.header is None:
        args.header = header_default(texts)
    digest = hashlib.sha256()
    args.n_texts = sum(1 for _ in iter_texts(texts, header=args.header, digest=digest))  # a bad line fails now
    # a resume or another shard: the options and the text file must be those recorded; a live writer of this
    # shard is refused now, not after the model has loaded
    given = {"texts": texts.name, "n_texts": args.n_texts, "texts_sha256": digest.hexdigest(), "chunk_size": args.chunk_size,
             "rate": args.rate, "seed": args.seed, "count": args.mask_count, "max_length": args.max_length,
             "header": bool(args.header), "keep_special_tokens": False}
    if args.out.is_dir():
        shard = parse_shard(args.shard)
        with writer_lock(args.out, shard):
            check_record(args.out, given, shard)


def _check_merge_args(args: argparse.Namespace) -> None:
    chunks = Path(args.chunks).expanduser()
    _resolved(chunks, "--chunks")
    if not chunks.is_dir():
        _bad(f"--chunks {chunks}: no such folder (give the --out folder of stream-mixing).")
    if not (chunks / STREAM_META).exists():
        _bad(f"--chunks {chunks} has no {STREAM_META}: it is not the --out folder of stream-mixing.")
    if not any(chunks.glob("chunk-*.parquet")):
        _bad(f"--chunks {chunks} holds no chunk-*.parquet files yet; run stream-mixing first.")
    args.out = check_out(args.out)
    if chunks.resolve().is_relative_to(args.out):
        _bad(f"--chunks {chunks} lies inside --out {args.out}, which this run replaces; give another --out.")


def check_args(args: argparse.Namespace) -> None:
    """Every check that needs no model; raises :class:`UsageError`. Runs before anything is loaded."""
    for key, value in vars(args).items():  # run.json (UTF-8) records every option: a name it cannot hold fails now
        if isinstance(value, str):
            _check_utf8(value, f"--{key.replace('_', '-')}")
    if getattr(args, "model", None) is not None and not args.model.strip():
        _bad("--model is empty; give a hub id such as bert-base-uncased, a local folder, or all-MiniLM-L6-v2.")
    if args.command == "merge":
        _check_merge_args(args)
        return
    if args.command == "stream-mixing":
        _check_stream_args(args)
        _check_device(args.device)
        return
    args.out = check_out(args.out)
    if args.command in ("mixing", "maps"):
        texts = Path(args.texts).expanduser()
        if _resolved(texts, "--texts").is_relative_to(args.out):
            _bad(f"--texts {texts} lies inside --out {args.out}, which this run replaces; move it elsewhere.")
        from .texts import iter_texts

        numbered = list(iter_texts(texts, header=args.header))
        numbered = numbered if args.limit is None else numbered[: args.limit]  # --limit: mixing and maps alike
        args.texts_list, args.texts_lines = [t for _, t in numbered], [n for n, _ in numbered]
    if args.command == "mixing":
        if args.ci is None and (args.n_boot is not None or args.boot_seed is not None):
            _bad("--n-boot and --boot-seed set the bootstrap interval of --ci; give --ci LEVEL (e.g. --ci 0.95) too, or leave them out.")
        if args.ci is not None:
            args.n_boot = 1000 if args.n_boot is None else args.n_boot
            args.boot_seed = 0 if args.boot_seed is None else args.boot_seed
    if args.command == "clusters":
        if args.upper_k > args.k:
            _bad(f"--upper-k {args.upper_k} is larger than --k {args.k}: the {args.k} centroids cannot form more "
                 f"than {args.k} upper clusters; choose --upper-k <= --k.")
        if args.top > args.k:
            _bad(f"--top {args.top} is larger than --k {args.k}: there are only {args.k} clusters to list; choose --top <= --k.")
    _check_device(args.device)


def check_args_for_model(args: argparse.Namespace, enc: Any) -> None:
    """The checks that need the model (its size); before anything is computed."""
    if args.command in ("mixing", "stream-mixing", "maps") and args.max_length > enc.max_positions:
        _bad(f"--max-length {args.max_length} is larger than {enc.name} accepts ({enc.max_positions} tokens); "
             f"choose 4..{enc.max_positions}.")
    if args.command == "clusters" and args.k > enc.vocab_size:
        _bad(f"--k {args.k} is larger than the vocabulary of {enc.name} ({enc.vocab_size} tokens); choose k <= {enc.vocab_size}.")
    if args.command == "positional":
        if args.layer >= enc.n_layers:
            _bad(f"--layer {args.layer} is out of range: {enc.name} has layers 0..{enc.n_layers - 1} (0-based).")
        if args.n > enc.max_positions:
            _bad(f"--n {args.n} is larger than the {enc.max_positions} positions of {enc.name}; choose 1..{enc.max_positions}.")


def _encoder(args: argparse.Namespace) -> Any:
    from .models import load_encoder

    enc = load_encoder(args.model, fallback=not args.no_fallback, device=args.device)
    print(f"model: {enc.describe()} (source: {enc.source})")
    return enc


def _card(enc: Any, args: argparse.Namespace) -> dict[str, Any]:
    options = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
               if k not in ("func", "command", "texts_list", "texts_lines")}
    return {
        "command": args.command,
        "options": options,
        "model": enc.name,
        "requested": enc.requested,
        "source": enc.source,
        "caption": enc.describe(),
        "n_layers": enc.n_layers,
        "n_heads": enc.n_heads,
        "d_model": enc.d_model,
        "d_head": enc.d_head,
        "vocab_size": enc.vocab_size,
        # what the 句読点 column counts for this model (the paper's, for bert-base-uncased: . and ,)
        "punctuation": _punctuation_of(enc),
    }


def _punctuation_of(enc: Any) -> str:
    from .data import PUNCTUATION
    from .japanese import PUNCTUATION as JA_PUNCTUATION, is_japanese

    if is_japanese(enc.tokenizer):
        return " ".join(JA_PUNCTUATION) + " (alone, in runs, or as ## continuations)"
    return " ".join(PUNCTUATION)


# ---------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------


def paper_comparison(ratio: Any, summary: Any, model: str) -> tuple[Any, Any]:
    """The paper's numbers next to ours: ``(per_layer, pooled)`` tables.

    For the paper's own model (bert-base-uncased) these are
    :func:`mixlib.reference.compare` tables with the difference ours - paper;
    for any other model the two sets of numbers stand side by side under the
    column level ``"ours (<model>)"`` / ``"paper (bert-base-uncased)"`` and no
    difference is taken (another model, possibly another number of layers).
    """
    import pandas as pd

    from . import reference

    paper_layers, paper_pooled = reference.paper_table(), reference.paper_summary()
    if model == PAPER_MODEL:
        return reference.compare(ratio, paper_layers), reference.compare(summary, paper_pooled)
    keys = [f"ours ({model})", f"paper ({PAPER_MODEL})"]
    return (pd.concat(dict(zip(keys, (ratio, paper_layers))), axis=1),
            pd.concat(dict(zip(keys, (summary, paper_pooled))), axis=1))


def _masked(args: argparse.Namespace, enc: Any) -> dict[str, Any]:
    """The masked batch of --texts; an error about ``texts[j]`` names the file's line."""
    from .data import mask_tokens
    from .texts import at_line, warnings_at_lines

    try:
        lines = (Path(args.texts).expanduser(), args.texts_lines)
        with warnings_at_lines(*lines):
            return mask_tokens(enc, args.texts_list, rate=args.rate, seed=args.seed, max_length=args.max_length,
                               count=args.mask_count, keep_special_tokens=args.keep_special_tokens)
    except ValueError as err:
        raise at_line(err, Path(args.texts).expanduser(), args.texts_lines) from None


def cmd_mixing(args: argparse.Namespace, enc: Any, out: _Out) -> None:
    import pandas as pd

    from . import plots
    from .mixing import NORM_METRICS, decompose, mixing_summary, mixing_table

    batch = _masked(args, enc)
    m = decompose(enc, batch, batch_size=args.batch_size, vectors=False, progress=True)

    ratio = mixing_table(m, metric="ratio")
    summary = mixing_summary(m)
    out.csv("mixing_ratio_by_layer.csv", ratio, index_label="layer")
    out.csv("mixing_ratio_noln_by_layer.csv", mixing_table(m, metric="attnres_n"), index_label="layer")
    norms = pd.DataFrame({metric: mixing_table(m, metric=metric)["全体"] for metric in NORM_METRICS})
    out.csv("norms_by_layer.csv", norms, index_label="layer")
    out.csv("summary.csv", summary, index_label="variant")
    if args.ci is not None:
        boot = {"ci": args.ci, "n_boot": args.n_boot, "seed": args.boot_seed}
        ratio_ci = mixing_table(m, metric="ratio", **boot)
        out.csv("mixing_ratio_by_layer_ci.csv", ratio_ci, index_label="layer")
        out.csv("summary_ci.csv", mixing_summary(m, **boot), index_label="variant")
    if args.conventions:
        from .mixing import mixing_conventions

        v = mixing_conventions(enc, batch, batch_size=args.batch_size)
        out.csv("conventions_by_layer.csv", v.table(), index_label="layer")
        out.csv("conventions_norms_by_layer.csv", v.table(list(v.norms)), index_label="layer")
        if args.ci is not None:
            out.csv("conventions_by_layer_ci.csv", v.table(ci=args.ci, n_boot=args.n_boot, seed=args.boot_seed), index_label="layer")
    by_layer, pooled = paper_comparison(ratio, summary, enc.name)
    out.csv("paper_vs_ours_by_layer.csv", by_layer, index_label="layer")
    out.csv("paper_vs_ours_summary.csv", pooled, index_label="variant")
    out.json("run.json", {**_card(enc, args), "texts": len(args.texts_list), "mask_rate": args.rate, "seed": args.seed,
                          "mask_count": args.mask_count, "ci": args.ci, "n_boot": args.n_boot, "boot_seed": args.boot_seed,
                          "paper_model": PAPER_MODEL, "paper_diff": enc.name == PAPER_MODEL,
                          "max_reconstruction_error": [float(e) for e in m.max_error]})

    plots.setup()
    out.fig("mixing_ratio_by_layer.png", plots.plot_mixing_by_layer(ratio if args.ci is None else ratio_ci, enc))
    panels = {"注意機構が混ぜる": "norm_mix", "注意機構が残す": "norm_keep_attn", "残差結合が残す": "norm_res"}
    out.fig("norms_by_layer.png", plots.plot_norm_heatmaps({t: mixing_table(m, metric=k) for t, k in panels.items()}, enc))


def cmd_stretch(args: argparse.Namespace, enc: Any, out: _Out) -> None:
    import numpy as np
    import pandas as pd

    from . import plots
    from .stretch import norm_stretch, stretch_bounds

    st = norm_stretch(enc)
    bounds = stretch_bounds(enc)
    rows = []
    for li, layer in enumerate(st.layers):
        for h in range(enc.n_heads):
            row = {"layer": layer, "head": h}
            for name, arr in (("q", st.psi_q), ("k", st.psi_k), ("v", st.psi_v), ("qkv", st.psi_qkv)):
                v = arr[li, h]
                row[f"psi_{name}_mean"] = float(np.nanmean(v))
                row[f"psi_{name}_max"] = float(np.nanmax(v))
                row[f"top_token_{name}"] = st.tokens[int(np.nanargmax(v))] if st.tokens else ""
            for pi, name in enumerate(("q", "k", "v")):
                row[f"bound_{name}_max"] = float(bounds.psi_max[pi, li, h])
            rows.append(row)
    out.csv("psi_by_head.csv", pd.DataFrame(rows), index=False)
    heads = pd.MultiIndex.from_product([st.layers, range(enc.n_heads)], names=["layer", "head"])
    if args.normalize:
        from .stretch import normalize_stretch, random_psi_rms

        rms = random_psi_rms(enc, layers=st.layers)  # (3, L, H)
        out.csv("random_psi_rms.csv", pd.DataFrame({f"rms_{p}": rms[pi].reshape(-1) for pi, p in enumerate("qkv")}, index=heads))
        ns = normalize_stretch(st, rms)
        out.csv("psi_normalized_by_head.csv", pd.DataFrame(
            {f"psi_{name}_mean": np.nanmean(ns.get(name), axis=-1).reshape(-1) for name in ("q", "k", "v", "qkv")}, index=heads))
    if args.bias:
        from .stretch import bias_rank_correlation

        biased = norm_stretch(enc, bias=True)
        out.csv("bias_rank_correlation.csv", pd.DataFrame(
            {f"rho_{name}": bias_rank_correlation(st, biased, name).reshape(-1) for name in ("q", "k", "v", "qkv")}, index=heads))
    out.json("run.json", _card(enc, args))
    plots.setup()
    mean = pd.DataFrame(np.nanmean(st.psi_qkv, axis=2), index=pd.Index(st.layers, name="層"),
                        columns=[f"H{h}" for h in range(enc.n_heads)])
    out.fig("psi_qkv_mean_by_head.png", plots.plot_norm_heatmaps({"ψ_qkv の全トークン平均（層 × ヘッド）": mean}, enc, annot=False))


def cmd_clusters(args: argparse.Namespace, enc: Any, out: _Out) -> None:
    import pandas as pd

    from . import plots
    from .clusters import cluster_stretch, cluster_summary, cluster_vocab, recluster_centroids, top_clusters, type_map
    from .stretch import norm_stretch

    vc = cluster_vocab(enc, k=args.k, seed=args.seed)
    out.csv("tokens.csv", pd.DataFrame({"token": vc.tokens, "cluster": vc.labels, "type": vc.token_types}), index_label="token_id")
    # every token under its own type (cluster_summary counts them under their cluster's type), in the types' order
    counts = pd.Series(vc.token_types).value_counts().reindex(list(vc.types), fill_value=0)
    out.csv("token_types.csv", pd.DataFrame({"type": counts.index, "n_tokens": counts.to_numpy()}), index=False)
    out.csv("cluster_summary.csv", cluster_summary(vc), index=False)
    upper = recluster_centroids(vc, k=args.upper_k, seed=args.seed)
    out.csv("upper_clusters.csv", pd.DataFrame({"cluster": range(vc.k), "upper": upper.labels, "type": vc.cluster_types}), index=False)
    cs = cluster_stretch(norm_stretch(enc), vc)
    tops = [top_clusters(cs, vc, layer, head, n=args.top).assign(layer=layer, head=head)
            for layer in range(enc.n_layers) for head in range(enc.n_heads)]
    out.csv("top_clusters_by_head.csv", pd.concat(tops, ignore_index=True), index=False)
    tm = type_map(cs, vc, top=min(3, vc.k))  # the paper's three stripes; fewer when there are fewer clusters
    out.csv("type_map.csv", pd.DataFrame(tm) if not isinstance(tm, pd.DataFrame) else tm, index_label="layer")
    out.json("run.json", {**_card(enc, args), "k": vc.k, "seed": vc.seed, "from_cache": bool(vc.from_cache)})
    plots.setup()
    out.fig("type_map.png", plots.plot_type_map(tm, enc))
    out.fig("psi_by_cluster.png", plots.plot_psi_curves(cs, enc))


def cmd_positional(args: argparse.Namespace, enc: Any, out: _Out) -> None:
    import pandas as pd

    from . import plots
    from .positional import centred_overlap, position_attention, positional_orthogonality

    po = positional_orthogonality(enc)
    summary = {"pairs": po.n_pairs, "mean_cos": po.mean_cos, "mean_abs_cos": po.mean_abs_cos,
               "random_mean_abs_cos": po.random_mean_abs_cos, "cls_pos0_cos": po.cls_pos0_cos,
               "principal_angles_deg": [float(a) for a in po.angles_deg],
               "random_principal_angles_deg": [float(a) for a in po.random_angles_deg]}
    out.json("summary.json", {**_card(enc, args), **summary})
    out.json("run.json", _card(enc, args))
    out.csv("cos_histogram.csv", pd.DataFrame({"lo": po.bin_edges[:-1], "hi": po.bin_edges[1:], "count": po.hist}), index=False)
    out.csv("top_pairs.csv", po.top_pairs, index=False)
    ov = centred_overlap(enc, None, seed=args.seed)
    out.csv("overlap_cos.csv", ov.cos_table().rename("value").to_frame(), index_label="statistic")
    out.csv("overlap_share.csv", ov.share_table(), index_label="k")
    att = position_attention(enc, layer=args.layer, n=args.n)
    plots.setup()
    out.fig("pca.png", plots.plot_positional_pca(po, enc))
    out.fig("cos_histogram.png", plots.plot_cos_hist(po, enc))
    out.fig(f"position_attention_layer{args.layer}.png", plots.plot_position_attention(att, enc, layer=args.layer))


def own_share(cm: Any) -> Any:
    """Per layer and measure, the mean over real tokens of the share of a token's own column in its row.

    For token i of a sequence with real tokens 1..n: ``M[i, i] / sum_j M[i, j]``;
    the table averages it over every real token of every sequence.
    """
    import numpy as np
    import pandas as pd

    real = cm.attention_mask.bool().numpy()
    rows = {}
    for name, maps in cm.maps.items():
        m = np.nan_to_num(maps.numpy().astype(np.float64))  # (L, B, N, N), padding NaN -> 0
        m = m * real[None, :, None, :]
        diag = np.diagonal(m, axis1=2, axis2=3)  # (L, B, N)
        share = diag / np.maximum(m.sum(-1), 1e-30)
        rows[name] = share[:, real].mean(axis=1)
    df = pd.DataFrame(rows, index=pd.Index(list(cm.layers), name="layer"))
    df.columns.name = "measure"
    return df


def cmd_maps(args: argparse.Namespace, enc: Any, out: _Out) -> None:
    import itertools

    import numpy as np
    import pandas as pd

    from .measures import agreement_null, context_maps, measure_agreement

    batch = _masked(args, enc)
    batch.pop("masked", None)
    cm = context_maps(enc, batch, batch_size=args.batch_size)
    agreement = measure_agreement(cm, offdiag=True)
    out.csv("agreement.csv", agreement, index_label="layer")
    out.csv("agreement_rollout.csv", measure_agreement(cm, rollout=True), index_label="layer")
    out.csv("own_share.csv", own_share(cm), index_label="layer")
    if args.perm:
        rows = []
        for layer in cm.layers:
            for a, b in itertools.combinations(list(cm.maps), 2):
                observed = float(agreement.loc[layer, (f"{a} vs {b}", "mean")])
                null = agreement_null(cm, a, b, layer=layer, n_perm=args.perm, seed=args.seed, offdiag=True)
                null = null[np.isfinite(null)]
                rows.append({"layer": layer, "pair": f"{a} vs {b}", "observed": observed,
                             "null_mean": float(null.mean()) if len(null) else float("nan"),
                             "null_q95": float(np.quantile(null, 0.95)) if len(null) else float("nan"),
                             "p_value": float((1 + np.sum(null >= observed)) / (1 + len(null))), "n_perm": len(null)})
        out.csv("agreement_null.csv", pd.DataFrame(rows), index=False)
    arrays = {name: m.numpy() for name, m in cm.maps.items()}
    with open(out.path("maps.npz"), "wb") as fh:
        np.savez_compressed(fh, input_ids=cm.input_ids.numpy(), attention_mask=cm.attention_mask.numpy(),
                            layers=np.asarray(cm.layers), **arrays)
    out.json("run.json", {**_card(enc, args), "texts": len(args.texts_list), "mask_rate": args.rate, "seed": args.seed,
                          "measures": list(cm.maps), "max_self_check_error": [float(e) for e in cm.max_error]})


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        follow_umask(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def cmd_stream_mixing(args: argparse.Namespace, enc: Any) -> None:
    """Chunk files written one by one into --out (no staging folder: a re-run resumes)."""
    from .stream import stream_mixing

    t0 = time.perf_counter()
    opts = dict(chunk_size=args.chunk_size, shard=args.shard, rate=args.rate, seed=args.seed, count=args.mask_count,
                max_length=args.max_length, batch_size=args.batch_size, header=args.header)  # '[MASK]' in a text is text
    if args.engine == "ray":
        from .stream_ray import stream_mixing_ray

        res = stream_mixing_ray(enc, Path(args.texts).expanduser(), args.out, address=args.address,
                                workers=args.workers, cpus_per_worker=args.cpus_per_worker,
                                gpus_per_worker=args.gpus_per_worker, **opts)
    else:
        res = stream_mixing(enc, Path(args.texts).expanduser(), args.out, progress=None, **opts)
    _write_atomic(args.out / "run.json", json.dumps(
        {**_card(enc, args), "texts_in_file": args.n_texts, "chunks_written": list(res.written),
         "chunks_skipped": list(res.skipped), "sequences_written": res.n_sequences}, ensure_ascii=False, indent=2))
    print(f"shard {args.shard} ({args.engine}): wrote {len(res.written)} chunks ({res.n_sequences} texts), skipped {len(res.skipped)} "
          f"already there, into {args.out} in {time.perf_counter() - t0:.1f}s; "
          f"combine the shards with: python -m mixlib merge --chunks {args.out} --out DIR")


def cmd_merge(args: argparse.Namespace, enc: Any, out: _Out) -> None:
    from . import plots
    from .stream import merge_mixing

    res = merge_mixing(Path(args.chunks).expanduser(), allow_partial=args.allow_partial)
    out.csv("mixing_ratio_by_layer.csv", res["table"], index_label="layer")
    out.csv("summary.csv", res["summary"], index_label="variant")
    options = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("func", "command")}
    cov = res["coverage"]
    note = (f"一部のみ（partial）: {cov['texts_merged']} / {cov['texts_in_file']} 文、欠けたチャンク {len(cov['chunks_missing'])} 個"
            if res["partial"] else "")
    out.json("run.json", {"command": args.command, "options": options, "model": res["model"],
                          "n_sequences": res["n_sequences"], "chunks": res["chunks"], "partial": res["partial"],
                          "coverage": cov, "caption": note or None})
    plots.setup()
    out.fig("mixing_ratio_by_layer.png", plots.plot_mixing_by_layer(res["table"], res["model"], note=note))
    if res["partial"]:
        print(f"warning: partial merge, {cov['texts_merged']} of {cov['texts_in_file']} texts "
              f"({len(cov['chunks_missing'])} chunks missing); run.json says so.", file=sys.stderr)


COMMANDS = {
    "mixing": (cmd_mixing, "analysis A: mixing vs. preserving per layer and token category (Kobayashi et al.)"),
    "stretch": (cmd_stretch, "analysis B: norm stretch psi of every head for every word embedding (Maeda et al.)"),
    "clusters": (cmd_clusters, "analysis B: k-means of the vocabulary, psi per cluster, top clusters per head"),
    "positional": (cmd_positional, "word vs. position embeddings: PCA, cosine histogram, attention from positions alone"),
    "maps": (cmd_maps, "token-to-token maps of five context-mixing measures: agreement between them, own-token share"),
    "stream-mixing": (cmd_stream_mixing, "analysis A at corpus scale: chunk files (Parquet) written one by one, resumable, shardable"),
    "merge": (cmd_merge, "analysis A tables and figure from the chunk files of stream-mixing (no model is loaded)"),
}


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``prog: error: ...``), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m mixlib",
        description="Analyses of BERT's inside: writes CSV tables and PNG figures (Japanese labels) to --out.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    for name, (func, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text,
                           epilog=(TEXTS_HELP + (SPECIAL_HELP if name != "stream-mixing" else "") + "\n"
                                   if name in ("mixing", "maps", "stream-mixing") else "") + EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(func=func)
        if name == "stream-mixing":
            p.add_argument("--out", required=True,
                           help="folder of the chunk files: new, empty, or an earlier stream-mixing folder (resumed: "
                                "chunks already there are skipped); each chunk file appears whole or not at all")
        else:
            p.add_argument("--out", required=True,
                           help="output folder: new, empty, or an earlier run's output (replaced when it holds only that run's files); files appear only on success")
        if name == "merge":
            p.add_argument("--chunks", required=True, help="the --out folder of stream-mixing (all shards written into it)")
            p.add_argument("--allow-partial", action="store_true",
                           help="merge even when chunk files are missing (run.json and the figure then say 'partial' and "
                                "how many texts are covered); without it, a missing chunk is an error")
            continue
        p.add_argument("--model", default=None, help="hub id (Japanese: tohoku-nlp/bert-base-japanese-v3 ..., with pip install \"mixlib[ja]\"), local directory, "
                       "or all-MiniLM-L6-v2 (default: $MIXLIB_MODEL, else bert-base-uncased)")
        p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda, cuda:1 ... (default: auto)")
        p.add_argument("--no-fallback", action="store_true", help="fail instead of using the packaged model when --model cannot be loaded")
        if name == "stream-mixing":
            p.add_argument("--texts", required=True, help="UTF-8 file read lazily: one text per line, or 'A<TAB>B' for a sentence pair; "
                                                          "'#' lines and blank lines skipped (the same rules as mixing, below)")
            p.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                           help="the first line of --texts names its columns (sentence_a/sentence_b or text) "
                                "(default: yes for files ending in .tsv, no otherwise)")
            p.add_argument("--chunk-size", type=_int(1), default=256, help="texts per chunk file (default: 256)")
            p.add_argument("--shard", default="0/1", help="i/n: process chunks k with k %% n == i, so n machines split one file "
                                                          "into the same --out (default: 0/1, all chunks)")
            p.add_argument("--rate", type=_fraction, default=0.12, help="fraction of non-special tokens replaced by [MASK] (default: 0.12)")
            p.add_argument("--seed", type=_int(0), default=0, help="masking seed; text s uses the stream (seed, s) (default: 0)")
            p.add_argument("--mask-count", choices=("floor", "round"), default="floor",
                           help="masks per sequence: floor(rate × n) (the official code) or round(rate × n), at least 1 (default: floor)")
            p.add_argument("--max-length", type=_int(4), default=128, help="tokens per sequence; longer ones are truncated (default: 128)")
            p.add_argument("--batch-size", type=_int(1), default=32, help="sequences per forward pass (default: 32)")
            p.add_argument("--engine", choices=("stream", "ray"), default="stream",
                           help="stream: this process, chunk by chunk (default); ray: a pool of Ray Data workers, each "
                                'loading the model once (pip install "mixlib[ray]"; the same chunk files)')
            p.add_argument("--address", default=None,
                           help="with --engine ray: a running cluster (host:port, ray://host:port or auto); "
                                "default: a local cluster started for this run")
            p.add_argument("--workers", type=_int(1), default=2, help="with --engine ray: workers in the pool (default: 2)")
            p.add_argument("--cpus-per-worker", type=_int(1), default=1,
                           help="with --engine ray: CPUs (and torch threads) per worker (default: 1)")
            p.add_argument("--gpus-per-worker", type=float, default=0.0,
                           help="with --engine ray: GPUs per worker (e.g. 1, or 0.5 to share one); 0 runs on CPUs (default)")
        if name in ("mixing", "maps"):
            p.add_argument("--texts", required=True, help="UTF-8 file: one text per line, or 'A<TAB>B' for a sentence pair; '#' lines skipped (see below)")
            p.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                           help="the first line of --texts names its columns (sentence_a/sentence_b or text) "
                                "(default: yes for files ending in .tsv, no otherwise)")
            p.add_argument("--keep-special-tokens", action="store_true",
                           help="read [MASK], [SEP], [CLS] ... written in the texts as special tokens (default: as plain text)")
            p.add_argument("--rate", type=_fraction, default=0.12, help="fraction of non-special tokens replaced by [MASK] (default: 0.12, as the paper)")
            p.add_argument("--seed", type=_int(0), default=0, help="masking seed (default: 0)")
            p.add_argument("--mask-count", choices=("floor", "round"), default="floor",
                           help="masks per sequence: floor(rate × n) (the official code) or round(rate × n), at least 1 (default: floor)")
            p.add_argument("--max-length", type=_int(4), default=128, help="tokens per sequence; longer ones are truncated with a warning (default: 128)")
            p.add_argument("--batch-size", type=_int(1), default=32, help="sequences per forward pass (default: 32)")
            p.add_argument("--limit", type=_int(1), default=None, help="use only the first N texts (default: all)")
        if name == "mixing":
            p.add_argument("--ci", type=_fraction, default=None,
                           help="also write a bootstrap interval over the texts at this level, e.g. 0.95 "
                                "(mixing_ratio_by_layer_ci.csv, summary_ci.csv; a band in the figure) (default: none)")
            p.add_argument("--n-boot", type=_int(10), default=None, help="bootstrap resamples, with --ci (default: 1000)")
            p.add_argument("--boot-seed", type=_int(0), default=None, help="seed of the resampling, with --ci (default: 0)")
            p.add_argument("--conventions", action="store_true",
                           help="also write the ratio under other bias conventions and after each LayerNorm step "
                                "(conventions_by_layer.csv, conventions_norms_by_layer.csv; with --ci also conventions_by_layer_ci.csv)")
        if name == "maps":
            p.add_argument("--perm", type=_int(0), default=0,
                           help="permutations of the null of every agreement (senders shuffled within each row; "
                                "agreement_null.csv); 0: none (default: 0)")
        if name == "clusters":
            p.add_argument("--k", type=_int(1), default=1000, help="number of k-means clusters (default: 1000, as the paper)")
            p.add_argument("--upper-k", type=_int(1), default=7, help="clusters of the centroids, at most --k (default: 7)")
            p.add_argument("--seed", type=_int(0), default=0, help="k-means random_state (default: 0)")
            p.add_argument("--top", type=_int(1), default=5, help="top clusters listed per head, at most --k (default: 5)")
        if name == "stretch":
            p.add_argument("--normalize", action="store_true",
                           help="also write each head's random-direction psi (random_psi_rms.csv) and the per-head means of psi "
                                "divided by it (psi_normalized_by_head.csv; 1 = as much as a random direction)")
            p.add_argument("--bias", action="store_true",
                           help="also write, per head, Spearman's rho between psi without and with the projection biases "
                                "(bias_rank_correlation.csv)")
        if name == "positional":
            p.add_argument("--seed", type=_int(0), default=0,
                           help="seed of the random-rotation and random-subspace nulls in overlap_cos.csv and overlap_share.csv (default: 0)")
            p.add_argument("--layer", type=_int(0), default=0, help="layer of the position-only attention figure, 0-based (default: 0)")
            p.add_argument("--n", type=_int(1), default=64, help="positions in that figure (default: 64)")
    return parser


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


class _Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C (clean up, one line) but with exit status 143."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated


def _causes(err: BaseException) -> list[BaseException]:
    """``err`` and the exceptions it was raised from or while handling."""
    chain: list[BaseException] = []
    while err is not None and all(err is not e for e in chain):
        chain.append(err)
        err = err.__cause__ or err.__context__
    return chain


def _stopped(stop: KeyboardInterrupt, args: argparse.Namespace, prog: str) -> int:
    """Ctrl-C or SIGTERM: one line, exit 130 or 143 (later signals are ignored while the run cleans up)."""
    _hold_signals()  # a second Ctrl-C while cleaning up must not turn into a traceback
    kept = ("finished chunk files are kept; run the same command again to resume" if args.command == "stream-mixing"
            else "nothing was written")
    print(f"\n{prog}: {'terminated' if isinstance(stop, _Terminated) else 'interrupted'}; {kept} ({args.out}).",
          file=sys.stderr)
    return 143 if isinstance(stop, _Terminated) else 130


def _hold_signals() -> None:
    """Ignore Ctrl-C and SIGTERM from now on (the run is already stopping; :func:`main` restores them)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError):  # not the main thread
            signal.signal(sig, signal.SIG_IGN)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (0 done, 2 bad input, 130 interrupted, 143 terminated).

    Exceptions other than bad input (``ValueError``, ``OSError``) propagate:
    they are bugs and show their traceback. Ctrl-C pressed again while a run
    stops is ignored (the run is already cleaning up); one line says so.
    """
    try:
        sigint = signal.getsignal(signal.SIGINT)
    except ValueError:
        sigint = None
    try:
        return _main(argv)
    except KeyboardInterrupt:  # a Ctrl-C in the instant before the first one's clean-up held the signals
        print("\npython -m mixlib: interrupted; nothing was written.", file=sys.stderr)
        return 130
    finally:
        if sigint is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, sigint)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help (0) or an option argparse rejects (2, one line already printed)
        return exit_.code if isinstance(exit_.code, int) else 2
    prog = f"python -m mixlib {args.command}"
    shown = warnings.showwarning

    def one_line(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        print(f"{prog}: warning: {_one_line(message)}", file=sys.stderr)  # not Python's two lines with source

    warnings.showwarning = one_line
    out: _Out | None = None
    writer: _OneWriter | None = None
    done = False
    previous = None
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)  # a terminated run cleans up like Ctrl-C
    except ValueError:  # not the main thread
        previous = None
    try:
        check_args(args)
        writer = _OneWriter(args.out, shared=args.command == "stream-mixing")
        if args.command == "stream-mixing":  # resumable: chunk files go straight into --out, one by one
            enc = _encoder(args)
            check_args_for_model(args, enc)
            args.func(args, enc)
            done = True
            return 0
        out = _Out(args.out)
        enc = None if args.command == "merge" else _encoder(args)
        if enc is not None:
            check_args_for_model(args, enc)
        t0 = time.perf_counter()
        args.func(args, enc, out)
        out.commit()
        done = True
        out.report(t0)
        return 0
    except KeyboardInterrupt as stop:
        return _stopped(stop, args, prog)
    except (ValueError, OSError, MissingExtra) as err:
        print(f"{prog}: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except Exception as err:
        stop = next((e for e in _causes(err) if isinstance(e, KeyboardInterrupt)), None)
        if stop is None:
            raise
        return _stopped(stop, args, prog)  # e.g. Ctrl-C during an import: ImportError "initialization failed"
    finally:
        if out is not None:
            out.discard()
        if writer is not None:
            if args.command == "stream-mixing" and not done:
                writer.discard_new_folder(args.out)
            writer.release(keep_parents=done or args.command == "stream-mixing")
        warnings.showwarning = shown
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
