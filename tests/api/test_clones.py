"""Clone fingerprints through the API (issue 20, item 6): a retrained copy with tiny weight noise
submitted by another user is flagged on the admin integrity report with its evidence; independently
trained agents are not; the same owner's copy is one family (its versions), not a flag. The
fingerprints are computed by the background service's worker, never by a read."""

from __future__ import annotations

import json

import numpy as np
import torch

from agents.catalog import make_policy
from agents.checkpoint import serialize_weights
from agents.nets import build_net
from agents.neural import random_init_checkpoint
from agents.policy import MatchRng
from arena.evaluation.fingerprint_positions import fingerprint_positions
from tests.api.conftest import ADMIN_TOKEN
from tests.api.helpers import API, ENV, TINY, auth, new_user, seed_ladder, upload

Weights = dict[str, torch.Tensor]


def briefly_trained(seed: int, steps: int = 200) -> tuple[Weights, str]:
    """A tiny MLP trained for ``steps`` Adam steps to imitate the heuristic (positions of another seed)."""
    state, spec = random_init_checkpoint(ENV, "mlp", TINY, seed=seed)
    net = build_net(spec.arch, spec.hparams, spec.obs_shape, spec.num_actions)
    net.load_state_dict(state)
    data = fingerprint_positions(ENV, "player", 256, seed=100 + seed)
    n = len(data)
    rng = MatchRng(np.arange(n), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64))
    target = torch.as_tensor(make_policy("heuristic", ENV).act(data.obs, data.masks, rng))
    obs, legal = torch.as_tensor(data.obs), torch.as_tensor(data.masks)
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny net: more threads only fight over a loaded machine's cores
    try:
        for _ in range(steps):
            loss = torch.nn.functional.cross_entropy(net(obs).masked_fill(~legal, -1e9), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return {k: v.detach().clone() for k, v in net.state_dict().items()}, json.dumps(spec.to_json())


def random_init(seed: int) -> tuple[Weights, str]:
    state, spec = random_init_checkpoint(ENV, "mlp", TINY, seed=seed)
    return state, json.dumps(spec.to_json())


def with_noise(state: Weights, scale: float, seed: int) -> Weights:
    """The same weights plus ``scale`` gaussian noise: a "retrained" copy."""
    gen = torch.Generator().manual_seed(seed)
    return {k: v + scale * torch.randn(v.shape, generator=gen) for k, v in state.items()}


def submit(client, token: str, state: Weights, spec: str, name: str) -> int:
    response = upload(client, token, serialize_weights(state), spec, name=name)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def worker_of(services):
    """The background service's fingerprint worker, on the same Redis and snapshot pool."""
    from arena.evaluation.fingerprint_worker import FingerprintWorker
    from arena.evaluation.fingerprints import FingerprintStore

    return FingerprintWorker(FingerprintStore(services.pool, services.redis, services.pool.keys,
                                              max_bytes=services.settings.max_upload_bytes))


def fingerprint_keys(services) -> list[bytes]:
    return list(services.redis.scan_iter(f"{services.pool.keys.prefix}:fp:*"))


def test_a_noisy_copy_by_another_user_is_flagged_and_an_owners_copy_is_a_family(client, services):
    builtins = seed_ladder(services, ["heuristic", "random"], 2)  # agents without weights: no fingerprint
    alice, bob, carol, dave = (new_user(client, n) for n in ("alice", "bob", "carol", "dave"))
    trained, spec = briefly_trained(0)
    original = submit(client, alice, trained, spec, "original")
    version = submit(client, alice, with_noise(trained, 1e-4, 1), spec, "original-v2")
    copy = submit(client, bob, with_noise(trained, 1e-4, 2), spec, "my-own-work")
    independent = submit(client, carol, *briefly_trained(1), "independent")
    fresh = submit(client, dave, *random_init(2), "fresh")
    fresh_too = submit(client, carol, *random_init(3), "fresh-too")  # carol: trained and fresh, unrelated

    # Anyone may read an agent's versions; a read computes nothing: it queues the fingerprints
    # (202 pending), the background service's worker computes them (tests/api/test_family.py).
    agents = (original, version, copy, independent, fresh, fresh_too)
    assert {client.get(f"{API}/agents/{a}/family").status_code for a in agents} == {202}
    assert fingerprint_keys(services) == []
    assert worker_of(services).drain() == 6 and len(fingerprint_keys(services)) == 6
    family = client.get(f"{API}/agents/{original}/family")
    assert family.status_code == 200, family.text
    body = family.json()
    assert body["role"] == "player" and body["positions"] == 512 and body["status"] == "ready"
    assert [m["agent_id"] for m in body["members"]] == [original, version]
    assert [m["this"] for m in body["members"]] == [True, False]
    assert body["members"][1]["agreement"] >= body["min_agreement"] == 0.99
    assert body["members"][1]["mean_kl"] <= body["max_kl"]
    for agent_id in (copy, independent, fresh, fresh_too):  # bob's copy is not alice's version
        assert client.get(f"{API}/agents/{agent_id}/family").json()["members"] == []
    assert client.get(f"{API}/agents/999999/family").status_code == 404

    assert client.get(f"{API}/admin/integrity", params={"env": ENV}, headers=auth(alice)).status_code == 403
    report = client.get(f"{API}/admin/integrity", params={"env": ENV}, headers=auth(ADMIN_TOKEN))
    assert report.status_code == 200, report.text
    clones = report.json()["clones"]
    assert clones["fingerprinted"] == 6 and clones["positions"] == {"player": 512} and not clones["not_fingerprinted"]
    flagged = {(f["earlier"]["agent_id"], f["later"]["agent_id"]): f for f in clones["flags"]}
    assert set(flagged) == {(original, copy), (version, copy)}
    evidence = flagged[(original, copy)]
    assert evidence["earlier"] == {"agent_id": original, "name": "original", "owner": "alice"}
    assert evidence["later"] == {"agent_id": copy, "name": "my-own-work", "owner": "bob"}
    assert evidence["agreement"] >= 0.99 and evidence["mean_kl"] <= 0.01 and evidence["positions"] == 512
    [own] = clones["families"]
    assert own["owner"] == "alice" and [m["agent_id"] for m in own["members"]] == [original, version]
    assert clones["pending"] == []

    page = client.get(f"/agents/{original}")
    assert page.status_code == 200 and f'data-source="{API}/agents/{original}/family"' in page.text
    assert 'id="family-section"' not in client.get(f"/agents/{builtins['random']}").text
    assert ENV in client.get("/admin/integrity").text and "integrity-clones" in client.get("/admin/integrity").text

