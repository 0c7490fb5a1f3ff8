"""DeviceMatchEngine: the match engine with built-in board games played on a torch device.

An explicit class rather than a ``MatchEngine(device=...)`` flag: it *is* a
:class:`~arena.engine.MatchEngine` (same ``play``, same records, usable wherever one is),
and it falls back to the CPU path by itself for anything it cannot play on the device
(an env without a torch core, a policy without a device twin), so the CPU engine's
code and speed are untouched. See ``docs/gpu.md``.

Two ways to get results:

* :meth:`DeviceMatchEngine.play` - full records: every match's
  :class:`~arena.engine.records.MatchRecord`, exactly the CPU engine's for the same
  jobs (actions, scores, winner, termination, forfeit seat). Results and action logs
  leave the device once per batch, in bulk.
* :meth:`DeviceMatchEngine.summarize` - evaluation scale: per-line-up W/D/L and
  termination counts, plus the full records of a seeded sample of matches
  (:mod:`arena.engine.device_summary`). Only the counts and the sample leave the device.

Time budgets: only policies that cannot hang get device twins (registry networks and
the scripted baselines; see :mod:`agents.device_policies`), so the device path does
not time individual calls; everything else runs on the CPU path under its guard.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator

import numpy as np
import torch

from agents.device_policies import DevicePolicy, to_device_policy
from agents.device_rng import derive_seeds
from agents.neural import resolve_device
from agents.policy import Policy
from arena.engine import DEFAULT_TIME_BUDGET_S, MatchEngine
from arena.engine.board import _records
from arena.engine.device_loop import ERROR, INVALID, DeviceResults, play_on_device
from arena.engine.device_summary import MatchSummary, SummaryCounter, lineup_array, sampled
from arena.engine.plan import pairings
from arena.engine.records import TERMINATION_CODE, MatchJob, MatchRecord, Termination, gc_paused
from envs.device.boards import TorchBoardCore, make_torch_board_core
from envs.errors import UnknownAgent
from envs.registry import get_spec
from envs.spec import EnvSpec

ILLEGAL = TERMINATION_CODE[Termination.ILLEGAL_ACTION]


class DeviceMatchEngine(MatchEngine):
    """A :class:`MatchEngine` that plays built-in board games on ``device``.

    Args:
        device: ``"cuda"``, ``"cpu"`` or ``"auto"``.
        batch_size: Matches on the device at once (default 65,536 on a GPU, 8,192 on a CPU).
        compact_every: Drop finished matches every this many plies (default 1 on a
            CPU, 4 on a GPU; see :mod:`arena.engine.device_loop`).
        time_budget_s, env_workers: For the CPU fallback (see :class:`MatchEngine`).
    """

    def __init__(self, device: str | torch.device = "auto", *, batch_size: int | None = None,
                 compact_every: int | None = None,
                 time_budget_s: float | None = DEFAULT_TIME_BUDGET_S,
                 env_workers: int = 0) -> None:
        super().__init__(time_budget_s=time_budget_s, env_workers=env_workers)
        self.device = resolve_device(device)
        on_cpu = self.device.type == "cpu"
        self.batch_size = batch_size or (8192 if on_cpu else 65536)
        self.compact_every = compact_every or (1 if on_cpu else 4)
        self._twins: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def device_policies(self, agents: list[str], policies: dict[str, Policy]) -> list[DevicePolicy] | None:
        """Device twins of ``agents`` (cached per policy object), or ``None`` if one has none."""
        out = []
        for a in agents:
            if a not in policies:
                raise UnknownAgent(f"no policy given for agent(s) {[a]}")
            policy = policies[a]
            twin = self._twins.get(policy)
            if twin is None:
                try:
                    twin = to_device_policy(policy, self.device)
                except TypeError:
                    return None
                self._twins[policy] = twin
            out.append(twin)
        return out

    def _setup(self, env_id: str, agents: list[str], policies: dict[str, Policy]):
        core = make_torch_board_core(env_id, self.device)
        twins = self.device_policies(agents, policies) if core is not None else None
        return (core, twins) if twins is not None else (None, None)

    def play(self, env_id: str, jobs: list[MatchJob], policies: dict[str, Policy]) -> list[MatchRecord]:
        """Play every job; one record per job, in job order (see :meth:`MatchEngine.play`)."""
        agents = sorted({a for job in jobs for a in job.agents})
        core, twins = self._setup(env_id, agents, policies)
        if core is None:
            return super().play(env_id, jobs, policies)
        spec = get_spec(env_id)
        for job in jobs:
            if len(job.agents) != spec.num_teams:
                raise ValueError(f"{env_id} needs {spec.num_teams} agents per match, got {job.agents}")
        index = {a: i for i, a in enumerate(agents)}
        records: list[MatchRecord] = []
        for lo, hi in _chunks(len(jobs), self.batch_size):
            part = jobs[lo:hi]
            seeds = torch.tensor([j.seed for j in part], dtype=torch.int64, device=self.device)
            lineups = np.array([[index[a] for a in j.agents] for j in part], dtype=np.int64)
            res, problems = self._run(core, spec, seeds, lineups, twins)
            records += build_records(spec, part, res.to_host(), lineups, agents, problems, policies)
        return records

    def summarize(self, env_id: str, agents: list[str], policies: dict[str, Policy], matches: int,
                  seed: int, *, start: int = 0, replay_rate: float = 0.0,
                  sample_seed: int = 0) -> MatchSummary:
        """Play matches ``start .. start + matches - 1`` of ``plan_matches(agents, spec, matches, seed)``
        on the device and count them; keep full records for a ``replay_rate`` sample.

        Raises:
            ValueError: The env or a policy cannot be played on the device.
        """
        spec = get_spec(env_id)
        lineups = pairings(agents, spec)
        ids = sorted(set(agents))
        core, twins = self._setup(env_id, ids, policies)
        if core is None:
            raise ValueError(f"{env_id} with {agents} cannot be played on the device; use play()")
        index = {a: i for i, a in enumerate(ids)}
        table = np.array([[index[a] for a in lineup] for lineup in lineups], dtype=np.int64)
        counter = SummaryCounter(len(lineups), self.device)
        replays: list[MatchRecord] = []
        for lo, hi in _chunks(matches, self.batch_size):
            which = lineup_array(hi - lo, start + lo, len(lineups))
            index_t = torch.arange(start + lo, start + hi, dtype=torch.int64, device=self.device)
            seeds = derive_seeds(seed, index_t)
            res, problems = self._run(core, spec, seeds, table[which], twins)
            counter.add(torch.as_tensor(which, device=self.device), res)
            keep = sampled(seeds, replay_rate, sample_seed).nonzero()[:, 0]
            if len(keep):
                rows = keep.cpu().numpy()
                jobs = [MatchJob(int(s), lineups[which[r]]) for r, s in
                        zip(rows, seeds[keep].cpu().tolist(), strict=True)]
                replays += build_records(spec, jobs, res.take(keep).to_host(), table[which[rows]],
                                         ids, problems, policies)
        return MatchSummary(env_id, seed, start, matches, counter.counts(lineups), replay_rate, replays)

    def _run(self, core: TorchBoardCore, spec: EnvSpec, seeds: torch.Tensor, lineups: np.ndarray,
             twins: list[DevicePolicy]) -> tuple[DeviceResults, dict[tuple[int, int], str]]:
        return play_on_device(core, spec.step_limit, seeds, lineups, twins, self.compact_every)


def _chunks(n: int, size: int) -> Iterator[tuple[int, int]]:
    for lo in range(0, n, size):
        yield lo, min(n, lo + size)


def _detail(agent: str, code: int, reason: str | None) -> str:
    """The CPU guard's wording for each kind of forfeit."""
    if code == ILLEGAL:
        return f"{agent} played an illegal or out-of-range action"
    if reason:
        return f"{agent} {reason}"
    return f"{agent} returned a non-finite or non-integer action" if code == INVALID else ""


def build_records(spec: EnvSpec, jobs: list[MatchJob], res: dict[str, np.ndarray],
                  lineups: np.ndarray, agents: list[str], problems: dict[tuple[int, int], str],
                  policies: dict[str, Policy]) -> list[MatchRecord]:
    """MatchRecords from one batch's host copy of :class:`DeviceResults` (the CPU engine's own builder)."""
    winner, codes, seat = res["winner"], res["codes"], res["forfeit_seat"]
    has = winner >= 0
    rewards = np.zeros((len(jobs), 2))
    rewards[has, winner[has]], rewards[has, 1 - winner[has]] = 1.0, -1.0
    details = {}
    for i in np.flatnonzero(seat >= 0).tolist():
        p, code = int(lineups[i, seat[i]]), int(codes[i])
        details[i] = _detail(agents[p], code, problems.get((p, ERROR if code == ERROR else INVALID)))
    with gc_paused():
        return _records(spec, jobs, winner, res["plies"], res["actions"], rewards, codes, seat,
                        details, policies)
