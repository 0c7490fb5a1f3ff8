"""Reading the deployment files the way Docker Compose and Docker do, without an engine.

* :func:`interpolate` implements Compose's variable syntax (``$$``, ``$VAR``, ``${VAR}``,
  ``${VAR:-default}``, ``${VAR-default}``, ``${VAR:?error}``, ``${VAR?error}``,
  ``${VAR:+alt}``, ``${VAR+alt}``), as the Compose specification's "Interpolation"
  section defines it.
* :func:`read_env_file` reads ``.env.example`` (``KEY=value`` lines, ``#`` comments) and
  also returns the ``# ARENA_X=value`` lines that document variables compose sets itself.
* :func:`dockerfile_instructions` splits a Dockerfile into ``(INSTRUCTION, arguments)``
  with line continuations joined.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
SCHEMA_FILE = Path(__file__).with_name("compose-spec.json")

_VAR = re.compile(
    r"\$(?:(?P<escaped>\$)|(?P<named>[_A-Za-z][_A-Za-z0-9]*)|\{(?P<braced>[^}]*)\})")
_BRACED = re.compile(
    r"^(?P<name>[_A-Za-z][_A-Za-z0-9]*)(?:(?P<op>:?[-?+])(?P<arg>.*))?$", re.DOTALL)
_ENV_LINE = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$")
_DOC_LINE = re.compile(r"^#\s*(?P<key>ARENA_[A-Z0-9_]+)=(?P<value>.*)$")


class InterpolationError(ValueError):
    """A required variable is unset or empty (what ``docker compose`` refuses to run with)."""


@dataclass(frozen=True)
class VariableUse:
    """One ``${...}`` reference: the variable, its operator (``""``, ``:-``, ``:?``, ...)
    and the operator's argument (the default, the error message)."""

    name: str
    op: str
    arg: str


def _expand(match: re.Match[str], env: Mapping[str, str], uses: list[VariableUse] | None) -> str:
    if match["escaped"]:
        return "$"
    if match["named"]:
        if uses is not None:
            uses.append(VariableUse(match["named"], "", ""))
        return env.get(match["named"], "")
    body = _BRACED.match(match["braced"])
    if body is None:
        raise InterpolationError(f"invalid interpolation {match[0]!r}")
    name, op, arg = body["name"], body["op"] or "", body["arg"] or ""
    if uses is not None:
        uses.append(VariableUse(name, op, arg))
    value = env.get(name)
    set_, nonempty = value is not None, bool(value)
    present = nonempty if op.startswith(":") else set_
    if op == "":
        return value or ""
    if op in (":-", "-"):
        return value if present else arg  # type: ignore[return-value]
    if op in (":+", "+"):
        return arg if present else ""
    if not present:  # ":?" / "?"
        raise InterpolationError(f"{name}: {arg or 'required variable is missing'}")
    return value  # type: ignore[return-value]


def interpolate_string(text: str, env: Mapping[str, str],
                       uses: list[VariableUse] | None = None) -> str:
    """``text`` with every variable reference replaced as Compose does."""
    return _VAR.sub(lambda m: _expand(m, env, uses), text)


def interpolate(obj: Any, env: Mapping[str, str], uses: list[VariableUse] | None = None) -> Any:
    """Interpolate every string value (not mapping keys) of a parsed compose document."""
    if isinstance(obj, str):
        return interpolate_string(obj, env, uses)
    if isinstance(obj, list):
        return [interpolate(v, env, uses) for v in obj]
    if isinstance(obj, dict):
        return {k: interpolate(v, env, uses) for k, v in obj.items()}
    return obj


def variable_uses(obj: Any) -> list[VariableUse]:
    """Every variable reference in a parsed compose document."""
    uses: list[VariableUse] = []
    interpolate(obj, _Anything(), uses)
    return uses


class _Anything(dict):
    """An environment in which every variable is set (so ``:?`` never raises)."""

    def get(self, key: str, default: Any = None) -> str:
        return "x"


def load_compose() -> dict[str, Any]:
    """docker-compose.yml as parsed YAML (anchors and ``<<`` merge keys resolved)."""
    return yaml.safe_load(COMPOSE_FILE.read_text())


def load_schema() -> dict[str, Any]:
    """The vendored Compose specification JSON schema."""
    return json.loads(SCHEMA_FILE.read_text())


def read_env_file(path: Path = ENV_EXAMPLE) -> tuple[dict[str, str], dict[str, str]]:
    """``(assignments, documented)``: ``KEY=value`` lines, and ``# ARENA_X=value`` lines."""
    assigned: dict[str, str] = {}
    documented: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            doc = _DOC_LINE.match(line)
            if doc:
                documented[doc["key"]] = doc["value"].strip()
            continue
        found = _ENV_LINE.match(line)
        if found is None:
            raise ValueError(f"{path.name}: not a KEY=value line: {raw!r}")
        if found["key"] in assigned:
            raise ValueError(f"{path.name}: {found['key']} assigned twice")
        assigned[found["key"]] = found["value"]
    return assigned, documented


def dockerfile_instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` pairs, comments dropped, continuations joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, args = full.partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


def exec_form(args: str) -> list[str]:
    """The argument list of an exec-form (JSON array) instruction."""
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), args
    return value


def command_words(value: str | list[str] | None) -> list[str]:
    """A compose ``command``/``entrypoint``/healthcheck ``test`` as a list of words."""
    if value is None:
        return []
    return shlex.split(value) if isinstance(value, str) else list(value)
