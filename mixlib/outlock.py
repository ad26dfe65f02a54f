"""One lock per output folder, kept beside the folder itself.

Every command of ``python -m mixlib`` that writes into ``--out`` holds the
lock of that folder from before the model loads until its files are in
place. The lock is a file next to the folder, ``.<name>.mixlib-lock`` in its
parent, found from the folder's real path (symbolic links followed), so two
runs see each other whatever their ``MIXLIB_CACHE``, their user or the link
they came through.

* A command that replaces the folder (``mixing``, ``merge`` ...) holds it
  **exclusively**: any other writer of the folder is refused in one line.
* ``stream-mixing`` holds it **shared**: several shards write into one folder
  side by side, and a replacing command is refused while any of them runs.

The lock is ``flock(2)``, which the operating system drops when a process
dies, however it dies. The last holder removes the lock file on release; a
process that finds the file removed under it locks the new one instead, so
no two writers ever hold locks on different files of the same name.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["OutLock", "Busy", "lock_path"]

SUFFIX = ".mixlib-lock"


class Busy(OSError):
    """Another process holds the folder's lock."""


def lock_path(out: str | os.PathLike) -> Path:
    """The lock file of the output folder ``out`` (a real path): ``.<name>.mixlib-lock`` beside it."""
    out = Path(out)
    return out.parent / f".{out.name}{SUFFIX}"


def _same_file(path: Path, fd: int) -> bool:
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    there = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


class OutLock:
    """Hold the lock of the output folder ``out``; raises :class:`Busy` at once when another process holds it.

    ``out`` must be a real path (no symbolic links) whose parent exists. ``shared=True`` is for writers that
    add to the folder side by side (the shards of ``stream-mixing``).
    """

    def __init__(self, out: str | os.PathLike, *, shared: bool = False) -> None:
        import fcntl

        self.path = lock_path(out)
        self.shared = shared
        mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, mode)
            except BlockingIOError:
                stale = not _same_file(self.path, fd)  # its last holder removed it meanwhile: try the new one
                os.close(fd)
                if stale:
                    continue
                raise Busy(f"{self.path.parent / self.path.name[1:-len(SUFFIX)]} is being written by another "
                           "python -m mixlib run now") from None
            except BaseException:
                os.close(fd)
                raise
            if _same_file(self.path, fd):
                self.fd: int | None = fd
                return
            os.close(fd)

    def alone(self) -> bool:
        """Whether no other process holds the lock now; if so, this one holds it exclusively from here on."""
        import fcntl

        if self.fd is None:
            return False
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def release(self) -> None:
        """Let the lock go; the last holder removes the lock file."""
        fd = self.fd
        if fd is None:
            return
        try:
            if self.alone():  # nobody else can be using the file: remove it
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass
            # else another shard still holds it; it removes the file when it is done
        finally:
            self.fd = None
            os.close(fd)

    def __enter__(self) -> "OutLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
