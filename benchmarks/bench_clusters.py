"""Benchmark: k-means of the whole vocabulary, first computation vs. cached reload.

``mixlib.cluster_vocab`` on the packaged all-MiniLM-L6-v2 (30,522 x 384 word
embeddings) with the paper's k=1000: the time of the first computation
(scikit-learn KMeans, written to the cache) and of a second call that loads the
cached result (target < 1 s), with the reload split into its parts (hashing
the embedding matrix for the key, reading the .npz, rebuilding the types).
Then chapter 11's null baselines (100 cluster permutations, 200 random token
sets) and one cheap extra stability seed (``init="random"``, ``max_iter=10``)
with its ratio to the full k-means.

A fresh temporary cache directory is used unless ``--keep`` is given, so the
first call really computes (and the user's cache is not touched).

Usage::

    python benchmarks/bench_clusters.py            # k=1000 (one to a few minutes on 2 cores)
    python benchmarks/bench_clusters.py --quick    # k=100
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


KMEANS_THREADS_DEFAULT = 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="k=100 instead of 1000")
    ap.add_argument("--k", type=int, default=None, help="number of clusters (default 1000, or 100 with --quick)")
    ap.add_argument("--model", default="all-MiniLM-L6-v2", help="encoder name (default: the packaged model)")
    ap.add_argument("--threads", type=int, default=KMEANS_THREADS_DEFAULT,
                    help="k-means threads (default 1, as cluster_vocab; 0 = scikit-learn's default, all cores)")
    ap.add_argument("--keep", action="store_true", help="use the real cache directory ($MIXLIB_CACHE or the user cache)")
    ap.add_argument("--no-nulls", action="store_true", help="skip the null baselines and the extra stability seed")
    args = ap.parse_args()
    k = args.k or (100 if args.quick else 1000)
    threads = None if args.threads == 0 else args.threads

    tmp = None
    if not args.keep:
        tmp = tempfile.TemporaryDirectory(prefix="mixlib-bench-")
        os.environ["MIXLIB_CACHE"] = tmp.name

    import numpy as np

    import mixlib
    from mixlib import cache
    from mixlib.clusters import KMEANS_MAX_ITER, KMEANS_N_INIT, _kmeans_key

    enc = mixlib.load_encoder(args.model, device="cpu")
    print(f"model: {enc.describe()}  vocabulary {enc.vocab_size} x {enc.d_model}, k={k}, threads={threads or 'all'}")
    print(f"cache directory: {cache.cache_dir()}")

    t0 = time.perf_counter()
    first = mixlib.cluster_vocab(enc, k=k, seed=0, threads=threads)
    t_first = time.perf_counter() - t0
    how = "loaded from an existing cache file" if first.from_cache else f"{first.n_iter} Lloyd iterations"
    print(f"first call:  {t_first:7.2f} s  ({how}; KMeans itself {first.seconds:.2f} s, inertia {first.inertia:.1f})")

    t0 = time.perf_counter()
    second = mixlib.cluster_vocab(enc, k=k, seed=0, threads=threads)
    t_second = time.perf_counter() - t0
    assert second.from_cache and np.array_equal(second.labels, first.labels)
    print(f"second call: {t_second:7.3f} s  (from cache; target < 1 s)  -> {t_first / t_second:.0f}x faster")

    # where the reload time goes
    E = np.ascontiguousarray(enc.word_embeddings().numpy(), dtype=np.float32)
    t0 = time.perf_counter()
    key = _kmeans_key(enc.name, E, k, 0, KMEANS_N_INIT, KMEANS_MAX_ITER, threads)
    t_key = time.perf_counter() - t0
    t0 = time.perf_counter()
    cache.read_arrays("clusters", key, {"labels": ((None,), "iu"), "centroids": ((k, None), "f")})
    t_read = time.perf_counter() - t0
    print(f"  of which: key (SHA-256 of the {E.nbytes / 2**20:.0f} MiB embedding matrix) {t_key:.3f} s, "
          f"reading the .npz {t_read:.3f} s, the rest (token types, distances) {max(t_second - t_key - t_read, 0):.3f} s")
    print(f"cache file: {cache.cache_path('clusters', key).stat().st_size / 2**20:.1f} MiB")

    if not args.no_nulls:
        # chapter 11's null baselines and cheap stability seeds, on the clustering above
        psi = mixlib.normalize_stretch(mixlib.norm_stretch(enc), enc)
        t0 = time.perf_counter()
        mixlib.cluster_permutation_null(psi, first, n_perm=100, seed=0)
        t_perm = time.perf_counter() - t0
        vocab = enc.tokenizer.get_vocab()
        years = [i for t, i in vocab.items() if t.isdigit() and len(t) == 4]
        t0 = time.perf_counter()
        mixlib.feature_null(psi, years, n_draws=200, seed=0, relative=True)
        t_feat = time.perf_counter() - t0
        t0 = time.perf_counter()
        extra = mixlib.cluster_vocab(enc, k=k, seed=1, threads=threads, init="random", max_iter=10, cache=False)
        t_extra = time.perf_counter() - t0
        print(f"cluster_permutation_null, 100 permutations of {psi.shape[0] * psi.shape[1]} heads: {t_perm:.2f} s")
        print(f"feature_null, {len(years)} tokens, 200 draws: {t_feat:.2f} s")
        ref = first.seconds if first.seconds > 0 else float("nan")  # a cached result keeps the time it took
        print(f"one extra stability seed (init='random', max_iter=10): {t_extra:.1f} s "
              f"({extra.n_iter} iterations; ratio to the full k-means {t_extra / ref:.2f})")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
