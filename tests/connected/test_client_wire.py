"""What the Python client puts on the wire: uncompressed frames unless told otherwise (on a fast
link, permessage-deflate on every request costs the server and the client more than the bytes it
saves; ``compression="deflate"`` still asks for it, and both play the same), and one integer or
``None`` per row of an answer, whatever ``act`` returned."""

from __future__ import annotations

import numpy as np
import pytest

import arena.client.connected.client as client_module
from arena.client.connected.client import _clean
from tests.connected.test_live_protocol import play, wait_online


def first_legal(obs: np.ndarray, mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the database plays no part here
@pytest.mark.parametrize(("asked", "negotiated"), [({}, []), ({"compression": "deflate"}, ["PerMessageDeflate"])])
def test_the_client_compresses_frames_only_when_asked(live, run_client, monkeypatch, asked, negotiated):
    opened = []
    connect = client_module.connect

    def recording_connect(*args, **kwargs):
        ws = connect(*args, **kwargs)
        opened.append([type(e).__name__ for e in ws.protocol.extensions])
        return ws

    monkeypatch.setattr(client_module, "connect", recording_connect)
    token = live.user("squeezed")
    agent = live.connected_agent(token, "first-legal")
    client = run_client(live.url, token, agent["id"], first_legal, **asked)
    wait_online(live, agent["id"])
    records, _ = play(live, agent, "random", 4)
    assert [r.termination for r in records] == ["normal"] * 4
    assert client.progress.requests > 0
    assert opened and all(extensions == negotiated for extensions in opened)


@pytest.mark.parametrize(("returned", "sent"), [
    (np.array([3, 0, 6], dtype=np.int64), [3, 0, 6]),
    (np.array([[3], [0], [6]], dtype=np.uint8), [3, 0, 6]),
    ([3, 0.0, np.int32(6)], [3, 0, 6]),
    (np.array([3.0, 0.5, np.nan]), [3, None, None]),
    ([3, "x", None], [3, None, None]),
    (np.array([True, False, True]), [1, 0, 1]),
])
def test_an_answer_has_an_integer_or_none_per_row(returned, sent):
    values = _clean(returned, 3)
    assert values == sent
    assert all(type(v) is int or v is None for v in values)  # msgpack writes numpy scalars differently


@pytest.mark.parametrize("returned", [np.array([1, 2], dtype=np.int64), [1, 2, 3, 4]])
def test_an_answer_with_the_wrong_row_count_is_refused(returned):
    with pytest.raises(ValueError, match="actions for 3 rows"):
        _clean(returned, 3)
