"""Evaluation of hide-and-seek generations: whole episodes, both teams' frozen actors.

Evaluation episodes run on a core of their own (:class:`envs.hide_and_seek.core.HideAndSeekCore`
or v1's), all at once, both teams' actors sampling legal actions (temperature 1, like
the arena's :class:`agents.neural.NeuralPolicy`; :func:`agents.trainers.ppo_core.masked_sample`).
The outcome rule is ``higher_score``: the hiders win when their summed team reward is
positive (hidden on more than half of the post-preparation steps), the seekers when it
is negative, a draw at zero. Door blocking depends on the hiders alone (seekers are
frozen during preparation), so it is a property of the hider generation. The
per-episode results are plain tuples, ready for TrueSkill.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from agents.trainers.ppo_core import masked_sample
from envs.hide_and_seek.core import HideAndSeekCore
from envs.hide_and_seek.rules import HIDERS, NUM_ACTIONS, SEEKERS

if TYPE_CHECKING:
    from agents.trainers.hide_and_seek.ppo import HideAndSeekPPO


@dataclass(frozen=True)
class EpisodeResults:
    """Per-episode outcomes of one batch of evaluation episodes.

    Attributes:
        hider_score: ``(n,)`` summed hider team reward per episode.
        winner: ``(n,)`` winning team (0 hiders, 1 seekers) or ``-1`` for a draw.
        door_blocked: ``(n,)`` every door held a box when preparation ended.
        door_locked: ``(n,)`` ... and every such box was locked by the hiders.
        phases: ``hide_and_seek-v1``'s phase detectors, name -> ``(n,)`` per episode
            (:meth:`envs.hide_and_seek.core_v1.HideAndSeekV1Core.phases`); empty for v0.
    """

    hider_score: np.ndarray
    winner: np.ndarray
    door_blocked: np.ndarray
    door_locked: np.ndarray
    phases: dict[str, np.ndarray] = field(default_factory=dict)


def winners(hider_score: np.ndarray) -> np.ndarray:
    """Winner per episode from the summed hider team reward: 0 hiders (positive), 1 seekers
    (negative), -1 a draw."""
    return np.where(hider_score > 0, HIDERS, np.where(hider_score < 0, SEEKERS, -1))


@torch.no_grad()
def play_episodes(
    core: HideAndSeekCore,
    hider: nn.Module,
    seeker: nn.Module,
    seeds: np.ndarray,
    generator: torch.Generator,
) -> EpisodeResults:
    """Play ``core.n_envs`` whole episodes, layouts drawn from ``seeds``.

    Args:
        core: A core with two hiders and two seekers; it is reset here.
        hider, seeker: Actors mapping ``(k, obs_dim)`` observations to ``(k, 7)`` logits.
        seeds: One layout seed per env.
        generator: Torch random stream of the action draws.
    """
    n = core.n_envs
    obs, mask = core.reset(seeds)
    score = np.zeros(n)
    for _ in range(core.max_steps):
        actions = np.zeros((n, core.n_agents), dtype=np.int64)
        for team, actor in ((HIDERS, hider), (SEEKERS, seeker)):
            cols = np.flatnonzero(core.team == team)
            o = torch.from_numpy(obs[:, cols]).reshape(-1, core.obs_dim)
            m = torch.from_numpy(mask[:, cols]).reshape(-1, NUM_ACTIONS)
            act, _ = masked_sample(actor(o), m, generator)
            actions[:, cols] = act.view(n, len(cols)).numpy()
        obs, rewards, _, mask = core.step(actions)
        score += rewards[:, 0]
    return EpisodeResults(
        hider_score=score,
        winner=winners(score),
        door_blocked=core.door_block_status(locked=False).copy(),
        door_locked=core.door_block_status(locked=True).copy(),
        phases={k: v.copy() for k, v in core.phases().items()} if hasattr(core, "phases") else {},
    )


def evaluation_actions(seed: int, g: int) -> torch.Generator:
    """The torch random stream of generation ``g``'s evaluation actions under run ``seed``."""
    return torch.Generator().manual_seed(seed * 1_000_003 + g)


def evaluate_generation(
    trainer: HideAndSeekPPO, g: int, cores: tuple[HideAndSeekCore, HideAndSeekCore], seed: int
) -> tuple[dict[str, float], list[tuple[int, int, int]]]:
    """Play generation ``g`` against itself and (if any) the previous generation.

    Every pairing uses the same layout seeds (common random numbers). ``cores`` are the
    training-layout core and a core of the env's registered layouts, both of the episode count.
    """
    train_core, v0_core = cores
    seeds = np.random.default_rng([seed, 1]).integers(0, 2**31, size=train_core.n_envs)
    gen = evaluation_actions(seed, g)
    pairs = [(g, g)] + ([(g, g - 1), (g - 1, g)] if g > 0 else [])
    matches: list[tuple[int, int, int]] = []
    stats: dict[str, float] = {}
    for h, s in pairs:
        res = play_episodes(train_core, trainer.frozen_actor(h, "hider"),
                            trainer.frozen_actor(s, "seeker"), seeds, gen)
        matches.extend((h, s, int(w)) for w in res.winner)
        if (h, s) == (g, g):
            stats["door_block_rate"] = float(res.door_blocked.mean())
            stats["door_lock_rate"] = float(res.door_locked.mean())
            stats["hider_win_rate"] = float((res.winner == 0).mean())
    v0 = play_episodes(v0_core, trainer.frozen_actor(g, "hider"),
                       trainer.frozen_actor(g, "seeker"), seeds[: v0_core.n_envs], gen)
    stats["door_block_rate_v0"] = float(v0.door_blocked.mean())
    stats["phase_rates"] = {k: float(v.mean()) for k, v in v0.phases.items()}
    return stats, matches
