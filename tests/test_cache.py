"""The on-disk cache (mixlib.cache): round trip, atomicity, corrupted and foreign files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from mixlib import cache
from mixlib.cache import CacheWarning

KEY = {"what": "test", "model": "m", "k": 3, "hash": "abc"}
EXPECT = {"a": ((None, 2), "f"), "b": ((4,), "iu"), "s": ((), "U")}


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MIXLIB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _arrays():
    return {"a": np.arange(6, dtype=np.float32).reshape(3, 2), "b": np.array([3, 1, 4, 1]), "s": np.array("hello")}


def test_cache_dir_env_and_default(isolated_cache, monkeypatch):
    assert cache.cache_dir() == isolated_cache
    monkeypatch.delenv("MIXLIB_CACHE")
    import platformdirs

    assert cache.cache_dir() == Path(platformdirs.user_cache_dir("mixlib", appauthor=False))


def test_round_trip(isolated_cache):
    assert cache.read_arrays("t", KEY, EXPECT) is None  # nothing yet, silently
    path = cache.write_arrays("t", KEY, _arrays())
    assert path is not None and path.parent == isolated_cache and path.suffix == ".npz" and path.name.startswith("t-")
    got = cache.read_arrays("t", KEY, EXPECT)
    assert got is not None
    for name, arr in _arrays().items():
        np.testing.assert_array_equal(got[name], arr)
        assert got[name].dtype == arr.dtype
    # no temporary files left behind (the entry's lock file may stay: it is how processes take turns)
    assert [p.name for p in isolated_cache.iterdir() if not p.name.endswith(".lock")] == [path.name]
    # key order does not matter, key content does
    assert cache.cache_path("t", dict(reversed(list(KEY.items())))) == path
    assert cache.cache_path("t", {**KEY, "k": 4}) != path


def test_overwrite_is_atomic_replace(isolated_cache):
    p1 = cache.write_arrays("t", KEY, _arrays())
    ino = os.stat(p1).st_ino
    new = _arrays()
    new["a"] = new["a"] + 1
    p2 = cache.write_arrays("t", KEY, new)
    assert p1 == p2 and os.stat(p2).st_ino != ino  # a new file moved into place, not rewritten in place
    np.testing.assert_array_equal(cache.read_arrays("t", KEY, EXPECT)["a"], new["a"])


def test_truncated_file_warns(isolated_cache):
    path = cache.write_arrays("t", KEY, _arrays())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.warns(CacheWarning, match="unusable"):
        assert cache.read_arrays("t", KEY, EXPECT) is None


def test_garbled_file_warns(isolated_cache):
    path = cache.write_arrays("t", KEY, _arrays())
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(0)
    for i in rng.integers(0, len(data), 200):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.warns(CacheWarning):
        assert cache.read_arrays("t", KEY, EXPECT) is None


def test_not_a_zip_warns(isolated_cache):
    path = cache.cache_path("t", KEY)
    path.parent.mkdir(parents=True)
    path.write_text("hello, I am not an npz file")
    with pytest.warns(CacheWarning, match="unusable"):
        assert cache.read_arrays("t", KEY, EXPECT) is None


def test_foreign_npz_warns(isolated_cache):
    path = cache.cache_path("t", KEY)
    path.parent.mkdir(parents=True)
    with open(path, "wb") as f:
        np.savez(f, **_arrays())  # same arrays, but not written by mixlib: no key
    with pytest.warns(CacheWarning, match="not a mixlib cache file"):
        assert cache.read_arrays("t", KEY, EXPECT) is None


def test_key_mismatch_warns(isolated_cache):
    other = {**KEY, "hash": "def"}
    src = cache.write_arrays("t", other, _arrays())
    os.replace(src, cache.cache_path("t", KEY))  # a file of another computation under this name
    with pytest.warns(CacheWarning, match="different computation"):
        assert cache.read_arrays("t", KEY, EXPECT) is None


def test_pickled_object_array_is_refused(isolated_cache):
    path = cache.cache_path("t", KEY)
    path.parent.mkdir(parents=True)
    with open(path, "wb") as f:
        np.savez(f, __key__=np.array(cache._canonical(KEY)), a=np.array([{"x": 1}], dtype=object), b=np.arange(4), s=np.array("x"))
    with pytest.warns(CacheWarning):
        assert cache.read_arrays("t", KEY, EXPECT) is None
    with pytest.raises(TypeError, match="object"):
        cache.write_arrays("t", KEY, {"a": np.array([None], dtype=object)})


def test_wrong_shapes_dtypes_missing_and_check(isolated_cache):
    arrays = _arrays()
    cache.write_arrays("t", KEY, {**arrays, "b": np.arange(5)})
    with pytest.warns(CacheWarning, match="shape"):
        assert cache.read_arrays("t", KEY, EXPECT) is None
    cache.write_arrays("t", KEY, {**arrays, "b": np.arange(4.0)})
    with pytest.warns(CacheWarning, match="dtype"):
        assert cache.read_arrays("t", KEY, EXPECT) is None
    cache.write_arrays("t", KEY, {"a": arrays["a"], "s": arrays["s"]})
    with pytest.warns(CacheWarning, match="missing"):
        assert cache.read_arrays("t", KEY, EXPECT) is None
    cache.write_arrays("t", KEY, arrays)
    with pytest.warns(CacheWarning, match="negative"):
        assert cache.read_arrays("t", KEY, EXPECT, check=lambda a: "negative" if a["b"].min() < 2 else None) is None


def test_unwritable_directory_warns_and_returns_none(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("MIXLIB_CACHE", str(blocker / "sub"))  # a directory cannot be created under a file
    with pytest.warns(CacheWarning, match="could not write"):
        assert cache.write_arrays("t", KEY, _arrays()) is None


def test_digests_and_bad_kinds(isolated_cache):
    a = np.arange(10, dtype=np.float32)
    b = a.copy()
    assert cache.array_digest(a) == cache.array_digest(b)
    b[3] += 1e-6
    assert cache.array_digest(a) != cache.array_digest(b)
    assert cache.array_digest(a) != cache.array_digest(a.astype(np.float64))
    assert cache.array_digest(a) != cache.array_digest(a.reshape(2, 5))
    with pytest.raises(ValueError, match="kind"):
        cache.cache_path("../evil", KEY)
    with pytest.raises(TypeError, match="JSON"):
        cache.key_digest({"x": object()})
    cache.write_arrays("t", KEY, _arrays())
    cache.write_arrays("u", KEY, _arrays())
    assert cache.clear_cache("t") == 1 and cache.clear_cache() == 1


# -- concurrency: one writer at a time, orphans of killed writers removed -----------------------

_WORKER = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    from mixlib import cache
    key = {"what": "test", "model": "m", "k": 3, "hash": "abc"}
    expect = {"a": ((None, 2), "f")}
    log, release = sys.argv[1], sys.argv[2]
    with cache.entry_lock("t", key):
        got = cache.read_arrays("t", key, expect)
        if got is None:
            with open(log, "a") as f:
                f.write(f"compute {os.getpid()}\\n")
            print("computing", flush=True)
            while not os.path.exists(release):  # hold the lock until the test says so
                time.sleep(0.02)
            cache.write_arrays("t", key, {"a": np.ones((3, 2), dtype=np.float32)})
        else:
            with open(log, "a") as f:
                f.write(f"read {os.getpid()}\\n")
    print("done", flush=True)
""")


def _spawn(script, *args):
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ})


def _wait_for(predicate, what, limit=120.0):
    t0 = time.monotonic()
    while not predicate():
        assert time.monotonic() - t0 < limit, f"gave up waiting for {what}"
        time.sleep(0.05)


def test_a_second_process_waits_and_reads_instead_of_recomputing(isolated_cache, tmp_path):
    log, release = tmp_path / "log", tmp_path / "release"
    first = _spawn(_WORKER, log, release)
    assert first.stdout.readline().strip() == "computing", first.stderr.read()
    second = _spawn(_WORKER, log, release)
    line = second.stdout.readline()
    assert "another process is computing" in line and "waiting" in line, line + second.stderr.read()
    release.touch()
    for proc in (first, second):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    actions = [line.split()[0] for line in log.read_text().splitlines()]
    assert actions == ["compute", "read"]  # computed once, by the first process
    assert not list(isolated_cache.glob("*.tmp"))


_KILLED_WRITER = textwrap.dedent("""
    import sys, time
    import numpy as np
    from mixlib import cache
    key = {"what": "test", "model": "m", "k": 3, "hash": "abc"}

    def savez_then_hang(f, **arrays):
        f.write(b"PK half a file")
        f.flush()
        print("writing", flush=True)
        time.sleep(600)

    np.savez = savez_then_hang
    cache.write_arrays("t", key, {"a": np.ones((3, 2), dtype=np.float32)})
""")


def test_a_killed_writers_temporary_file_is_removed(isolated_cache):
    proc = _spawn(_KILLED_WRITER)
    assert proc.stdout.readline().strip() == "writing", proc.stderr.read()
    orphans = list(isolated_cache.glob("*.tmp"))
    assert len(orphans) == 1
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert orphans[0].exists()  # SIGKILL runs no clean-up code
    assert not cache.cache_path("t", KEY).exists()  # the final name never held half a file
    with cache.entry_lock("t", KEY, wait=30):  # the dead writer's lock is free; its orphan goes
        assert not orphans[0].exists()
    path = cache.write_arrays("t", KEY, _arrays())
    assert cache.read_arrays("t", KEY, EXPECT) is not None
    assert sorted(p.name for p in isolated_cache.iterdir() if not p.name.endswith(".lock")) == [path.name]


def test_entry_lock_is_reentrant_and_can_be_switched_off(isolated_cache, capsys):
    with cache.entry_lock("t", KEY) as path:
        assert path == cache.cache_path("t", KEY)
        assert cache.write_arrays("t", KEY, _arrays()) == path  # write_arrays takes the same lock: no deadlock
    with cache.entry_lock("t", KEY, enabled=False):
        pass
    assert capsys.readouterr().out == ""  # nobody else held it: no waiting line


def test_entry_lock_without_a_writable_directory_runs_unlocked(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("MIXLIB_CACHE", str(blocker / "sub"))
    ran = False
    with cache.entry_lock("t", KEY):
        ran = True
    assert ran
