"""A small 1-D CNN encoder with a seeded random init: exercises the neural path with no checkpoint."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ppgbench_pl.encoders.base import PPGEncoder


class SmallCNNEncoder(PPGEncoder):
    """Three strided conv blocks and a global average: a cheap stand-in for a foundation model.

    Args:
        embed_dim: Width of the last conv layer, which is the embedding size.
        seed: Seed of the weight initialisation, so the "random" encoder is the same in every run.
        checkpoint: Optional path to weights saved from this class (``torch.save(state_dict)``).
    """

    def __init__(self, embed_dim: int = 64, seed: int = 0, checkpoint: str | None = None) -> None:
        super().__init__()
        self.embed_dim = embed_dim  # type: ignore[misc]  # per-instance override of the class default
        widths = [1, 16, 32, embed_dim]
        layers: list[nn.Module] = []
        for cin, cout, k in zip(widths[:-1], widths[1:], (7, 5, 5), strict=True):
            layers += [nn.Conv1d(cin, cout, k, stride=2, padding=k // 2), nn.BatchNorm1d(cout), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for module in self.features:
                if isinstance(module, nn.Conv1d):
                    module.reset_parameters()
        if checkpoint is not None:
            self.load_pretrained(checkpoint)

    def preprocess(self, x: Tensor, ppg_mean: Tensor | None = None, ppg_std: Tensor | None = None) -> Tensor:
        """Per-window z-score, then a channel axis."""
        x = super().preprocess(x)
        return (x - x.mean(dim=-1, keepdim=True)) / (x.std(dim=-1, keepdim=True, unbiased=False) + 1e-6)

    def forward_features(self, x: Tensor) -> Tensor:
        """Conv stack then mean over time."""
        return self.features(x).mean(dim=-1)
