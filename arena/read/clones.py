"""Read models of clone fingerprints: the admin's clone flags, an agent's family.

Every neural agent (safetensors or ONNX; rejected ones left out) is fingerprinted on
the positions of its env and role by the background service
(:mod:`arena.evaluation.fingerprint_worker`, stored by snapshot hash); these reads only
compare what is stored (:mod:`league.evaluation.fingerprints`) and queue what is missing,
which they list as ``pending``: a read computes nothing heavy. Near-duplicates of different
owners are flagged for the admin with the evidence; one owner's near-duplicates are a
family, its versions, shown on each member's page. See docs/evaluation.md, "Clone
fingerprints".
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from arena.core.agent_status import AgentStatus
from arena.evaluation.fingerprints import FingerprintStore
from arena.storage.db import repositories as repo
from league.evaluation.fingerprints import DEFAULT_THRESHOLDS, Similarity, clone_report, near_duplicates, similarity

THRESHOLDS = DEFAULT_THRESHOLDS
"""When two agents count as one policy (league.evaluation.fingerprints.CloneThresholds)."""
MIN_POSITIONS = 32
"""Fewer distinct positions than this (rock-paper-scissors has 4) and agents are not compared:
so few decisions cannot tell a copy from two agents that learned the same answer."""


def _fingerprinted(session: Session, agents: list[repo.AgentInfo]) -> dict[str, list[repo.AgentInfo]]:
    """``{role: agents}`` of the neural agents among ``agents``, by their snapshot's role."""
    neural = [a for a in agents if a.kind == "neural" and a.snapshot_sha256 and a.status != AgentStatus.REJECTED]
    specs = repo.snapshot_specs(session, [a.snapshot_sha256 for a in neural])
    by_role: dict[str, list[repo.AgentInfo]] = defaultdict(list)
    for a in neural:
        role = (specs.get(a.snapshot_sha256) or {}).get("role") or a.role
        if role:
            by_role[role].append(a)
    return by_role


@dataclass
class _Stored:
    """What is stored for some agents of one env and role."""

    positions: int = 0
    found: dict[int, np.ndarray] = field(default_factory=dict)
    pending: list[int] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)


def _fingerprints(store: FingerprintStore, env_id: str, role: str, agents: list[repo.AgentInfo]) -> _Stored:
    """The stored fingerprints of ``agents`` on ``role``'s positions; the missing ones are queued
    (``pending``). None are compared where the env has fewer than :data:`MIN_POSITIONS`."""
    positions = store.position_set(env_id, role)
    if positions is None:  # nothing computed for this env and role yet: its first job publishes the set
        store.ask(env_id, role, [a.snapshot_sha256 for a in agents])
        return _Stored(pending=[a.id for a in agents])
    if positions.error:
        return _Stored(failed=[{"agent_id": a.id, "name": a.name, "error": positions.error} for a in agents])
    if positions.count < MIN_POSITIONS:
        return _Stored(positions.count)
    stored = store.stored(positions, [a.snapshot_sha256 for a in agents])
    out = _Stored(positions.count)
    for a in agents:
        fp = stored[a.snapshot_sha256]
        if fp is None:
            out.pending.append(a.id)
        elif fp.probs is None:
            out.failed.append({"agent_id": a.id, "name": a.name, "error": fp.error})
        else:
            out.found[a.id] = fp.probs
    by_id = {a.id: a for a in agents}
    store.ask(env_id, role, [by_id[i].snapshot_sha256 for i in out.pending])
    return out


def _who(agent: repo.AgentInfo, owner_names: dict[int, str]) -> dict[str, Any]:
    return {"agent_id": agent.id, "name": agent.name, "owner": owner_names.get(agent.owner_id)}


def _link(s: Similarity) -> dict[str, Any]:
    return {"a": s.a, "b": s.b, "agreement": s.agreement, "mean_kl": s.mean_kl}


def clones_data(session: Session, store: FingerprintStore, env_id: str) -> dict[str, Any]:
    """``ClonesPublic``: near-duplicate agents of different owners (flags) and of one owner (families),
    among the agents fingerprinted so far (the others are queued: ``pending``)."""
    by_role = _fingerprinted(session, repo.list_agents(session, env_id))
    agents = {a.id: a for members in by_role.values() for a in members}
    owner_names = repo.user_names(session, {a.owner_id for a in agents.values() if a.owner_id is not None})
    flags, families, missing, pending, positions, fingerprinted = [], [], [], [], {}, 0
    for role, members in sorted(by_role.items()):
        stored = _fingerprints(store, env_id, role, members)
        positions[role], fps = stored.positions, stored.found
        missing, pending, fingerprinted = missing + stored.failed, pending + stored.pending, fingerprinted + len(fps)
        report = clone_report(near_duplicates(fps, THRESHOLDS), {a.id: a.owner_id for a in members})
        flags += [{"role": role, "earlier": _who(agents[s.a], owner_names), "later": _who(agents[s.b], owner_names),
                   "agreement": s.agreement, "mean_kl": s.mean_kl, "positions": s.positions} for s in report.flags]
        families += [{"role": role, "owner": owner_names.get(f.owner),
                      "members": [_who(agents[m], owner_names) for m in f.members],
                      "links": [_link(s) for s in f.links]} for f in report.families]
    return {"env": env_id, "positions": positions, "min_agreement": THRESHOLDS.min_agreement,
            "max_kl": THRESHOLDS.max_kl, "fingerprinted": fingerprinted,
            "flags": flags, "families": families, "not_fingerprinted": missing, "pending": sorted(pending)}


def family_data(session: Session, store: FingerprintStore, agent: repo.AgentInfo) -> dict[str, Any]:
    """``FamilyPublic``: the agent's versions - its owner's agents of its env and role that play
    as one policy with it (linked by near-duplicate pairs) - each with its similarity to it.

    ``status`` says how complete it is: ``ready``; ``pending`` (fingerprints are queued: the
    agent's own, or some of its owner's agents', listed in ``pending``, so the family may grow);
    ``failed`` (the agent's policy could not be fingerprinted: ``error`` says why)."""
    base = {"agent_id": agent.id, "env": agent.env_id, "role": None, "positions": 0,
            "min_agreement": THRESHOLDS.min_agreement, "max_kl": THRESHOLDS.max_kl, "members": [],
            "status": "ready", "pending": [], "error": None}
    own = [a for a in repo.list_agents(session, agent.env_id) if a.owner_id == agent.owner_id]
    role, members = next(((r, m) for r, m in _fingerprinted(session, own).items()
                          if any(a.id == agent.id for a in m)), (None, []))
    if role is None:
        return base
    stored = _fingerprints(store, agent.env_id, role, members)
    fps = stored.found
    base |= {"role": role, "positions": stored.positions, "pending": sorted(stored.pending),
             "status": "pending" if stored.pending else "ready"}
    own_error = next((f["error"] for f in stored.failed if f["agent_id"] == agent.id), None)
    if own_error is not None:
        return base | {"status": "failed", "error": own_error}
    if agent.id not in fps:
        return base
    report = clone_report(near_duplicates(fps, THRESHOLDS), {a.id: a.owner_id for a in members})
    family = next((f for f in report.families if agent.id in f.members), None)
    if family is None:
        return base
    by_id = {a.id: a for a in members}
    rows = []
    for m in family.members:
        agreement, kl = similarity(fps[agent.id], fps[m])
        a = by_id[m]
        rows.append({"agent_id": m, "name": a.name, "status": a.status, "created_at": a.created_at,
                     "this": m == agent.id, "agreement": agreement, "mean_kl": kl})
    return base | {"members": rows}
