"""The Minari layout of an exported board: one episode per (match, seat) of the exported role.

The dataset ``arena/<env id>/<role>-v0`` is created under ``OUT`` (Minari's
``MINARI_DATASETS_PATH``), in Minari's HDF5 format, so it loads with::

    MINARI_DATASETS_PATH=OUT python -c "import minari; minari.load_dataset('arena/connect_four-v3/player-v0')"

An episode is one seat's side of one match: its observations (each decision's, then the
one after the end: ``T + 1``), actions, rewards, terminations and truncations as in the
Parquet steps table (:mod:`arena.datasets.parquet`), and per observation the infos
``action_mask`` (all ``True`` after the end), ``match_seq``, ``seat`` and ``agent_id``
(``-1``: not an agent of this database) to join ``OUT/matches.parquet`` and
``OUT/agents.parquet``, which are written beside it with the agents' keys and ratings.
Episodes whose recorded illegal final action lies outside the action space cannot be
stored in a ``Discrete`` space and are left out (counted in the report).
"""

from __future__ import annotations

import os
import warnings
from contextlib import contextmanager
from pathlib import Path

import gymnasium
import numpy as np

from arena.datasets.log import BoardAgents, LogChunk
from arena.datasets.parquet import seat_keys
from arena.datasets.resimulate import Steps
from envs.spec import EnvSpec

# HDF5 (one file): Minari's Arrow format writes a folder per episode, 7x slower (9 against 63 episodes/s
# measured on the 2-core development machine).
DATA_FORMAT = "hdf5"


def dataset_id(env_id: str, role: str) -> str:
    """The Minari id of an export: ``arena/<env id>/<role>-v0``."""
    return f"arena/{env_id}/{role}-v0"


@contextmanager
def datasets_path(out: Path):
    """Minari reads its root from ``MINARI_DATASETS_PATH``: point it at ``out`` meanwhile."""
    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(Path(out).resolve())
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = old


class MinariWriter:
    """Adds a chunk's episodes to the Minari dataset as chunks arrive (module docstring)."""

    def __init__(self, out: Path, spec: EnvSpec, role: str, observation_space: gymnasium.spaces.Box,
                 agents: BoardAgents) -> None:
        self.out, self.spec, self.agents = Path(out), spec, agents
        self.id = dataset_id(spec.env_id, role)
        self.observation_space = observation_space
        self.action_space = gymnasium.spaces.Discrete(spec.num_actions)
        self._dataset = None
        self.episodes = 0
        self.left_out = 0

    def add(self, chunk: LogChunk, steps: Steps) -> None:
        buffers = self._episodes(chunk, steps)
        if not buffers:
            return
        import minari

        with datasets_path(self.out), warnings.catch_warnings():
            # Minari warns about every metadata field left empty (author, code link, env spec):
            # an export has no author and no Gymnasium env id to name.
            warnings.simplefilter("ignore", UserWarning)
            if self._dataset is None:
                self._dataset = minari.create_dataset_from_buffers(
                    self.id, buffers, observation_space=self.observation_space, action_space=self.action_space,
                    algorithm_name="Arena match log", data_format=DATA_FORMAT,
                    description=f"Recorded {self.spec.env_id} matches of an Arena board, re-simulated: "
                                "one episode per (match, seat).")
            else:
                self._dataset.update_dataset_from_buffer(buffers)
        self.episodes += len(buffers)

    def _episodes(self, chunk: LogChunk, steps: Steps) -> list:
        from minari.data_collector import EpisodeBuffer

        index, keys = seat_keys(chunk.columns)
        key_ids = np.array([self.agents.ids.get(k, -1) for k in keys], dtype=np.int64)
        order = np.lexsort((steps.step, steps.seat, steps.match))
        group = steps.match[order] * self.spec.num_seats + steps.seat[order]
        bounds = np.flatnonzero(np.diff(group)) + 1
        buffers = []
        seqs = np.asarray(chunk.columns.seq, dtype=np.int64)
        for rows in np.split(order, bounds) if len(order) else []:
            actions = steps.action[rows]
            if ((actions < 0) | (actions >= self.spec.num_actions)).any():
                self.left_out += 1
                continue
            match, seat = int(steps.match[rows[0]]), int(steps.seat[rows[0]])
            final = steps.final_obs[match, seat][None].astype(self.observation_space.dtype)
            observations = np.concatenate([steps.obs[rows].astype(self.observation_space.dtype), final])
            length = len(rows) + 1
            masks = np.concatenate([steps.mask[rows], np.ones((1, self.spec.num_actions), dtype=bool)])
            buffers.append(EpisodeBuffer(
                observations=observations, actions=actions.astype(np.int64),
                rewards=steps.reward[rows].astype(np.float64).tolist(),
                terminations=steps.terminated[rows].tolist(), truncations=steps.truncated[rows].tolist(),
                infos={"action_mask": masks, "match_seq": np.full(length, seqs[match]),
                       "seat": np.full(length, seat), "agent_id": np.full(length, key_ids[index[match, seat]])},
            ))
        return buffers
