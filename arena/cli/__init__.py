"""The ``arena`` command line. Output goes through rich; work is done by the library.

Commands live in one module per concept and register themselves on :data:`app`:
:mod:`~arena.cli.matches` (play, replay, demo, envs), :mod:`~arena.cli.operate`
(serve, ladder, leaderboard, ratings, db), :mod:`~arena.cli.remote` (user, agent,
submit, challenge, matches against a server), :mod:`~arena.cli.leagues` (league) and
:mod:`~arena.cli.connect` (connect: play your own code as a connected agent),
:mod:`~arena.cli.competitions` (competition: seasons, teams, entries, standings, verify),
:mod:`~arena.cli.tournaments` (tournament: create, list, show) and
:mod:`~arena.cli.doctor` (doctor: what this machine gives the ONNX sandbox).
"""

from __future__ import annotations

import atexit
import gc
import logging
import sys

import typer

from arena.cli import competitions, connect, doctor, leagues, matches, operate, remote, tournaments

app = typer.Typer(help="Arena: multi-agent self-play matches, ladders and leagues.", no_args_is_help=True)
for module in (matches, operate, remote, competitions, tournaments, leagues, connect, doctor):
    module.register(app)


def main() -> None:
    # The interpreter's exit runs full garbage collections over everything still alive (torch,
    # SQLAlchemy, the app: millions of objects): 1-2 s at the end of every command on a busy
    # 2-core machine, 0.4 s once they are frozen, as the collector skips frozen objects.
    # Registered first, so it runs last: every other exit handler (Ray's, logging's) runs as
    # before; only cyclic garbage still around at exit goes uncollected, for the OS to reclaim.
    atexit.register(gc.freeze)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app()


if __name__ == "__main__":
    sys.exit(main())
