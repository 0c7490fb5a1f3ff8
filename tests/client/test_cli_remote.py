"""The remote CLI commands as a user runs them (subprocesses) against a live server (SQLite)."""

from __future__ import annotations

import re
import stat

import pytest

from agents.checkpoint import load_checkpoint
from agents.neural import write_checkpoint
from tests.client.live import run_cli
from tests.client.test_roundtrip import BUILTINS, C4, play_ladder

sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@sqlite_only
def test_user_create_init_submit_show_delete(arena, cli_home):
    created = run_cli("user", "create", "ada", home=cli_home, server=arena.url)
    assert created.returncode == 0, created.stderr
    token_file = cli_home / ".config" / "arena" / "token"
    token = token_file.read_text().strip()
    assert token in created.stdout  # printed once...
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600  # ...and saved privately

    me = run_cli("user", "me", home=cli_home, server=arena.url)
    assert me.returncode == 0 and me.stdout.startswith("ada (id ")
    token_file.unlink()
    login = run_cli("login", "--token", token, home=cli_home, server=arena.url)
    assert login.returncode == 0, login.stderr
    assert "token of user ada" in login.stdout and token_file.read_text().strip() == token

    init = run_cli("agent", "init", "--env", C4, "--hparams", '{"hidden": [32]}', "--out", "bot.safetensors",
                   home=cli_home)
    assert init.returncode == 0, init.stderr
    sha = load_checkpoint(cli_home / "bot.safetensors").sha256

    submitted = run_cli("submit", "bot.safetensors", "--name", "cli bot", home=cli_home, server=arena.url)
    assert submitted.returncode == 0, submitted.stderr
    assert f"mlp-{sha[:16]}" in submitted.stdout and "queued" in submitted.stdout
    agent_id = re.search(r"submitted as agent (\d+)", submitted.stdout).group(1)

    shown = run_cli("agent", "show", agent_id, home=cli_home, server=arena.url)
    assert shown.returncode == 0 and "cli bot" in shown.stdout and "queue_position" in shown.stdout

    again = run_cli("submit", "bot.safetensors", home=cli_home, server=arena.url)
    assert again.returncode == 2
    assert f"already submitted for {C4} as agent {agent_id}" in again.stderr and "HTTP 409" in again.stderr

    listed = run_cli("agent", "list", "--env", C4, home=cli_home, server=arena.url)
    assert listed.returncode == 0 and "cli bot" in listed.stdout

    deleted = run_cli("agent", "delete", agent_id, home=cli_home, server=arena.url)
    assert deleted.returncode == 0, deleted.stderr
    gone = run_cli("agent", "show", agent_id, home=cli_home, server=arena.url)
    assert "retired" in gone.stdout


@sqlite_only
def test_bad_or_missing_token_exits_2_with_the_servers_reason(arena, cli_home):
    write_checkpoint(cli_home / "bot.safetensors", C4, "mlp", {"hidden": [16]}, seed=0)  # `agent init`: above
    bad = run_cli("submit", "bot.safetensors", home=cli_home, server=arena.url, token="stolen-or-typo")
    assert bad.returncode == 2
    assert "invalid or revoked API token" in bad.stderr and "HTTP 401" in bad.stderr
    refused = run_cli("login", "--token", "stolen-or-typo", home=cli_home, server=arena.url)
    assert refused.returncode == 2 and "invalid or revoked API token" in refused.stderr
    assert not (cli_home / ".config" / "arena" / "token").exists()  # a bad token is not saved
    missing = run_cli("submit", "bot.safetensors", home=cli_home, server=arena.url)
    assert missing.returncode == 2 and "arena user create" in missing.stderr
    unknown = run_cli("agent", "show", "424242", home=cli_home, server=arena.url)
    assert unknown.returncode == 2 and "HTTP 404" in unknown.stderr


@sqlite_only
def test_leaderboard_matches_and_challenge_over_http(arena, cli_home):
    ids = play_ladder(arena, 60)
    board = run_cli("leaderboard", "--env", C4, "--server", arena.url, home=cli_home)
    assert board.returncode == 0, board.stderr
    lines = [ln for ln in board.stdout.splitlines() if "│" in ln]
    order = [k for ln in lines for k in BUILTINS if f" {k} " in ln]
    assert order == list(BUILTINS)
    assert "3 agents" in board.stdout

    recent = run_cli("matches", "--env", C4, "--limit", "5", home=cli_home, server=arena.url)
    assert recent.returncode == 0, recent.stderr
    assert sum(" vs " in ln for ln in recent.stdout.splitlines()) == 5

    assert run_cli("user", "create", "ada", home=cli_home, server=arena.url).returncode == 0
    played = run_cli("challenge", str(ids["heuristic"]), str(ids["random"]), "--matches", "2",
                     home=cli_home, server=arena.url)
    assert played.returncode == 0, played.stderr
    assert "2 matches recorded (unrated)" in played.stdout
