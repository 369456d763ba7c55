"""PaPaGei-P and -S (Nokia Bell Labs): a pre-activation 1-D ResNet at 125 Hz, named so the checkpoints load strictly."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from torch import Tensor, nn

from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.encoders.layers import add_resnet1d, resnet1d_trunk
from ppgbench_pl.encoders.preprocessing import cheby2_bandpass_sos, moving_average_smooth, zscore_window


class PaPaGeiPEncoder(PPGEncoder):
    """PaPaGei-P: ResNet1D (18 blocks, base width 32, kernel 3) -> BN -> ReLU -> time mean -> dense."""

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
        with self.weights(checkpoint, random_init):
            self._build_backbone(base_filters, kernel_size, n_block, n_classes, dropout)

    def _build_backbone(self, base_filters: int, kernel_size: int, n_block: int, n_classes: int,
                        dropout: float) -> None:
        width = add_resnet1d(self, base_filters, kernel_size, n_block, dropout)
        self.final_bn = nn.BatchNorm1d(width)
        self.final_relu = nn.ReLU()
        self.dense = nn.Linear(width, n_classes)

    def preprocess(self, x: Tensor, ppg_mean: Tensor | None = None, ppg_std: Tensor | None = None) -> Tensor:
        """Chebyshev II 0.5-12 Hz band-pass, 50 ms smoother (fs >= 75), per-window z-score -> [B,1,T]."""
        self.check_raw(x)
        smoothed = moving_average_smooth(cheby2_bandpass_sos(x, self.sampling_rate), self.sampling_rate)
        return zscore_window(smoothed).to(x.device).unsqueeze(1)

    def forward_features(self, x: Tensor) -> Tensor:
        """The embedding: ``dense`` applied to the time-averaged final feature map."""
        return self.dense(self.final_relu(self.final_bn(resnet1d_trunk(self, x))).mean(dim=-1))

    def extract_state_dict(self, checkpoint: object) -> Mapping[str, Tensor]:
        """The state dict, without a DataParallel ``module.`` prefix."""
        return {k.removeprefix("module."): v for k, v in super().extract_state_dict(checkpoint).items()}


def _expert(width: int, hidden: int, dropout: float | None) -> nn.Sequential:
    """One MoE expert: Linear -> ReLU [-> Dropout] -> Linear(1); indices match upstream keys."""
    drop = [] if dropout is None else [nn.Dropout(dropout)]
    return nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), *drop, nn.Linear(hidden, 1))


class PaPaGeiSEncoder(PaPaGeiPEncoder):
    """PaPaGei-S: the -P backbone plus two mixture-of-experts heads, there only so the checkpoint loads strictly."""

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
        with self.weights(checkpoint, random_init):
            self._build_backbone(base_filters, kernel_size, n_block, n_classes, dropout)
            hidden = n_classes // 2
            self.expert_layers_1 = nn.ModuleList(_expert(n_classes, hidden, None) for _ in range(n_experts))
            self.gating_network_1 = nn.Sequential(nn.Linear(n_classes, n_experts), nn.Softmax(dim=-1))
            self.expert_layers_2 = nn.ModuleList(_expert(n_classes, hidden, 0.3) for _ in range(n_experts))
            self.gating_network_2 = nn.Sequential(nn.Linear(n_classes, n_experts), nn.Softmax(dim=-1))
