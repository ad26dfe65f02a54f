"""Optional: a larger sample of English Wikipedia prose for analysis A, when the network allows.

Kobayashi et al. analysed 992 Wikipedia sequences (from Clark et al., 2019),
which cannot be redistributed. The book ships its own 283 sentence pairs
(``data/sentence_pairs.tsv``, :func:`mixlib.widgets.load_sentence_pairs`);
this module fetches more text of the same kind when the machine is online:
the introductions of a fixed list of general-interest articles, through the
MediaWiki API (plain HTTPS, no extra package), split into consecutive sentence
pairs in the book's format.

It never hangs: a TCP probe with a hard time limit runs first, and every
request has a timeout. Offline (or when Wikipedia does not answer) it raises
:class:`ConnectionError` at once, saying what to use instead. Nothing is cached
and nothing is written; the article texts change over time, so the pairs are
reproducible only as long as the articles are.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["DEFAULT_TITLES", "API_URL", "wikipedia_reachable", "split_sentences", "pairs_from_texts", "load_wikipedia_pairs"]

HOST = "en.wikipedia.org"
API_URL = f"https://{HOST}/w/api.php"
#: MediaWiki asks API clients to identify themselves.
USER_AGENT = "mixbook/0.1 (teaching book on BERT analysis; https://github.com/nlp-course-ja/mixbook)"
#: General-interest articles whose introductions are read (same spirit as the book's own pairs).
DEFAULT_TITLES: tuple[str, ...] = (
    "Photosynthesis", "Printing press", "Moon", "Jupiter", "Volcano", "Tea", "Bicycle", "Piano", "Honey bee",
    "Coral reef", "Rainbow", "Great Wall of China", "Pompeii", "Olympic Games", "Marathon", "Basketball", "Chess",
    "Bread", "Cheese", "Coffee", "Rice", "Paper", "Electrical telegraph", "Rail transport", "Internet", "Email",
    "Camera", "Satellite navigation", "Vaccine", "Sleep", "Language", "Sign language", "Dictionary", "Poetry",
    "Novel", "Fairy tale", "Museum", "Cathedral", "Skyscraper", "Bridge", "River", "Desert", "Antarctica",
    "Amazon River", "Iceland", "Glacier", "Earthquake", "Thunderstorm", "Snow", "Tropical cyclone", "Bird migration",
    "Octopus", "Elephant", "Salmon", "Ant", "Wolf", "Prime number", "Statistics", "Map projection", "Inflation",
    "Money", "Tourism", "Library", "Census",
)
#: Titles per API request (the API returns at most 20 introductions at a time).
BATCH = 20
# a sentence ends at . ! ? (possibly followed by a closing quote or bracket), then space, then a capital or an opening quote
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')]))\s+(?=[A-Z\"'(])")


def wikipedia_reachable(timeout: float = 3.0) -> bool:
    """True when a TCP connection to en.wikipedia.org:443 opens within ``timeout`` seconds.

    The probe runs in a daemon thread that is abandoned after ``timeout`` (DNS
    lookups cannot be interrupted), so the caller never waits longer.
    """
    from .models import tcp_reachable

    return tcp_reachable(HOST, 443, timeout)


def split_sentences(text: str) -> list[str]:
    """Split plain prose into sentences (at ``.``/``!``/``?`` followed by space and a capital or quote).

    Good enough for encyclopaedic English; abbreviations such as "Dr. Smith" may split wrongly.
    """
    text = re.sub(r"\s+", " ", text.replace("\n", " ")).strip()
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def pairs_from_texts(texts: Iterable[str], *, min_words: int = 10, max_words: int = 40) -> list[tuple[str, str]]:
    """Consecutive sentence pairs ``(a, b)`` from each text, both sentences ``min_words..max_words`` long.

    Pairs do not overlap (sentences 1-2, 3-4, ... of each text); a sentence
    outside the length range breaks the chain; duplicate pairs are dropped.
    """
    if min_words < 1 or max_words < min_words:
        raise ValueError(f"need 1 <= min_words <= max_words; got min_words={min_words}, max_words={max_words}.")
    out: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for text in texts:
        sents = split_sentences(text)
        i = 0
        while i + 1 < len(sents):
            a, b = sents[i], sents[i + 1]
            if all(min_words <= len(s.split()) <= max_words and "\t" not in s for s in (a, b)):
                if (a, b) not in seen:
                    seen.add((a, b))
                    out.append((a, b))
                i += 2
            else:
                i += 1
    return out


def _fetch_intros(titles: Sequence[str], timeout: float) -> list[str]:
    texts: list[str] = []
    for start in range(0, len(titles), BATCH):
        chunk = titles[start : start + BATCH]
        params = {"action": "query", "prop": "extracts", "explaintext": "1", "exintro": "1", "exlimit": str(len(chunk)),
                  "redirects": "1", "format": "json", "titles": "|".join(chunk)}
        req = urllib.request.Request(f"{API_URL}?{urllib.parse.urlencode(params)}", headers={"User-Agent": USER_AGENT})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                data: Any = json.loads(resp.read().decode("utf-8"))
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise ConnectionError(
                f"Wikipedia did not answer within {timeout:g} s ({type(err).__name__}: {err}). "
                "Use the book's own pairs instead: mixlib.widgets.load_sentence_pairs()."
            ) from err
        pages = data.get("query", {}).get("pages", {})
        order = {t: i for i, t in enumerate(chunk)}
        found = sorted(pages.values(), key=lambda p: order.get(p.get("title", ""), len(order)))
        texts += [p["extract"] for p in found if p.get("extract")]
    return texts


def load_wikipedia_pairs(n: int | None = 500, *, titles: Sequence[str] | None = None, timeout: float = 5.0,
                         min_words: int = 10, max_words: int = 40) -> list[tuple[str, str]]:
    """Consecutive sentence pairs from Wikipedia introductions, for :func:`mixlib.mask_tokens` / :func:`mixlib.decompose`.

    Parameters
    ----------
    n : int or None, default 500
        At most this many pairs (None: all that the articles give).
    titles : sequence of str, optional
        Article titles; default :data:`DEFAULT_TITLES`.
    timeout : float, default 5.0
        Seconds for the reachability probe and for each request.
    min_words, max_words : int
        Length range of each sentence (the book's own pairs use 10..40).

    Returns
    -------
    list of (str, str)

    Raises
    ------
    ConnectionError
        Wikipedia cannot be reached (no network) or does not answer in time; raised
        after at most ``timeout`` seconds for the probe.
    ValueError
        Bad arguments, or the articles gave no pair in the length range.

    Examples
    --------
    >>> try:
    ...     pairs = load_wikipedia_pairs(300)
    ... except ConnectionError:
    ...     pairs = mixlib.widgets.load_sentence_pairs()
    """
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"n={n!r}; give a positive int, or None for every pair.")
    if not timeout > 0:
        raise ValueError(f"timeout={timeout!r}; give a positive number of seconds.")
    titles = list(DEFAULT_TITLES if titles is None else titles)
    if not titles or not all(isinstance(t, str) and t.strip() for t in titles):
        raise ValueError("titles must be a non-empty list of article titles (non-empty strings).")
    if not wikipedia_reachable(timeout):
        raise ConnectionError(
            f"{HOST} cannot be reached (checked for {timeout:g} s): this machine seems to be offline. "
            "Use the book's own sentence pairs instead: mixlib.widgets.load_sentence_pairs()."
        )
    pairs = pairs_from_texts(_fetch_intros(titles, timeout), min_words=min_words, max_words=max_words)
    if not pairs:
        raise ValueError(f"the {len(titles)} articles gave no sentence pair with {min_words}..{max_words} words per sentence.")
    return pairs if n is None else pairs[:n]
