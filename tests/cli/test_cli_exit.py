"""The ``arena`` command's exit: the objects still alive are frozen out of the collector's sight
before the interpreter's final collections (each rescanned them all: 1-2 s per command)."""

from __future__ import annotations

import atexit
import gc

import pytest

import arena.cli


def test_the_command_freezes_what_is_alive_after_every_other_exit_handler(monkeypatch):
    registered: list = []
    monkeypatch.setattr(atexit, "register", registered.append)  # not this test session's own exit
    monkeypatch.setattr("sys.argv", ["arena", "--help"])
    with pytest.raises(SystemExit) as done:
        arena.cli.main()
    assert done.value.code == 0
    # The first registered runs last: after any handler that a command registers as it runs.
    assert registered[:1] == [gc.freeze]
