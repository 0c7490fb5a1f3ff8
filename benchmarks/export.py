"""Dataset export throughput: matches/s from the SQL match log to Parquet, naive and batched, in one run.

A fresh SQLite database gets ``--matches`` rated connect-four matches from a ladder of
Arena's scripted agents (what ``arena serve`` records). Then, from the same log, to the
same Parquet tables (steps, matches, agents):

(a) naive: every match re-simulated on its own through the PettingZoo env (reset, then
    observe and step per recorded action: what ``arena replay`` does), on the first
    ``--naive-matches`` matches;
(b) ours: ``arena export`` (:func:`arena.datasets.export_board`): pages of the log read
    as columns with the actions parsed by numpy, every match of a chunk re-simulated at
    once on the vectorized core, rows written as Arrow arrays.

Both include reading the log and writing the files; matches/s counts matches of the log.

    python benchmarks/export.py [--matches 20000] [--naive-matches 2000] [--smoke]

Prints a table, then one JSON line with ``batched_matches_per_s``, ``naive_matches_per_s``,
``ratio``, ``matches``, ``steps``, ``env``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
if sys.path and Path(sys.path[0]).resolve() == _ROOT / "benchmarks":
    sys.path[0] = str(_ROOT)  # benchmarks/league.py (and gym.py) would shadow the packages of those names

from rich.console import Console
from rich.table import Table

from arena.datasets import export_board
from arena.ladder.dispatch import LadderConfig, open_ladder
from arena.runners import AgentSource, InProcessRunner
from arena.storage.db import make_engine, session_factory, upgrade
from benchmarks.support.smoke import parse_with_smoke

AGENTS = ("heuristic", "heuristic:epsilon=0.1", "heuristic:epsilon=0.3", "heuristic:epsilon=0.6", "random")


def recorded_board(folder: Path, env_id: str, matches: int, seed: int):
    """Sessions on a new SQLite database holding ``matches`` recorded ladder matches of ``env_id``."""
    url = f"sqlite+pysqlite:///{folder / 'arena.sqlite3'}"
    upgrade(url)
    sessions = session_factory(make_engine(url))
    ladder = open_ladder(sessions, LadderConfig(env_id, batch_size=min(4096, matches), seed=seed))
    ladder.add_agents([AgentSource(key=k, builtin=k) for k in AGENTS])
    ladder.run(InProcessRunner(), matches)
    return sessions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="connect_four-v3")
    parser.add_argument("--matches", type=int, default=20000, help="Matches recorded and exported (ours).")
    parser.add_argument("--naive-matches", type=int, default=2000, help="Matches the naive export re-simulates.")
    parser.add_argument("--seed", type=int, default=0)
    args = parse_with_smoke(parser, "A few seconds: 300 matches, 100 naive.", matches=300, naive_matches=100)

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        sessions = recorded_board(folder, args.env, args.matches, args.seed)
        record_s = time.perf_counter() - start
        export_board(sessions, args.env, folder / "warm", limit=min(100, args.matches))  # imports, first calls
        ours = export_board(sessions, args.env, folder / "batched")
        naive = export_board(sessions, args.env, folder / "naive", limit=args.naive_matches, vectorized=False)
        size = sum(f.stat().st_size for f in (folder / "batched").iterdir())
        sessions.dispose()

    table = Table(title=f"{args.env}: export of recorded matches to Parquet (recorded in {record_s:.1f}s)")
    for col in ("export", "matches", "steps", "seconds", "matches/s"):
        table.add_column(col, justify="left" if col == "export" else "right")
    table.add_row("naive: per match through PettingZoo", f"{naive.matches:,}", f"{naive.steps:,}",
                  f"{naive.seconds:.2f}", f"{naive.matches_per_s:,.0f}")
    table.add_row("ours: batched on the vector core", f"{ours.matches:,}", f"{ours.steps:,}",
                  f"{ours.seconds:.2f}", f"{ours.matches_per_s:,.0f}")
    Console().print(table)
    print(json.dumps({"env": args.env, "matches": ours.matches, "steps": ours.steps, "bytes": size,
                      "batched_matches_per_s": round(ours.matches_per_s, 1),
                      "naive_matches_per_s": round(naive.matches_per_s, 1),
                      "ratio": round(ours.matches_per_s / naive.matches_per_s, 2), "smoke": args.smoke}))


if __name__ == "__main__":
    main()
