"""Turn an agent name into a policy.

Names:
    ``random``                     uniformly random legal moves (every env)
    ``heuristic``                  the env's scripted heuristic (board games)
    ``heuristic:epsilon=0.3``      ... playing a random legal move 30% of the time
    ``chaser``, ``box-hider``, ...  the role and team envs' scripted baselines
                                   (:mod:`agents.role_baselines`; ``:epsilon=`` too)
    ``file:path/agent.safetensors`` a neural checkpoint (spec JSON beside it)
    ``file:path/agent.onnx``       an ONNX policy (spec JSON beside it)
"""

from __future__ import annotations

from agents.baselines import HEURISTICS, RandomPolicy
from agents.policy import Policy
from agents.role_baselines import ROLE_BASELINES
from envs.errors import InvalidSubmission, UnknownAgent
from envs.registry import get_spec

BUILTIN_NAMES = ("random", "heuristic")


def parse_params(text: str) -> dict[str, float]:
    """Parse ``"epsilon=0.3,foo=1"`` into floats, with a clear error on bad input."""
    params: dict[str, float] = {}
    for part in filter(None, text.split(",")):
        key, sep, value = part.partition("=")
        if not sep:
            raise UnknownAgent(f"agent parameter {part!r} must look like name=value")
        try:
            params[key.strip()] = float(value)
        except ValueError:
            raise UnknownAgent(f"agent parameter {key!r} must be a number, got {value!r}") from None
    return params


def make_policy(name: str, env_id: str, *, device: str = "cpu") -> Policy:
    """Build the policy called ``name`` for ``env_id``.

    Raises:
        UnknownAgent: The name is not a builtin, or has bad parameters.
        InvalidSubmission: A ``file:`` checkpoint fails validation.
    """
    get_spec(env_id)  # raises UnknownEnv early with the list of envs
    if name.startswith("file:"):
        path = name[len("file:"):]
        if path.endswith(".onnx"):
            from agents.onnx_agents.policy import onnx_policy_from_file  # onnxruntime only when needed

            policy = onnx_policy_from_file(path, device=device)
        else:
            from agents.neural import policy_from_file  # torch is only imported when needed

            policy = policy_from_file(path, device=device)
        if policy.spec.env != env_id:
            raise InvalidSubmission(
                f"{name} is a checkpoint for {policy.spec.env}, not {env_id}; "
                "pass the matching --env or a checkpoint trained for this env"
            )
        return policy
    base, _, params_text = name.partition(":")
    params = parse_params(params_text)
    if base == "random":
        if params:
            raise UnknownAgent("'random' takes no parameters")
        return RandomPolicy()
    if base in ROLE_BASELINES.get(env_id, {}):
        return _with_epsilon(ROLE_BASELINES[env_id][base], params)
    if base == "heuristic":
        if env_id not in HEURISTICS:
            raise UnknownAgent(f"no heuristic for {env_id}; heuristics exist for {sorted(HEURISTICS)}")
        return _with_epsilon(HEURISTICS[env_id], params)
    names = (*BUILTIN_NAMES, *ROLE_BASELINES.get(env_id, {}))
    raise UnknownAgent(
        f"unknown agent {name!r}; use one of {', '.join(names)} "
        "(optionally 'heuristic:epsilon=0.3') or 'file:path/to/agent.safetensors' (or .onnx)"
    )


def _with_epsilon(factory, params: dict[str, float]) -> Policy:
    """A scripted baseline; ``epsilon`` is its only parameter."""
    unknown = set(params) - {"epsilon"}
    if unknown:
        raise UnknownAgent(f"unknown heuristic parameter(s) {sorted(unknown)}; use epsilon=<0..1>")
    try:
        return factory(epsilon=params.get("epsilon", 0.0))
    except ValueError as exc:
        raise UnknownAgent(str(exc)) from None
