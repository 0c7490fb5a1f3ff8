"""From a policy trained anywhere to an Arena submission: ONNX export on the user's side.

::

    from arena.client.onnx_export import export_submission
    export_submission(model, "connect_four-v3", "my-agent.onnx")     # model: SB3 PPO/A2C/DQN, MaskablePPO, ...
    # then: arena submit my-agent.onnx --wait

:func:`export_submission` takes a Stable-Baselines3 model or policy (``PPO``, ``A2C``,
sb3-contrib's ``MaskablePPO``: the actor's logits; ``DQN``: its Q-values as logits) or any
torch module mapping float32 observations ``(batch, *obs_shape)`` to logits
``(batch, num_actions)`` (a CleanRL actor), exports it with Arena's exporter
(:func:`agents.onnx_agents.export.export_module`: TorchScript-based, opset 17, dynamic
batch axis), validates it exactly as the server will (the checks and probe runs of
``docs/onnx.md``), and writes ``<stem>.onnx`` + ``<stem>.json`` (``"arch": "onnx"``).
Arena masks illegal actions and samples from the logits itself, so the exported model
needs no mask input. Nothing here talks to a server.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from agents.checkpoint_spec import ONNX_ARCH, make_spec
from agents.files import atomic_write
from agents.onnx_agents.export import export_module
from agents.onnx_agents.policy import ValidatedOnnx, onnx_paths, validate_onnx_bytes

__all__ = ["SB3_ALGOS", "SB3Logits", "export_submission", "load_sb3", "logits_module"]

SB3_ALGOS = ("maskable_ppo", "ppo", "a2c", "dqn")
"""Algorithms :func:`load_sb3` knows (``auto`` tries them in this order)."""


class SB3Logits(nn.Module):
    """The logits of a Stable-Baselines3 policy as a plain module (what Arena runs).

    Actor-critic policies (PPO, A2C, MaskablePPO): features, the actor's latent, the
    action net. Q-learning policies (DQN): the Q-network's values, used as logits (Arena
    then samples ``softmax(Q)``; export a sharper policy yourself if that is too soft).
    """

    def __init__(self, policy: nn.Module) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        policy = self.policy
        if hasattr(policy, "q_net"):
            return policy.q_net(obs)
        features = policy.extract_features(obs)
        if isinstance(features, tuple):  # actor and critic with separate feature extractors
            features = features[0]
        return policy.action_net(policy.mlp_extractor.forward_actor(features))


def logits_module(model: Any) -> nn.Module:
    """A module ``obs -> logits`` from an SB3 model or policy, or ``model`` itself if it is a module.

    Raises:
        TypeError: Neither an SB3 model/policy nor a torch module.
    """
    policy = getattr(model, "policy", model)  # an SB3 algorithm holds its policy
    if hasattr(policy, "q_net") or (hasattr(policy, "action_net") and hasattr(policy, "mlp_extractor")):
        return SB3Logits(policy).cpu()
    if isinstance(model, nn.Module):
        return model.cpu()
    raise TypeError(f"cannot export {type(model).__name__}: pass a Stable-Baselines3 model or policy, "
                    "or a torch module mapping observations (batch, *obs_shape) to logits (batch, num_actions)")


def export_submission(model: Any, env_id: str, out: str | os.PathLike, *, role: str | None = None,
                      name: str | None = None, hparams: Mapping[str, Any] | None = None) -> ValidatedOnnx:
    """Export ``model`` as an ONNX submission for ``env_id`` and validate it as the server will.

    Args:
        model: An SB3 model or policy, or a torch module (module docstring).
        env_id: The env it plays.
        out: The ``.onnx`` path or stem; the spec JSON goes beside it.
        role: Its role in role envs (may be left out where the env has one role).
        name: Display name stored in the spec.
        hparams: Informational entries for the spec (at most 16 short name -> str/number/bool);
            default: the exported class.

    Returns:
        The validated model (``sha256`` is the agent's identity).

    Raises:
        InvalidSubmission: The export breaks a rule of docs/onnx.md (the message says which).
    """
    module = logits_module(model)
    source = type(getattr(model, "policy", model)).__name__
    spec = make_spec(env_id, ONNX_ARCH, dict(hparams or {"source": source[:64]}), role=role, name=name)
    validated = validate_onnx_bytes(export_module(module, spec.obs_shape), spec)
    model_path, spec_path = onnx_paths(out)
    model_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(model_path, validated.data)
    atomic_write(spec_path, (json.dumps(validated.spec.to_json(), indent=2) + "\n").encode())
    return validated


def _sb3_class(algo: str) -> Any:
    if algo == "maskable_ppo":
        from sb3_contrib import MaskablePPO

        return MaskablePPO
    import stable_baselines3

    return {"ppo": stable_baselines3.PPO, "a2c": stable_baselines3.A2C, "dqn": stable_baselines3.DQN}[algo]


def load_sb3(path: str | os.PathLike, algo: str = "auto") -> Any:
    """A Stable-Baselines3 model from the ``.zip`` its ``save()`` wrote, on the CPU, to export.

    SB3's loader unpickles parts of the archive (its saved objects): load only models you
    trained yourself. Exporting turns it into ONNX, so no pickle ever reaches a server.

    Args:
        path: The ``.zip``.
        algo: One of :data:`SB3_ALGOS`, or ``auto`` (the first that loads it).

    Raises:
        InvalidSubmission: No such file, an unknown ``algo``, or none loads it (with why).
    """
    from envs.errors import InvalidSubmission

    if not os.path.isfile(path):
        raise InvalidSubmission(f"{path} does not exist")
    if algo != "auto" and algo not in SB3_ALGOS:
        raise InvalidSubmission(f"unknown SB3 algorithm {algo!r}; use auto or one of {', '.join(SB3_ALGOS)}")
    errors = []
    for name in SB3_ALGOS if algo == "auto" else (algo,):
        try:
            return _sb3_class(name).load(path, device="cpu")
        except Exception as exc:  # noqa: BLE001 - SB3 raises whatever its loader meets; try the next class
            errors.append(f"{name}: {str(exc)[:160]}")
    raise InvalidSubmission(f"cannot load {path} as an SB3 model ({'; '.join(errors)})")
