"""Fuzzing the connected-agent protocol: whatever a client sends, the server answers with
an error or a close code of its own, never an internal error, and keeps serving.

Hypothesis generates message sequences: arbitrary maps and values (hello, answer and
ping shapes with wrong field types, unknown types, nested junk, oversized lists, raw
bytes that are not msgpack), sent as binary or text frames, to a live server, before
and after a valid hello, while the engine asks the agent for decisions. A valid ``ping``
follows each sequence: the server handles a connection's frames in order, so its
``pong`` (or a close) is its verdict on everything before it. The socket must have
closed with one of the protocol's codes, or stayed open and answered that ping; the
API must still answer, the agent's presence must be released, and the matches asked
in the meantime must each have ended with a recorded reason.
"""

from __future__ import annotations

import json
import logging
import threading

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from arena.connected.protocol import ProtocolError, decode_frame
from arena.connected.time_controls import TimeControl
from tests.connected.test_hostile_clients import play, ws_url
from tests.waiting import wait_for

PROTOCOL_CLOSES = {1000, 1001, 1009, 4400, 4401, 4403, 4404, 4408, 4409, 4429}
PING = msgpack.packb({"type": "ping"})

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64 - 1), st.floats(allow_nan=True),
                    st.text(max_size=40), st.binary(max_size=40))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=6),
                                                        st.dictionaries(st.text(max_size=8), inner, max_size=6)),
                      max_leaves=20)
messages = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["answer", "ping", "hello", "nonsense"])},
                          optional={"id": values, "actions": values, "protocol": values, "token": values,
                                    "encoding": values, "text": values}),
    st.dictionaries(st.text(max_size=8), values, max_size=5),
    values,
)


def is_pong(raw: bytes | str) -> bool:
    try:
        return decode_frame(raw)["type"] == "pong"
    except ProtocolError:  # not a map with a type (or a frame over the client limit: no pong)
        return False


def frame(message, as_text: bool) -> bytes | str:
    if as_text:
        try:
            return json.dumps(message)
        except (TypeError, ValueError):
            return str(message)
    try:
        return msgpack.packb(message, use_bin_type=True)
    except (TypeError, ValueError, OverflowError):
        return repr(message).encode()


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the database plays no part here
def test_no_message_breaks_the_server(live, caplog):
    token = live.user("fuzzer")
    agent = live.connected_agent(token, "fuzzed")
    url = ws_url(live, agent["id"])
    codes: list[int | None] = []

    @given(sequence=st.lists(st.tuples(messages, st.booleans()), min_size=1, max_size=12),
           hello_first=st.booleans())
    @settings(max_examples=60, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def run(sequence, hello_first: bool) -> None:
        with connect(url, open_timeout=10) as ws:
            if hello_first:
                ws.send(msgpack.packb({"type": "hello", "protocol": 1, "token": token}))
            try:
                for message, as_text in sequence:
                    ws.send(frame(message, as_text))
                ws.send(PING)
                while not is_pong(ws.recv(timeout=10)):  # welcome, errors, the engine's requests
                    pass
                codes.append(None)  # still open, and still answering
            except ConnectionClosed as closed:
                codes.append(closed.rcvd.code if closed.rcvd else None)
        wait_for("the presence to go with the socket",  # a hang guard: how soon is test_gateway_races's
                 lambda: live.services.connected_policies().broker.presence(agent["id"]) is None, timeout_s=30,
                 every_s=0.02)

    # while the fuzz runs, the engine keeps asking the agent for moves
    results: list = []
    asker = threading.Thread(target=lambda: results.extend(
        play(live, agent, 8, TimeControl(act_timeout_s=0.3, overage_s=0.0, grace_s=0.2))))
    asker.start()
    with caplog.at_level(logging.WARNING):
        run()
    asker.join(60)
    assert {c for c in codes if c is not None} <= PROTOCOL_CLOSES
    failures = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("arena")
                and "connection" in r.getMessage()]
    assert not failures, [r.getMessage() for r in failures]
    assert len(results) == 8 and all(r.termination for r in results)
    import httpx

    assert httpx.get(f"{live.url}/api/v1/health").status_code == 200
