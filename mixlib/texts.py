"""Text files of the command line and of :mod:`mixlib.stream`: one reader, one set of rules.

``python -m mixlib mixing``, ``maps`` and ``stream-mixing`` and the library
(:func:`mixlib.stream.stream_mixing`) all read their texts here, so one file
gives the same texts to every command, or the same one-line error naming the
file and the line. The rules:

* **Lines** end at ``\\n`` (a ``\\r`` before it is dropped). Nothing else
  starts a line: U+2028, form feeds and NEL stay inside their text as
  whitespace, as a tokenizer reads them.
* The file is **UTF-8**; a byte-order mark at its start is ignored. A byte that
  is not UTF-8 is an error naming its line.
* **Blank lines** (only whitespace) and lines starting with ``#`` are skipped.
* **Header**: with ``header=True`` (the default for ``*.tsv`` files) the first
  remaining line names TAB-separated columns, and the texts come from the
  ``sentence_a``/``sentence_b`` columns (sentence pairs) or a ``text`` column.
  The rule follows the file's name or the caller, never the line's content.
* Without a header, a line is **one text or** ``A<TAB>B`` (a sentence pair),
  one kind for the whole file.
* Every text must hold a character a tokenizer keeps: a line of zero-width
  spaces, control characters or lone combining marks would become a sequence
  with no ordinary token, and is refused here, before any model is loaded.

Reading is lazy (:func:`iter_texts` yields one text at a time with its line
number), so a corpus of any size is checked in constant memory.
"""

from __future__ import annotations

import os
import re
import unicodedata
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["iter_texts", "read_texts", "has_content", "header_default", "at_line", "warnings_at_lines"]

Text = str | tuple[str, str]

_PAIR = "a sentence pair (A<TAB>B)"
_SINGLE = "a single text"


def has_content(text: str) -> bool:
    """True when ``text`` holds a character a BERT tokenizer keeps.

    A tokenizer drops whitespace, control and format characters (zero-width
    spaces, BOMs, soft hyphens), U+FFFD and, in uncased models, combining marks
    once accents are stripped; a text made only of those yields no token. Marks
    of every kind count as nothing here (a text of lone marks is refused even
    where a cased tokenizer would keep them; U+1734, a spacing mark to Python's
    Unicode tables, is dropped by BERT's).
    """
    for ch in text:
        cat = unicodedata.category(ch)
        if cat[0] not in "CZM" and ch != "\ufffd" and not ch.isspace():
            return True
    return False


def header_default(path: str | os.PathLike) -> bool:
    """The header rule when none is given: True for ``*.tsv`` files, False otherwise."""
    return Path(path).suffix.lower() == ".tsv"


def _lines(p: Path, digest: Any = None) -> Iterator[tuple[int, str]]:
    """(line number, line) for every line of ``p``, split at ``\\n`` only; ``digest`` (hashlib) sees every byte."""
    offset = 0
    with open(p, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if digest is not None:
                digest.update(raw)
            data = raw[3:] if lineno == 1 and raw.startswith(b"\xef\xbb\xbf") else raw
            try:
                line = data.decode("utf-8")
            except UnicodeDecodeError as err:
                at = offset + err.start + (len(raw) - len(data))
                raise ValueError(f"{p}, line {lineno}: not UTF-8 text ({err.reason} at byte {at} of the file); "
                                 "save the file as UTF-8.") from None
            offset += len(raw)
            if line.endswith("\n"):
                line = line[:-1]
            if line.endswith("\r"):
                line = line[:-1]
            if "\r" in line:
                raise ValueError(f"{p}, line {lineno}: a carriage return (CR) inside the line: the file has old Mac line "
                                 "ends (CR only) or a stray CR; convert it to LF line ends.")
            yield lineno, line.removeprefix("\ufeff")  # files joined with their BOMs


def _columns(p: Path, lineno: int, line: str) -> tuple[list[str], list[int]]:
    names = [h.strip().lower() for h in line.split("\t")]
    twice = [n for n in ("sentence_a", "sentence_b", "text") if names.count(n) > 1]
    if twice:
        raise ValueError(f"{p}, line {lineno}: the header names the column '{twice[0]}' {names.count(twice[0])} times; "
                         "name each column once.")
    if "sentence_a" in names and "sentence_b" in names:
        return names, [names.index("sentence_a"), names.index("sentence_b")]
    if "text" in names:
        return names, [names.index("text")]
    raise ValueError(f"{p}, line {lineno}: the header names no 'sentence_a'/'sentence_b' or 'text' column "
                     f"(found: {', '.join(names)}); fix the header, or read the file without one (--no-header).")


def iter_texts(path: str | os.PathLike, *, header: bool | None = None, digest: Any = None) -> Iterator[tuple[int, Text]]:
    """``(line number, text)`` for every text of a file, read lazily (see the module docstring for the rules).

    Parameters
    ----------
    path : str or Path
        A UTF-8 text file.
    header : bool, optional
        Whether the first (non-blank, non-comment) line names columns.
        Default: :func:`header_default` (True for ``*.tsv``).
    digest : hashlib object, optional
        Updated with every byte of the file as it is read, so that a caller
        can tell whether the file it read is the file it checked.

    Yields
    ------
    (int, str or (str, str))
        The 1-based line number and a single text or a sentence pair.

    Raises
    ------
    ValueError
        No such file, not UTF-8, a malformed line, singles and pairs mixed, a
        text with nothing to tokenize: one line naming the file and the line.
    """
    p = Path(path)
    if not p.is_file():
        what = ("is a folder" if p.is_dir() else "is not a regular file (a pipe or a device?)" if p.exists()
                else ": no such file")
        raise ValueError(f"{p}{'' if what.startswith(':') else ' '}{what}; give a UTF-8 text file, one text or "
                         "'A<TAB>B' pair per line.")
    if header is None:
        header = header_default(p)
    names: list[str] | None = None
    columns: list[int] = []
    first: tuple[int, bool] | None = None  # line number and kind (pair?) of the first text
    for lineno, line in _lines(p, digest):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if header and names is None:
            names, columns = _columns(p, lineno, line)
            continue
        parts = [s.strip() for s in line.split("\t")]
        if names is not None:
            if len(parts) != len(names) or not all(parts[c] for c in columns):
                raise ValueError(f"{p}, line {lineno}: expected {len(names)} TAB-separated fields "
                                 f"({', '.join(names)}) with non-empty text.")
            parts = [parts[c] for c in columns]
        elif len(parts) > 2 or (len(parts) == 2 and not all(parts)):
            hint = " (if it is a header, pass --header)" if first is None else ""
            raise ValueError(f"{p}, line {lineno}: expected one text, or two non-empty texts separated by one TAB{hint}.")
        for part in parts:
            if not has_content(part):
                raise ValueError(f"{p}, line {lineno}: {part!r:.60} has nothing to tokenize (only spaces, zero-width "
                                 "or control characters); remove the line or give it text.")
        pair = len(parts) == 2
        if first is None:
            first = (lineno, pair)
        elif pair != first[1]:
            what = (_SINGLE, _PAIR)
            raise ValueError(f"{p}, line {lineno}: {what[pair]}, but line {first[0]} is {what[first[1]]}: a file holds "
                             "either single texts or 'A<TAB>B' pairs, not both; put them in two files.")
        yield lineno, ((parts[0], parts[1]) if pair else parts[0])
    if first is None:
        raise ValueError(f"{p} holds no texts" + (" after its header" if names is not None else "")
                         + " (blank lines and '#' comments are skipped).")


def read_texts(path: str | os.PathLike, *, header: bool | None = None) -> list[Text]:
    """Every text of a file as a list (:func:`iter_texts` without the line numbers)."""
    return [text for _, text in iter_texts(path, header=header)]


def _texts_index(path: str | os.PathLike, lines: list[int]) -> Any:
    def name(match: re.Match) -> str:
        j = int(match.group(1))
        return f"line {lines[j]} of {path}" if j < len(lines) else match.group(0)

    return name


def at_line(err: ValueError, path: str | os.PathLike, lines: list[int]) -> ValueError:
    """A library error that names ``texts[j]`` (a text's place in a list), renamed to the line of the file it came from."""
    match = re.match(r"texts\[(\d+)\]", str(err))
    if not match or int(match.group(1)) >= len(lines):
        return ValueError(re.sub(r"texts\[(\d+)\]", _texts_index(path, lines), str(err))) if "texts[" in str(err) else err
    return ValueError(f"{path}, line {lines[int(match.group(1))]}:" + str(err)[match.end():])


@contextmanager
def warnings_at_lines(path: str | os.PathLike, lines: list[int]) -> Iterator[None]:
    """Warnings raised inside (e.g. "... longer than max_length, e.g. texts[3]") name the file's line instead."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        warnings.warn(re.sub(r"texts\[(\d+)\]", _texts_index(path, lines), str(w.message)), w.category, stacklevel=3)
