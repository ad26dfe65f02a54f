"""``python -m mixlib ...`` runs the command-line interface (see :mod:`mixlib.cli`)."""

from .cli import main

raise SystemExit(main())
