"""The Dockerfile and .dockerignore, checked without a Docker engine: they agree with
pyproject.toml, arena.core.settings and docker-compose.yml, and the wheel `pip install`
builds inside the image carries every file of the packages."""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from arena.core.settings import Settings
from tests.deploy.deployfiles import (
    DOCKERIGNORE,
    ROOT,
    dockerfile_instructions,
    exec_form,
    load_compose,
)

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


@pytest.fixture(scope="module")
def instructions() -> list[tuple[str, str]]:
    return dockerfile_instructions()


def stage(instructions: list[tuple[str, str]], name: str) -> list[tuple[str, str]]:
    """The instructions of the build stage called ``name``."""
    out, inside = [], False
    for keyword, args in instructions:
        if keyword == "FROM":
            inside = args.split()[-1] == name
            continue
        if inside:
            out.append((keyword, args))
    assert out, f"no stage {name}"
    return out


def args_of(instructions: list[tuple[str, str]], keyword: str) -> list[str]:
    return [args for k, args in instructions if k == keyword]


def env_of(instructions: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for args in args_of(instructions, "ENV"):
        for pair in re.findall(r"(\w+)=(\S+)", args):
            env[pair[0]] = pair[1]
    return env


def arg_defaults(instructions: list[tuple[str, str]]) -> dict[str, str]:
    return dict(a.split("=", 1) for a in args_of(instructions, "ARG") if "=" in a)


def packages() -> set[str]:
    """Top-level package directories setuptools installs (tool.setuptools.packages.find)."""
    include = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    return {p.rstrip("*") for p in include}


def test_base_image_is_the_python_pyproject_requires(instructions) -> None:
    assert arg_defaults(instructions)["PYTHON_IMAGE"] == "python:3.11-slim"
    assert PYPROJECT["project"]["requires-python"] == ">=3.11,<3.12"
    assert [a.split()[0] for a in args_of(instructions, "FROM")] == ["${PYTHON_IMAGE}"] * 2


def test_torch_is_the_pinned_version_from_the_cpu_index_by_default(instructions) -> None:
    pins = [d for d in PYPROJECT["project"]["dependencies"] if re.match(r"torch\b", d)]
    assert pins == [f"torch=={arg_defaults(instructions)['TORCH_VERSION']}"]
    build = stage(instructions, "build")
    assert arg_defaults(build)["TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"
    install = [a for a in args_of(build, "RUN") if "torch==" in a]
    assert install and '--index-url "${TORCH_INDEX_URL}"' in install[0]


def test_every_package_and_the_project_metadata_are_copied(instructions) -> None:
    copied = set()
    for args in args_of(stage(instructions, "build"), "COPY"):
        if not args.startswith("--from"):
            copied.update(Path(src).name for src in args.split()[:-1])
    assert packages() | {"pyproject.toml", PYPROJECT["project"]["readme"]} <= copied
    runs = args_of(stage(instructions, "build"), "RUN")
    assert any(a.startswith("pip install /src") for a in runs)


def test_runtime_runs_as_a_non_root_user(instructions) -> None:
    runtime = stage(instructions, "runtime")
    users = args_of(runtime, "USER")
    assert users and users[-1] not in ("root", "0")
    assert "--uid 10001" in " ".join(args_of(runtime, "RUN"))


def test_entrypoint_is_the_project_script(instructions) -> None:
    runtime = stage(instructions, "runtime")
    assert exec_form(args_of(runtime, "ENTRYPOINT")[-1]) == ["arena"]
    assert "arena" in PYPROJECT["project"]["scripts"]
    assert exec_form(args_of(runtime, "CMD")[-1]) == ["serve"]


def test_exposed_port_and_healthcheck_are_the_settings_port_and_health_route(instructions) -> None:
    runtime = stage(instructions, "runtime")
    port = Settings.model_fields["port"].default
    assert args_of(runtime, "EXPOSE") == [str(port)]
    check = args_of(runtime, "HEALTHCHECK")[-1]
    cmd = exec_form(check[check.index("CMD") + 3:].strip())
    assert cmd[:2] == ["python", "-c"]
    assert "/api/v1/health" in cmd[2] and f"'ARENA_PORT', '{port}'" in cmd[2]


def test_image_environment_is_settings_and_the_data_volume(instructions) -> None:
    runtime = stage(instructions, "runtime")
    env = env_of(runtime)
    arena = {k for k in env if k.startswith("ARENA_")}
    assert arena and arena <= {f"ARENA_{n.upper()}" for n in Settings.model_fields}
    assert exec_form(args_of(runtime, "VOLUME")[-1]) == [env["ARENA_DATA_DIR"]]
    assert env["ARENA_HOST"] == "0.0.0.0"  # reachable from outside the container
    api = load_compose()["services"]["api"]
    assert api["environment"]["ARENA_DATA_DIR"] == env["ARENA_DATA_DIR"]


def test_dockerignore_keeps_secrets_and_local_state_out_but_not_the_sources() -> None:
    patterns = [p.strip() for p in DOCKERIGNORE.read_text().splitlines()
                if p.strip() and not p.startswith("#")]
    excludes = [p for p in patterns if not p.startswith("!")]
    assert {".env", ".venv", ".git", ".arena"} <= set(excludes)
    needed = packages() | {"pyproject.toml", "README.md"}
    for name in needed:
        assert not any(fnmatch.fnmatch(name, p) for p in excludes), name


@pytest.mark.slow
def test_the_wheel_ships_every_file_of_the_packages(tmp_path: Path) -> None:
    """What ``pip install /src`` puts in the image: every non-bytecode file of every package.

    A template, a static asset or a migration missing here is missing in the container.
    """
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for package in sorted(packages()):
        shutil.copytree(ROOT / package, src / package, ignore=ignore)
    out = tmp_path / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(src)], check=True, capture_output=True, timeout=300)
    [wheel] = out.glob("*.whl")
    shipped = {n for n in zipfile.ZipFile(wheel).namelist() if not n.endswith("/")}
    expected = {p.relative_to(src).as_posix() for package in packages()
                for p in (src / package).rglob("*") if p.is_file()}
    missing = sorted(expected - shipped)
    assert not missing, f"not installed by `pip install` (add them to package-data): {missing}"
