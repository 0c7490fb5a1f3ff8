"""Deprecated: moved to :mod:`envs.hide_and_seek.device.core_v1`; this path re-exports it for one release."""

from envs.hide_and_seek.device.core_v1 import (
    LayoutBankV1,
    TorchHideAndSeekV1Core,
)

__all__ = [
    "LayoutBankV1", "TorchHideAndSeekV1Core",
]
