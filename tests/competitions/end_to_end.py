"""Helpers of the end-to-end competition tests: an arena served live (the API in a thread of the
test, the background service in a process of its own: :mod:`tests.competitions.service_process`),
the entries' weights, and a season held open by its organizer while the test's entries are made
and validated (:func:`season_held_open`: no test races the wall clock to its deadline)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import torch
from sqlalchemy import func, select

from agents.checkpoint import serialize_weights
from agents.neural import random_init_checkpoint
from arena.api import create_app
from arena.client import ArenaClient
from arena.client.agents import upload_parts
from arena.core.settings import Settings
from arena.storage.db import upgrade
from arena.storage.db.models import Agent
from arena.storage.wiring import Services, open_services
from tests.api.helpers import RAISED_LIMITS
from tests.client.live import REPO_ROOT, LiveServer
from tests.competitions.service_process import GO

ENV = "tictactoe-v3"
ADMIN_TOKEN = "end-to-end-admin"


def entry(seed: int, strong: bool = False) -> tuple[bytes, dict[str, Any]]:
    """An entry's ``(weights, spec)``: a tiny random MLP (about a random player), or with ``strong``
    the same net told by its output bias to take the centre, then the corners, then the edges
    (it beats a random player at tictactoe most of the time)."""
    state, spec = random_init_checkpoint(ENV, "mlp", {"hidden": [8]}, seed=seed)
    if strong:
        state["head.weight"] = torch.zeros_like(state["head.weight"])
        state["head.bias"] = torch.tensor([6.0, 0.0, 6.0, 0.0, 12.0, 0.0, 6.0, 0.0, 6.0])
    return serialize_weights(state), spec.to_json()


def post_entry(url: str, token: str, competition_id: int, weights: bytes, spec: dict[str, Any],
               name: str) -> httpx.Response:
    """``POST /competitions/{id}/entries`` as sent by the client, answered as it is (refusals too)."""
    files, form = upload_parts(weights, json.dumps(spec).encode(), name, None)
    return httpx.post(f"{url}/api/v1/competitions/{competition_id}/entries", files=files, data=form,
                      headers={"Authorization": f"Bearer {token}"}, timeout=60)


@dataclass
class Arena:
    url: str
    services: Services
    settings: Settings

    def stored_agents(self) -> int:
        """Agents stored, whatever their status (a refused submission must not add one)."""
        with self.services.sessions() as session:
            return session.scalar(select(func.count()).select_from(Agent))


@contextmanager
def live_arena(tmp_path: Path, redis_url: str, database_url: str | None = None) -> Iterator[Arena]:
    """A fresh arena's API served live by this process (no background service: see :func:`service`)."""
    database_url = database_url or f"sqlite+pysqlite:///{tmp_path / 'arena.sqlite3'}"
    upgrade(database_url)
    settings = Settings(page_cache_s=0.0, data_dir=tmp_path / "data", database_url=database_url,
                        redis_url=redis_url, envs=ENV, probe_concurrency=0, admin_token=ADMIN_TOKEN,
                        **RAISED_LIMITS)
    with open_services(settings) as services:
        server = LiveServer(create_app(services))
        try:
            yield Arena(server.url, services, settings)
        finally:
            server.stop()


@contextmanager
def service(arena: Arena, hang_after: int | None = None, gated: bool = False) -> Iterator[subprocess.Popen]:
    """The background service in a process of its own, over the arena's database, Redis and data; killed after.

    With ``gated`` the process imports and opens its services but starts only once passed to :func:`release`
    (say the successor of a service the test kills: ready before the kill, started after it)."""
    args = [arena.settings.database_url, arena.settings.redis_url, str(arena.settings.data_dir), ENV]
    if hang_after is not None:
        args.append(str(hang_after))
    path = arena.settings.data_dir.parent / f"service-{time.monotonic_ns()}.log"
    log = open(path, "wb")  # noqa: SIM115
    env = {**os.environ, "ARENA_TEST_SERVICE_GATED": "1"} if gated else None
    process = subprocess.Popen([sys.executable, "-m", "tests.competitions.service_process", *args],
                               cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, env=env,
                               stdin=subprocess.PIPE if gated else None)
    try:
        yield process
    except BaseException as exc:  # a failure shows what the service said
        log.flush()
        exc.add_note("the service's log ends:\n" + path.read_text(errors="replace")[-4000:])
        raise
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        if process.stdin is not None:
            process.stdin.close()
        log.close()


def release(process: subprocess.Popen) -> None:
    """Starts a service made with ``gated`` (:func:`service`)."""
    assert process.stdin is not None and process.poll() is None, "not a gated service, or it ended"
    process.stdin.write(GO)
    process.stdin.close()


@dataclass
class HeldSeason:
    """An open competition held by :func:`season_held_open`."""

    deadline: datetime
    """Its deadline as the server stores it; after the block, the one to wait for."""
    extensions: int = 0
    """How often its organizer extended it."""


EXTENSION_STEP_S = 1.0
"""How far past its margin the holder moves the deadline each time (about one PATCH a second)."""


@contextmanager
def season_held_open(url: str, token: str, competition_id: int, margin_s: float) -> Iterator[HeldSeason]:
    """Keeps an open competition taking entries while the block runs, however slow the machine.

    Its organizer (``token``) extends the deadline through the API (``PATCH /competitions/{id}``,
    allowed once open: dates only, later, before the deadline) to ``margin_s`` plus
    :data:`EXTENSION_STEP_S` from now whenever fewer than ``margin_s`` are left (polled every
    0.1 s). A test then makes and validates its entries inside the block with no race against the
    deadline, and waits for :attr:`HeldSeason.deadline` after it: at most ``margin_s`` plus the step
    (or the deadline it set itself, if no extension was needed). ``margin_s`` is the stall the
    holder survives (its thread starved, an extension slow to be served): a failure needs it to
    miss some ``margin_s / 0.1`` polls in a row. The deadline can only move later, so whatever is
    left at the block's end is waited out: the margin is both the safety and the cost. The
    competition must have no ``final_ends_at`` (it would have to move with the deadline).

    Raises:
        AssertionError: An extension failed (say the deadline passed first: a stall of ``margin_s``).
    """
    stop = threading.Event()
    failures: list[BaseException] = []
    path = f"/competitions/{int(competition_id)}"
    with ArenaClient(url, token=token) as organizer:
        held = HeldSeason(datetime.fromisoformat(organizer.competition(competition_id)["deadline"]))

        def hold() -> None:
            try:
                while not stop.is_set():
                    now = datetime.now(UTC)
                    if held.deadline - now < timedelta(seconds=margin_s):
                        later = (now + timedelta(seconds=margin_s + EXTENSION_STEP_S)).isoformat()
                        extended = organizer.request("PATCH", path, json={"deadline": later})
                        held.deadline = datetime.fromisoformat(extended["deadline"])
                        held.extensions += 1
                    stop.wait(0.1)  # the polling period; the block's end sets ``stop``
            except BaseException as exc:  # noqa: BLE001 - raised in the test's thread at the block's end
                failures.append(exc)

        holder = threading.Thread(target=hold, name=f"season-{competition_id}-held-open", daemon=True)
        holder.start()
        try:
            yield held
        except BaseException as exc:
            if failures:
                exc.add_note(f"extending competition {competition_id}'s deadline failed: {failures[0]!r}")
            raise
        finally:
            stop.set()
            holder.join(timeout=60)
        if failures:
            raise AssertionError(f"extending competition {competition_id}'s deadline failed") from failures[0]
        held.deadline = datetime.fromisoformat(organizer.competition(competition_id)["deadline"])
