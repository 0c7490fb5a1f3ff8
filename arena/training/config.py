"""What a training league is told (:class:`LeagueConfig`) and what it reports (:class:`LeagueProgress`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agents.trainers.ppo_selfplay import PPOConfig
from league.scheduling.roles import RoleConfig, SnapshotRule


def default_baselines(env_id: str) -> tuple[str, ...]:
    """Scripted opponents of graded strength: random, plus the heuristic where one exists."""
    from agents.baselines import HEURISTICS

    if env_id in HEURISTICS:
        return ("random", "heuristic:epsilon=0.5", "heuristic:epsilon=0.2", "heuristic")
    return ("random",)


@dataclass
class LeagueConfig:
    """A training league (CleanRL-style: each field documented)."""

    name: str = "main"
    """league name: folder ``leagues/<name>``, pool ``league.<name>.<env>``"""
    env_id: str = "connect_four-v3"
    """a two-player env with a vectorized core"""
    roles: tuple[str, ...] = ("main", "main_exploiter", "league_exploiter")
    """one learner per entry"""
    minutes: float = 10.0
    """training time budget of this run (wall clock of the updates)"""
    max_updates: int | None = None
    """stop after this many updates in this run (all learners together); when that comes
    before ``minutes``, the learning-rate schedule runs over these updates"""
    ppo: PPOConfig = field(default_factory=lambda: PPOConfig(num_envs=1024, hidden=[128, 128], shared_trunk=True,
                                                            epochs=6, minibatches=8))
    """PPO settings of every learner. Six passes over each rollout: optimising is about two
    thirds of an update, yet at equal CPU time 6 epochs beat 4 and 4 beat 2 (win rate
    against ``heuristic``: 0.90 / 0.89 / 0.85 in the connect four sweep of
    ``benchmarks/learning.py``); collecting games is the scarcer resource."""
    lr_end: float | None = 1e-4
    """learning rate reached linearly at the end of the run's budget (None: constant)"""
    baselines: tuple[str, ...] | None = None
    """scripted opponents (None: :func:`default_baselines`)"""
    snapshot: SnapshotRule = field(default_factory=SnapshotRule)
    """when a learner is frozen into the pool"""
    role_config: RoleConfig = field(default_factory=lambda: RoleConfig(baseline_share=0.5))
    """AlphaStar role constants; half of a main agent's PFSP games go to the scripted
    baselines alone (PFSP among them). Without that share, PFSP over dozens of fresh
    snapshots of itself left ``heuristic`` about a tenth of the games, and after 6M steps
    the main agent beat it 0.80 of the time instead of 0.89 (``docs/leagues.md``)."""
    decay: float = 0.99
    """per-game decay of the win-rate tables"""
    cache_size: int = 16
    """snapshot policies held in memory at once; each update plays at most half as many
    snapshots, so the games left over from the previous update's draw fit too (no thrashing)"""
    seed: int = 0
    """master seed of learners' initialisation and opponent draws"""


@dataclass
class LearnerProgress:
    """One learner's numbers after its latest update."""

    name: str
    role: str
    generation: int
    updates: int
    env_steps: int
    steps_per_s: float
    win_rate: float
    expected_win_rate: float
    opponents: list[tuple[str, float, float]]
    """top opponents: (name, probability, learner's win rate)"""


@dataclass
class LeagueProgress:
    """What a live display shows."""

    elapsed: float
    updates: int
    env_steps: int
    steps_per_s: float
    snapshots: int
    learners: list[LearnerProgress]
    ratings: dict[str, list[float]]
    event: str = ""
