"""Heads on top of an embedding: the protocol's one-hidden-layer MLP (PROTOCOL.md 4.3) and a linear one."""

from __future__ import annotations

from torch import Tensor, nn


class MLPHead(nn.Module):
    """LayerNorm -> Linear -> GELU -> Dropout -> Linear, as the published MLP probe and finetune head."""

    def __init__(self, in_features: int, out_features: int, hidden_dim: int = 256, dropout: float = 0.0) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.LayerNorm(in_features),
            nn.Linear(in_features, hidden_dim),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(hidden_dim, out_features),
        )

    def forward(self, x: Tensor) -> Tensor:
        """Logits or regression outputs."""
        return self.net(x)
