"""examples/openai_agent.py without the network: parsing replies, and falling back to a legal move."""

from __future__ import annotations

import logging

import numpy as np

from arena.connected.protocol import pack_array
from tests.examples.test_connect_four_negamax import load_example


def test_parse_move_takes_the_first_legal_number():
    example = load_example("openai_agent")
    assert example.parse_move("I will play column 3.", [0, 3, 4]) == 3
    assert example.parse_move("Column 7 is full, so 2", [0, 2]) == 2
    assert example.parse_move("no idea", [1]) is None


def test_an_unreachable_endpoint_falls_back_to_legal_moves(monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9")  # discard port: nothing listens
    monkeypatch.setenv("OPENAI_TIMEOUT_S", "2")
    example = load_example("openai_agent")
    assert example.act.arena_request and example.act.arena_text  # arena connect asks for text by itself
    mask = np.zeros((3, 7), dtype=bool)
    mask[0, 4] = mask[1, [1, 5]] = mask[2, :] = True
    request = {"type": "request", "id": "r", "env": "connect_four-v3", "budget_ms": 2000,
               "overage_ms": [30000] * 3, "obs": pack_array(np.zeros((3, 6, 7, 2), dtype=np.int8)),
               "mask": pack_array(mask), "text": ["board"] * 3}
    with caplog.at_level(logging.WARNING, logger="openai_agent"):
        moves = example.act(request)
    assert len(moves) == 3 and all(mask[i, m] for i, m in enumerate(moves))
    fallbacks = [r.getMessage() for r in caplog.records if r.name == "openai_agent"]
    assert len(fallbacks) == 3 and all("playing a random legal move" in m for m in fallbacks)  # one per row, logged
