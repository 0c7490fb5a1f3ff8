"""ArenaEnv: one seat of an Arena game as a Gymnasium env, its opponents played by Arena agents.

The env drives the registered PettingZoo env exactly as the match engine does (the
engine's own :func:`~arena.engine.envpool.reset_env` and
:func:`~arena.engine.envpool.step_env`, on the same unwrapped env), so an episode is a
rated match: same seed, same turn order, same opponent streams, same outcome rule.

The learner's side:
    * plays one team: in symmetric games (connect four, tictactoe, rps) a team drawn per
      episode, so it learns to move first and second; in role games the team of
      ``role`` (default: the env's first role). A team of several seats (hide and seek:
      two hiders) is played seat by seat: each ``step`` answers the next decision of the
      learner's team, which is how one Arena agent drives a whole team.
    * observes that seat's observation (``observation_space``: a ``Box`` of the seat's
      observation shape and dtype; rps: the opponent's last move as a scalar ``Box``);
    * acts in ``Discrete(num_actions)``; ``action_masks()`` (what sb3-contrib's
      ``MaskablePPO`` calls) and ``info["action_mask"]`` give the legal moves.

Rules of the episode:
    * **Reward**: 0 until the end, then the match outcome for the learner's team:
      +1 win, 0 draw, -1 loss (:meth:`envs.spec.EnvSpec.winner` on the scores, as the
      ladder rates it).
    * **Illegal action** (outside the mask or the action space): the episode ends at
      once as a loss (reward -1, ``terminated``, ``info["illegal_action"] = True``), the
      forfeit a rated match would give.
    * An opponent that forfeits (illegal move, exception) loses: reward +1.
    * ``terminated`` when the game ended (or a forfeit); ``truncated`` when Arena's step
      limit (``EnvSpec.step_limit``) cut it, with the outcome rated as a match is.
    * After the end, the observation is the final position from the learner's seat
      (parallel envs: its last observation) and the mask is all ``True``, so a masked
      sampler never sees an empty mask; stepping an ended episode raises.

Seeding: ``reset(seed=s)`` makes episode ``k`` after it a function of ``(s, k)`` alone
(:func:`arena.gym.opponents.plan_episodes`): the same learner actions give the same
episode. ``reset()`` without a seed continues the sequence; an env never seeded draws
its seed from the OS.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium
import numpy as np

from agents.policy import MatchRng, Policy
from arena.engine.envpool import reset_env, step_env
from arena.engine.guard import OK, PolicyCaller
from arena.gym.opponents import Opponents, fresh_seed, plan_episodes
from envs.adapters import direct
from envs.registry import flat_obs, get_spec, make_env
from envs.spec import EnvSpec


def learner_teams(spec: EnvSpec, role: str | None) -> tuple[int, ...]:
    """The teams the learner may play: every team of a symmetric game, else ``role``'s team."""
    if spec.symmetric:
        if role not in (None, spec.roles[0]):
            raise ValueError(f"{spec.env_id} is symmetric (role {spec.roles[0]!r}); leave role out")
        return tuple(range(spec.num_teams))
    role = spec.roles[0] if role is None else role
    if role not in spec.roles:
        raise ValueError(f"{spec.env_id} has roles {', '.join(spec.roles)}; got role={role!r}")
    return (spec.team_of_role(role),)


def observation_space(spec: EnvSpec, team: int) -> gymnasium.spaces.Box:
    """The observation space of ``team``'s seats, read from the PettingZoo env (a ``Box``)."""
    env = make_env(spec.env_id)
    try:
        space = env.observation_space(spec.seats[spec.teams[team][0]])
    finally:
        env.close()
    if isinstance(space, gymnasium.spaces.Dict):
        space = space["observation"]
    if isinstance(space, gymnasium.spaces.Discrete):
        # rps: the opponent's last move; a scalar Box keeps the engine's observation shape ().
        return gymnasium.spaces.Box(int(space.start), int(space.start + space.n - 1), shape=(), dtype=np.int64)
    if not isinstance(space, gymnasium.spaces.Box):
        raise TypeError(f"{spec.env_id}: observation space {space} is not a Box")
    return space


def outcome_reward(winner: int, team: int) -> float:
    """+1 if ``team`` won, 0 for a draw (``winner == -1``), -1 otherwise."""
    return 0.0 if winner < 0 else (1.0 if winner == team else -1.0)


class ArenaEnv(gymnasium.Env):
    """One learner seat against Arena opponents (module docstring).

    Args:
        env_id: A registered env id.
        opponents: Opponent names or policies (:mod:`arena.gym.opponents`).
        role: The learner's role in role games (default: the first role).
        seed: Env seed; the first ``reset()`` uses it when given no seed of its own.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, env_id: str, opponents: Sequence[str | Policy] = ("random",), role: str | None = None,
                 seed: int | None = None) -> None:
        self.arena_spec = spec = get_spec(env_id)
        self.env_id = env_id
        self.learner_teams = learner_teams(spec, role)
        self.observation_space = observation_space(spec, self.learner_teams[0])
        self.action_space = gymnasium.spaces.Discrete(spec.num_actions)
        self.opponents = opponents if isinstance(opponents, Opponents) else Opponents(env_id, opponents)
        self._env = direct(make_env(env_id))
        self._caller = PolicyCaller(None)
        self._env_seed = seed
        self._episode = 0
        self._done = True
        self._seat = self.arena_spec.teams[self.learner_teams[0]][0]
        self._mask = np.ones(spec.num_actions, dtype=bool)

    # ----------------------------------------------------------------- Gymnasium API

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._env_seed, self._episode = int(seed), 0
        elif self._env_seed is None:
            self._env_seed, self._episode = fresh_seed(), 0
        spec = self.arena_spec
        plan = plan_episodes(self.opponents, self.learner_teams, spec.num_teams,
                             np.array([self._env_seed]), np.array([self._episode]))
        self._episode += 1
        self.match_seed = int(plan.seeds[0])
        self.team = int(plan.learner_team[0])
        self._opponent_of_team = plan.opponents[0].tolist()
        self._scores = np.zeros(spec.num_seats)
        self._actions: list[tuple[int, int]] = []
        self._decided: dict[int, int] = {}
        self._done = False
        self._last_obs: np.ndarray | None = None
        self._pending = reset_env(spec, self._env, self.match_seed)
        info = self._run_opponents()[-1]
        return self._obs(), info

    def step(self, action):
        if self._done:
            raise RuntimeError("the episode has ended: call reset() before step()")
        a = int(action)
        seat = self._seat
        if not (0 <= a < self.arena_spec.num_actions and self._mask[a]):
            self._actions.append((seat, a))
            return self._obs_end(-1.0, terminated=True, illegal=True)
        self._decided[seat] = a
        reward, terminated, truncated, info = self._run_opponents()
        return self._obs(), reward, terminated, truncated, info

    @property
    def seat(self) -> int:
        """The seat whose decision the next ``step`` makes (teams of several seats take turns)."""
        return self._seat

    def action_masks(self) -> np.ndarray:
        """The legal actions of the learner's current decision (all ``True`` once the episode ended)."""
        return self._mask.copy()

    def close(self) -> None:
        self._env.close()
        self._caller.close()

    # ----------------------------------------------------------------- the match

    def _run_opponents(self) -> tuple[float, bool, bool, dict[str, Any]]:
        """Play until the learner has a decision to make or the episode is over."""
        spec = self.arena_spec
        team_of = spec.seat_team
        while True:
            mine = [s for s in sorted(self._pending) if team_of[s] == self.team and s not in self._decided]
            if mine:
                self._seat = mine[0]
                self._last_obs, self._mask = self._pending[self._seat]
                return 0.0, False, False, {"action_mask": self._mask.copy()}
            forfeit = self._opponents_decide()
            if forfeit:
                return self._end(1.0, terminated=True)
            out = step_env(spec, self._env, self._decided)
            self._actions.extend(sorted(self._decided.items()))
            self._scores += out.rewards
            self._decided, self._pending = {}, out.pending
            if out.finished or len(self._actions) >= spec.step_limit:
                winner = int(spec.winner(self._scores)[0])
                return self._end(outcome_reward(winner, self.team), terminated=out.finished)

    def _opponents_decide(self) -> bool:
        """One batched ``act`` per opponent team with pending seats; True if one forfeited."""
        team_of = self.arena_spec.seat_team
        ply = len(self._actions)
        by_team: dict[int, list[int]] = {}
        for seat in sorted(self._pending):
            if team_of[seat] != self.team:
                by_team.setdefault(team_of[seat], []).append(seat)
        for team, seats in by_team.items():
            policy = self.opponents.policy(self._opponent_of_team[team])
            obs = np.stack([self._pending[s][0] for s in seats])
            mask = np.stack([self._pending[s][1] for s in seats])
            rng = MatchRng(np.full(len(seats), self.match_seed), np.array(seats), np.full(len(seats), ply))
            res = self._caller.act(policy, obs, mask, rng)
            if (res.codes != OK).any():
                return True
            self._decided.update(zip(seats, res.actions.tolist()))
        return False

    def _end(self, reward: float, terminated: bool, illegal: bool = False):
        self._done = True
        self._mask = np.ones(self.arena_spec.num_actions, dtype=bool)
        if self.arena_spec.api == "aec":
            seat = self.arena_spec.teams[self.team][0]
            self._last_obs = flat_obs(self._env.observe(self.arena_spec.seats[seat]))
        opponents = {t: self.opponents.members[m] for t, m in enumerate(self._opponent_of_team) if m >= 0}
        self.opponents.record(np.array([m for m in self._opponent_of_team if m >= 0]),
                              np.full(len(opponents), reward))
        info = {"action_mask": self._mask.copy(), "illegal_action": illegal, "outcome": reward,
                "opponents": opponents, "learner_team": self.team, "match_seed": self.match_seed}
        return reward, terminated, not terminated, info

    def _obs_end(self, reward: float, terminated: bool, illegal: bool):
        reward, terminated, truncated, info = self._end(reward, terminated, illegal)
        return self._obs(), reward, terminated, truncated, info

    def _obs(self) -> np.ndarray:
        space = self.observation_space
        return np.array(self._last_obs, dtype=space.dtype).reshape(space.shape)  # a copy: callers keep it
