"""Policy networks Arena's registry does not have, built in torch for ONNX export tests.

Shared by the export tests here and the end-to-end submission test (tests/web).
"""

from __future__ import annotations

import math

import torch
from torch import nn


class TinyTransformer(nn.Module):
    """One pre-norm attention block over the board cells, mean-pooled into logits."""

    def __init__(self, obs_shape: tuple[int, ...], num_actions: int, d: int = 16, heads: int = 2):
        super().__init__()
        self.heads, self.scale = heads, 1.0 / math.sqrt(d // heads)
        self.embed = nn.Linear(obs_shape[-1], d)
        self.pos = nn.Parameter(torch.randn(math.prod(obs_shape[:-1]), d) * 0.1)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.head = nn.Linear(d, num_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.embed(obs.flatten(1, -2)) + self.pos
        k, cells, d = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(k, cells, 3, self.heads, d // self.heads)
        q, key, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        attention = torch.softmax(q @ key.transpose(-1, -2) * self.scale, dim=-1)
        x = x + self.proj((attention @ v).transpose(1, 2).reshape(k, cells, d))
        x = x + self.mlp(self.norm2(x))
        return self.head(x.mean(dim=1))


class ResidualCNN(nn.Module):
    """Conv stem, two residual blocks with batch norm, global average pool, linear head."""

    def __init__(self, obs_shape: tuple[int, ...], num_actions: int, width: int = 16):
        super().__init__()
        self.stem = nn.Conv2d(obs_shape[-1], width, 3, padding=1)
        self.blocks = nn.ModuleList(nn.Sequential(
            nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width)) for _ in range(2))
        self.head = nn.Linear(width, num_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(obs.permute(0, 3, 1, 2)))
        for block in self.blocks:
            x = torch.relu(x + block(x))
        return self.head(x.mean(dim=(2, 3)))
