"""Work around a missed wake-up in notebook execution (jupyter_client + pyzmq asyncio).

The problem
-----------
nbclient waits for each cell's ``execute_reply`` with
``await kc.shell_channel.get_msg(timeout=T)``, i.e. ``socket.poll(T)`` on a
``zmq.asyncio`` socket. When a cell shows an ipywidgets Output widget
(``interact``, ``interactive_output``), nbclient's OutputWidget handler *sends*
comm messages on that same shell socket while the poll is pending. Now and then
the socket's edge-triggered file descriptor is consumed by that send and the
poll is never woken: the reply sits in the socket until the poll times out,
after which it is read and the cell "succeeds". With the book's per-cell
timeout (30 min) one such stall costs 30 minutes of build time.

Measured here (2026-11, nbclient 0.11.0, jupyter_client 8.10.0, pyzmq 27.3.0
and 26.4.0, ipykernel 7.4.0 and 6.31.0): a notebook of 12 ``interact`` cells
stalled on about 1 run in 4; the kernel had sent the reply 0.1 s after the
request. Notebooks without widgets never stalled (0 of 30).

The fix
-------
:func:`install` replaces ``AsyncZMQSocketChannel.get_msg`` with one that polls
in slices of :data:`SLICE` seconds until the same deadline. The semantics are
unchanged (a message is returned as soon as it is seen; ``Empty`` after
``timeout``), but a missed edge costs at most one slice. ``make book`` (via
.ci/build_book.py) and tests/test_notebooks.py install it.
"""

from __future__ import annotations

import time
from queue import Empty

#: seconds between re-polls of a socket whose wake-up may have been missed
SLICE = 0.5

_installed = False


def install() -> None:
    """Patch ``jupyter_client.channels.AsyncZMQSocketChannel.get_msg`` (idempotent).

    jupyter_client 7 (Colab's 7.4.9, ``make test-colab``) has the same asynchronous ``get_msg`` on
    ``ZMQSocketChannel``; that one is patched there.
    """
    global _installed
    if _installed:
        return
    import inspect

    from jupyter_client import channels

    AsyncZMQSocketChannel = getattr(channels, "AsyncZMQSocketChannel", None) or channels.ZMQSocketChannel
    original = AsyncZMQSocketChannel.get_msg
    if not inspect.iscoroutinefunction(original):
        raise RuntimeError(f"{AsyncZMQSocketChannel.__qualname__}.get_msg is not asynchronous in this jupyter_client: "
                           "the fix in .ci/nbexec_fix.py does not apply; check the missed wake-up again")

    async def get_msg(self, timeout: float | None = None):
        assert self.socket is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            step = SLICE if left is None else min(SLICE, left)
            if await self.socket.poll(int(step * 1000)):
                return await self._recv()
            if left is not None and left <= step:
                raise Empty

    get_msg.__doc__ = (original.__doc__ or "") + "\n\n(Polls in slices; see .ci/nbexec_fix.py.)"
    AsyncZMQSocketChannel.get_msg = get_msg  # type: ignore[method-assign]
    _installed = True
