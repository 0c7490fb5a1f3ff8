"""Demo agents for an empty database, so a first visitor sees every board moving.

Every env gets scripted baselines for each of its roles (``random`` plays any role;
the role baselines of :mod:`agents.role_baselines` play theirs) and a few small
random-init MLPs per role, queued and validated like any submission.
"""

from __future__ import annotations

import functools

from sqlalchemy.orm import Session

from agents.baselines import HEURISTICS
from agents.catalog import make_policy
from agents.checkpoint import serialize_weights
from agents.neural import random_init_checkpoint
from agents.role_baselines import ROLE_BASELINES
from arena.ladder.registration import register_builtin_agents, register_env, register_snapshot_agent
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services
from envs.registry import get_spec

DEMO_BUILTINS = ("heuristic", "heuristic:epsilon=0.1", "heuristic:epsilon=0.3", "heuristic:epsilon=0.6",
                 "random")
DEMO_EPSILONS = ("", ":epsilon=0.3")
"""Each role baseline joins as itself and as a noisier copy (a spread of strengths)."""


def demo_builtins(env_id: str) -> tuple[str, ...]:
    """The scripted agents the demo puts on ``env_id``'s ladder."""
    if env_id in HEURISTICS:
        return DEMO_BUILTINS
    names = [f"{name}{eps}" for name in ROLE_BASELINES.get(env_id, {}) for eps in DEMO_EPSILONS]
    return (*names, "random")


def seed_demo(services: Services, envs: tuple[str, ...], neural_per_env: int = 3) -> int:
    """Register demo agents in ``envs`` that have no agents yet; returns how many.

    Scripted agents go straight to placement; the small random-init MLPs (``neural_per_env``
    per role) are queued and validated like any submission.
    """
    def seed(session: Session, env_id: str) -> int:
        register_env(session, env_id)
        if repo.list_agents(session, env_id):
            return 0
        keys = [make_policy(n, env_id).agent_id for n in demo_builtins(env_id)]
        created = len(register_builtin_agents(session, env_id, keys))
        for role in dict.fromkeys(get_spec(env_id).roles):
            for i in range(neural_per_env):
                name = f"demo-mlp-{i}" if get_spec(env_id).symmetric else f"demo-{role}-mlp-{i}"
                state, ck = random_init_checkpoint(env_id, "mlp", {"hidden": [64, 64]}, seed=i,
                                                   role=role, name=name)
                register_snapshot_agent(session, services.pool, serialize_weights(state), ck,
                                        pool_name=f"submissions.{env_id}", name=name)
                created += 1
        return created

    return sum(services.sessions.write_transaction(functools.partial(seed, env_id=env_id),
                                                   what=f"seeding demo agents on {env_id}")
               for env_id in envs)
