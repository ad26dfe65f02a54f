"""``python -m mixlib ...`` runs the command-line interface (see :mod:`mixlib.cli`)."""

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
raise SystemExit(code)
