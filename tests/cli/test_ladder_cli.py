"""The service CLI as a user runs it: ladder, leaderboard, ratings rebuild, db upgrade."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ARENA = [sys.executable, "-m", "arena.cli"]
# The checkout under test, first on the path: the CLI runs in another folder, where the
# venv's installed ``arena`` (possibly another checkout) would be found otherwise.
REPO_ROOT = str(Path(__file__).resolve().parents[2])


def run(*args: str, data_dir, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "COLUMNS": "200",
           "ARENA_DATA_DIR": str(data_dir), "RAY_AUTH_MODE": "disabled", "HOME": str(data_dir),
           "PYTHONPATH": REPO_ROOT}
    return subprocess.run([*ARENA, *args], check=False, cwd=data_dir, capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_ladder_in_process_then_leaderboard_and_rebuild(tmp_path):
    res = run("ladder", "run", "--matches", "3000", "--workers", "0", "--batch-size", "500",
              "--agents", "heuristic,heuristic:epsilon=0.5,random", data_dir=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "recorded 3000" in res.stdout
    board = run("leaderboard", "--env", "connect_four-v3", data_dir=tmp_path)
    assert board.returncode == 0, board.stderr
    lines = [ln for ln in board.stdout.splitlines() if "│" in ln]
    order = [name for ln in lines for name in ("heuristic:epsilon=0.5", "heuristic ", "random") if name in ln]
    assert order == ["heuristic ", "heuristic:epsilon=0.5", "random"]
    rebuilt = run("ratings", "rebuild", "--env", "connect_four-v3", data_dir=tmp_path)
    assert rebuilt.returncode == 0, rebuilt.stdout
    assert "equal the live ratings exactly" in rebuilt.stdout
    assert (tmp_path / "arena.db").exists() and (tmp_path / "redis").is_dir()


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.xdist_group("ray")
def test_ladder_on_two_ray_workers(tmp_path):
    # Six batches on two workers: four in flight (two per worker), then two more as batches come back,
    # as with 6000 matches in batches of 1000; 300-match batches play 30% of the games.
    res = run("ladder", "run", "--matches", "1800", "--workers", "2", "--batch-size", "300",
              data_dir=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "scheduled 1800, recorded 1800" in res.stdout


def test_db_upgrade_and_bad_env(tmp_path):
    res = run("db", "upgrade", data_dir=tmp_path)
    assert res.returncode == 0 and "revision" in res.stdout
    res = run("leaderboard", "--env", "nope-v0", data_dir=tmp_path)
    assert res.returncode == 2 and "unknown env" in (res.stdout + res.stderr)
