"""Client behaviour that needs no server: the token file, and a server that is not there."""

from __future__ import annotations

import socket
import stat

import pytest

from arena.client import ArenaClient, ArenaConnectionError, load_token, save_token, token_path
from envs.errors import ArenaError
from tests.client.live import run_cli


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for var in ("XDG_CONFIG_HOME", "ARENA_TOKEN", "ARENA_TOKEN_FILE", "ARENA_SERVER"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_token_file_is_private_and_env_var_wins(home, monkeypatch):
    assert token_path() == home / ".config" / "arena" / "token"
    assert load_token() is None
    path = save_token("tok-1")
    assert path == token_path() and path.read_text() == "tok-1\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)
    save_token("tok-2")  # rewriting an existing, too-open file makes it private again
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_token() == "tok-2"
    assert ArenaClient("http://x").token == "tok-2"
    monkeypatch.setenv("ARENA_TOKEN", "from-env")
    assert load_token() == "from-env"
    assert ArenaClient("http://x", token="explicit").token == "explicit"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg"))
    assert token_path() == home / "xdg" / "arena" / "token"


def test_unreachable_server_is_a_clear_arena_error(home):
    url = f"http://127.0.0.1:{closed_port()}"
    with ArenaClient(url, timeout=5) as client, pytest.raises(ArenaConnectionError) as err:
        client.health()
    assert isinstance(err.value, ArenaError)
    assert f"cannot reach the Arena server at {url}" in str(err.value)


def test_cli_against_an_unreachable_server_exits_1(home):
    url = f"http://127.0.0.1:{closed_port()}"
    for args in (("agent", "show", "1", "--server", url), ("leaderboard", "--server", url)):
        res = run_cli(*args, home=home)
        assert res.returncode == 1, res.stdout + res.stderr
        assert "cannot reach the Arena server" in res.stderr
    res = run_cli("agent", "show", "1", home=home, server=url)  # ARENA_SERVER
    assert res.returncode == 1 and url in res.stderr


def test_submit_a_missing_file_exits_2(home):
    res = run_cli("submit", str(home / "nope.safetensors"), home=home,
                  server=f"http://127.0.0.1:{closed_port()}")
    assert res.returncode == 2
    assert "does not exist" in res.stderr
