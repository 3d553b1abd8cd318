"""``python -m piece_by_piece_serialize`` runs the ``pbp-serialize`` command line."""

from .cli import main

raise SystemExit(main())
