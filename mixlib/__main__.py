"""``python -m mixlib ...`` runs the command-line interface (see :mod:`mixlib.cli`)."""

import os
import signal
import sys

try:
    from .cli import main

    code = main()
except KeyboardInterrupt:  # Ctrl-C while Python imports the command line, before main() handles it
    print("\npython -m mixlib: interrupted; nothing was written.", file=sys.stderr)
    code = 130
for sig in (signal.SIGINT, signal.SIGTERM):  # the process is ending: a late Ctrl-C must not become a traceback
    signal.signal(sig, signal.SIG_IGN)
if code in (130, 143):
    # An interrupted run has already removed what it staged and said so. The interpreter's own shutdown is skipped:
    # with a forward pass stopped in the middle, a thread of torch's pool crashed it now and then ("Fatal Python
    # error: PyThreadState_Get ... finalizing", exit -6 instead of 143, once in tests/test_cli.py during a full make test).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
raise SystemExit(code)
