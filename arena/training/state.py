"""A training league's resumable state on disk: JSON for counters, safetensors for tensors.

Layout under ``<data_dir>/leagues/<name>/``::

    state.json                       counters, roster, snapshots, win-rate tables, rng states
    learners/<learner>.safetensors   model weights + Adam moments (tensors only, no pickle)
    learners/<learner>.init.safetensors   the initial weights exploiters reset to
    tb/                              TensorBoard event files
    ratings.png                      ratings per generation (written after evaluation)

Tensors are written before ``state.json`` (each file atomically), so the JSON always
describes tensors that exist: a crash mid-save resumes from the previous save. torch is
imported only to read or write them: ``arena league status`` reads the JSON alone.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.files import atomic_write
from league.evaluation.phases import PhaseTimeline
from league.scheduling.matchmaking import WinRateTable

if TYPE_CHECKING:
    import torch

FORMAT_VERSION = 1


@dataclass
class SnapshotEntry:
    """One frozen learner in the pool (and on the ladder as an agent)."""

    sha256: str
    key: str
    name: str
    role: str
    learner: str
    generation: int
    updates: int
    env_steps: int
    reason: str


@dataclass
class LearnerState:
    """Counters and win rates of one learner (its tensors live in ``learners/``)."""

    name: str
    role: str
    seed: int
    generation: int = 0
    updates: int = 0
    updates_since: int = 0
    env_steps: int = 0
    seconds: float = 0.0
    resets: int = 0
    table: WinRateTable = field(default_factory=WinRateTable)
    rng_state: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "table"}
        out["table"] = self.table.to_json()
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LearnerState:
        fields = {k: v for k, v in data.items() if k != "table"}
        return cls(**fields, table=WinRateTable.from_json(data["table"]))


@dataclass
class LeagueState:
    """Everything but tensors needed to continue a league where it stopped."""

    name: str
    env_id: str
    spec: dict[str, Any]
    learners: list[LearnerState]
    roster: list[str]
    snapshots: list[SnapshotEntry] = field(default_factory=list)
    league_id: int | None = None
    runs: int = 0
    seconds: float = 0.0
    rng_state: dict[str, Any] | None = None
    ratings: dict[str, list[float]] = field(default_factory=dict)
    plot: str | None = None
    phases: PhaseTimeline = field(default_factory=PhaseTimeline)
    """strategy phases per generation (hide and seek), see :mod:`arena.training.phases`"""
    phases_seq: int = 0
    """match log position up to which recorded matches were scanned for phases"""

    @property
    def updates(self) -> int:
        """Updates of all learners together."""
        return sum(learner.updates for learner in self.learners)

    @property
    def env_steps(self) -> int:
        """Learner decisions of all learners together."""
        return sum(learner.env_steps for learner in self.learners)

    def snapshot_names(self) -> dict[str, str]:
        """``{sha256: display name}`` of the pool's snapshots."""
        return {s.sha256: s.name for s in self.snapshots}

    def to_json(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION, "name": self.name, "env_id": self.env_id,
            "spec": self.spec, "learners": [lr.to_json() for lr in self.learners],
            "roster": self.roster, "snapshots": [asdict(s) for s in self.snapshots],
            "league_id": self.league_id, "runs": self.runs, "seconds": self.seconds,
            "rng_state": self.rng_state, "ratings": self.ratings, "plot": self.plot,
            "phases": self.phases.to_json(), "phases_seq": self.phases_seq,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LeagueState:
        if data.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"league state format {data.get('format_version')!r} is not {FORMAT_VERSION}")
        return cls(
            name=data["name"], env_id=data["env_id"], spec=data["spec"],
            learners=[LearnerState.from_json(lr) for lr in data["learners"]],
            roster=list(data["roster"]), snapshots=[SnapshotEntry(**s) for s in data["snapshots"]],
            league_id=data.get("league_id"), runs=data.get("runs", 0), seconds=data.get("seconds", 0.0),
            rng_state=data.get("rng_state"), ratings=data.get("ratings", {}), plot=data.get("plot"),
            phases=PhaseTimeline.from_json(data.get("phases")), phases_seq=data.get("phases_seq", 0),
        )


class LeagueDir:
    """The folder of one league: where its state, tensors, logs and plot live."""

    def __init__(self, data_dir: str | os.PathLike[str], name: str) -> None:
        if not name or not all(c.isalnum() or c in "_-" for c in name):
            raise ValueError(f"league name {name!r} must be letters, digits, '_' or '-'")
        self.root = Path(data_dir) / "leagues" / name

    @property
    def state_path(self) -> Path:
        return self.root / "state.json"

    @property
    def tb_dir(self) -> Path:
        return self.root / "tb"

    @property
    def plot_path(self) -> Path:
        return self.root / "ratings.png"

    def tensors_path(self, learner: str, initial: bool = False) -> Path:
        return self.root / "learners" / f"{learner}{'.init' if initial else ''}.safetensors"

    def exists(self) -> bool:
        return self.state_path.is_file()

    def load_state(self) -> LeagueState:
        """The saved state; ``FileNotFoundError`` if this league was never saved."""
        return LeagueState.from_json(json.loads(self.state_path.read_text()))

    def save_tensors(self, learner: str, tensors: dict[str, torch.Tensor], initial: bool = False) -> None:
        import safetensors.torch

        data = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
        atomic_write(self.tensors_path(learner, initial), safetensors.torch.save(data))

    def load_tensors(self, learner: str, initial: bool = False) -> dict[str, torch.Tensor]:
        from safetensors.torch import load as load_safetensors_bytes  # tensors only, never code

        return load_safetensors_bytes(self.tensors_path(learner, initial).read_bytes())

    def save_state(self, state: LeagueState) -> None:
        """Write ``state.json`` (after the tensors it refers to)."""
        atomic_write(self.state_path, json.dumps(state.to_json(), indent=1).encode())
