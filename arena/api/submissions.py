"""Submitting a neural agent: validate everything first, then store it in one go.

Order matters for the promise "a rejected upload stores nothing": the form fields,
the env, the spec and every tensor are checked (:func:`agents.checkpoint.
load_checkpoint_bytes`: header, names, shapes, dtypes, finiteness) before anything
is written. Storing is one database transaction (env row, snapshot metadata, agent
row) inside which the weights go to the snapshot pool last; if the pool fails, the
transaction rolls back and no row refers to missing weights.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from agents.checkpoint import load_checkpoint_bytes
from agents.checkpoint_spec import MAX_SPEC_BYTES
from arena.api.deps import Principal
from arena.db import repositories as repo
from arena.services import Services
from envs.errors import Conflict, InvalidSubmission, UnknownEnv
from envs.registry import get_spec
from envs.spec import EnvSpec

log = logging.getLogger(__name__)

FIELD_HELP = (
    "fields: weights (the .safetensors file), spec (agent.json as text or file), "
    "env (env id) and optionally name"
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


def env_spec_json(spec: EnvSpec) -> dict[str, list[str]]:
    """The env row's stored spec (the same shape the ladder registers)."""
    return {"seats": list(spec.seats), "roles": list(spec.roles)}


def submit_agent(services: Services, owner: Principal, sub: Submission) -> int:
    """Validate and store a submission; returns the new agent's id (status ``queued``).

    Raises:
        InvalidSubmission: Unknown env, bad spec or weights, or spec env != form env.
        Conflict: The same weights were already submitted for this env (its id attached).
    """
    try:
        env = get_spec(sub.env)
    except UnknownEnv as exc:
        raise InvalidSubmission(f"form field 'env': {exc}") from None
    checkpoint = load_checkpoint_bytes(
        sub.weights, sub.spec, max_bytes=services.settings.max_upload_bytes
    )
    if checkpoint.spec.env != env.env_id:
        raise InvalidSubmission(
            f"the spec is for env {checkpoint.spec.env!r} but the form says env={env.env_id!r}; "
            "submit the checkpoint for the env it was built for"
        )
    sha = checkpoint.sha256
    key = f"{checkpoint.spec.arch}-{sha[:16]}"
    name = sub.name or checkpoint.spec.name or key
    with services.sessions.begin() as session:
        existing = repo.get_agent_by_key(session, env.env_id, key)
        if existing is not None:
            raise Conflict(
                f"these weights were already submitted for {env.env_id} as agent {existing.id} "
                f"({existing.name!r}, status {existing.status})",
                existing_id=existing.id,
            )
        repo.ensure_env(session, env.env_id, env_spec_json(env))
        repo.put_snapshot(session, sha, env_id=env.env_id, spec=checkpoint.spec.to_json(),
                          size_bytes=len(sub.weights))
        ids = repo.get_or_create_agents(
            session, env.env_id, [key], "neural", names={key: name}, status="queued",
            owner_id=owner.user_id, snapshot_sha256=sha,
        )
        # Last, inside the transaction: a pool failure rolls the rows back.
        services.pool.put(sub.weights, checkpoint.spec, pool=f"submissions.{env.env_id}",
                          meta={"agent_key": key})
    log.info("agent %s (%s) submitted for %s by %s", ids[key], key, env.env_id, owner.name)
    return ids[key]
