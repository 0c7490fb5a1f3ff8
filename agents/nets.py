"""Architecture registry: the only network shapes a checkpoint may name.

A checkpoint says ``arch`` + ``hparams``; :func:`build_net` turns that (plus the env's
observation shape and action count) into a fresh ``torch.nn.Module`` mapping float
observations ``(k, *obs_shape)`` to logits ``(k, num_actions)``. Because the
architecture is rebuilt from a small, validated description and only *tensors* are
loaded into it, a submission can never smuggle code (no pickle, no TorchScript).

Architectures:
    mlp: flatten, then ``hidden`` fully connected layers (default ``[256, 256]``),
        activation ``relu`` or ``tanh``, then a linear head.
    cnn: for board observations ``(H, W, C)``: ``channels`` conv layers (default
        ``[32, 32]``, ``kernel`` 3, "same" padding), one ``hidden`` fully connected
        layer (default 128), then a linear head.

State-dict keys are part of the checkpoint format: ``trunk.<i>`` / ``head`` for mlp,
``convs.<i>`` / ``fc`` / ``head`` for cnn. Change them only with a new arch name.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import torch
from torch import nn

from envs.errors import InvalidSubmission

MAX_PARAMETERS = 8_388_608
"""Largest network a checkpoint may describe (2**23 floats = 32 MiB of float32)."""

_ACTIVATIONS: Mapping[str, Callable[[torch.Tensor], torch.Tensor]] = MappingProxyType(
    {"relu": torch.relu, "tanh": torch.tanh}
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


@dataclass(frozen=True)
class Arch:
    """One registered architecture.

    Attributes:
        name: Registry key written into checkpoints.
        description: One line for listings.
        defaults: Hyper-parameters used when a key is omitted.
        resolve: Validates user hparams against ``(obs_shape, num_actions)`` and
            returns the complete hparams (defaults filled in).
        count_parameters: Exact parameter count, computed without allocating.
        build: Constructs the module from complete hparams.
    """

    name: str
    description: str
    defaults: Mapping[str, Any]
    resolve: Callable[[dict, tuple[int, ...]], dict]
    count_parameters: Callable[[dict, tuple[int, ...], int], int]
    build: Callable[[dict, tuple[int, ...], int], nn.Module]


def unknown_keys(value: Any, what: str, allowed: Collection[str]) -> list[str]:
    """The keys of the JSON object ``value`` (named ``what`` in the error) that are not ``allowed``, sorted.

    Raises:
        InvalidSubmission: ``value`` is not a JSON object.
    """
    if not isinstance(value, Mapping):
        raise InvalidSubmission(f"{what} must be a JSON object, got {type(value).__name__}")
    return sorted(str(k) for k in value if k not in allowed)


def _check_keys(arch: str, hparams: Any, defaults: Mapping[str, Any]) -> dict:
    unknown = unknown_keys(hparams, "hparams", defaults)
    if unknown:
        raise InvalidSubmission(
            f"unknown hyper-parameter(s) {', '.join(map(repr, unknown))} for arch {arch!r}; "
            f"allowed: {', '.join(sorted(defaults))}"
        )
    return {**defaults, **hparams}


def _int(arch: str, key: str, value: Any, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidSubmission(f"{arch} hparam {key!r} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise InvalidSubmission(f"{arch} hparam {key!r} must be in [{lo}, {hi}], got {value}")
    return value


def _int_list(arch: str, key: str, value: Any, lengths: tuple[int, int], hi: int) -> list[int]:
    if not isinstance(value, (list, tuple)):
        raise InvalidSubmission(f"{arch} hparam {key!r} must be a list of integers, got {value!r}")
    if not lengths[0] <= len(value) <= lengths[1]:
        raise InvalidSubmission(
            f"{arch} hparam {key!r} must have {lengths[0]} to {lengths[1]} entries, got {len(value)}"
        )
    return [_int(arch, f"{key}[{i}]", v, 1, hi) for i, v in enumerate(value)]


def _activation(arch: str, value: Any) -> str:
    if value not in _ACTIVATIONS:
        raise InvalidSubmission(
            f"{arch} hparam 'activation' must be one of {', '.join(_ACTIVATIONS)}, got {value!r}"
        )
    return value


def _resolve_mlp(hparams: dict, obs_shape: tuple[int, ...]) -> dict:
    hp = _check_keys("mlp", hparams, MLP_DEFAULTS)
    return {
        "hidden": _int_list("mlp", "hidden", hp["hidden"], (0, 8), 4096),
        "activation": _activation("mlp", hp["activation"]),
    }


def _count_mlp(hp: dict, obs_shape: tuple[int, ...], num_actions: int) -> int:
    sizes = [math.prod(obs_shape), *hp["hidden"], num_actions]
    return sum(a * b + b for a, b in itertools.pairwise(sizes))


def _build_mlp(hp: dict, obs_shape: tuple[int, ...], num_actions: int) -> nn.Module:
    return MLPNet(math.prod(obs_shape), hp["hidden"], hp["activation"], num_actions)


def _resolve_cnn(hparams: dict, obs_shape: tuple[int, ...]) -> dict:
    if len(obs_shape) != 3:
        raise InvalidSubmission(
            f"arch 'cnn' needs a board observation (H, W, C); this env's observation shape "
            f"{tuple(obs_shape)} is {len(obs_shape)}-D, use arch 'mlp' instead"
        )
    hp = _check_keys("cnn", hparams, CNN_DEFAULTS)
    kernel = _int("cnn", "kernel", hp["kernel"], 1, 7)
    if kernel % 2 == 0:
        raise InvalidSubmission(f"cnn hparam 'kernel' must be odd for 'same' padding, got {kernel}")
    return {
        "channels": _int_list("cnn", "channels", hp["channels"], (1, 6), 512),
        "kernel": kernel,
        "hidden": _int("cnn", "hidden", hp["hidden"], 1, 4096),
        "activation": _activation("cnn", hp["activation"]),
    }


def _count_cnn(hp: dict, obs_shape: tuple[int, ...], num_actions: int) -> int:
    height, width, c_in = obs_shape
    sizes = [c_in, *hp["channels"]]
    convs = sum(a * b * hp["kernel"] ** 2 + b for a, b in itertools.pairwise(sizes))
    fc = height * width * sizes[-1] * hp["hidden"] + hp["hidden"]
    return convs + fc + hp["hidden"] * num_actions + num_actions


def _build_cnn(hp: dict, obs_shape: tuple[int, ...], num_actions: int) -> nn.Module:
    return CNNNet(
        obs_shape, hp["channels"], hp["kernel"], hp["hidden"], hp["activation"], num_actions
    )


MLP_DEFAULTS: Mapping[str, Any] = MappingProxyType({"hidden": (256, 256), "activation": "relu"})
CNN_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {"channels": (32, 32), "kernel": 3, "hidden": 128, "activation": "relu"}
)

ARCHS: Mapping[str, Arch] = MappingProxyType(
    {
        "mlp": Arch(
            "mlp",
            "multi-layer perceptron on the flattened observation",
            MLP_DEFAULTS,
            _resolve_mlp,
            _count_mlp,
            _build_mlp,
        ),
        "cnn": Arch(
            "cnn",
            "conv net for (H, W, C) board observations",
            CNN_DEFAULTS,
            _resolve_cnn,
            _count_cnn,
            _build_cnn,
        ),
    }
)
"""Read-only registry of architectures by name."""


def get_arch(arch: str) -> Arch:
    """Look up an architecture; raises :class:`InvalidSubmission` listing the known ones."""
    try:
        return ARCHS[arch]
    except (KeyError, TypeError):
        raise InvalidSubmission(
            f"unknown arch {arch!r}; known archs: {', '.join(sorted(ARCHS))}"
        ) from None


def _check_io(obs_shape: Any, num_actions: Any) -> tuple[int, ...]:
    if not isinstance(obs_shape, (list, tuple)) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in obs_shape
    ):
        raise InvalidSubmission(f"obs_shape must be a list of positive integers, got {obs_shape!r}")
    if not isinstance(num_actions, int) or isinstance(num_actions, bool) or num_actions < 1:
        raise InvalidSubmission(f"num_actions must be a positive integer, got {num_actions!r}")
    return tuple(obs_shape)


def resolve_hparams(
    arch: str, hparams: Mapping[str, Any] | None, obs_shape: tuple[int, ...], num_actions: int
) -> dict:
    """Validate hyper-parameters strictly and fill in defaults.

    Args:
        arch: Registered architecture name.
        hparams: User hyper-parameters (``None`` means all defaults).
        obs_shape: Observation shape of one decision.
        num_actions: Size of the discrete action space.

    Returns:
        The complete hyper-parameters as plain JSON-ready values.

    Raises:
        InvalidSubmission: Unknown arch or key, wrong type, out of range, unsuitable
            observation shape, or more than :data:`MAX_PARAMETERS` parameters.
    """
    spec = get_arch(arch)
    shape = _check_io(obs_shape, num_actions)
    hp = spec.resolve({} if hparams is None else hparams, shape)
    n = spec.count_parameters(hp, shape, num_actions)
    if n > MAX_PARAMETERS:
        raise InvalidSubmission(
            f"{arch} with hparams {hp} has {n:,} parameters, more than the limit of "
            f"{MAX_PARAMETERS:,}; use fewer or narrower layers"
        )
    return hp


def count_parameters(
    arch: str, hparams: Mapping[str, Any] | None, obs_shape: tuple[int, ...], num_actions: int
) -> int:
    """Exact parameter count of ``build_net(...)``, without allocating it."""
    hp = resolve_hparams(arch, hparams, obs_shape, num_actions)
    return get_arch(arch).count_parameters(hp, tuple(obs_shape), num_actions)


def build_net(
    arch: str, hparams: Mapping[str, Any] | None, obs_shape: tuple[int, ...], num_actions: int
) -> nn.Module:
    """Build a fresh (randomly initialized) network.

    Build under ``with torch.device("meta"):`` to get the expected state-dict shapes
    without allocating memory.

    Args:
        arch: Registered architecture name (see :data:`ARCHS`).
        hparams: Hyper-parameters; omitted keys take the arch defaults.
        obs_shape: Observation shape; the module takes float ``(k, *obs_shape)``.
        num_actions: Number of logits per row.

    Returns:
        A module mapping ``(k, *obs_shape)`` float32 to ``(k, num_actions)`` logits.

    Raises:
        InvalidSubmission: See :func:`resolve_hparams`.
    """
    hp = resolve_hparams(arch, hparams, obs_shape, num_actions)
    return get_arch(arch).build(hp, tuple(obs_shape), num_actions)
