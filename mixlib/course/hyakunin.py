"""The Ogura Hyakunin Isshu (小倉百人一首) as data for a small encoder-decoder.

Chapter 7 feeds the upper phrase (上の句, kami-no-ku, 5-7-5) of each poem to a
Transformer encoder and lets the decoder write the lower phrase (下の句,
shimo-no-ku, 7-7), one hiragana character at a time.  This module holds what
that chapter needs besides the model itself (:mod:`mixlib.course.transformer`):

* :func:`load_poems` / :func:`validate_poems` -- read ``data/hyakunin_isshu.tsv``
  and check its structure (100 distinct poems, numbers 1..100, hiragana only,
  plausible lengths per phrase);
* :class:`CharVocab` -- the character vocabulary with ``<pad> <bos> <eos> <unk>``;
* :func:`split_poems`, :func:`encode_pairs` -- a train/held-out split and the
  tensors for teacher forcing (decoder input shifted right by one);
* :func:`train_chihaya` -- training with per-epoch scores of *generated*
  (greedy) lower phrases, exact match and character accuracy;
* :func:`char_accuracy`, :func:`render_errors` -- the scores and a coloured
  right/wrong print of the generated characters (HTML for the book, ANSI for a
  terminal).
"""

from __future__ import annotations

import html
import re
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import torch

__all__ = [
    "COLUMNS",
    "KANA",
    "PAD",
    "BOS",
    "EOS",
    "UNK",
    "load_poems",
    "validate_poems",
    "CharVocab",
    "split_poems",
    "encode_pairs",
    "char_accuracy",
    "score_generations",
    "ChihayaConfig",
    "ChihayaRun",
    "train_chihaya",
    "render_errors",
    "char_frequency",
]

#: Columns of ``data/hyakunin_isshu.tsv``.
COLUMNS = ("number", "poet", "kami_no_ku", "shimo_no_ku")

#: The characters a poem may contain: the 83 hiragana from ぁ to ゖ minus the small
#: ones, including the historical ゐ and ゑ.  Phrases (句) are separated by a space.
_SMALL = set("ぁぃぅぇぉっゃゅょゎゕゖ")
KANA = frozenset(chr(c) for c in range(ord("あ"), ord("ゖ") + 1)) - _SMALL

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"

#: Allowed length (in characters) of each phrase: 5-mora phrases may have one extra
#: character (字余り), 7-mora phrases one extra or one missing.
_KAMI_LENGTHS = ((5, 6), (6, 8), (5, 6))
_SHIMO_LENGTHS = ((6, 8), (6, 8))


# ---------------------------------------------------------------------------
# the data
# ---------------------------------------------------------------------------


def load_poems(path: str | Path | None = None, *, validate: bool = True) -> pd.DataFrame:
    """Read the 100 poems.

    Parameters
    ----------
    path : str or Path, optional
        A TSV file with the columns :data:`COLUMNS`; default
        ``data/hyakunin_isshu.tsv`` of the repository.
    validate : bool, default True
        Run :func:`validate_poems` on the result.

    Returns
    -------
    pandas.DataFrame
        One row per poem with ``number`` (int), ``poet``, ``kami_no_ku`` and
        ``shimo_no_ku`` as in the file (phrases separated by a space), plus
        ``kami`` and ``shimo``: the same text with the spaces removed, which is
        what the model reads and writes.

    Examples
    --------
    >>> poems = load_poems()
    >>> poems.loc[poems.number == 17, "kami"].item()
    'ちはやぶるかみよもきかずたつたがは'
    """
    if path is None:
        from ..paths import data_path

        path = data_path("hyakunin_isshu.tsv")
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path} lacks the column(s) {missing}; expected the columns {list(COLUMNS)}.")
    df = df[list(COLUMNS)].copy()
    df["number"] = pd.to_numeric(df["number"], errors="raise").astype(int)
    for col in ("poet", "kami_no_ku", "shimo_no_ku"):
        df[col] = df[col].map(lambda s: unicodedata.normalize("NFC", s.strip()))
    df["kami"] = df["kami_no_ku"].str.replace(" ", "", regex=False)
    df["shimo"] = df["shimo_no_ku"].str.replace(" ", "", regex=False)
    if validate:
        validate_poems(df)
    return df.reset_index(drop=True)


def validate_poems(df: pd.DataFrame) -> None:
    """Raise ``ValueError`` naming every row that breaks the structure of the data.

    Checked: exactly 100 rows numbered 1..100 in order; 100 distinct poems and
    100 distinct upper phrases; a poet on every row; upper phrase = 3 phrases
    and lower phrase = 2 phrases separated by single spaces; only the
    characters in :data:`KANA`; each phrase's length within 5/7 mora plus the
    usual 字余り (one extra character; a 7-mora phrase may also have 6).
    """
    problems: list[str] = []
    if len(df) != 100:
        problems.append(f"{len(df)} rows, expected 100")
    numbers = list(df["number"])
    if numbers != list(range(1, len(df) + 1)):
        problems.append("numbers are not 1, 2, ..., n in order")
    full = (df["kami_no_ku"] + "/" + df["shimo_no_ku"]).tolist()
    dups = [p for p, c in Counter(full).items() if c > 1]
    if dups:
        problems.append(f"duplicated poems: {dups}")
    kami_dups = [p for p, c in Counter(df["kami_no_ku"]).items() if c > 1]
    if kami_dups:
        problems.append(f"duplicated upper phrases: {kami_dups}")
    for row in df.itertuples(index=False):
        where = f"poem {row.number}"
        if not row.poet:
            problems.append(f"{where}: no poet")
        for name, text, lengths in (("kami_no_ku", row.kami_no_ku, _KAMI_LENGTHS), ("shimo_no_ku", row.shimo_no_ku, _SHIMO_LENGTHS)):
            bad = sorted({ch for ch in text if ch != " " and ch not in KANA})
            if bad:
                problems.append(f"{where}: {name} has characters that are not full-size hiragana: {bad}")
            parts = text.split(" ")
            if len(parts) != len(lengths):
                problems.append(f"{where}: {name} has {len(parts)} phrases separated by single spaces, expected {len(lengths)}")
                continue
            for i, (part, (lo, hi)) in enumerate(zip(parts, lengths)):
                if not lo <= len(part) <= hi:
                    problems.append(f"{where}: {name} phrase {i + 1} {part!r} has {len(part)} characters, expected {lo}..{hi}")
    if problems:
        raise ValueError("the poem data is malformed:\n  " + "\n  ".join(problems))
