"""The hide-and-seek league's saved state: versioned JSON plus the trainer's tensors.

Under ``<data_dir>/leagues/<name>/``:

* ``hide_and_seek_trainer.safetensors``: both teams' models (actor and critic, a
  centralized critic included: only the actors are exported as agents) and Adam moments
  and the torch random streams (:meth:`HideAndSeekPPO.state_tensors`; tensors only, never pickled);
* ``hide_and_seek.json``: ``version`` (:data:`STATE_VERSION`), ``config`` (the league's,
  ``ppo`` inside), the trainer's ``updates``, ``total_steps`` and ``trainer_rng``,
  ``train_seconds``, the pools' ``tables`` and ``league_rng``, ``generations`` (one
  :class:`GenerationSummary` each, with the pool's sha256 of both actors), ``matches``
  (every evaluation match: the input of the ratings), ``curriculum_shares`` and
  ``ramp_reach``, and the exploiters' account (``exploiters``) and the pool's sha256 of each
  frozen exploiter per role (``exploiter_snapshots``).

The tensors are written first, then the JSON that refers to them (each atomically), so
the JSON always describes tensors that exist. :func:`read_state` reads every version
ever written: version 1 is the unversioned state of before (its trainer config split a
pass by ``minibatch_size``), version 2 the state before the trainer's ``critic`` choice
(its critics are ``local``), version 3 the state before ``eval_every`` and ``ramp_use_gate`` (it
evaluated every generation and gated the ramp stage on forts alone, and keeps doing so),
version 4 the state before exploiters (it has none: ``exploiters`` and
``exploiter_snapshots`` are empty); each is upgraded on reading.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import safetensors.torch
import torch

from agents.files import atomic_write
from agents.trainers.hide_and_seek.ppo import HideAndSeekPPOConfig

STATE_VERSION = 5
STATE_FILE = "hide_and_seek.json"
TENSOR_FILE = "hide_and_seek_trainer.safetensors"


def upgrade(saved: dict[str, Any]) -> dict[str, Any]:
    """A saved state of any version as the current version (a new dict)."""
    version = saved.get("version", 1)
    if version > STATE_VERSION:
        raise ValueError(f"league state version {version} was written by a newer Arena (this one reads "
                         f"<= {STATE_VERSION})")
    state = dict(saved)
    if version == 1:
        ppo = HideAndSeekPPOConfig.from_dict(state["config"]["ppo"])
        state["config"] = {**state["config"], "ppo": {**state["config"]["ppo"], "minibatches": ppo.minibatches}}
        state["config"]["ppo"].pop("minibatch_size", None)
        state.setdefault("ramp_reach", 0.0)
    if version <= 2:
        state["config"] = {**state["config"], "ppo": {"critic": "local", **state["config"]["ppo"]}}
    if version <= 3:
        state["config"] = {"eval_every": 1, "ramp_use_gate": False, **state["config"]}
    if version <= 4:
        state.setdefault("exploiters", [])
        state.setdefault("exploiter_snapshots", {})
    state["version"] = STATE_VERSION
    return state


def read_state(root: str | Path) -> dict[str, Any] | None:
    """The league state saved under ``root`` (upgraded to :data:`STATE_VERSION`), or ``None``."""
    path = Path(root) / STATE_FILE
    return upgrade(json.loads(path.read_text())) if path.is_file() else None


def read_tensors(root: str | Path) -> dict[str, torch.Tensor]:
    """The trainer's tensors saved under ``root``."""
    return safetensors.torch.load((Path(root) / TENSOR_FILE).read_bytes())  # tensors only, never code


def write_state(root: str | Path, state: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
    """Write the tensors, then the state (stamped with :data:`STATE_VERSION`), each atomically."""
    root = Path(root)
    atomic_write(root / TENSOR_FILE, safetensors.torch.save(tensors))
    atomic_write(root / STATE_FILE, json.dumps({"version": STATE_VERSION, **state}).encode())
