"""What every benchmark script shares: its ``--smoke`` mode and its printed table.

A smoke run takes seconds and tiny sizes; the suite runs it so no script can rot. A script declares its
own flags, then :func:`parse_with_smoke` adds ``--smoke`` and parses: with it, the script's smoke sizes
replace the flags they name. :func:`print_rows` prints the table of label and value lines that comes
before the script's last line, its JSON.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any


def parse_with_smoke(parser: argparse.ArgumentParser, smoke_help: str, **smoke_sizes: Any) -> argparse.Namespace:
    """The parsed command line, ``--smoke`` (described by ``smoke_help``) included.

    Args:
        parser: the script's parser, its own flags added.
        smoke_help: what ``--smoke`` runs, for ``--help``.
        **smoke_sizes: flag destination -> its value in a smoke run (e.g. ``seconds=2.0``).
    """
    parser.add_argument("--smoke", action="store_true", help=smoke_help)
    args = parser.parse_args()
    if args.smoke:
        for name, value in smoke_sizes.items():
            setattr(args, name, value)
    return args


def print_rows(label_width: int, rows: Iterable[tuple[str, object]]) -> None:
    """Prints a benchmark's table before its JSON line: each ``(label, value)`` on a line, the label
    left-aligned in ``label_width`` columns and the value as given (formatted by the caller)."""
    for label, value in rows:
        print(f"{label:<{label_width}}{value}")
