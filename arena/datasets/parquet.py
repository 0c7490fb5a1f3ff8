"""The Parquet layout of an exported board: steps, matches, agents, and a JSON description.

``OUT/steps.parquet``
    One row per recorded decision of an exported seat, in (match, step) order:
    ``match_seq``, ``match_id``, ``step`` (index of the action in the record), ``seat``,
    ``team``, ``role``, ``agent_id``, ``agent_key``, ``observation`` (the seat's
    observation as the raw bytes of its C-order array: a fixed-size binary; the shape and
    dtype are in the ``arena`` schema metadata and ``dataset.json``, and
    :func:`observations` decodes a table's), ``action_mask`` (one byte per action,
    :func:`action_masks`), ``action``, ``legal`` (False only for a
    recorded illegal final action), ``reward``, ``terminated``, ``truncated``. A seat's
    next observation is its next row in the same match; its last row is terminated or
    truncated (:mod:`arena.datasets.resimulate` for the rules).
``OUT/matches.parquet``
    One row per match of the env's log: ``match_seq``, ``match_id``, ``seed``,
    ``league_id``, ``rated``, ``seats`` (agent keys), ``agent_ids``,
    ``scores``, ``winner``, ``termination``, ``forfeit_seat``, ``num_actions``,
    ``exported`` and ``skipped_reason`` (moves dropped by replay retention, or a record
    that did not re-simulate).
``OUT/agents.parquet``
    One row per (agent, rated role): id, key, name, kind, status, the agent's role, and
    its current rating (``mu``, ``sigma``, ``conservative`` = mu - 3 sigma, games, W/D/L);
    agents never rated have one row with empty rating columns.
``OUT/dataset.json``
    The env (seats, teams, roles, observation shape and dtype, number of actions), what
    was exported and what was skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from arena.datasets.log import BoardAgents, LogChunk
from arena.datasets.resimulate import Steps
from arena.storage.db.repositories import MatchColumns
from envs.spec import EnvSpec

# zstd: a third of snappy's size (connect four: 2.8 MB against 9.6 MB per 400,000 steps) for +20% write time.
COMPRESSION = "zstd"


def _dictionary(indices: np.ndarray, values: list[str]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(indices.astype(np.int32)), pa.array(values, pa.string()))


def _packed(values: np.ndarray) -> pa.FixedSizeBinaryArray:
    """Each row's values as one fixed-size binary (C order, little-endian).

    Parquet writes a fixed-size list with a repetition level per element: 84 int8 planes
    per connect-four row wrote 15x slower than the same bytes as one binary value.
    """
    rows = np.ascontiguousarray(values).reshape(len(values), int(np.prod(values.shape[1:], dtype=np.int64)))
    width = rows.shape[1] * rows.dtype.itemsize
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(rows), [None, pa.py_buffer(rows.tobytes())])


def observations(table: pa.Table, column: str = "observation") -> np.ndarray:
    """The ``observation`` column of a steps table (or any slice of it) as ``(rows, *obs_shape)``.

    The shape and dtype come from the table's ``arena`` metadata.
    """
    meta = json.loads(table.schema.metadata[b"arena"])
    return _unpack(table[column], np.dtype(meta["obs_dtype"]), tuple(meta["obs_shape"]))


def action_masks(table: pa.Table) -> np.ndarray:
    """The ``action_mask`` column of a steps table as ``(rows, num_actions)`` bool."""
    return _unpack(table["action_mask"], np.dtype(bool), (table.schema.field("action_mask").type.byte_width,))


def _unpack(column: pa.ChunkedArray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    parts = [np.frombuffer(chunk.buffers()[1], dtype=np.uint8)[chunk.offset * chunk.type.byte_width:]
             [: len(chunk) * chunk.type.byte_width] for chunk in column.chunks]
    flat = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
    return flat.view(dtype).reshape(-1, *shape)


def seat_keys(columns: MatchColumns) -> tuple[np.ndarray, list[str]]:
    """``(n, seats)`` index of every seat's agent key into the returned list of the page's keys."""
    keys: dict[str, int] = {}
    index = np.array([[keys.setdefault(k, len(keys)) for k in seats] for seats in columns.seats],
                     dtype=np.int64)
    return index, list(keys)


class ParquetWriter:
    """Writes the tables of one export as chunks arrive (module docstring).

    Args:
        out: The output folder (created).
        spec: The env.
        obs_shape: The exported seats' observation shape; ``obs_dtype`` its dtype.
        agents: The board's agents, for agent ids and the agents table.
    """

    def __init__(self, out: Path, spec: EnvSpec, obs_shape: tuple[int, ...], obs_dtype: np.dtype,
                 agents: BoardAgents) -> None:
        self.out, self.spec, self.agents = Path(out), spec, agents
        self.out.mkdir(parents=True, exist_ok=True)
        self.obs_shape, self.obs_dtype = tuple(obs_shape), np.dtype(obs_dtype)
        self._steps: pq.ParquetWriter | None = None
        self._matches: pq.ParquetWriter | None = None

    def add(self, chunk: LogChunk, steps: Steps) -> None:
        """Append a chunk's steps and matches."""
        index, keys = seat_keys(chunk.columns)
        key_ids = np.array([self.agents.ids.get(k, -1) for k in keys], dtype=np.int64)
        self._write_steps(chunk, steps, index, keys, key_ids)
        self._write_matches(chunk, steps, index, key_ids)

    def _write_steps(self, chunk: LogChunk, steps: Steps, index, keys, key_ids) -> None:
        spec = self.spec
        team = np.asarray(spec.seat_team, dtype=np.int8)[steps.seat]
        agent = index[steps.match, steps.seat]
        ids = key_ids[agent]
        table = pa.table({
            "match_seq": pa.array(np.asarray(chunk.columns.seq, dtype=np.int64)[steps.match]),
            "match_id": _dictionary(steps.match, chunk.columns.id),
            "step": pa.array(steps.step.astype(np.int32)),
            "seat": pa.array(steps.seat.astype(np.int8)),
            "team": pa.array(team),
            "role": _dictionary(team, list(spec.roles)),
            "agent_id": pa.array(ids, mask=ids < 0),
            "agent_key": _dictionary(agent, keys),
            "observation": _packed(steps.obs.astype(self.obs_dtype, copy=False)),
            "action_mask": _packed(steps.mask.astype(bool, copy=False)),
            "action": pa.array(steps.action.astype(np.int16)),
            "legal": pa.array(steps.legal),
            "reward": pa.array(steps.reward.astype(np.float32)),
            "terminated": pa.array(steps.terminated),
            "truncated": pa.array(steps.truncated),
        })
        if self._steps is None:
            meta = {b"arena": json.dumps({"env": spec.env_id, "obs_shape": list(self.obs_shape),
                                          "obs_dtype": self.obs_dtype.name}).encode()}
            # Dictionary-encode only the dictionary columns: trying it on the observation bytes is wasted work.
            self._steps = pq.ParquetWriter(self.out / "steps.parquet", table.schema.with_metadata(meta),
                                           use_dictionary=["match_id", "role", "agent_key"],
                                           compression=COMPRESSION)
        self._steps.write_table(table)

    def _write_matches(self, chunk: LogChunk, steps: Steps, index, key_ids) -> None:
        cols = chunk.columns
        ids = key_ids[index]
        table = pa.table({
            "match_seq": pa.array(cols.seq, pa.int64()),
            "match_id": pa.array(cols.id, pa.string()),
            "seed": pa.array(cols.seed, pa.int64()),
            "league_id": pa.array(cols.league_id, pa.int64()),
            "rated": pa.array(cols.rated, pa.bool_()),
            "seats": pa.array(cols.seats, pa.list_(pa.string())),
            "agent_ids": pa.array([[None if i < 0 else i for i in row] for row in ids.tolist()],
                                  pa.list_(pa.int64())),
            "scores": pa.array(cols.scores, pa.list_(pa.float64())),
            "winner": pa.array(cols.winner, pa.int8()),
            "termination": pa.array(cols.termination, pa.string()),
            "forfeit_seat": pa.array(cols.forfeit_seat, pa.int8()),
            "num_actions": pa.array(chunk.lengths.astype(np.int32)),
            "exported": pa.array(steps.valid),
            "skipped_reason": pa.array(steps.invalid_reason, pa.string()),
        })
        if self._matches is None:
            self._matches = pq.ParquetWriter(self.out / "matches.parquet", table.schema, compression=COMPRESSION)
        self._matches.write_table(table)

    def close(self, description: dict) -> None:
        """Finish the tables, write ``agents.parquet`` and ``dataset.json``."""
        for writer in (self._steps, self._matches):
            if writer is not None:
                writer.close()
        if self._steps is None:  # nothing exported: empty tables with the right columns
            self._write_steps(LogChunk.empty(), Steps.empty(self.obs_shape, self.obs_dtype, self.spec.num_actions),
                              np.zeros((0, self.spec.num_seats), np.int64), [], np.zeros(0, np.int64))
            self._steps.close()
        pq.write_table(agents_table(self.agents), self.out / "agents.parquet")
        (self.out / "dataset.json").write_text(json.dumps(description, indent=2, default=str) + "\n")


def agents_table(agents: BoardAgents) -> pa.Table:
    """One row per (agent, rated role); an unrated agent has one row with empty rating columns."""
    rows = []
    for agent in agents.agents:
        rated = [r for (agent_id, _), r in agents.ratings.items() if agent_id == agent.id] or [None]
        for rating in rated:
            rows.append({
                "agent_id": agent.id, "key": agent.key, "name": agent.name, "kind": agent.kind,
                "status": agent.status, "agent_role": agent.role,
                "role": rating.role if rating else None, "mu": rating.mu if rating else None,
                "sigma": rating.sigma if rating else None,
                "conservative": rating.conservative if rating else None,
                "games": rating.games if rating else None, "wins": rating.wins if rating else None,
                "draws": rating.draws if rating else None, "losses": rating.losses if rating else None,
            })
    schema = pa.schema([("agent_id", pa.int64()), ("key", pa.string()), ("name", pa.string()),
                        ("kind", pa.string()), ("status", pa.string()), ("agent_role", pa.string()),
                        ("role", pa.string()), ("mu", pa.float64()), ("sigma", pa.float64()),
                        ("conservative", pa.float64()), ("games", pa.int64()), ("wins", pa.int64()),
                        ("draws", pa.int64()), ("losses", pa.int64())])
    return pa.Table.from_pylist(rows, schema=schema)
