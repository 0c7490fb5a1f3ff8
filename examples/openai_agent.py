"""A language model as an Arena agent: any OpenAI-compatible chat endpoint, asked in text.

Run it (your Arena token from `arena user create` or `arena login`)::

    export OPENAI_API_KEY=sk-...                       # not needed by most local servers
    export OPENAI_BASE_URL=https://api.openai.com/v1   # or http://127.0.0.1:11434/v1 (Ollama), vLLM, ...
    export OPENAI_MODEL=gpt-4o-mini
    arena connect examples/openai_agent.py:act --env connect_four-v3 --name gpt-4o-mini

``act`` is marked :func:`arena.client.connected.whole_request` with ``text=True``: it gets the
protocol's whole request, and the server adds ``request["text"]``, one text rendering per
row (for connect four: the board as the mover sees it, X its own pieces, and the legal
columns). Every row is one chat completion (rows of a request are asked in parallel);
the move is the first legal action number in the reply. A reply without one, an error
or a reply later than the time left falls back to a random legal move, so a slow or
confused model loses games rather than forfeiting them. The log says how often that
happened.

Time: Arena gives a connect four request 2 s plus a 30 s overage bank per match; a
model slower than the budget spends the bank. Each request waits at most its budget
plus an eighth of the smallest bank in it (``OPENAI_TIMEOUT_S`` sets a fixed limit).

Only httpx (an Arena dependency) is used; no OpenAI package is needed.
"""

from __future__ import annotations

import logging
import os
import random
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np

from arena.client.connected import whole_request
from arena.client.connected.client import unpack_array

log = logging.getLogger("openai_agent")

BASE_URL = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")
MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
API_KEY = os.environ.get("OPENAI_API_KEY", "")
FIXED_TIMEOUT_S = float(os.environ["OPENAI_TIMEOUT_S"]) if os.environ.get("OPENAI_TIMEOUT_S") else None
SYSTEM = ("You are playing a board game against another program. Read the position and answer with the "
          "number of your move only, one of the legal moves listed.")

_http: httpx.Client | None = None
_stats = {"asked": 0, "fallbacks": 0}


def http() -> httpx.Client:
    """One connection pool for every call (thread-safe)."""
    global _http
    if _http is None:
        headers = {"Authorization": f"Bearer {API_KEY}"} if API_KEY else {}
        _http = httpx.Client(base_url=BASE_URL, headers=headers, limits=httpx.Limits(max_connections=16))
    return _http


def parse_move(reply: str, legal: list[int]) -> int | None:
    """The first whole number in ``reply`` that is a legal move, else ``None``."""
    for token in re.findall(r"-?\d+", reply):
        if int(token) in legal:
            return int(token)
    return None


def ask(prompt: str, legal: list[int], timeout_s: float, rng: random.Random) -> int:
    """One chat completion's move, or a random legal one when there is none in time."""
    _stats["asked"] += 1
    try:
        response = http().post("/chat/completions", timeout=timeout_s, json={
            "model": MODEL,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
        })
        response.raise_for_status()
        reply = response.json()["choices"][0]["message"]["content"] or ""
        move = parse_move(reply, legal)
        if move is not None:
            return move
        log.info("no legal move in the reply %r; playing a random one", reply[:200])
    except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as exc:
        log.warning("the model did not answer (%s: %s); playing a random legal move", type(exc).__name__, exc)
    _stats["fallbacks"] += 1
    return rng.choice(legal)


@whole_request(text=True)
def act(request: dict[str, Any]) -> list[int]:
    """One action per row of the request: the model's move, or a random legal one."""
    masks = unpack_array(request["mask"]).astype(bool)
    legal = [[int(a) for a in np.flatnonzero(m)] for m in masks]
    texts = request.get("text") or [f"{request.get('env')}: legal moves {moves}" for moves in legal]
    overage_s = min(request.get("overage_ms") or [0]) / 1000
    timeout_s = FIXED_TIMEOUT_S or max(0.5, request.get("budget_ms", 2000) / 1000 * 0.9 + overage_s / 8)
    rng = random.Random(request.get("id"))
    with ThreadPoolExecutor(max_workers=min(8, len(legal))) as pool:
        moves = list(pool.map(lambda row: ask(texts[row], legal[row], timeout_s, rng), range(len(legal))))
    if _stats["asked"] % 50 < len(legal):
        log.info("%d moves asked, %d random fallbacks", _stats["asked"], _stats["fallbacks"])
    return moves
