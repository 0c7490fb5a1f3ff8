"""The house's import rules, read statically from every module of the four packages.

1. Arrows point one way, ``arena -> league -> agents -> envs``: a module imports only
   its own package and the packages to its right.
2. ``arena/client/`` (what runs on a user's machine) reaches no server module, not even
   through another module it imports.
3. No import cycles between modules.
4. A name is imported from the module that defines it: ``from M import n``, anywhere in
   the repository (tests, benchmarks and examples too), where ``M`` is a module of the
   four packages or of benchmarks (not a package's ``__init__``, which presents its
   package), names what ``M`` defines (a function, a class, an assignment) or a
   submodule; a module's ``__all__`` lists only what it defines. No module passes on
   another's names.

Imports are read with :mod:`ast`, so nothing is executed: ``import`` and ``from``
statements anywhere (inside functions and ``TYPE_CHECKING`` blocks too), imports by
string (``importlib.import_module("...")`` and ``__import__("...")`` with a literal name,
every string naming one of our modules in a module that imports by string, and entry
points such as ``"envs.tictactoe:TicTacToeCore"``). A failure lists every violation.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYERS = ("arena", "league", "agents", "envs")
"""Left to right: a package may import itself and the packages to its right."""
CLIENT = "arena.client"
SERVER = ("arena.api", "arena.ladder", "arena.storage", "arena.engine", "arena.runners", "arena.web",
          "arena.evaluation", "arena.training", "arena.connected.gateway", "arena.connected.broker",
          "arena.connected.policy")
"""Modules (and everything under them) that only the service runs."""
ENTRY_POINT = re.compile(r"^([A-Za-z_][\w.]*):[A-Za-z_]\w*$")
IMPORTERS = (*LAYERS, "tests", "benchmarks", "examples")
"""Where rule 4 reads imports from."""


@cache
def _modules(root: Path, layers: tuple[str, ...] = LAYERS) -> dict[str, Path]:
    """Every module of the four packages (or of ``layers``) under ``root``, by dotted name."""
    found = {}
    for layer in layers:
        for path in sorted((root / layer).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _absolute(module: str | None, level: int, importer: str, is_package: bool) -> str:
    """The absolute name of ``from <level dots><module> import ...`` in ``importer``."""
    if level == 0:
        return module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _strings_imported(tree: ast.AST) -> Iterator[str]:
    """Names a module imports by string."""
    dynamic = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__"):
                dynamic = True
                if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                    yield node.args[0].value
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            entry = ENTRY_POINT.match(node.value)
            if entry:
                yield entry.group(1)
            elif dynamic:
                yield node.value


@cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for every rule."""
    return ast.parse(path.read_text(), str(path))


@cache
def imports(module: str, root: Path = REPO) -> frozenset[str]:
    """Our modules that ``module`` imports, each as the deepest of our modules named."""
    known = _modules(root)
    path = known[module]
    tree = _tree(path)
    found: set[str] = set()

    def add(name: str) -> None:
        while name and name not in known:  # "arena.x.Class" -> "arena.x"
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, module, path.name == "__init__.py")
            for alias in node.names:
                add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    for name in _strings_imported(tree):
        if name.split(".")[0] in LAYERS:
            add(name)
    return frozenset(found)


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _parents(module: str, root: Path) -> list[str]:
    """The packages Python imports before ``module`` (``a``, ``a.b`` for ``a.b.c``)."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in _modules(root)]


def arrow_violations(root: Path = REPO) -> list[str]:
    """``importer -> imported`` pairs that point left."""
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    return [f"{m} -> {d}" for m in sorted(_modules(root)) for d in sorted(imports(m, root))
            if rank[d.split(".")[0]] < rank[m.split(".")[0]]]


def client_violations(root: Path = REPO) -> list[str]:
    """For each server module the client reaches: the chain of imports from the client."""
    chains: dict[str, list[str]] = {}
    queue = [[m] for m in sorted(_modules(root)) if _under(m, CLIENT)]
    seen = {chain[0] for chain in queue}
    while queue:
        chain = queue.pop(0)
        for d in sorted(imports(chain[-1], root) | set(_parents(chain[-1], root))):
            if d in seen:
                continue
            seen.add(d)
            if any(_under(d, s) for s in SERVER):
                chains.setdefault(d, [*chain, d])
            else:
                queue.append([*chain, d])
    return [" -> ".join(chain) for _, chain in sorted(chains.items())]


def cycles(root: Path = REPO) -> list[str]:
    """Import cycles, each once (a package's ``__init__`` importing its own modules is no cycle)."""
    modules = _modules(root)
    graph = {m: sorted(d for d in imports(m, root)
                       if not (modules[m].name == "__init__.py" and d.startswith(m + ".")))
             for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for m in sorted(graph):
        if m not in index:
            connect(m)
    return [_one_cycle(graph, component) for component in sorted(components)]


def _one_cycle(graph: dict[str, list[str]], component: list[str]) -> str:
    """A shortest cycle through the first module of a strongly connected component, as text."""
    members, start = set(component), component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in graph[v]:
            if w == start:
                cycle = [*paths[v], start]
                more = len(component) > len(cycle) - 1
                return " -> ".join(cycle) + (f" (one of {len(component)} modules in cycles together)" if more else "")
            if w in members and w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    raise AssertionError(f"no cycle through {start}")  # a component of two or more always has one


def _defined(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level itself (not by importing them)."""
    names: set[str] = set()
    for node in tree.body:
        for inner in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]:
            if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(inner.name)
            elif isinstance(inner, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = inner.targets if isinstance(inner, ast.Assign) else [inner.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _listed(tree: ast.Module) -> list[str]:
    """A module's ``__all__`` (a literal list or tuple of strings), else nothing."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)]
    return []


def passed_on(root: Path = REPO) -> list[str]:
    """``importer: module.name`` for each name imported from a module that does not define it,
    and ``module.__all__: name`` for each name a module lists but does not define."""
    modules = _modules(root, (*LAYERS, "benchmarks"))
    trees = {m: _tree(p) for m, p in modules.items() if p.name != "__init__.py"}
    defined = {m: _defined(t) for m, t in trees.items()}
    found = [f"{m}.__all__: {n}" for m, t in sorted(trees.items()) for n in _listed(t) if n not in defined[m]]
    for top in IMPORTERS:
        for path in sorted((root / top).rglob("*.py")):
            for node in _from_imports(path.read_text()):
                if node.level == 0 and node.module in defined:
                    found += [f"{path.relative_to(root)}: {node.module}.{a.name}" for a in node.names
                              if a.name not in defined[node.module] and f"{node.module}.{a.name}" not in modules]
    return found


FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+[\w.]+[ \t]+import[ \t]+(?:\([^)]*\)|[^\n]*)", re.MULTILINE)
"""A ``from ... import ...`` statement (parenthesised over lines, or on one line)."""


def _from_imports(text: str) -> Iterator[ast.ImportFrom]:
    """The ``from`` imports of a file, anywhere in it: each statement parsed alone (a whole
    file's tree costs several times more, for hundreds of files)."""
    for match in FROM_IMPORT.finditer(text):
        try:
            node = ast.parse(match.group(0).strip()).body[0]
        except SyntaxError:  # inside a string, or a statement the pattern cut short
            continue
        if isinstance(node, ast.ImportFrom):
            yield node


def test_the_parser_sees_every_kind_of_import() -> None:
    """The rules below are only as good as what the parser finds: it finds these."""
    assert "envs.builtin" in imports("envs.registry")  # a module-level from-import
    assert {"envs.spec", "envs.registry"} <= imports("envs")  # strings a PEP 562 package imports by name
    assert "envs.tictactoe" in imports("envs.builtin")  # an entry point "envs.tictactoe:TicTacToeCore"
    assert "agents.onnx_agents.handlers" in imports("agents.onnx_agents.worker")  # importlib.import_module("...")


def test_each_rule_lists_what_breaks_it(tmp_path: Path) -> None:
    """A tree built to break every rule once: each check names the offender."""
    files = {
        "envs/__init__.py": "",
        "envs/game.py": "def late():\n    from league import board\n",  # right to left, inside a function
        "league/__init__.py": "",
        "league/board.py": "import importlib\nMOD = importlib.import_module('league.book')\n",
        "league/book.py": "from league import board\n",  # board -> book by string, book -> board
        "agents/__init__.py": "",
        "arena/__init__.py": "",
        "arena/api/__init__.py": "",
        "arena/api/app.py": "",
        "arena/core/__init__.py": "",
        "arena/core/errors.py": "from arena.api import app\n",
        "arena/client/__init__.py": "from .http import Client\n",
        "arena/client/http.py": "from ..core import errors\n",  # reaches the API through core
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert arrow_violations(tmp_path) == ["envs.game -> league.board"]
    assert client_violations(tmp_path) == ["arena.client.http -> arena.core.errors -> arena.api.app"]
    assert cycles(tmp_path) == ["league.board -> league.book -> league.board"]


def test_a_name_passed_on_by_another_module_is_named(tmp_path: Path) -> None:
    files = {
        "envs/__init__.py": "from envs.rules import NOOP\n",  # a package presents its modules: allowed
        "envs/rules.py": "NOOP, GRAB = range(2)\nif True:\n    def late():\n        pass\n",
        "envs/env.py": "from envs.rules import GRAB, NOOP\n__all__ = ['GRAB', 'Env']\nclass Env:\n    pass\n",
        "tests/test_env.py": "from envs.env import NOOP, Env\nfrom envs.rules import late\nfrom envs import rules\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert passed_on(tmp_path) == ["envs.env.__all__: GRAB", "tests/test_env.py: envs.env.NOOP"]


def test_arrows_point_one_way() -> None:
    violations = arrow_violations()
    assert not violations, (f"{len(violations)} imports point against arena -> league -> agents -> envs:\n"
                            + "\n".join(violations))


def test_the_client_reaches_no_server_module() -> None:
    violations = client_violations()
    assert not violations, (f"arena/client/ reaches {len(violations)} server modules:\n" + "\n".join(violations))


def test_no_import_cycles() -> None:
    found = cycles()
    assert not found, f"{len(found)} import cycles:\n" + "\n".join(found)


def test_names_are_imported_from_their_home() -> None:
    found = passed_on()
    assert not found, (f"{len(found)} names passed on by a module that does not define them (import each "
                       "from its home; list in __all__ only what the module defines):\n" + "\n".join(found))
