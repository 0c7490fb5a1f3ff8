"""Submitting a neural agent: validate everything first, then store it in one go.

Order matters for the promise "a rejected upload stores nothing": the form fields,
the env, the spec and the weights are checked before anything is written. The spec's
arch says what the weights are: safetensors of a registry arch
(:func:`agents.checkpoint_weights.check_weights`: header, names, shapes, dtypes,
finiteness; no torch) or, for ``"arch": "onnx"``, an ONNX model
(:func:`agents.onnx_agents.policy.validate_onnx_bytes`: protobuf, opsets, operators,
external data, declared tensor sizes, signature, then the checker and probe batches of
real observations under a deadline, in a sandboxed worker process: one that dies is a
refusal, a sandbox that cannot start one is a 503). Storing is one database transaction
(env row, snapshot metadata, agent row) inside which the weights go to the snapshot pool
last; if the pool fails, the transaction rolls back and no row refers to missing weights.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from agents.checkpoint_spec import MAX_SPEC_BYTES, ONNX_ARCH, CheckpointSpec, validate_spec
from agents.checkpoint_weights import check_weights
from arena.core.errors import Conflict
from arena.ladder.registration import QUEUED_REASON, ladder_envs, register_snapshot_agent, snapshot_agent_key
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services
from envs.errors import InvalidSubmission, UnknownEnv
from envs.registry import get_spec

log = logging.getLogger(__name__)

FIELD_HELP = (
    "fields: weights (the .safetensors file, or the .onnx model when the spec's arch is "
    "onnx), spec (agent.json as text or file), env (env id) and optionally name"
)
_SHORT_FIELD_BYTES = 256
_AGENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.:+-]{0,63}$")


def form_limits(max_upload_bytes: int) -> dict[str, int]:
    """Byte limit of every field of ``POST /agents``."""
    return {"weights": max_upload_bytes, "spec": MAX_SPEC_BYTES, "name": _SHORT_FIELD_BYTES,
            "env": _SHORT_FIELD_BYTES}


@dataclass(frozen=True)
class Submission:
    """The fields of an upload, present and decoded (not yet validated as a checkpoint)."""

    weights: bytes
    spec: bytes
    env: str
    name: str | None


def _text(fields: dict[str, bytes], name: str) -> str | None:
    raw = fields.get(name)
    if raw is None:
        return None
    try:
        return raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise InvalidSubmission(f"form field {name!r} must be UTF-8 text") from None


def parse_submission(fields: dict[str, bytes]) -> Submission:
    """Check that the required fields are there and decode the text ones.

    Raises:
        InvalidSubmission: A field is missing, empty or not text; the name is malformed.
    """
    missing = [f for f in ("weights", "spec", "env") if not fields.get(f)]
    if missing:
        raise InvalidSubmission(f"missing or empty form field(s) {', '.join(missing)}; {FIELD_HELP}")
    env = _text(fields, "env") or ""
    name = _text(fields, "name") or None
    if name is not None and not _AGENT_NAME.fullmatch(name):
        raise InvalidSubmission(
            f"name {name[:80]!r} must be 1-64 characters: letters, digits, space and _.:+- "
            "(starting with a letter or digit)"
        )
    return Submission(fields["weights"], fields["spec"], env, name)


def validate_weights(services: Services, sub: Submission) -> tuple[CheckpointSpec, str]:
    """Validate the spec, then the weights as the format its arch names; ``(spec, sha256)``.

    Raises:
        InvalidSubmission: What to fix in the spec or the weights.
    """
    limit = services.settings.max_upload_bytes
    spec = validate_spec(sub.spec)
    if spec.arch != ONNX_ARCH:
        checked = check_weights(sub.weights, spec.to_json(), max_bytes=limit)
        return checked.spec, checked.sha256
    from agents.onnx_agents.policy import validate_onnx_bytes  # onnxruntime only when needed
    from agents.onnx_agents.sandbox import validation_sandbox

    model = validate_onnx_bytes(sub.weights, spec, limit,
                                probe_limit_s=services.settings.onnx_probe_limit_s,
                                sandbox=validation_sandbox(services.settings.onnx_confinement))
    return model.spec, model.sha256


def submit_agent(services: Services, owner_id: int | None, owner_name: str, sub: Submission, *,
                 pool_name: str | None = None, league_id: int | None = None,
                 parent_sha256: str | None = None,
                 tag: Callable[[Session], Callable[[int], None]] | None = None) -> int:
    """Validate and store a submission; returns the new agent's id (status ``queued``).

    Args:
        pool_name: The snapshot pool it joins (default ``submissions.<env>``); a league's
            pool for a snapshot pushed through the league API.
        league_id, parent_sha256: Lineage of a league snapshot.
        tag: Checks the storing transaction before anything is written and returns what
            attaches the new agent's id to something else in it (a competition entry:
            :func:`arena.competitions.entries.entry_tag`); what either raises refuses the
            submission and nothing is stored.

    Raises:
        InvalidSubmission: Unknown env, bad spec or weights, or spec env != form env.
        Conflict: The same weights were already submitted for this env and role (its id
            attached); the same weights may be submitted once per role.
    """
    served = ladder_envs(services.settings.envs)  # registers ARENA_ENVS' third-party envs
    try:
        env = get_spec(sub.env)
    except UnknownEnv as exc:
        raise InvalidSubmission(f"form field 'env': {exc}") from None
    spec, sha = validate_weights(services, sub)
    if spec.env != env.env_id:
        raise InvalidSubmission(
            f"the spec is for env {spec.env!r} but the form says env={env.env_id!r}; "
            "submit the checkpoint for the env it was built for"
        )
    key = snapshot_agent_key(spec.arch, sha, env.env_id, spec.role)
    name = sub.name or spec.name or key
    def store(session: Session) -> int:
        existing = repo.get_agent_by_weights(session, env.env_id, sha, spec.role)
        if existing is not None:
            role = f" as {spec.role}" if len(set(env.roles)) > 1 else ""
            raise Conflict(
                f"these weights were already submitted for {env.env_id}{role} as agent {existing.id} "
                f"({existing.name!r}, status {existing.status})",
                existing_id=existing.id,
            )
        # Storing the same weights twice in the pool (on a retry) is harmless: content-addressed.
        attach = tag(session) if tag is not None else None
        agent_id = register_snapshot_agent(session, services.pool, sub.weights, spec,
                                           pool_name=pool_name or f"submissions.{env.env_id}", name=name,
                                           owner_id=owner_id, reason=_queued_reason(env.env_id, served),
                                           league_id=league_id, parent_sha256=parent_sha256).id
        if attach is not None:
            attach(agent_id)
        return agent_id

    agent_id = services.sessions.write_transaction(store, what=f"storing a submission for {env.env_id}")
    log.info("agent %s (%s) submitted for %s by %s", agent_id, key, env.env_id, owner_name)
    return agent_id


def _queued_reason(env_id: str, served: tuple[str, ...]) -> str:
    """Why a new submission waits: validation, or an env this server runs no ladder for."""
    if env_id in served:
        return QUEUED_REASON
    return (f"no ladder runs for {env_id} on this server (ARENA_ENVS lists {', '.join(served)}); "
            "it is validated and rated once the env is added")
