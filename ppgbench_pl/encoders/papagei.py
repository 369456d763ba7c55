"""PaPaGei-P and PaPaGei-S (Nokia Bell Labs): a pre-activation 1-D ResNet at 125 Hz.

Re-implemented from the published architecture description so that the authors' ``papagei_p.pt`` /
``papagei_s.pt`` load strictly. The embedding is the 512-d output of the final ``dense`` layer
applied to the time-averaged feature map (element 0 of the upstream forward tuple).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from torch import Tensor, nn

from ppgbench_pl.encoders.base import PPGEncoder, seeded_init, strip_prefix
from ppgbench_pl.encoders.layers import SameConv1d, resnet1d_blocks, resnet1d_trunk
from ppgbench_pl.encoders.preprocessing import cheby2_bandpass_sos, moving_average_smooth, zscore_window
from ppgbench_pl.errors import CheckpointError


class PaPaGeiPEncoder(PPGEncoder):
    """PaPaGei-P: ResNet1D (18 blocks, base width 32, kernel 3) -> BN -> ReLU -> time mean -> dense."""

    name: ClassVar[str] = "papagei_p"
    sampling_rate: ClassVar[float] = 125.0
    embed_dim: ClassVar[int] = 512
    min_samples: ClassVar[int] = 2
    weights_source: ClassVar[str | None] = (
        "papagei_p.pt from Zenodo record 13983110 (https://zenodo.org/records/13983110)")

    def __init__(
        self,
        base_filters: int = 32,
        kernel_size: int = 3,
        n_block: int = 18,
        n_classes: int = 512,
        dropout: float = 0.5,
        checkpoint: str | Path | None = None,
        random_init: bool = False,
    ) -> None:
        """Build the published configuration; load ``checkpoint`` strictly (or ``random_init: true``)."""
        super().__init__()
        with seeded_init(self.settle_weights(checkpoint, random_init)):
            self._build_backbone(base_filters, kernel_size, n_block, n_classes, dropout)
        if checkpoint is not None:
            self.load_pretrained(checkpoint)

    def _build_backbone(self, base_filters: int, kernel_size: int, n_block: int, n_classes: int,
                        dropout: float) -> None:
        """Stem, residual blocks, final BN/ReLU and ``dense`` (attribute names match the checkpoint keys)."""
        self.first_block_conv = SameConv1d(1, base_filters, kernel_size, stride=1)
        self.first_block_bn = nn.BatchNorm1d(base_filters)
        self.basicblock_list = resnet1d_blocks(base_filters, kernel_size, n_block, stride=2, dropout=dropout)
        width = int(self.basicblock_list[-1].out_channels)  # type: ignore[arg-type]
        self.final_bn = nn.BatchNorm1d(width)
        self.final_relu = nn.ReLU()
        self.dense = nn.Linear(width, n_classes)

    def preprocess(self, x: Tensor, ppg_mean: Tensor | None = None, ppg_std: Tensor | None = None) -> Tensor:
        """Chebyshev II 0.5-12 Hz band-pass, 50 ms smoother (fs >= 75), per-window z-score -> [B,1,T]."""
        if x.ndim != 2:
            raise ValueError(f"{self.name} expects raw windows [B, T], got shape {tuple(x.shape)}")
        super().preprocess(x)
        filtered = cheby2_bandpass_sos(x, self.sampling_rate)
        smoothed = moving_average_smooth(filtered, self.sampling_rate)
        return zscore_window(smoothed).to(x.device).unsqueeze(1)

    def pooled_features(self, x: Tensor) -> Tensor:
        """The 512-d time-averaged feature map before ``dense`` (upstream's last tuple element)."""
        out = resnet1d_trunk(x, self.first_block_conv, self.first_block_bn, self.basicblock_list)
        return self.final_relu(self.final_bn(out)).mean(dim=-1)

    def forward_features(self, x: Tensor) -> Tensor:
        """The embedding: ``dense`` applied to the pooled features."""
        return self.dense(self.pooled_features(x))

    def extract_state_dict(self, checkpoint: object) -> Mapping[str, Tensor]:
        """The state dict itself, with a DataParallel ``module.`` prefix removed if present."""
        if not isinstance(checkpoint, Mapping):
            kind = type(checkpoint).__name__
            raise CheckpointError(f"{self.name}: checkpoint is a {kind}, not a state dict")
        return strip_prefix(checkpoint, "module.")


def _expert(width: int, hidden: int, dropout: float | None) -> nn.Sequential:
    """One MoE expert: Linear -> ReLU [-> Dropout] -> Linear(1); indices match upstream keys."""
    layers: list[nn.Module] = [nn.Linear(width, hidden), nn.ReLU()]
    if dropout is not None:
        layers.append(nn.Dropout(dropout))
    layers.append(nn.Linear(hidden, 1))
    return nn.Sequential(*layers)


class PaPaGeiSEncoder(PaPaGeiPEncoder):
    """PaPaGei-S: the PaPaGei-P backbone plus two mixture-of-experts heads.

    The heads (two sets of 3 experts with softmax gates) only exist so the checkpoint loads strictly;
    they are not used for the embedding, which is the ``dense`` output exactly as for PaPaGei-P.
    """

    name: ClassVar[str] = "papagei_s"
    weights_source: ClassVar[str | None] = (
        "papagei_s.pt from Zenodo record 13983110 (https://zenodo.org/records/13983110)")

    def __init__(
        self,
        base_filters: int = 32,
        kernel_size: int = 3,
        n_block: int = 18,
        n_classes: int = 512,
        n_experts: int = 3,
        dropout: float = 0.5,
        checkpoint: str | Path | None = None,
        random_init: bool = False,
    ) -> None:
        """Build backbone and MoE heads; load ``checkpoint`` strictly (or ``random_init: true``)."""
        PPGEncoder.__init__(self)
        with seeded_init(self.settle_weights(checkpoint, random_init)):
            self._build_backbone(base_filters, kernel_size, n_block, n_classes, dropout)
            hidden = n_classes // 2
            self.expert_layers_1 = nn.ModuleList(_expert(n_classes, hidden, None) for _ in range(n_experts))
            self.gating_network_1 = nn.Sequential(nn.Linear(n_classes, n_experts), nn.Softmax(dim=-1))
            self.expert_layers_2 = nn.ModuleList(_expert(n_classes, hidden, 0.3) for _ in range(n_experts))
            self.gating_network_2 = nn.Sequential(nn.Linear(n_classes, n_experts), nn.Softmax(dim=-1))
        if checkpoint is not None:
            self.load_pretrained(checkpoint)
