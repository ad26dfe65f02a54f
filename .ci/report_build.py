"""Print how long each notebook took to execute in the last `make book`, slowest first.

The times come from the jupyter-cache database (the ``execution_seconds`` that
jupyter-cache records for every cached execution). Usage::

    python .ci/report_build.py [CACHE_DIR]      # default: .jupyter_cache
"""

from __future__ import annotations

import sys
from pathlib import Path


def execution_times(cache_dir: Path) -> list[tuple[str, float]]:
    """(notebook path relative to the repository, seconds) for every cached notebook, slowest first."""
    from jupyter_cache import get_cache

    if not cache_dir.is_dir():
        raise FileNotFoundError(f"{cache_dir} does not exist: run `make book` first (it creates the execution cache).")
    cache = get_cache(str(cache_dir))
    root = Path.cwd().resolve()
    rows = []
    for record in cache.list_cache_records():
        seconds = (record.data or {}).get("execution_seconds")
        if seconds is None:
            continue
        uri = Path(record.uri)
        try:
            uri = uri.resolve().relative_to(root)
        except ValueError:
            pass
        rows.append((str(uri), float(seconds)))
    # one row per notebook: the latest record wins (older records of edited notebooks may linger)
    latest: dict[str, float] = {}
    for uri, seconds in rows:
        latest[uri] = seconds
    return sorted(latest.items(), key=lambda r: -r[1])


def main(argv: list[str]) -> int:
    cache_dir = Path(argv[1] if len(argv) > 1 else ".jupyter_cache")
    try:
        times = execution_times(cache_dir)
    except FileNotFoundError as err:
        print(err)
        return 1
    if not times:
        print("No executed notebooks in the cache.")
        return 0
    print("Notebook execution times (jupyter-cache, full mode):")
    for uri, seconds in times:
        print(f"  {seconds:8.1f} s  {uri}")
    print(f"  {sum(s for _, s in times):8.1f} s  in all (summed: make book runs two at a time); slowest: {times[0][0]} ({times[0][1]:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
