"""Headline: what `arena serve` costs left alone after its demo boards have settled.

Starts the real ``arena serve`` (embedded defaults: SQLite and the embedded Redis
server under a temporary ``ARENA_DATA_DIR``, demo agents seeded, matches played in the
server process with ``--workers 0``) twice in one run:

* **ours**: the default pacing: unsettled boards play at full rate, settled ones only
  their drift checks (``ARENA_TRICKLE_MATCHES_PER_S``, default 0: no maintenance trickle);
* **baseline**: ``ARENA_LADDER_SETTLE=false``, the old behaviour: every ladder plays flat
  out forever (capped by ``--max-rate`` as ``arena serve`` always was).

Each waits until its boards have settled (ours: over ``--settle-window`` seconds every
env played at most the trickle plus one trickle batch; the baseline never settles, so it
waits as long as ours took), then measures over ``--window`` seconds: the CPU time of the
service's whole process tree (the server and its embedded Redis, from ``/proc``; Linux
only) as a share of one core, and the growth of the database files (``arena.db`` with
its WAL: pages in use, and the files), extrapolated to an hour. Goal: under 10% of one core and 20 MB/hour.

Run: ``python benchmarks/idle.py [--window 180] [--baseline-window S] [--smoke]`` (``taskset -c 0`` to pin it to
one core); the last line is JSON: ``cpu_share_settled``, ``db_growth_mb_per_hour``,
``file_growth_mb_per_hour``, ``matches_per_s_settled``, ``settled``, ``settle_s``,
``baseline_cpu_share``, ``baseline_db_growth_mb_per_hour``,
``baseline_file_growth_mb_per_hour``, ``baseline_matches_per_s``, ``window_s``, ``baseline_window_s``,
``trickle_matches_per_s``, ``cpus``, ``affinity``. ``--smoke``: both servers measured
for 1 s without waiting for the boards to settle (the suite's check that it runs).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

# Lets the script run from a checkout without installing the project.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from arena.storage.redis_server import free_port

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
TRICKLE_BATCH = 16  # arena.ladder.pacing.PacingConfig.trickle_batch


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU seconds of ``root`` and every live descendant (from ``/proc``)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        fields = stat[stat.rindex(")") + 2:].split()
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        times[pid] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent and p not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(times.get(p, 0.0) for p in tree)


def file_bytes(data_dir: Path) -> int:
    """Size of the SQLite database files with the write-ahead log (which wraps at each checkpoint)."""
    return sum(p.stat().st_size for p in data_dir.glob("arena.db*") if p.is_file())


def db_bytes(data_dir: Path) -> int:
    """Bytes of the database's pages in use (the WAL's latest pages included, free pages not).

    The files themselves grow in steps (the WAL is reused after each checkpoint and the
    main file grows when it is checkpointed), which is noise over a window of minutes.
    """
    with sqlite3.connect(f"file:{data_dir / 'arena.db'}?mode=ro", uri=True, timeout=10) as db:
        pages, free, size = (db.execute(f"PRAGMA {p}").fetchone()[0]
                             for p in ("page_count", "freelist_count", "page_size"))
    return (pages - free) * size


def rated_counts(data_dir: Path) -> dict[str, int]:
    """Rated matches per env so far (read-only; 0 before the schema exists)."""
    try:
        with sqlite3.connect(f"file:{data_dir / 'arena.db'}?mode=ro", uri=True, timeout=10) as db:
            rows = db.execute("SELECT env_id, count(*) FROM matches WHERE rated GROUP BY env_id").fetchall()
    except sqlite3.Error:
        return {}
    return dict(rows)


@dataclass
class Measured:
    mode: str
    settled: bool
    settle_s: float
    matches_before: int
    cpu_share: float
    db_growth_mb_per_hour: float
    file_growth_mb_per_hour: float
    matches_per_s: float


def start(data_dir: Path, settle: bool, trickle: float, max_rate: float) -> subprocess.Popen:
    env = {**os.environ, "ARENA_DATA_DIR": str(data_dir), "ARENA_LADDER_SETTLE": str(settle).lower(),
           "ARENA_TRICKLE_MATCHES_PER_S": str(trickle), "ARENA_LOG_LEVEL": "WARNING",
           "PYTHONPATH": str(ROOT)}
    for name in ("ARENA_DATABASE_URL", "ARENA_REDIS_URL", "ARENA_RAY_ADDRESS"):
        env.pop(name, None)  # embedded defaults
    cmd = [sys.executable, "-m", "arena.cli", "serve", "--workers", "0", "--port", str(free_port()),
           "--max-rate", str(max_rate)]
    return subprocess.Popen(cmd, env=env, cwd=data_dir, stdout=subprocess.DEVNULL,
                            stderr=open(data_dir / "serve.log", "w"))


def wait_for_database(data_dir: Path, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    """Wait until the server has created its database (measuring needs its pages)."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"arena serve exited with {proc.returncode}; see {data_dir / 'serve.log'}")
        try:
            db_bytes(data_dir)
            return
        except sqlite3.Error:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def wait_settled(data_dir: Path, proc: subprocess.Popen, trickle: float, window: float, timeout: float,
                 console: Console) -> tuple[bool, float]:
    """Wait until every env played at most the trickle (+ two batches; nothing without a
    trickle) over ``window`` seconds."""
    start_t = time.monotonic()
    history: list[tuple[float, dict[str, int]]] = []
    while time.monotonic() - start_t < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"arena serve exited with {proc.returncode}; see {data_dir / 'serve.log'}")
        now, counts = time.monotonic(), rated_counts(data_dir)
        history.append((now, counts))
        old = [(t, c) for t, c in history if now - t >= window]
        if old and counts:
            t0, c0 = old[-1]
            # With a trickle, its batches; without one a settled board plays nothing (a slow
            # env's full rate can be as low as a trickle's: hide-and-seek plays ~1 match/s).
            limit = trickle * (now - t0) + 2 * TRICKLE_BATCH if trickle > 0 else 0
            rates = {e: n - c0.get(e, 0) for e, n in counts.items()}
            console.log(f"settling: matches in the last {now - t0:.0f} s {rates} (settled at <= {limit:.0f})")
            if len(counts) >= 2 and all(d <= limit for d in rates.values()):
                return True, now - start_t
        time.sleep(min(5.0, max(0.0, timeout - (time.monotonic() - start_t))))
    return False, time.monotonic() - start_t


def measure(mode: str, settle: bool, args: argparse.Namespace, console: Console,
            wait_s: float | None = None) -> Measured:
    with tempfile.TemporaryDirectory(prefix=f"arena-idle-{mode}-") as tmp:
        data_dir = Path(tmp)
        proc = start(data_dir, settle, args.trickle, args.max_rate)
        try:
            if wait_s is None:
                settled, settle_s = wait_settled(data_dir, proc, args.trickle, args.settle_window,
                                                 args.settle_timeout, console)
            else:
                time.sleep(wait_s)
                settled, settle_s = False, wait_s
            wait_for_database(data_dir, proc)
            before = sum(rated_counts(data_dir).values())
            window = args.window if settle or args.baseline_window is None else args.baseline_window
            console.log(f"{mode}: measuring {window:.0f} s after {settle_s:.0f} s ({before} matches so far)")
            cpu0, db0, f0, t0 = tree_cpu_seconds(proc.pid), db_bytes(data_dir), file_bytes(data_dir), time.monotonic()
            time.sleep(window)
            cpu1, db1, f1, t1 = tree_cpu_seconds(proc.pid), db_bytes(data_dir), file_bytes(data_dir), time.monotonic()
            after = sum(rated_counts(data_dir).values())
        finally:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    elapsed = t1 - t0
    return Measured(mode, settled, settle_s, before, (cpu1 - cpu0) / elapsed,
                    (db1 - db0) / 1e6 / elapsed * 3600.0, (f1 - f0) / 1e6 / elapsed * 3600.0,
                    (after - before) / elapsed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=180.0, help="seconds measured after settling")
    parser.add_argument("--baseline-window", type=float, default=None,
                        help="seconds the baseline is measured (default: --window); it never settles, so "
                             "a long window (30 minutes, drift checks included) need not be spent on it")
    parser.add_argument("--trickle", type=float, default=0.0, help="ARENA_TRICKLE_MATCHES_PER_S")
    parser.add_argument("--max-rate", type=float, default=2000.0, help="arena serve --max-rate (both modes)")
    parser.add_argument("--settle-window", type=float, default=30.0)
    parser.add_argument("--settle-timeout", type=float, default=900.0)
    parser.add_argument("--smoke", action="store_true", help="seconds, no settling: checks that it runs")
    args = parser.parse_args()
    if args.smoke:
        args.window, args.settle_window, args.settle_timeout = 1.0, 1.0, 0.5
    console = Console(stderr=True)
    ours = measure("ours", True, args, console)
    baseline = measure("baseline", False, args, console, wait_s=ours.settle_s)
    table = Table(title=f"`arena serve` after its boards settled, measured over {args.window:.0f} s")
    for col in ("mode", "settled", "waited s", "matches before", "CPU (share of one core)", "DB MB/hour",
                "files MB/hour", "matches/s"):
        table.add_column(col, justify="right")
    for m in (ours, baseline):
        table.add_row(m.mode, "yes" if m.settled else "no", f"{m.settle_s:.0f}", str(m.matches_before),
                      f"{100 * m.cpu_share:.1f}%", f"{m.db_growth_mb_per_hour:.1f}",
                      f"{m.file_growth_mb_per_hour:.1f}", f"{m.matches_per_s:.1f}")
    Console().print(table)
    print(json.dumps({
        "cpu_share_settled": round(ours.cpu_share, 4),
        "db_growth_mb_per_hour": round(ours.db_growth_mb_per_hour, 2),
        "file_growth_mb_per_hour": round(ours.file_growth_mb_per_hour, 2),
        "matches_per_s_settled": round(ours.matches_per_s, 2),
        "settled": ours.settled, "settle_s": round(ours.settle_s, 1),
        "baseline_cpu_share": round(baseline.cpu_share, 4),
        "baseline_db_growth_mb_per_hour": round(baseline.db_growth_mb_per_hour, 2),
        "baseline_file_growth_mb_per_hour": round(baseline.file_growth_mb_per_hour, 2),
        "baseline_matches_per_s": round(baseline.matches_per_s, 2),
        "window_s": args.window, "baseline_window_s": args.baseline_window or args.window,
        "trickle_matches_per_s": args.trickle, "cpus": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
    }))


if __name__ == "__main__":
    from benchmarks.support.signals import unwind_on_sigterm

    unwind_on_sigterm()  # a SIGTERM cleans up as a Ctrl-C does: no server or client left running
    main()
