"""The CLI end to end, in a subprocess as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ARENA = [sys.executable, "-m", "arena.cli"]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*ARENA, *args], check=False, cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})


def test_play_writes_records_and_replay_reproduces_them(tmp_path):
    out = tmp_path / "results.jsonl"
    res = run("play", "--env", "connect_four-v3", "--agents", "heuristic,random", "--matches", "1000",
              "--seed", "7", "--out", str(out), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "heuristic" in res.stdout and "W" in res.stdout
    lines = out.read_text().splitlines()
    assert len(lines) == 1000
    first = json.loads(lines[0])
    assert {"env", "seed", "seats", "actions", "scores", "winner", "termination"} <= set(first)
    assert first["env"] == "connect_four-v3" and len(first["seats"]) == 2
    res = run("replay", str(out), cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "reproduced 1000/1000" in res.stdout
    # Same seed: byte-identical records apart from the fresh match ids.
    out2 = tmp_path / "again.jsonl"
    run("play", "--env", "connect_four-v3", "--agents", "heuristic,random", "--matches", "1000",
        "--seed", "7", "--out", str(out2), cwd=tmp_path)
    strip = lambda text: [{k: v for k, v in json.loads(x).items() if k != "match_id"} for x in text.splitlines()]
    assert strip(out.read_text()) == strip(out2.read_text())


def test_replay_exits_nonzero_on_a_tampered_record(tmp_path):
    out = tmp_path / "r.jsonl"
    run("play", "--env", "tictactoe-v3", "--agents", "heuristic,random", "--matches", "20", "--out", str(out),
        cwd=tmp_path)
    records = [json.loads(x) for x in out.read_text().splitlines()]
    scores = records[3]["scores"]
    records[3]["scores"] = [scores[1], scores[0]] if records[3]["winner"] is not None else [1.0, -1.0]
    out.write_text("".join(json.dumps(r) + "\n" for r in records) + "not json\n")
    res = run("replay", str(out), cwd=tmp_path)
    assert res.returncode == 1
    assert "reproduced 19/21" in res.stdout


def test_neural_file_agent_plays(tmp_path):
    from agents.neural import write_checkpoint

    write_checkpoint(tmp_path / "agent.safetensors", "connect_four-v3", "mlp", {"hidden": [32]}, seed=3)
    res = run("play", "--env", "connect_four-v3", "--agents", f"file:{tmp_path / 'agent.safetensors'},random",
              "--matches", "50", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "mlp-" in res.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "nope-v1"], "unknown env"),
        (["--agents", "heuristic,bogus"], "unknown agent"),
        (["--agents", "heuristic:epsilon=2"], "epsilon"),
        (["--agents", "file:/does/not/exist.safetensors,random"], "exist"),
        (["--env", "tictactoe-v3", "--agents", "heuristic:speed=3,random"], "unknown heuristic parameter"),
    ],
)
def test_bad_input_gets_a_clear_error(tmp_path, args, message):
    res = run("play", "--matches", "5", *args, cwd=tmp_path)
    assert res.returncode == 2
    assert message in (res.stdout + res.stderr).lower()
