"""ArenaVectorEnv: ``num_envs`` learner seats on one of Arena's vectorized board cores.

Every board of the batch lives in one :class:`~envs.board_core.BoardBatch` and moves as
numpy arrays: a step plays the learner's ``num_envs`` moves with one ``core.play``, then
answers every opponent move of the step with ONE batched ``Policy.act`` per distinct
opponent (one call in all against a single opponent), exactly as the match engine
(:mod:`arena.engine.board`) plays a rated batch. Episodes follow the rules of
:class:`arena.gym.env.ArenaEnv` (rewards, illegal actions, masks, seeding), and env
``i`` of ``reset(seed=s)`` plays the episodes of ``ArenaEnv(...).reset(seed=s + i)``:
the same opponents making the same moves (``tests/gym/test_vector.py`` checks it step
by step against Gymnasium's ``SyncVectorEnv`` of single envs).

Autoreset is Gymnasium's default ``NEXT_STEP`` mode: the step that ends an episode
returns its final observation (reward, ``terminated``); the next step ignores that env's
action and returns the first observation of its next episode (reward 0). Opponents who
move first in the new episode move in that same step, inside the step's one ``act``.

``action_masks()`` returns the ``(num_envs, num_actions)`` legal-move masks (all ``True``
for ended episodes), as sb3-contrib's ``MaskablePPO`` reads them; ``info["action_mask"]``
holds the same array.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from agents.policy import MatchRng, Policy
from arena.engine.guard import OK, PolicyCaller
from arena.gym.env import learner_teams, observation_space
from arena.gym.opponents import Opponents, fresh_seed, plan_episodes
from envs.board_core import BoardCore
from envs.registry import get_spec, make_vector_core


class ArenaVectorEnv(VectorEnv):
    """``num_envs`` learner seats of a two-player board game (module docstring).

    Args:
        env_id: A registered env with a vectorized core (connect_four-v3, tictactoe-v3).
        num_envs: Boards stepped together.
        opponents: Opponent names or policies (:mod:`arena.gym.opponents`).
        role: Must be left out (the board games are symmetric).
        seed: Seed of env 0 (env ``i`` gets ``seed + i``) for a ``reset()`` without a seed.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, env_id: str, num_envs: int, opponents: Sequence[str | Policy] = ("random",),
                 role: str | None = None, seed: int | None = None) -> None:
        core = make_vector_core(env_id)
        if not isinstance(core, BoardCore):
            raise ValueError(  # noqa: TRY004 - the env id is the wrong value, not the core's type
                f"{env_id} has no vectorized board core; use arena.gym.make_vec, which falls "
                "back to Gymnasium's SyncVectorEnv for it")
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        self.arena_spec = spec = get_spec(env_id)
        self.core = core
        self.num_envs = num_envs
        self.learner_teams = learner_teams(spec, role)
        self.single_observation_space = observation_space(spec, self.learner_teams[0])
        self.single_action_space = gymnasium.spaces.Discrete(spec.num_actions)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.opponents = opponents if isinstance(opponents, Opponents) else Opponents(env_id, opponents)
        self._caller = PolicyCaller(None)
        self._env_seeds = None if seed is None else np.arange(num_envs, dtype=np.int64) + int(seed)
        self._episodes = np.zeros(num_envs, dtype=np.int64)
        self._batch = core.new_batch(num_envs)
        self._seeds = np.zeros(num_envs, dtype=np.int64)
        self._learner = np.zeros(num_envs, dtype=np.int8)
        self._opponent = np.zeros(num_envs, dtype=np.int64)
        self._ended = np.ones(num_envs, dtype=bool)

    # ----------------------------------------------------------------- Gymnasium API

    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None):
        n = self.num_envs
        if seed is not None:
            seeds = [seed + i for i in range(n)] if isinstance(seed, int) else list(seed)
            if len(seeds) != n or any(s is None for s in seeds):
                raise ValueError(f"reset needs one int seed per env ({n}), or one int for all")
            self._env_seeds = np.asarray(seeds, dtype=np.int64)
            self._episodes[:] = 0
        elif self._env_seeds is None:
            self._env_seeds = np.arange(n, dtype=np.int64) + fresh_seed() % (1 << 61)
        all_rows = np.arange(n)
        self._start(all_rows)
        self._opponents_move(all_rows[self._batch.to_move != self._learner])
        obs, mask = self._observe()
        return obs, {"action_mask": mask, "_action_mask": np.ones(n, dtype=bool)}

    def step(self, actions):
        n, batch, core = self.num_envs, self._batch, self.core
        actions = np.asarray(actions, dtype=np.int64).reshape(n)
        starting = np.flatnonzero(self._ended)
        playing = np.flatnonzero(~self._ended)
        illegal = np.zeros(n, dtype=bool)
        a = actions[playing]
        legal = (a >= 0) & (a < core.num_actions)
        in_range = np.flatnonzero(legal)
        legal[in_range] = core.legal_mask(batch, playing[in_range])[np.arange(in_range.size), a[in_range]]
        bad = playing[~legal]
        illegal[bad] = True
        self._forfeit(bad, loser=self._learner[bad])
        core.play(batch, playing[legal], a[legal])
        self._start(starting)
        movers = np.flatnonzero(~batch.done & (batch.to_move != self._learner))
        self._opponents_move(movers)
        truncated = ~batch.done & (batch.plies >= self.arena_spec.step_limit)
        batch.done |= truncated
        ended = np.flatnonzero(batch.done)  # starting boards were cleared: done means ended in this step
        rewards = np.zeros(n, dtype=np.float64)
        winner = batch.winner[ended].astype(np.int64)
        rewards[ended] = np.where(winner < 0, 0.0, np.where(winner == self._learner[ended], 1.0, -1.0))
        terminated = np.zeros(n, dtype=bool)
        terminated[ended] = ~truncated[ended]
        self._ended[:] = False
        self._ended[ended] = True
        self.opponents.record(self._opponent[ended], rewards[ended])
        obs, mask = self._observe()
        info = {"action_mask": mask, "_action_mask": np.ones(n, dtype=bool),
                "illegal_action": illegal, "_illegal_action": self._ended.copy()}
        return obs, rewards, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """``(num_envs, num_actions)`` legal moves of the learners (all ``True`` where an episode ended)."""
        return self._observe()[1]

    def close_extras(self, **kwargs: Any) -> None:
        self._caller.close()

    # ----------------------------------------------------------------- the boards

    def _start(self, rows: np.ndarray) -> None:
        """New episodes on ``rows``: plan them and clear their boards."""
        if not rows.size:
            return
        spec, batch = self.arena_spec, self._batch
        plan = plan_episodes(self.opponents, self.learner_teams, spec.num_teams,
                             self._env_seeds[rows], self._episodes[rows])
        self._episodes[rows] += 1
        self._seeds[rows] = plan.seeds
        self._learner[rows] = plan.learner_team
        self._opponent[rows] = plan.opponents[np.arange(rows.size), 1 - plan.learner_team]
        batch.cells[rows] = 0
        batch.to_move[rows] = 0
        batch.done[rows] = False
        batch.winner[rows] = -1
        batch.plies[rows] = 0
        self._ended[rows] = False

    def _opponents_move(self, rows: np.ndarray) -> None:
        """One move on each of ``rows`` (the opponent to move): one ``act`` per distinct opponent."""
        if not rows.size:
            return
        batch = self._batch
        obs, mask = self.core.observe(batch, rows)
        streams = MatchRng(self._seeds[rows], batch.to_move[rows], batch.plies[rows])
        who = self._opponent[rows]
        members = np.unique(who)
        actions = np.empty(rows.size, dtype=np.int64)
        codes = np.empty(rows.size, dtype=np.int8)
        for member in members:
            sel = slice(None) if members.size == 1 else np.flatnonzero(who == member)
            rng = streams if members.size == 1 else streams.subset(sel)
            res = self._caller.act(self.opponents.policy(int(member)), obs[sel], mask[sel], rng)
            actions[sel], codes[sel] = res.actions, res.codes
        ok = codes == OK
        self.core.play(batch, rows[ok], actions[ok])
        self._forfeit(rows[~ok], loser=1 - self._learner[rows[~ok]])

    def _forfeit(self, rows: np.ndarray, loser: np.ndarray) -> None:
        """End ``rows`` as forfeits of seat ``loser`` (the other seat wins)."""
        self._batch.done[rows] = True
        self._batch.winner[rows] = 1 - loser

    def _observe(self) -> tuple[np.ndarray, np.ndarray]:
        """Every board from its learner's seat (own pieces, opponent's), and the learner's masks."""
        batch = self._batch
        me = (self._learner + 1).astype(np.int8)[:, None, None]
        obs = np.empty((self.num_envs, *self.core.shape, 2), dtype=np.int8)
        np.equal(batch.cells, me, out=obs[..., 0], casting="unsafe")
        np.equal(batch.cells, 3 - me, out=obs[..., 1], casting="unsafe")
        mask = self.core.legal_mask(batch, np.arange(self.num_envs))
        mask[batch.done] = True
        return obs, mask
