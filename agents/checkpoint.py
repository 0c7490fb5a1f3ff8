"""Checkpoints: ``agent.safetensors`` (weights) + ``agent.json`` (spec) with the same stem.

Spec fields (``agent.json``)::

    {"format_version": 1, "arch": "mlp", "hparams": {"hidden": [64, 64]},
     "env": "simple_tag-v3", "role": "prey", "obs_shape": [14], "num_actions": 5,
     "name": "optional display name"}

Loading is the trust boundary of the arena: anyone can upload a checkpoint. Nothing
is ever unpickled, ``torch.load``-ed or scripted. The safetensors header is parsed and
checked here first (:mod:`agents.safetensors_header`), then the bytes go to the
safetensors library, then the tensors must match exactly the state dict of
``build_net(arch, hparams, obs_shape, num_actions)``. Every failure raises
:class:`InvalidSubmission` with a message saying what to fix.

Version history:
    format_version 1: the fields above; float32 tensors only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import safetensors.torch
import torch
from torch import nn

from agents.nets import build_net, get_arch, resolve_hparams
from agents.safetensors_header import parse_header, strict_json
from envs.errors import InvalidSubmission, UnknownEnv
from envs.registry import get_spec

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""Largest accepted weights file (64 MiB)."""
MAX_SPEC_BYTES = 64 * 1024
SPEC_FIELDS = ("format_version", "arch", "hparams", "env", "role", "obs_shape", "num_actions",
               "name")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.:+-]{0,63}$")


@dataclass(frozen=True)
class CheckpointSpec:
    """Validated contents of ``agent.json`` (hparams complete, defaults filled in)."""

    arch: str
    hparams: dict
    env: str
    role: str
    obs_shape: tuple[int, ...]
    num_actions: int
    name: str | None = None
    format_version: int = FORMAT_VERSION

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict in the on-disk layout (``name`` omitted when unset)."""
        out: dict[str, Any] = {
            "format_version": self.format_version, "arch": self.arch, "hparams": self.hparams,
            "env": self.env, "role": self.role, "obs_shape": list(self.obs_shape),
            "num_actions": self.num_actions,
        }
        if self.name is not None:
            out["name"] = self.name
        return out


@dataclass(frozen=True)
class LoadedCheckpoint:
    """A checkpoint that passed every check.

    Attributes:
        spec: The validated spec.
        state_dict: float32 CPU tensors, keys exactly those of ``build_net(...)``.
        sha256: Hex sha256 of the weights file bytes (the agent's identity).
    """

    spec: CheckpointSpec
    state_dict: dict[str, torch.Tensor] = field(repr=False)
    sha256: str


def _require(raw: Mapping[str, Any], key: str) -> Any:
    if key not in raw:
        raise InvalidSubmission(f"spec is missing required field {key!r}")
    return raw[key]


def validate_spec(spec_json: bytes | str | Mapping[str, Any] | CheckpointSpec) -> CheckpointSpec:
    """Parse and validate a checkpoint spec against the env registry and arch registry.

    Args:
        spec_json: ``agent.json`` contents as bytes/str, an already parsed dict, or a
            :class:`CheckpointSpec` (re-validated).

    Returns:
        The validated spec with complete hparams.

    Raises:
        InvalidSubmission: With a message naming the offending field.
    """
    if isinstance(spec_json, CheckpointSpec):
        spec_json = spec_json.to_json()
    if isinstance(spec_json, (bytes, bytearray, str)):
        if len(spec_json) > MAX_SPEC_BYTES:
            raise InvalidSubmission(f"spec JSON is larger than {MAX_SPEC_BYTES} bytes")
        try:
            text = spec_json.decode("utf-8") if isinstance(spec_json, (bytes, bytearray)) else spec_json
            raw = strict_json(text)
        except (UnicodeDecodeError, ValueError) as e:
            raise InvalidSubmission(
                f"spec is not valid JSON ({e}); expected an object with fields {', '.join(SPEC_FIELDS)}"
            ) from None
    else:
        raw = spec_json
    if not isinstance(raw, Mapping):
        raise InvalidSubmission(f"spec must be a JSON object, got {type(raw).__name__}")
    unknown = sorted(str(k) for k in raw if k not in SPEC_FIELDS)
    if unknown:
        raise InvalidSubmission(f"unknown spec field(s) {unknown}; allowed: {', '.join(SPEC_FIELDS)}")
    version = _require(raw, "format_version")
    if type(version) is not int or version != FORMAT_VERSION:
        raise InvalidSubmission(f"unsupported format_version {version!r}; this arena reads {FORMAT_VERSION}")
    arch = _require(raw, "arch")
    get_arch(arch)
    env_id = _require(raw, "env")
    if not isinstance(env_id, str):
        raise InvalidSubmission(f"spec field 'env' must be an env id string, got {env_id!r}")
    try:
        env = get_spec(env_id)
    except UnknownEnv as e:
        raise InvalidSubmission(str(e)) from None
    role = _require(raw, "role")
    if not isinstance(role, str) or role not in env.roles:
        roles = ", ".join(dict.fromkeys(env.roles))
        raise InvalidSubmission(f"role {role!r} is not a role of {env_id}; its roles: {roles}")
    expected_shape = tuple(env.team_obs_shape(env.team_of_role(role)))
    obs_shape = _require(raw, "obs_shape")
    if (not isinstance(obs_shape, (list, tuple)) or not all(type(d) is int for d in obs_shape)
            or tuple(obs_shape) != expected_shape):
        raise InvalidSubmission(
            f"obs_shape {obs_shape!r} does not match {env_id} role {role!r}: expected {list(expected_shape)}"
        )
    num_actions = _require(raw, "num_actions")
    if type(num_actions) is not int or num_actions != env.num_actions:
        raise InvalidSubmission(f"num_actions {num_actions!r} does not match {env_id}: expected {env.num_actions}")
    name = raw.get("name")
    if name is not None and (not isinstance(name, str) or not _NAME.match(name)):
        raise InvalidSubmission(
            f"name {name!r} must be 1-64 characters: letters, digits, space and _.:+- (not first)"
        )
    hparams = resolve_hparams(arch, raw.get("hparams", {}), expected_shape, env.num_actions)
    return CheckpointSpec(arch=arch, hparams=hparams, env=env_id, role=role,
                          obs_shape=expected_shape, num_actions=env.num_actions, name=name)


def make_spec(env_id: str, arch: str, hparams: Mapping[str, Any] | None = None,
              role: str | None = None, name: str | None = None) -> CheckpointSpec:
    """Spec for a new agent of ``env_id``; ``role`` may be omitted when the env has one role.

    Raises:
        UnknownEnv: ``env_id`` is not registered.
        InvalidSubmission: Ambiguous or unknown role, bad arch or hparams.
    """
    env = get_spec(env_id)
    if role is None:
        roles = list(dict.fromkeys(env.roles))
        if len(roles) != 1:
            raise InvalidSubmission(f"{env_id} has several roles ({', '.join(roles)}); choose one")
        role = roles[0]
    team = env.team_of_role(role) if role in env.roles else 0
    raw = {"format_version": FORMAT_VERSION, "arch": arch, "hparams": dict(hparams or {}),
           "env": env_id, "role": role, "obs_shape": list(env.team_obs_shape(team)),
           "num_actions": env.num_actions}
    if name is not None:
        raw["name"] = name
    return validate_spec(raw)


def _list(names: list[str], limit: int = 8) -> str:
    more = f" (+{len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def check_state_dict(spec: CheckpointSpec, state_dict: Mapping[str, torch.Tensor], *,
                     require_finite: bool = True) -> None:
    """Require ``state_dict`` to match ``build_net(spec)`` exactly: keys, shapes, float32.

    Args:
        spec: A validated spec.
        state_dict: Tensors to check.
        require_finite: Also reject NaN/inf values (always on for submissions).

    Raises:
        InvalidSubmission: Listing missing/unexpected keys or the first bad tensor.
    """
    with torch.device("meta"):
        expected = build_net(spec.arch, spec.hparams, spec.obs_shape, spec.num_actions).state_dict()
    missing = sorted(set(expected) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(expected))
    if missing or unexpected:
        parts = ([f"missing tensors: {_list(missing)}"] if missing else []) + (
            [f"unexpected tensors: {_list(unexpected)}"] if unexpected else [])
        raise InvalidSubmission(
            f"weights do not match arch {spec.arch!r} with hparams {spec.hparams}: {'; '.join(parts)}"
        )
    for key, want in expected.items():
        got = state_dict[key]
        if tuple(got.shape) != tuple(want.shape):
            raise InvalidSubmission(
                f"tensor {key!r} has shape {list(got.shape)}, expected {list(want.shape)} "
                f"for arch {spec.arch!r} with hparams {spec.hparams}"
            )
        if got.dtype != torch.float32:
            raise InvalidSubmission(
                f"tensor {key!r} has dtype {str(got.dtype).removeprefix('torch.')}, expected "
                "float32; convert with tensor.float() before saving"
            )
        if require_finite and not bool(torch.isfinite(got).all()):
            raise InvalidSubmission(f"tensor {key!r} contains NaN or infinite values")


def serialize_weights(state_dict: Mapping[str, torch.Tensor]) -> bytes:
    """Canonical safetensors bytes of a state dict (no metadata; byte-stable)."""
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in state_dict.items()}
    return safetensors.torch.save(tensors)


def load_checkpoint_bytes(weights: bytes, spec_json: bytes | str | Mapping[str, Any], *,
                          max_bytes: int = DEFAULT_MAX_BYTES) -> LoadedCheckpoint:
    """Validate and load a checkpoint held in memory (e.g. an HTTP upload).

    Args:
        weights: Raw ``.safetensors`` bytes.
        spec_json: ``agent.json`` contents (bytes, str or parsed dict).
        max_bytes: Size limit of ``weights``.

    Returns:
        The validated checkpoint; ``sha256`` is the hash of ``weights``.

    Raises:
        InvalidSubmission: Size, format, spec or tensor mismatch; the message says what to fix.
    """
    if len(weights) > max_bytes:
        raise InvalidSubmission(
            f"weights file is {len(weights):,} bytes, over the limit of {max_bytes:,} bytes"
        )
    spec = validate_spec(spec_json)
    parse_header(weights)
    try:
        state_dict = safetensors.torch.load(bytes(weights))
    except Exception as e:  # the library's own checks; ours should have caught it first
        raise InvalidSubmission(f"not a loadable safetensors file: {e}") from None
    check_state_dict(spec, state_dict)
    return LoadedCheckpoint(spec=spec, state_dict=state_dict,
                            sha256=hashlib.sha256(weights).hexdigest())


def checkpoint_paths(path: str | os.PathLike) -> tuple[Path, Path]:
    """``(weights, spec)`` paths for ``x.safetensors``, ``x.json`` or the stem ``x``."""
    p = Path(path)
    if p.suffix in (".safetensors", ".json"):
        return p.with_suffix(".safetensors"), p.with_suffix(".json")
    return p.with_name(p.name + ".safetensors"), p.with_name(p.name + ".json")


def _read_limited(path: Path, limit: int, what: str) -> bytes:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise InvalidSubmission(f"{what} {path} does not exist") from None
    if size > limit:
        raise InvalidSubmission(f"{path.name} is {size:,} bytes, over the limit of {limit:,} bytes")
    return path.read_bytes()


def load_checkpoint(path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES) -> LoadedCheckpoint:
    """Validate and load ``agent.safetensors`` + ``agent.json`` from disk.

    Args:
        path: The ``.safetensors`` file, its ``.json`` spec, or their common stem.
        max_bytes: Size limit of the weights file (checked before reading it).

    Raises:
        InvalidSubmission: Missing file or any validation failure, prefixed with the file name.
    """
    weights_path, spec_path = checkpoint_paths(path)
    weights = _read_limited(weights_path, max_bytes, "weights file")
    spec_bytes = _read_limited(spec_path, MAX_SPEC_BYTES, f"spec file (expected beside {weights_path.name})")
    try:
        return load_checkpoint_bytes(weights, spec_bytes, max_bytes=max_bytes)
    except InvalidSubmission as e:
        raise InvalidSubmission(f"{weights_path.name}: {e}") from None


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(model: nn.Module | Mapping[str, torch.Tensor],
                    spec: CheckpointSpec | Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Write ``<stem>.safetensors`` + ``<stem>.json``; refuses anything ``load_checkpoint`` would.

    Args:
        model: A module built by :func:`agents.nets.build_net` or its state dict.
        spec: The spec (validated again here).
        path: The ``.safetensors`` path, the ``.json`` path or the stem.

    Returns:
        Path of the written ``.safetensors`` file.

    Raises:
        InvalidSubmission: The spec or weights would not load back.
    """
    spec = validate_spec(spec)
    state_dict = model.state_dict() if isinstance(model, nn.Module) else dict(model)
    check_state_dict(spec, state_dict)
    weights_path, spec_path = checkpoint_paths(path)
    weights_path.parent.mkdir(parents=True, exist_ok=True)
    data = serialize_weights(state_dict)
    _atomic_write(weights_path, data)
    _atomic_write(spec_path, (json.dumps(spec.to_json(), indent=2) + "\n").encode())
    log.info("saved checkpoint %s (sha256 %s)", weights_path, hashlib.sha256(data).hexdigest()[:16])
    return weights_path
