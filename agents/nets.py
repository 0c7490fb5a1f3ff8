"""The networks of the registry's architectures, as torch modules.

A checkpoint says ``arch`` + ``hparams`` (validated by :mod:`agents.archs`, which
describes the architectures and their state dicts without torch); :func:`build_net`
turns that (plus the env's observation shape and action count) into a fresh
``torch.nn.Module`` mapping float observations ``(k, *obs_shape)`` to logits
``(k, num_actions)``. Because the architecture is rebuilt from a small, validated
description and only *tensors* are loaded into it, a submission can never smuggle code
(no pickle, no TorchScript).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import torch
from torch import nn

from agents.archs import ACTIVATIONS, resolve_hparams

_ACTIVATIONS: Mapping[str, Callable[[torch.Tensor], torch.Tensor]] = MappingProxyType(
    {name: getattr(torch, name) for name in ACTIVATIONS}  # torch.relu, torch.tanh
)


class MLPNet(nn.Module):
    """Flatten -> (Linear -> activation)* -> Linear head."""

    def __init__(self, in_features: int, hidden: list[int], activation: str, num_actions: int):
        super().__init__()
        sizes = [in_features, *hidden]
        self.trunk = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(sizes))
        self.head = nn.Linear(sizes[-1], num_actions)
        self._act = _ACTIVATIONS[activation]

    def features(self, obs: torch.Tensor, matmul_dtype: torch.dtype | None = None) -> torch.Tensor:
        """The last hidden layer (what ``head`` reads); a trainer's critic may share it.

        ``matmul_dtype`` (training only, e.g. ``torch.bfloat16``): the first layer's matrix
        product, where nearly all of the arithmetic is, runs in that type (its output back in
        float32; gradients reach the float32 weights); every later layer and the head stay float32.
        """
        x = obs.reshape(obs.shape[0], -1)
        for i, layer in enumerate(self.trunk):
            if i == 0 and matmul_dtype is not None:
                x = nn.functional.linear(x.to(matmul_dtype), layer.weight.to(matmul_dtype),
                                         layer.bias.to(matmul_dtype)).float()
            else:
                x = layer(x)
            x = self._act(x)
        return x

    def forward(self, obs: torch.Tensor, matmul_dtype: torch.dtype | None = None) -> torch.Tensor:
        return self.head(self.features(obs, matmul_dtype))


class CNNNet(nn.Module):
    """(Conv2d same-padding -> activation)* -> flatten -> Linear -> activation -> head.

    Input is channels-last ``(k, H, W, C)`` like the PettingZoo board observations.
    """

    def __init__(
        self,
        obs_shape: tuple[int, int, int],
        channels: list[int],
        kernel: int,
        hidden: int,
        activation: str,
        num_actions: int,
    ):
        super().__init__()
        height, width, c_in = obs_shape
        sizes = [c_in, *channels]
        self.convs = nn.ModuleList(
            nn.Conv2d(a, b, kernel, padding=kernel // 2) for a, b in itertools.pairwise(sizes)
        )
        self.fc = nn.Linear(height * width * channels[-1], hidden)
        self.head = nn.Linear(hidden, num_actions)
        self._act = _ACTIVATIONS[activation]

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """The fully connected layer's output (what ``head`` reads)."""
        x = obs.permute(0, 3, 1, 2)
        for conv in self.convs:
            x = self._act(conv(x))
        return self._act(self.fc(x.flatten(1)))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(obs))


def _build_mlp(hp: dict, obs_shape: tuple[int, ...], num_actions: int) -> nn.Module:
    return MLPNet(math.prod(obs_shape), hp["hidden"], hp["activation"], num_actions)


def _build_cnn(hp: dict, obs_shape: tuple[int, ...], num_actions: int) -> nn.Module:
    return CNNNet(
        obs_shape, hp["channels"], hp["kernel"], hp["hidden"], hp["activation"], num_actions
    )


BUILDERS: Mapping[str, Callable[[dict, tuple[int, ...], int], nn.Module]] = MappingProxyType(
    {"mlp": _build_mlp, "cnn": _build_cnn}
)
"""The module of each arch of :data:`agents.archs.ARCHS`, from complete hparams."""


def build_net(
    arch: str, hparams: Mapping[str, Any] | None, obs_shape: tuple[int, ...], num_actions: int
) -> nn.Module:
    """Build a fresh (randomly initialized) network.

    Build under ``with torch.device("meta"):`` to get a module without allocating memory
    (:func:`agents.archs.state_shapes` lists its state dict without torch).

    Args:
        arch: Registered architecture name (see :data:`agents.archs.ARCHS`).
        hparams: Hyper-parameters; omitted keys take the arch defaults.
        obs_shape: Observation shape; the module takes float ``(k, *obs_shape)``.
        num_actions: Number of logits per row.

    Returns:
        A module mapping ``(k, *obs_shape)`` float32 to ``(k, num_actions)`` logits.

    Raises:
        InvalidSubmission: See :func:`agents.archs.resolve_hparams`.
    """
    hp = resolve_hparams(arch, hparams, obs_shape, num_actions)
    return BUILDERS[arch](hp, tuple(obs_shape), num_actions)
