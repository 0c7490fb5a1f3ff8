"""Games: registry of versioned env ids, EnvSpec, vectorized cores for built-in games."""

from envs.registry import get_spec, list_envs, make_env, make_vector_core, register_env
from envs.spec import EnvSpec

__all__ = ["EnvSpec", "get_spec", "list_envs", "make_env", "make_vector_core", "register_env"]
