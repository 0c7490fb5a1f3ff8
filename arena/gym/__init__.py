"""Train anywhere, submit here: Arena's games as Gymnasium envs against Arena's agents.

::

    import arena.gym

    env = arena.gym.make("connect_four-v3", opponents=["heuristic:epsilon=0.3", "random"], seed=0)
    obs, info = env.reset()
    obs, reward, terminated, truncated, info = env.step(env.action_masks().argmax())

    envs = arena.gym.make_vec("connect_four-v3", 256, opponents=["random"], seed=0)

:func:`make` gives one learner seat (:class:`~arena.gym.env.ArenaEnv`: rewards, the
illegal-action rule and seeding are in its module docstring); :func:`make_vec` gives
``num_envs`` of them on the env's vectorized core (:class:`~arena.gym.vector.ArenaVectorEnv`),
or Gymnasium's ``SyncVectorEnv`` of single envs for games without one; :func:`win_rate`
measures a policy on them. Opponent names: :mod:`arena.gym.opponents`. The guide: ``docs/gym.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import gymnasium
import numpy as np

from agents.policy import Policy
from arena.gym.env import ArenaEnv
from arena.gym.opponents import Opponents
from arena.gym.vector import ArenaVectorEnv
from envs.registry import get_entry

__all__ = ["ArenaEnv", "ArenaVectorEnv", "MaskedSyncVectorEnv", "Opponents", "make", "make_vec", "win_rate"]


def make(env_id: str, opponents: Sequence[str | Policy] = ("random",), role: str | None = None,
         seed: int | None = None) -> ArenaEnv:
    """One learner seat of ``env_id`` against ``opponents`` (one drawn per episode).

    Args:
        env_id: A registered env id (``arena envs`` lists them).
        opponents: Opponent names (``"random"``, ``"heuristic:epsilon=0.3"``, ``"file:agent.onnx"``,
            ``"pfsp:snapshots/"``, ...) or :class:`~agents.policy.Policy` objects.
        role: The learner's role in role games (default: the env's first role); leave it
            out for symmetric games, where the learner's seat is drawn per episode.
        seed: Env seed used by the first ``reset()`` without a seed.
    """
    return ArenaEnv(env_id, opponents, role=role, seed=seed)


class MaskedSyncVectorEnv(gymnasium.vector.SyncVectorEnv):
    """Gymnasium's ``SyncVectorEnv`` of :class:`ArenaEnv` with the vector env's ``action_masks()``."""

    def action_masks(self) -> np.ndarray:
        """``(num_envs, num_actions)``: every sub-env's :meth:`ArenaEnv.action_masks`."""
        return np.stack(self.call("action_masks"))


def make_vec(env_id: str, num_envs: int, opponents: Sequence[str | Policy] = ("random",), role: str | None = None,
             seed: int | None = None, vectorized: bool = True) -> gymnasium.vector.VectorEnv:
    """``num_envs`` learner seats of ``env_id``, auto-resetting (``NEXT_STEP`` mode).

    Games with a vectorized core (connect_four-v3, tictactoe-v3) step every board as numpy
    arrays with one batched opponent ``act`` per step (:class:`ArenaVectorEnv`); other games,
    or ``vectorized=False``, get a :class:`MaskedSyncVectorEnv` of :func:`make` envs. Both
    play the same episodes from the same seeds. Arguments as in :func:`make`; env ``i`` is
    seeded ``seed + i``.
    """
    if vectorized and get_entry(env_id).vector_core is not None:
        return ArenaVectorEnv(env_id, num_envs, opponents, role=role, seed=seed)
    shared = opponents if isinstance(opponents, Opponents) else Opponents(env_id, opponents)
    return MaskedSyncVectorEnv([
        (lambda i=i: ArenaEnv(env_id, shared, role=role, seed=None if seed is None else seed + i))
        for i in range(num_envs)
    ])


def win_rate(act: Callable[[np.ndarray, np.ndarray], np.ndarray], env_id: str,
             opponents: Sequence[str | Policy] = ("random",), episodes: int = 512, seed: int = 0,
             role: str | None = None, num_envs: int = 64) -> float:
    """The score of ``act`` against ``opponents`` over ``episodes`` episodes: wins count 1, draws 1/2.

    Args:
        act: ``act(obs, mask) -> actions`` for a batch: observations ``(n, *obs_shape)``
            and legal-action masks ``(n, num_actions)``, one action per row (a trained
            policy, e.g. an SB3 model's ``predict`` with ``action_masks=mask``).
        env_id, opponents, role, seed: As in :func:`make_vec`.
        episodes: Episodes counted (the first to end, in step order).
        num_envs: Episodes played at once.
    """
    envs = make_vec(env_id, num_envs, opponents, role=role, seed=seed)
    obs, info = envs.reset()
    scores: list[float] = []
    while len(scores) < episodes:
        obs, reward, terminated, truncated, info = envs.step(np.asarray(act(obs, info["action_mask"])))
        scores.extend(((reward[terminated | truncated] + 1) / 2).tolist())
    envs.close()
    return float(np.mean(scores[:episodes]))
