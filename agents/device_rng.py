"""Per-match random streams computed on the device: :class:`~agents.policy.MatchRng` in torch.

:class:`DeviceMatchRng` draws exactly the numbers ``MatchRng`` draws - the same
SplitMix64 hashing of (match seed, seat, ply, draw index), written with int64 torch
operations - so a match sampled on a GPU uses the same random numbers as on the CPU
engine, and the same alone as inside a batch of a million. Nothing is read back to the
host: keys and draws stay tensors on the device of the seeds.

Torch has no uint64 arithmetic, so the hash runs on int64 bit patterns: addition,
multiplication and xor wrap the same way in two's complement, and the logical right
shift is an arithmetic shift with the sign-extended bits masked off.
"""

from __future__ import annotations

import numpy as np
import torch

from agents.policy import MatchRng


def _signed(x: int) -> int:
    """The int64 whose bit pattern is the uint64 ``x``."""
    return x - (1 << 64) if x >= 1 << 63 else x


_GOLDEN = _signed(0x9E3779B97F4A7C15)
_M1 = _signed(0xBF58476D1CE4E5B9)
_M2 = _signed(0x94D049BB133111EB)


def _shr(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 bit patterns."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def splitmix64(x: torch.Tensor) -> torch.Tensor:
    """SplitMix64 finalizer on int64 tensors; bit-identical to :func:`agents.policy.splitmix64`."""
    x = x + _GOLDEN
    x = (x ^ _shr(x, 30)) * _M1
    x = (x ^ _shr(x, 27)) * _M2
    return x ^ _shr(x, 31)


def derive_seeds(master_seed: int, index: torch.Tensor) -> torch.Tensor:
    """:func:`agents.policy.derive_seed` of ``index`` (int64 tensor), computed where it lives."""
    base = splitmix64(torch.tensor(_signed(master_seed & (2**64 - 1)), dtype=torch.int64))
    return _shr(splitmix64(base.to(index.device) ^ splitmix64(index)), 1)


class DeviceMatchRng:
    """Independent uniform streams for a batch of decisions, on the seeds' device.

    Args:
        seeds: ``(k,)`` int64 match seeds.
        seats: ``(k,)`` int64 seat deciding in each row, or one int for every row.
        plies: ``(k,)`` int64 move counter of each match, or one int for every row.
    """

    def __init__(self, seeds: torch.Tensor, seats: torch.Tensor | int,
                 plies: torch.Tensor | int) -> None:
        seat = torch.as_tensor(seats, dtype=torch.int64)
        ply = torch.as_tensor(plies, dtype=torch.int64)
        self._keys = splitmix64(splitmix64(seeds.to(torch.int64)) ^ (seat << 48) ^ ply)
        self._draws = 0

    @classmethod
    def from_match_rng(cls, rng: MatchRng, device: str | torch.device = "cpu") -> DeviceMatchRng:
        """The very streams of a numpy :class:`MatchRng` (same keys, same draw counter).

        For a policy that answers the numpy interface with torch code.
        """
        out = cls.__new__(cls)
        keys = np.asarray(rng._keys).view(np.int64)  # the twin class's own state
        out._keys, out._draws = torch.as_tensor(keys, device=device), rng._draws
        return out

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def device(self) -> torch.device:
        return self._keys.device

    def subset(self, rows: torch.Tensor) -> DeviceMatchRng:
        """The streams of ``rows`` only (same draw counter)."""
        out = DeviceMatchRng.__new__(DeviceMatchRng)
        out._keys, out._draws = self._keys[rows], self._draws
        return out

    def uniform(self, n: int = 1) -> torch.Tensor:
        """``(k, n)`` float64 in ``[0, 1)``; successive calls give fresh numbers."""
        j = torch.arange(self._draws, self._draws + n, dtype=torch.int64, device=self.device)
        self._draws += n
        bits = splitmix64(self._keys[:, None] ^ splitmix64(j)[None, :])
        return _shr(bits, 11).to(torch.float64) * (1.0 / (1 << 53))

    def choice(self, mask: torch.Tensor) -> torch.Tensor:
        """One uniformly random ``True`` column per row of ``mask`` (``-1`` if none)."""
        counts = mask.sum(1)
        pick = torch.floor(self.uniform(1)[:, 0] * counts.clamp(min=1)).to(torch.int64)
        ranks = mask.cumsum(1) - 1
        hit = mask & (ranks == pick[:, None])
        return torch.where(counts > 0, hit.to(torch.uint8).argmax(1), -1)

    def gumbel(self, n: int) -> torch.Tensor:
        """``(k, n)`` float64 standard Gumbel noise (for sampling from logits)."""
        u = self.uniform(n).clamp(1e-12, 1 - 1e-12)
        return -torch.log(-torch.log(u))
