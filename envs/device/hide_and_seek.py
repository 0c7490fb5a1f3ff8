"""Deprecated: moved to :mod:`envs.hide_and_seek.device.core`; this path re-exports it for one release."""

from envs.hide_and_seek.device.core import (
    LayoutBank,
    TorchHideAndSeekCore,
)

__all__ = [
    "LayoutBank", "TorchHideAndSeekCore",
]
