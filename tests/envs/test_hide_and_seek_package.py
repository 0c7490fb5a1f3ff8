"""Hide-and-seek's one home: ids defined once, no import cycles."""

from __future__ import annotations

import ast
from pathlib import Path

from envs.hide_and_seek import rules
from envs.registry import get_spec, make_env

REPO = Path(__file__).resolve().parents[2]
HIDE_AND_SEEK = [
    "envs/hide_and_seek", "agents/hide_and_seek", "agents/role_baselines.py",
    "agents/trainers", "arena/training",
]


def test_the_ids_are_the_rules_ones_everywhere() -> None:
    from agents import role_baselines
    from agents.hide_and_seek import model as hide_and_seek_model
    from envs.hide_and_seek.core_v1 import HideAndSeekV1Core

    assert (role_baselines.HS_NOOP, role_baselines.HS_GRAB, role_baselines.HS_LOCK) == (rules.NOOP, rules.GRAB,
                                                                                        rules.LOCK)
    assert hide_and_seek_model.ACTIONS == rules.ACTIONS and role_baselines.HS_MOVES is rules.MOVES
    assert rules.ROLES == get_spec("hide_and_seek-v1").roles == get_spec("hide_and_seek-v0").roles
    for env_id, v1 in (("hide_and_seek-v0", False), ("hide_and_seek-v1", True)):
        env = make_env(env_id)
        assert env.action_space(env.possible_agents[0]).n == rules.NUM_ACTIONS
        assert get_spec(env_id).obs_shapes[0] == (rules.obs_dim(v1=v1),)
    core = HideAndSeekV1Core(1)
    core.reset([0])
    obs = core.observe()
    assert obs[0, 0, rules.flat_index("is_hider")] == 1.0 and obs[0, 2, rules.flat_index("is_seeker")] == 1.0


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, known: set[str]) -> set[str]:
    """Repository modules ``path`` imports anywhere (functions and ``TYPE_CHECKING`` included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        found |= {n for n in names if n in known}
    return found


def test_the_hide_and_seek_modules_import_one_way() -> None:
    files = []
    for entry in HIDE_AND_SEEK:
        path = REPO / entry
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    modules = {_module_name(f): f for f in files}
    graph = {m: _imports(f, set(modules)) - {m} for m, f in modules.items()}
    # A package's __init__ importing its own submodules is how packages work, not a cycle.
    graph = {m: {d for d in deps if not (d.startswith(m + ".") and modules[m].name == "__init__.py")}
             for m, deps in graph.items()}
    cycles, state = [], dict.fromkeys(graph, 0)

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state[d] == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif state[d] == 0:
                visit(d, [*stack, d])
        state[m] = 2

    for m in sorted(graph):
        if state[m] == 0:
            visit(m, [m])
    assert not cycles, cycles
