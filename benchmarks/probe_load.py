"""Does a running exploitability probe starve the rated ladder? Ladder throughput alone and beside a probe.

One run on one connect four ladder of scripted agents (SQLite, the in-process runner:
``arena serve --workers 0``'s set-up), ``--rounds`` rounds of three phases of
``--seconds`` each:

1. the ladder alone;
2. beside a probe run as the service runs it (:class:`arena.evaluation.probes.ProbeService`:
   a spawned process, one torch thread, ``nice 10``);
3. baseline: beside the same probe run the naive way - a thread of the server process
   with torch's default thread count, sharing the interpreter (GIL) with the ladder.

Rounds interleave the phases so that drift in a shared machine's load hits all three
alike. Reported per phase (mean over rounds): rated matches per second, and the probe's
env steps per second (a probe's time to start is not counted).

    python benchmarks/probe_load.py [--seconds 30] [--rounds 3] [--batch 500] [--smoke]

Prints a table, then one JSON line: ``env``, ``seconds_per_phase``, ``rounds``,
``batch``, ``cpus``, ``load_average``, ``ladder_alone_matches_per_s``,
``ladder_with_service_probe_matches_per_s``, ``ladder_with_naive_probe_matches_per_s``,
``service_probe_ratio``, ``naive_probe_ratio``, ``service_probe_env_steps_per_s``,
``naive_probe_env_steps_per_s``, ``per_round_matches_per_s``. ``--smoke``: one round of
1 s phases, batches of 50 (the suite's check that it runs, no numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == _ROOT / "benchmarks":
    sys.path[0] = str(_ROOT)  # benchmarks/league.py would shadow the league package

from agents.catalog import make_policy
from agents.trainers.exploit_probe import ProbeConfig, probe_exploitability
from arena.core.settings import Settings
from arena.evaluation.probe_backends import ProcessProbeBackend
from arena.evaluation.probes import ProbeService, queue_probe
from arena.ladder.dispatch import LadderConfig, open_ladder
from arena.runners import AgentSource, InProcessRunner
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services, open_services
from benchmarks.support.smoke import parse_with_smoke

ENV = "connect_four-v3"
AGENTS = ("heuristic", "heuristic:epsilon=0.3", "heuristic:epsilon=0.7", "random")
PROBE_BUDGET = 50_000_000  # longer than any phase: the probe runs throughout


class _Stop(Exception):
    pass


def ladder_rate(ladder, runner: InProcessRunner, seconds: float, batch: int) -> float:
    """Rated matches per second recorded over ``seconds`` (whole batches)."""
    start, played = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        played += ladder.run(runner, batch).recorded
    return played / (time.perf_counter() - start)


def probe_steps(services: Services, probe_id: int) -> int:
    with services.sessions() as session:
        return repo.get_probe(session, probe_id).env_steps


def with_service_probe(services: Services, ladder, runner, seconds: float, batch: int) -> tuple[float, float]:
    """Ladder rate beside a probe run by the ProbeService; and the probe's env steps/s."""
    with services.sessions.begin() as session:
        target = repo.get_agent_by_key(session, ENV, "heuristic").id
    probe, _ = queue_probe(services, target, "benchmark", budget_env_steps=PROBE_BUDGET, may_exceed_budget=True)
    service = ProbeService(services, ProcessProbeBackend(), poll_s=0.2).start()
    try:
        while probe_steps(services, probe.id) == 0:  # past the process's start-up and imports
            time.sleep(0.2)
        steps0, t0 = probe_steps(services, probe.id), time.perf_counter()
        rate = ladder_rate(ladder, runner, seconds, batch)
        steps = (probe_steps(services, probe.id) - steps0) / (time.perf_counter() - t0)
    finally:
        service.stop()
    return rate, steps


def with_thread_probe(ladder, runner, seconds: float, batch: int) -> tuple[float, float]:
    """Ladder rate beside the naive probe: a thread of this process, torch's default threads."""
    done = [0]
    stop = threading.Event()

    def progress(steps: int, _planned: int) -> None:
        done[0] = steps
        if stop.is_set():
            raise _Stop

    def run() -> None:
        try:
            probe_exploitability(ENV, make_policy("heuristic", ENV),
                                 ProbeConfig(budget_env_steps=PROBE_BUDGET, eval_games=2), progress)
        except _Stop:
            pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    while done[0] == 0:
        time.sleep(0.2)
    steps0, t0 = done[0], time.perf_counter()
    rate = ladder_rate(ladder, runner, seconds, batch)
    steps = (done[0] - steps0) / (time.perf_counter() - t0)
    stop.set()
    thread.join()
    return rate, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each phase")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three phases")
    parser.add_argument("--batch", type=int, default=500, help="matches per ladder batch")
    args = parse_with_smoke(parser, "tiny sizes, seconds: checks that it runs", seconds=1.0, rounds=1, batch=50)
    import torch

    phases: dict[str, list[tuple[float, float | None]]] = {"alone": [], "service": [], "naive": []}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp), probe_concurrency=1, probe_auto=False)
        with open_services(settings) as services:
            ladder = open_ladder(services.sessions, LadderConfig(ENV, batch_size=args.batch, seed=1))
            ladder.add_agents([AgentSource(key=k, builtin=k) for k in AGENTS])
            runner = InProcessRunner()
            ladder_rate(ladder, runner, min(5.0, args.seconds), args.batch)  # warm-up
            for _ in range(args.rounds):
                phases["alone"].append((ladder_rate(ladder, runner, args.seconds, args.batch), None))
                phases["service"].append(with_service_probe(services, ladder, runner, args.seconds, args.batch))
                phases["naive"].append(with_thread_probe(ladder, runner, args.seconds, args.batch))
            runner.close()
    mean = {k: sum(r for r, _ in v) / len(v) for k, v in phases.items()}
    steps = {k: sum(s or 0 for _, s in v) / len(v) for k, v in phases.items()}
    names = {"alone": "ladder alone", "service": "+ probe (service: process, 1 thread, nice 10)",
             "naive": "+ probe (naive: thread, default torch threads)"}
    print(f"connect four ladder, {len(AGENTS)} scripted agents, batches of {args.batch}, {args.rounds} rounds of "
          f"{args.seconds:g} s phases, {os.cpu_count()} CPUs, torch default threads {torch.get_num_threads()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'phase':<50}{'matches/s':>11}{'vs alone':>10}{'probe steps/s':>15}  per round")
    for key, name in names.items():
        rounds = " ".join(f"{r:.0f}" for r, _ in phases[key])
        probe = "" if key == "alone" else f"{steps[key]:.0f}"
        print(f"{name:<50}{mean[key]:>11.0f}{mean[key] / mean['alone']:>10.2f}{probe:>15}  {rounds}")
    print(json.dumps({
        "env": ENV, "seconds_per_phase": args.seconds, "rounds": args.rounds, "batch": args.batch,
        "cpus": os.cpu_count(), "load_average": round(os.getloadavg()[0], 1),
        "ladder_alone_matches_per_s": round(mean["alone"], 1),
        "ladder_with_service_probe_matches_per_s": round(mean["service"], 1),
        "ladder_with_naive_probe_matches_per_s": round(mean["naive"], 1),
        "service_probe_ratio": round(mean["service"] / mean["alone"], 3),
        "naive_probe_ratio": round(mean["naive"] / mean["alone"], 3),
        "service_probe_env_steps_per_s": round(steps["service"]), "naive_probe_env_steps_per_s": round(steps["naive"]),
        "per_round_matches_per_s": {k: [round(r, 1) for r, _ in v] for k, v in phases.items()},
    }))


if __name__ == "__main__":
    from benchmarks.support.signals import unwind_on_sigterm

    unwind_on_sigterm()  # a SIGTERM cleans up as a Ctrl-C does: no server or client left running
    main()
