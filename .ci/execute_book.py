"""Execute the book's notebooks into its jupyter-cache, two at a time, before `make book` builds the site.

myst-nb (``execute_notebooks: cache``) executes a notebook that is not in the cache while Sphinx reads it, one
after another. Most chapters keep one core busy (chapter 7: 145 s of CPU in 147 s; chapter 10: 150 s in 114 s),
so on two cores a clean build spent about half the machine. This does what myst-nb's cache mode does for each
notebook (``myst_nb.core.execute.cache``: read it as myst-nb reads an ``.ipynb``, match it in the cache, else
execute it with jupyter-cache's ``single_nb_execution`` in its own folder and store the bundle), with
``--jobs`` notebooks at once; the build then finds every one in the cache and executes nothing.

* Longest first: the order of the cache's last recorded run times where there are some, else file size.
* With more than one job each kernel gets one thread (``OMP_NUM_THREADS=1``): two kernels that each start a
  thread per core would fight over the cores.
* A notebook that fails is reported with its error and not cached; the script then exits 1 (the build would
  execute it again and fail the same way). Nothing else is written.

Usage::

    python .ci/execute_book.py [--jobs 2] [--root .]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

HERE = Path(__file__).resolve().parent


def book_notebooks(root: Path) -> list[Path]:
    """The ``.ipynb`` files the table of contents names, in its order."""
    from sphinx_external_toc.parsing import parse_toc_yaml

    site_map = parse_toc_yaml(root / "_toc.yml")
    return [root / f"{doc}.ipynb" for doc in site_map if (root / f"{doc}.ipynb").is_file()]


def settings(root: Path) -> dict:
    """The book's execution settings (``_config.yml``'s ``execute``), as myst-nb reads them."""
    import yaml

    execute = (yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8")) or {}).get("execute", {})
    if execute.get("execute_notebooks", "auto") != "cache":
        raise SystemExit(f"_config.yml executes notebooks with {execute.get('execute_notebooks')!r}, not 'cache': "
                         "nothing here would be reused")
    if execute.get("run_in_temp"):
        raise SystemExit("_config.yml sets run_in_temp: this script runs notebooks in their own folder only")
    return {"cache": root / execute.get("cache", ".jupyter_cache"), "timeout": execute.get("timeout", 30),
            "allow_errors": bool(execute.get("allow_errors", False))}


def _init(threads: int | None) -> None:
    sys.path.insert(0, str(HERE))
    import nbexec_fix  # the wake-up fix the build installs (.ci/build_book.py)

    nbexec_fix.install()
    if threads is not None:
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(threads)


def _execute(path: str, timeout: int, allow_errors: bool) -> tuple[str, str | None, str | None, float]:
    """In a worker: the executed notebook (JSON) or the error, and the seconds it took."""
    import nbformat
    from jupyter_cache.executors.utils import single_nb_execution
    from myst_nb.core.read import standard_nb_read

    nb = standard_nb_read(Path(path).read_text(encoding="utf-8"))
    result = single_nb_execution(nb, cwd=str(Path(path).parent), timeout=timeout, allow_errors=allow_errors,
                                 meta_override=True)
    if result.err is not None:
        return path, None, result.exc_string or repr(result.err), result.time
    return path, nbformat.writes(nb), None, result.time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=HERE.parent, help="the book's root (default: the repository)")
    parser.add_argument("--jobs", type=int, default=min(2, len(os.sched_getaffinity(0))),
                        help="notebooks executed at once (default: 2, or 1 on one core)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: give 1 or more")
    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    from myst_nb.core.read import standard_nb_read

    conf = settings(args.root)
    cache = get_cache(str(conf["cache"]))
    todo, last, notebooks = [], {}, book_notebooks(args.root)
    for record in cache.list_cache_records():
        last[record.uri] = (record.data or {}).get("execution_seconds") or 0
    for path in notebooks:
        nb = standard_nb_read(path.read_text(encoding="utf-8"))
        try:
            cache.match_cache_notebook(nb)
        except KeyError:
            todo.append(path)
    if not todo:
        print(f"execute_book: all {len(notebooks)} notebooks are in the cache")
        return 0
    todo.sort(key=lambda p: (last.get(str(p), 0), p.stat().st_size), reverse=True)
    print(f"execute_book: {len(todo)} of {len(notebooks)} notebooks to execute, {args.jobs} at a time: "
          f"{', '.join(p.stem for p in todo)}",
          flush=True)
    t0, failed = time.monotonic(), []
    with ProcessPoolExecutor(args.jobs, initializer=_init, initargs=(1 if args.jobs > 1 else None,)) as pool:
        futures = [pool.submit(_execute, str(p), conf["timeout"], conf["allow_errors"]) for p in todo]
        for future in as_completed(futures):
            path, text, error, seconds = future.result()
            name = Path(path).relative_to(args.root)
            if error is not None:
                failed.append(str(name))
                print(f"execute_book: {name} FAILED after {seconds:.0f} s:\n{error}", flush=True)
                continue
            stage = cache.add_nb_to_project(path)
            cache.cache_notebook_bundle(CacheBundleIn(nbformat.reads(text, as_version=4), stage.uri,
                                                      data={"execution_seconds": seconds}),
                                        check_validity=False, overwrite=True)
            print(f"execute_book: {name} executed in {seconds:.0f} s", flush=True)
    print(f"execute_book: {len(todo) - len(failed)} of {len(todo)} executed in {time.monotonic() - t0:.0f} s "
          f"({args.jobs} at a time)")
    if failed:
        print(f"execute_book: failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
