"""Tests for mixlib.wikipedia: offline it fails fast and clearly; the text splitting is right.

No test needs the network: the probe and the HTTP request are replaced where
the network would be used, and one test runs the real probe against an
address that cannot answer.
"""

from __future__ import annotations

import socket
import time
import urllib.error

import pytest

from mixlib import wikipedia


def test_offline_raises_connection_error_fast(monkeypatch):
    monkeypatch.setattr(wikipedia, "wikipedia_reachable", lambda timeout=3.0: False)
    t0 = time.perf_counter()
    with pytest.raises(ConnectionError, match=r"cannot be reached.*load_sentence_pairs"):
        wikipedia.load_wikipedia_pairs(10)
    assert time.perf_counter() - t0 < 1.0


def test_probe_gives_up_after_its_timeout(monkeypatch):
    def hang(*args, **kwargs):  # a connection that never opens (DNS or SYN lost)
        time.sleep(5)
        raise OSError("too late")

    monkeypatch.setattr(socket, "create_connection", hang)
    t0 = time.perf_counter()
    assert wikipedia.wikipedia_reachable(timeout=0.3) is False
    assert time.perf_counter() - t0 < 1.5


def test_probe_refused_is_false(monkeypatch):
    def refuse(*args, **kwargs):
        raise ConnectionRefusedError("refused")

    monkeypatch.setattr(socket, "create_connection", refuse)
    assert wikipedia.wikipedia_reachable(timeout=1.0) is False


def test_request_failure_is_a_connection_error(monkeypatch):
    monkeypatch.setattr(wikipedia, "wikipedia_reachable", lambda timeout=3.0: True)

    def refuse(*args, **kwargs):
        raise urllib.error.URLError("timed out")

    monkeypatch.setattr(wikipedia.urllib.request, "urlopen", refuse)
    with pytest.raises(ConnectionError, match="did not answer"):
        wikipedia.load_wikipedia_pairs(5, timeout=0.2)


def test_parses_a_canned_api_answer(monkeypatch):
    monkeypatch.setattr(wikipedia, "wikipedia_reachable", lambda timeout=3.0: True)
    long_a = "The river flows slowly through the green valley and past the old mill near the village square."
    long_b = "Fishermen gather on its banks every morning to catch trout before the tourists arrive in summer."
    short = "It is wide."
    payload = {"query": {"pages": {"1": {"title": "River", "extract": f"{long_a} {long_b} {short} {long_a}"},
                                   "2": {"title": "Empty", "extract": ""}}}}

    class Resp:
        def __init__(self, body):
            self.body = body

        def read(self):
            import json

            return json.dumps(self.body).encode()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    seen = {}

    def fake_urlopen(req, timeout):
        seen["url"], seen["timeout"], seen["ua"] = req.full_url, timeout, req.get_header("User-agent")
        return Resp(payload)

    monkeypatch.setattr(wikipedia.urllib.request, "urlopen", fake_urlopen)
    pairs = wikipedia.load_wikipedia_pairs(None, titles=["River", "Empty"], timeout=1.5)
    assert pairs == [(long_a, long_b)]
    assert "titles=River%7CEmpty" in seen["url"] and seen["timeout"] == 1.5 and "mixbook" in seen["ua"]


def test_split_and_pair_rules():
    text = 'First sentence has exactly ten words in it right here. "Second one also has ten words in it, which is fine." Short. ' \
           "Fourth sentence is long enough to count as a proper sentence here."
    sents = wikipedia.split_sentences(text)
    assert len(sents) == 4 and sents[2] == "Short."
    pairs = wikipedia.pairs_from_texts([text, text])
    assert pairs == [(sents[0], sents[1])], "the short third sentence breaks the chain; duplicates are dropped"
    with pytest.raises(ValueError):
        wikipedia.pairs_from_texts([text], min_words=5, max_words=2)


@pytest.mark.parametrize("kwargs", [{"n": 0}, {"n": 2.5}, {"timeout": 0}, {"titles": []}, {"titles": ["ok", " "]}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        wikipedia.load_wikipedia_pairs(**kwargs)
