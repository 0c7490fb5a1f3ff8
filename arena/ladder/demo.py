"""Demo agents for an empty database, so a first visitor sees a moving leaderboard."""

from __future__ import annotations

import functools

from sqlalchemy.orm import Session

from agents.baselines import HEURISTICS
from agents.catalog import make_policy
from agents.checkpoint import serialize_weights
from agents.neural import random_init_checkpoint
from arena.ladder.registration import register_builtin_agents, register_env, register_snapshot_agent
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services

DEMO_BUILTINS = ("heuristic", "heuristic:epsilon=0.1", "heuristic:epsilon=0.3", "heuristic:epsilon=0.6",
                 "random")


def seed_demo(services: Services, envs: tuple[str, ...], neural_per_env: int = 3) -> int:
    """Register demo agents in ``envs`` that have no agents yet; returns how many.

    Scripted agents go straight to placement; the small random-init MLPs are queued and
    validated like any submission.
    """
    def seed(session: Session, env_id: str) -> int:
        register_env(session, env_id)
        if repo.list_agents(session, env_id):
            return 0
        names = DEMO_BUILTINS if env_id in HEURISTICS else ("random",)
        created = len(register_builtin_agents(session, env_id, [make_policy(n, env_id).agent_id for n in names]))
        for i in range(neural_per_env):
            state, ck = random_init_checkpoint(env_id, "mlp", {"hidden": [64, 64]}, seed=i, name=f"demo-mlp-{i}")
            register_snapshot_agent(session, services.pool, serialize_weights(state), ck,
                                    pool_name=f"submissions.{env_id}", name=f"demo-mlp-{i}")
            created += 1
        return created

    return sum(services.sessions.write_transaction(functools.partial(seed, env_id=env_id),
                                                   what=f"seeding demo agents on {env_id}")
               for env_id in envs)
