"""Settings of the hide-and-seek league: the trainer's (rewards included) and the league's own."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from agents.trainers.hide_and_seek.ppo import HideAndSeekPPOConfig
from envs.hide_and_seek.curriculum import CurriculumRule
from league.scheduling.matchmaking import PFSPWeighting

SHAPING = {"fort_bonus": 40.0, "fort_potential_bonus": 10.0, "ramp_defense_bonus": 30.0, "ramp_use_bonus": 0.0}
"""The shaped configuration's bonuses (``default_v1_ppo(shaped=True)``): the hiders are paid
for the fort and the defended ramp, exactly what the phase detectors count."""


def default_v1_ppo(seed: int = 0, shaped: bool = False) -> HideAndSeekPPOConfig:
    """PPO settings of the v1 league on the standard quadrant layout.

    Args:
        seed: The run's seed.
        shaped: Add :data:`SHAPING`'s bonuses; by default the teams learn from the game's
            own team reward alone.

    The critic is ``central`` (it sees the full state; each actor its own view): on two CPUs
    the honest league's forts rose faster with it than with the ``local`` one at equal env
    steps, on both seeds measured (docs/leagues.md, "The honest headline"). Each update makes
    4 passes of 6 minibatches: 2 passes of 3 (issue 30's first cheaper loop) played about 1.3x
    the env steps per CPU-minute but learned forts far slower per CPU-minute (docs/leagues.md,
    "A cheaper learner loop"). ``precision`` ``auto``: the networks' first layers multiply in
    bfloat16 on a CPU that does so in hardware (AMX, AVX-512 BF16), where an update takes about
    0.6x the time (docs/leagues.md, "bfloat16 first layers").
    """
    return HideAndSeekPPOConfig(
        env_id="hide_and_seek-v1", size=9, n_doors=None, layout="quadrant", seekers_by_door=False,
        critic="central", seed=seed, device="auto", epochs=4, minibatches=6, precision="auto",
        **(SHAPING if shaped else {}),
    )


@dataclass
class HideAndSeekLeagueConfig:
    """Settings of a hide-and-seek league."""

    name: str = "hide_and_seek"
    """league name: its folder under ``<data_dir>/leagues`` and its pools"""
    ppo: HideAndSeekPPOConfig = field(default_factory=default_v1_ppo)
    """trainer settings (env, layouts, shaping, device)"""
    updates_per_generation: int = 10
    """updates between two generations"""
    eval_episodes: int = 256
    """episodes per evaluation pairing"""
    eval_every: int = 5
    """evaluate every this many generations (generation 0 always); the others read their phase
    rates, fort and win rates and matches from their own training episodes
    (:class:`arena.training.hide_and_seek.evaluation.TrainingRates`); 1: every generation, as before"""
    pfsp: PFSPWeighting = "variance"
    """PFSP weighting of past opponents (``variance``: those near the learner's level)"""
    win_rate_decay: float = 0.9
    """decay of the per-role win-rate tables per recorded update"""
    curriculum: bool = True
    """mix boxes-by-the-doors episodes into training while forts are rare
    (:class:`envs.hide_and_seek.curriculum.CurriculumRule`)"""
    curriculum_share: float = 0.5
    """share of training episodes with boxes by the doors while the standard fort rate is 0"""
    curriculum_target: float = 0.8
    """standard-layout fort rate at which that share has shrunk (linearly) to 0"""
    curriculum_ramp: bool = True
    """second stage: once forts are common, episodes with the ramp near a door, a hider on its way"""
    ramp_reach_step: float = 0.1
    """how much the ramp stage's reach (0: the ramp next to a hider by the door, 1: as drawn)
    moves per generation (0: stays at 0)"""
    ramp_reach_up: float = 0.4
    """ramp-defense rate in the stage's own episodes at which the reach grows"""
    ramp_reach_down: float = 0.1
    """... and below which it shrinks"""
    exploiter_margin: float = 0.1
    """an exploiter whose score against the other role's main beat its own main's self-play score
    by more than this in a generation is frozen into the pools (the number of exploiters is the
    trainer's ``ppo.exploiters``; :mod:`arena.training.hide_and_seek.exploiters`)"""
    exploiter_patience: int = 20
    """generations without such a win after which an exploiter starts again from the main (with 3,
    exploiters with 16 envs each were reset every third generation, 480 episodes after the last
    reset: too few to learn anything the main does not know)"""
    ramp_use_gate: bool = True
    """the ramp stage also opens with the seekers' standard-layout ramp use (0.2 -> 0.5), not
    only with forts (:meth:`envs.hide_and_seek.curriculum.CurriculumRule.ramp_gate`)"""

    def curriculum_rule(self) -> CurriculumRule:
        """The start-state curriculum these settings describe."""
        return CurriculumRule(self.curriculum, self.curriculum_share, self.curriculum_target, self.curriculum_ramp,
                              self.ramp_reach_step, self.ramp_reach_up, self.ramp_reach_down,
                              ramp_use_gate=self.ramp_use_gate)


CLASSIC_LOOP = {"core_backend": "numpy", "batched_values": False, "epochs": 4, "minibatches": 6, "exploiters": 0,
                "precision": "fp32", "lean_loop": False}
"""The trainer's switches of the loop before issue 30 (with ``eval_every=1``): the numpy core, the
critic called at every rollout step, four passes of six minibatches (as today's default), float32
throughout, no exploiters, autograd and ``torch.optim.Adam`` per minibatch (no ``lean_loop``)."""


def classic_loop(config: HideAndSeekLeagueConfig) -> HideAndSeekLeagueConfig:
    """``config`` with the learner loop as it was before issue 30 (:data:`CLASSIC_LOOP`, every
    generation evaluated): the same league, kept reachable as the speed benchmark's baseline."""
    return replace(config, eval_every=1, ppo=replace(config.ppo, **CLASSIC_LOOP))
