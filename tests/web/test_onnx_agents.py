"""ONNX agents end to end: exported, submitted over HTTP, validated, rated, shown.

A live server (uvicorn in a thread) runs over real services with the background
service playing the ladder, as ``arena serve`` does. Two ONNX agents are submitted
over HTTP: a registry checkpoint exported with ``arena agent export-onnx`` and sent
with ``arena submit``, and a small transformer built here in torch (an architecture
Arena's registry does not have) sent with :class:`~arena.client.ArenaClient`. Both
must reach ``rated``; their pages say what they are, in a real browser too.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
import torch

from agents.neural import write_checkpoint
from agents.onnx_agents.export import export_module
from arena.client import ArenaClient
from tests.agents.onnx_corpus import ENV, spec_json
from tests.agents.onnx_nets import TinyTransformer
from tests.client.live import live_arena, run_cli

sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
OBS_SHAPE, ACTIONS = (3, 3, 2), 9


def transformer_onnx() -> tuple[bytes, dict]:
    """A small attention policy for tictactoe, exported from torch, with its spec."""
    torch.manual_seed(11)
    net = TinyTransformer(OBS_SHAPE, ACTIONS)
    return export_module(net, OBS_SHAPE), {**spec_json(), "hparams": {"source_arch": "transformer"}}


def exported_checkpoint(home: Path) -> Path:
    """``arena agent export-onnx`` of a fresh registry checkpoint; the .onnx path."""
    write_checkpoint(home / "bot.safetensors", ENV, "cnn", {"channels": [8], "hidden": 16}, seed=4)
    exported = run_cli("agent", "export-onnx", "bot.safetensors", "--out", "bot-onnx.onnx", home=home)
    assert exported.returncode == 0, exported.stderr
    assert "bot-onnx.onnx" in exported.stdout and (home / "bot-onnx.json").exists()
    return home / "bot-onnx.onnx"


@pytest.mark.slow
@sqlite_only
def test_an_exported_agent_and_a_transformer_reach_rated(tmp_path, migrated_db_url, redis_url):
    cli_home = tmp_path / "home"
    cli_home.mkdir()
    model_path = exported_checkpoint(cli_home)
    with live_arena(tmp_path, migrated_db_url, redis_url, ENV, ladder=True) as live:
        client = ArenaClient(live.url, token=live.token)
        submitted = run_cli("submit", model_path.name, "--name", "exported cnn", home=cli_home,
                            server=live.url, token=client.token)
        assert submitted.returncode == 0, submitted.stderr
        exported_id = int(re.search(r"submitted as agent (\d+)", submitted.stdout).group(1))
        data, spec = transformer_onnx()
        transformer = client.submit_agent(data, spec, name="tiny transformer")
        assert transformer["status"] == "queued" and transformer["key"].startswith("onnx-")
        final = {i: client.wait_for_status(i, {"rated", "rejected"}, timeout=300)
                 for i in (exported_id, transformer["id"])}
        assert {a["status"] for a in final.values()} == {"rated"}, final
        assert [a["hparams"]["source_arch"] for a in final.values()] == ["cnn", "transformer"]
        assert all((a["format"], a["arch"]) == ("onnx", "onnx") for a in final.values())
        board = {row["agent_id"]: row for row in client.leaderboard(ENV)["data"]}
        assert all(board[i]["games"] > 0 for i in final)
        # A challenge against a builtin plays them on demand too.
        result = client.challenge(ENV, [transformer["id"], live.builtin_ids["random"]], matches=4)
        assert [m["termination"] for m in result["results"]] == ["normal"] * 4
        page = httpx.get(f"{live.url}/agents/{exported_id}").text
        assert "ONNX" in page and "(declared: cnn)" in page
        client.close()


@pytest.mark.browser
@sqlite_only
def test_an_onnx_agents_page_in_chromium(tmp_path, migrated_db_url, redis_url):
    from tests.web.test_browser import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS  # skips without chromium

    sync_api = pytest.importorskip("playwright.sync_api")
    with live_arena(tmp_path, migrated_db_url, redis_url, ENV, ladder=False) as live:
        client = ArenaClient(live.url, token=live.token)
        agent = client.submit_agent(*transformer_onnx(), name="tiny transformer")
        client.close()
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{live.url}/agents/{agent['id']}")
            assert page.locator("h1").inner_text() == "tiny transformer"
            assert page.locator("#agent-format").inner_text() == "ONNX"
            assert page.locator("#agent-arch").inner_text() == "onnx (declared: transformer)"
            assert "queued" in page.locator(".status-queued").inner_text()
            browser.close()
        assert not errors, errors
