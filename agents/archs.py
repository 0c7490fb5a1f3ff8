"""Architecture registry: the only network shapes a checkpoint may name, without torch.

A checkpoint says ``arch`` + ``hparams``; this module validates them against the env's
observation shape and action count, fills in the defaults, counts the parameters and
lists the state dict the network has (tensor names and shapes), all by arithmetic:
validating a spec or the tensors of an upload needs no torch. The networks themselves
are built by :func:`agents.nets.build_net`, where tensors are made.

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

from envs.errors import InvalidSubmission

MAX_PARAMETERS = 8_388_608
"""Largest network a checkpoint may describe (2**23 floats = 32 MiB of float32)."""

ACTIVATIONS = ("relu", "tanh")
"""Activation names an arch's ``activation`` hparam may take."""

StateShapes = dict[str, tuple[int, ...]]
"""A network's state dict as tensor names and shapes, in the module's order."""


@dataclass(frozen=True)
class Arch:
    """One registered architecture.

    Attributes:
        name: Registry key written into checkpoints.
        description: One line for listings.
        defaults: Hyper-parameters used when a key is omitted.
        resolve: Validates user hparams against ``(obs_shape, num_actions)`` and
            returns the complete hparams (defaults filled in).
        state_shapes: The state dict of the network built from complete hparams
            (names and shapes in the module's order), computed without allocating.
    """

    name: str
    description: str
    defaults: Mapping[str, Any]
    resolve: Callable[[dict, tuple[int, ...]], dict]
    state_shapes: Callable[[dict, tuple[int, ...], int], StateShapes]


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
    if value not in ACTIVATIONS:
        raise InvalidSubmission(
            f"{arch} hparam 'activation' must be one of {', '.join(ACTIVATIONS)}, got {value!r}"
        )
    return value


def _resolve_mlp(hparams: dict, obs_shape: tuple[int, ...]) -> dict:
    hp = _check_keys("mlp", hparams, MLP_DEFAULTS)
    return {
        "hidden": _int_list("mlp", "hidden", hp["hidden"], (0, 8), 4096),
        "activation": _activation("mlp", hp["activation"]),
    }


def _linear(name: str, n_in: int, n_out: int) -> StateShapes:
    return {f"{name}.weight": (n_out, n_in), f"{name}.bias": (n_out,)}


def _mlp_shapes(hp: dict, obs_shape: tuple[int, ...], num_actions: int) -> StateShapes:
    sizes = [math.prod(obs_shape), *hp["hidden"]]
    shapes: StateShapes = {}
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        shapes |= _linear(f"trunk.{i}", a, b)
    return shapes | _linear("head", sizes[-1], num_actions)


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


def _cnn_shapes(hp: dict, obs_shape: tuple[int, ...], num_actions: int) -> StateShapes:
    height, width, c_in = obs_shape
    sizes, k = [c_in, *hp["channels"]], hp["kernel"]
    shapes: StateShapes = {}
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        shapes |= {f"convs.{i}.weight": (b, a, k, k), f"convs.{i}.bias": (b,)}
    shapes |= _linear("fc", height * width * sizes[-1], hp["hidden"])
    return shapes | _linear("head", hp["hidden"], num_actions)


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
            _mlp_shapes,
        ),
        "cnn": Arch(
            "cnn",
            "conv net for (H, W, C) board observations",
            CNN_DEFAULTS,
            _resolve_cnn,
            _cnn_shapes,
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


def _count(shapes: StateShapes) -> int:
    return sum(math.prod(shape) for shape in shapes.values())


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
    n = _count(spec.state_shapes(hp, shape, num_actions))
    if n > MAX_PARAMETERS:
        raise InvalidSubmission(
            f"{arch} with hparams {hp} has {n:,} parameters, more than the limit of "
            f"{MAX_PARAMETERS:,}; use fewer or narrower layers"
        )
    return hp


def state_shapes(
    arch: str, hparams: Mapping[str, Any] | None, obs_shape: tuple[int, ...], num_actions: int
) -> StateShapes:
    """The state dict of ``build_net(...)``: tensor names and shapes in its order, without torch.

    Raises:
        InvalidSubmission: See :func:`resolve_hparams`.
    """
    hp = resolve_hparams(arch, hparams, obs_shape, num_actions)
    return get_arch(arch).state_shapes(hp, tuple(obs_shape), num_actions)


def count_parameters(
    arch: str, hparams: Mapping[str, Any] | None, obs_shape: tuple[int, ...], num_actions: int
) -> int:
    """Exact parameter count of ``build_net(...)``, without allocating it."""
    return _count(state_shapes(arch, hparams, obs_shape, num_actions))
