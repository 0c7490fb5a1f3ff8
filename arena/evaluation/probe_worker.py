"""One exploitability probe, run where the probe service puts it: a spawned process or a Ray task.

The probe must never take CPU from the rated ladder beyond its one core, so before
torch is imported here the worker limits every thread pool to one thread and lowers
its scheduling priority (``nice``, by ``ARENA_PROBE_NICENESS``: 10 unless configured):
on a busy machine the ladder's workers win the CPU.
Imports are inside the functions so that a spawned process reads this module without
loading torch before the limits are set.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
NICENESS = 10

ProbeJob = dict[str, Any]
"""``probe_id``, ``env_id``, ``budget_env_steps``, ``eval_games``, ``seed``, ``max_bytes``,
``niceness`` (optional, :data:`NICENESS` if absent) and the target: ``builtin`` (its
catalog key), ``weights`` (snapshot bytes) with ``spec``, or ``connected`` (a connected
agent's id) with its ``key``, ``redis_url`` and key ``prefix``."""


def limit_resources(niceness: int = NICENESS) -> None:
    """One thread for every math library, priority ``niceness`` below the ladder's."""
    for name in THREAD_VARIABLES:
        os.environ[name] = "1"
    try:
        os.nice(niceness)
    except OSError:  # not permitted: the thread limit still holds
        pass
    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set in this process (a reused Ray worker)
        pass


def run_probe(job: ProbeJob, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Train the exploiter and evaluate it; returns ``ProbeResult.to_dict()``."""
    limit_resources(job.get("niceness", NICENESS))
    from agents.catalog import make_policy
    from agents.trainers.exploit_probe import ProbeConfig, probe_exploitability
    from arena.snapshots.cache import snapshot_policy

    env_id = job["env_id"]
    if "builtin" in job:
        target = make_policy(job["builtin"], env_id)
    elif "connected" in job:  # its owner asked: every decision goes to the owner's client
        from arena.connected.policy import ConnectedPolicies
        from arena.runners import AgentSource

        target = ActionsOnly(ConnectedPolicies(job["redis_url"], job["prefix"]).get(
            env_id, AgentSource(key=job["key"], connected=job["connected"])))
    else:
        target = snapshot_policy(job["weights"], job["spec"], device="cpu", temperature=1.0,
                                 time_limit_s=job.get("time_limit_s", 5.0), max_bytes=job["max_bytes"])
    config = ProbeConfig(budget_env_steps=job["budget_env_steps"], eval_games=job["eval_games"], seed=job["seed"])
    return probe_exploitability(env_id, target, config, progress).to_dict()


class ActionsOnly:
    """A policy that judges its rows itself (a connected agent), as plain actions: a row it
    forfeited (timeout, disconnected, invalid) becomes ``-1``, which the probe counts as a loss."""

    def __init__(self, policy: Any) -> None:
        self.policy, self.agent_id, self.weights_hash = policy, policy.agent_id, None

    def act(self, obs: Any, mask: Any, rng: Any) -> Any:
        import numpy as np

        from arena.engine.guard import ILLEGAL, OK

        res = self.policy.act(obs, mask, rng)
        return np.where((res.codes == OK) | (res.codes == ILLEGAL), res.actions, -1)


def _exit_with_parent(parent_pid: int, every_s: float = 1.0) -> None:
    """End this process once its parent is gone (a SIGKILLed server must not leave probes running)."""
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def probe_process_main(job: ProbeJob, messages: Any) -> None:
    """Entry point of a spawned probe process: progress and the outcome go to ``messages``."""
    if "parent_pid" in job:
        _exit_with_parent(job["parent_pid"])
    probe_id = job["probe_id"]
    try:
        result = run_probe(job, lambda done, planned: messages.put(("progress", probe_id, done)))
    except BaseException as exc:  # noqa: BLE001 - every failure is reported as the probe's error
        messages.put(("failed", probe_id, f"{type(exc).__name__}: {exc}"))
    else:
        messages.put(("done", probe_id, result))


def run_probe_task(job: ProbeJob) -> dict[str, Any]:
    """Body of the Ray task (see :class:`arena.evaluation.probes.RayProbeBackend`)."""
    return run_probe(job)
