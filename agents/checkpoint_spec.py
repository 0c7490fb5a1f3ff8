"""The checkpoint spec (``agent.json``): parsing and validation against the registries.

Spec fields::

    {"format_version": 1, "arch": "mlp", "hparams": {"hidden": [64, 64]},
     "env": "simple_tag-v3", "role": "prey", "obs_shape": [14], "num_actions": 5,
     "name": "optional display name"}

``env`` must be registered, ``role`` one of its team roles, ``obs_shape`` and
``num_actions`` exactly the env's for that role, ``arch``/``hparams`` valid in
:mod:`agents.archs`. Unknown fields are refused so a typo is never silently ignored.

``"arch": "onnx"`` describes an ONNX model (:mod:`agents.onnx_agents.policy`) instead of
safetensors weights: the graph itself is the architecture, so ``hparams`` is only
informational (e.g. ``{"source_arch": "cnn"}``): at most 16 entries of short strings,
numbers or booleans, stored as given.

Version history:
    format_version 1: the fields above; float32 tensors only. ``arch`` ``onnx`` was
        added later within version 1 (an older reader refuses it as an unknown arch).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agents.archs import get_arch, resolve_hparams, unknown_keys
from agents.safetensors_header import strict_json
from envs.errors import InvalidSubmission, UnknownEnv
from envs.registry import get_spec
from envs.spec import EnvSpec

FORMAT_VERSION = 1
MAX_SPEC_BYTES = 64 * 1024
SPEC_FIELDS = (
    "format_version",
    "arch",
    "hparams",
    "env",
    "role",
    "obs_shape",
    "num_actions",
    "name",
)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.:+-]{0,63}$")
ONNX_ARCH = "onnx"
"""The arch of a spec that goes with an ``.onnx`` model instead of safetensors weights."""
_MAX_INFO_ENTRIES = 16
_MAX_INFO_CHARS = 256


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
            "format_version": self.format_version,
            "arch": self.arch,
            "hparams": self.hparams,
            "env": self.env,
            "role": self.role,
            "obs_shape": list(self.obs_shape),
            "num_actions": self.num_actions,
        }
        if self.name is not None:
            out["name"] = self.name
        return out


def _require(raw: Mapping[str, Any], key: str) -> Any:
    if key not in raw:
        raise InvalidSubmission(f"spec is missing required field {key!r}")
    return raw[key]


def _parse(spec_json: bytes | str | Mapping[str, Any]) -> Mapping[str, Any]:
    """The spec as a mapping with only known fields."""
    raw: Any = spec_json
    if isinstance(spec_json, (bytes, bytearray, str)):
        if len(spec_json) > MAX_SPEC_BYTES:
            raise InvalidSubmission(f"spec JSON is larger than {MAX_SPEC_BYTES} bytes")
        try:
            is_bytes = isinstance(spec_json, (bytes, bytearray))
            raw = strict_json(spec_json.decode("utf-8") if is_bytes else spec_json)
        except (UnicodeDecodeError, ValueError) as e:
            raise InvalidSubmission(
                f"spec is not valid JSON ({e}); expected an object with fields "
                f"{', '.join(SPEC_FIELDS)}"
            ) from None
    unknown = unknown_keys(raw, "spec", SPEC_FIELDS)
    if unknown:
        raise InvalidSubmission(
            f"unknown spec field(s) {unknown}; allowed: {', '.join(SPEC_FIELDS)}"
        )
    version = _require(raw, "format_version")
    if type(version) is not int or version != FORMAT_VERSION:
        raise InvalidSubmission(
            f"unsupported format_version {version!r}; this arena reads {FORMAT_VERSION}"
        )
    return raw


def _env_and_role(raw: Mapping[str, Any]) -> tuple[EnvSpec, str]:
    """The registered env and the role the spec plays in it."""
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
    return env, role


def _check_arch(arch: Any) -> None:
    if arch == ONNX_ARCH:
        return
    try:
        get_arch(arch)
    except InvalidSubmission as e:
        raise InvalidSubmission(f"{e}; or {ONNX_ARCH!r} with an .onnx model") from None


def _info_hparams(hparams: Any) -> dict:
    """The informational hparams of an ONNX spec: a small flat object of plain values."""
    if not isinstance(hparams, Mapping) or len(hparams) > _MAX_INFO_ENTRIES:
        raise InvalidSubmission(
            f"hparams of an onnx spec must be a JSON object of at most {_MAX_INFO_ENTRIES} "
            "entries (informational only: the graph is the architecture)"
        )
    for key, value in hparams.items():
        plain = isinstance(value, (str, int, float, bool)) and len(str(value)) <= _MAX_INFO_CHARS
        plain = plain and not (isinstance(value, float) and not math.isfinite(value))
        if not (isinstance(key, str) and len(key) <= 64 and plain):
            raise InvalidSubmission(
                f"onnx hparam {str(key)[:64]!r} must map a short name to a string, number or "
                f"boolean of at most {_MAX_INFO_CHARS} characters"
            )
    return dict(hparams)


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
    raw = _parse(spec_json)
    arch = _require(raw, "arch")
    _check_arch(arch)
    env, role = _env_and_role(raw)
    expected = tuple(env.team_obs_shape(env.team_of_role(role)))
    obs_shape = _require(raw, "obs_shape")
    if (
        not isinstance(obs_shape, (list, tuple))
        or not all(type(d) is int for d in obs_shape)
        or tuple(obs_shape) != expected
    ):
        raise InvalidSubmission(
            f"obs_shape {obs_shape!r} does not match {env.env_id} role {role!r}: "
            f"expected {list(expected)}"
        )
    num_actions = _require(raw, "num_actions")
    if type(num_actions) is not int or num_actions != env.num_actions:
        raise InvalidSubmission(
            f"num_actions {num_actions!r} does not match {env.env_id}: expected {env.num_actions}"
        )
    name = raw.get("name")
    if name is not None and (not isinstance(name, str) or not _NAME.match(name)):
        raise InvalidSubmission(
            f"name {name!r} must be 1-64 characters: letters, digits, space and _.:+- (not first)"
        )
    if arch == ONNX_ARCH:
        hparams = _info_hparams(raw.get("hparams", {}))
    else:
        hparams = resolve_hparams(arch, raw.get("hparams", {}), expected, env.num_actions)
    return CheckpointSpec(
        arch=arch,
        hparams=hparams,
        env=env.env_id,
        role=role,
        obs_shape=expected,
        num_actions=env.num_actions,
        name=name,
    )


def make_spec(
    env_id: str,
    arch: str,
    hparams: Mapping[str, Any] | None = None,
    role: str | None = None,
    name: str | None = None,
) -> CheckpointSpec:
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
    raw = {
        "format_version": FORMAT_VERSION,
        "arch": arch,
        "hparams": dict(hparams or {}),
        "env": env_id,
        "role": role,
        "obs_shape": list(env.team_obs_shape(team)),
        "num_actions": env.num_actions,
    }
    if name is not None:
        raw["name"] = name
    return validate_spec(raw)
