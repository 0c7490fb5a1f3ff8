"""The hider and seeker populations: one snapshot pool per role, PFSP over each.

Every generation's two actors go into the Redis snapshot pool
(:class:`arena.snapshots.pool.RedisSnapshotPool`), one pool per role:
``league.<name>.<env>.hider`` / ``.seeker``. In every update a share of the envs pits each
learning team against a past generation of the other role, drawn by PFSP
(:func:`league.scheduling.matchmaking.pfsp_weights`) over that learner's decayed win rates against
each generation (:class:`league.scheduling.matchmaking.WinRateTable`, one per role, fed by those
training games). A league with exploiters also puts their winning snapshots into the same
pools (opponent keys ``x<j>``, :mod:`.exploiters`), where PFSP weighs them as it weighs
past generations.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import safetensors.torch
import torch

from agents.checkpoint import serialize_weights
from agents.checkpoint_spec import make_spec
from agents.trainers.hide_and_seek.episodes import hider_points
from arena.snapshots.keys import league_pool
from arena.snapshots.pool import RedisSnapshotPool
from envs.hide_and_seek.rules import ROLES
from league.scheduling.matchmaking import PFSPWeighting, WinRateTable, pfsp_weights

OTHER = {"hider": "seeker", "seeker": "hider"}


class RolePools:
    """Per-role pools of one league and the PFSP draws over them.

    Args:
        pool: The snapshot pool.
        league: League name.
        env_id: The env (part of the pool names).
        pfsp: PFSP weighting.
        decay: Decay of the win-rate tables per recorded update.
        seed: The run's seed (the draws' stream is ``[seed, 7]``).
    """

    def __init__(self, pool: RedisSnapshotPool, league: str, env_id: str, pfsp: PFSPWeighting, decay: float,
                 seed: int) -> None:
        self.pool, self.league, self.env_id, self.pfsp = pool, league, env_id, pfsp
        self.names = {role: league_pool(league, env_id, role) for role in ROLES}
        """the pool name of each role"""
        self.tables = {role: WinRateTable(decay=decay) for role in ROLES}
        """each learner's decayed win rates against the other role's generations"""
        self.rng = np.random.default_rng([seed, 7])

    def put(self, generation: int, weights: dict[str, dict[str, torch.Tensor]], hidden: list[int]) -> dict[str, str]:
        """Snapshot generation ``generation``'s actors (``role -> state dict``); their sha256 per role."""
        shas = {}
        for role in ROLES:
            spec = make_spec(self.env_id, "mlp", {"hidden": hidden}, role=role,
                             name=f"{self.league}-{role}-gen{generation}")
            shas[role] = self.pool.put(serialize_weights(weights[role]), spec, self.names[role],
                                       meta={"league": self.league, "generation": generation, "role": role})
        return shas

    def put_exploiter(self, role: str, key: str, weights: dict[str, torch.Tensor], hidden: list[int]) -> str:
        """Snapshot a frozen exploiter of ``role`` (opponent key ``x<j>``) into its role's pool; its sha256."""
        spec = make_spec(self.env_id, "mlp", {"hidden": hidden}, role=role, name=f"{self.league}-{role}-{key}")
        return self.pool.put(serialize_weights(weights), spec, self.names[role],
                             meta={"league": self.league, "exploiter_snapshot": key, "role": role})

    def load(self, shas: list[dict[str, str]], exploiters: dict[str, list[str]] | None = None,
             ) -> tuple[list[dict[str, dict[str, torch.Tensor]]], dict[str, list[dict[str, torch.Tensor]]]]:
        """The actors of every generation (``role -> sha256`` each) and of every frozen exploiter
        (``role -> [sha256, ...]``) read back from the pools; snapshots nothing refers to (a kill
        between a snapshot and the save) are removed."""
        exploiters = exploiters or {}
        for role in ROLES:
            kept = {s[role] for s in shas} | set(exploiters.get(role, []))
            for sha in set(self.pool.list(self.names[role])) - kept:
                self.pool.remove(self.names[role], sha)

        def read(sha: str) -> dict[str, torch.Tensor]:
            return safetensors.torch.load(self.pool.get(sha)[0])

        return ([{role: read(s[role]) for role in ROLES} for s in shas],
                {role: [read(sha) for sha in exploiters.get(role, [])] for role in ROLES})

    def pick(self, role: str, generations: int, exploiters: list[str] = ()) -> int | str:
        """PFSP: the generation (or frozen exploiter, ``x<j>``) of ``role`` that the other role's
        learner meets."""
        keys = [str(g) for g in range(generations)] + list(exploiters)
        probs = pfsp_weights(self.tables[OTHER[role]].win_rates(keys), self.pfsp)
        key = keys[int(self.rng.choice(len(keys), p=probs))]
        return key if key.startswith("x") else int(key)

    def record(self, plan: dict[str, tuple[slice, int] | None], returns: np.ndarray) -> None:
        """Feed the tables with one update's games against past generations (the trainer's
        ``last_plan``: per opponent role, its envs and generation; ``last_returns``: hider returns)."""
        for opponent_role, entry in plan.items():
            if entry is None:
                continue
            rows, g = entry
            hider_score = float(np.mean(hider_points(returns[rows])))
            learner = OTHER[opponent_role]
            self.tables[learner].record(str(g), hider_score if learner == "hider" else 1.0 - hider_score)

    def to_json(self) -> dict[str, Any]:
        """The tables and the draws' stream."""
        return {"tables": {r: t.to_json() for r, t in self.tables.items()}, "rng": self.rng.bit_generator.state}

    def load_json(self, saved: dict[str, Any]) -> None:
        """Inverse of :meth:`to_json`."""
        self.tables = {r: WinRateTable.from_json(d) for r, d in saved["tables"].items()}
        self.rng.bit_generator.state = saved["rng"]
