"""Games: registry of versioned env ids, EnvSpec, vectorized cores for built-in games.

The names below load on first use (PEP 562): ``envs.errors``, which every package
imports, then costs no gymnasium or numpy import (the remote CLI commands need neither).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envs.registry import get_spec, list_envs, make_env, make_vector_core, register_env
    from envs.spec import EnvSpec

__all__ = ["EnvSpec", "get_spec", "list_envs", "make_env", "make_vector_core", "register_env"]
_HOMES = {"EnvSpec": "envs.spec", **{name: "envs.registry" for name in __all__ if name != "EnvSpec"}}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'envs' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
