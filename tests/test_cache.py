"""The on-disk cache (mixlib.cache): round trip, atomicity, corrupted and foreign files."""

from __future__ import annotations

import os
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
    # no temporary files left behind
    assert [p.name for p in isolated_cache.iterdir()] == [path.name]
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
