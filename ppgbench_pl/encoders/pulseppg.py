"""PulsePPG: a wide pre-activation 1-D ResNet at 50 Hz, max-pooled, named so ``checkpoint_best.pkl`` loads strictly."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import torch.nn.functional as F
from torch import Tensor

from ppgbench_pl.encoders.base import PPGEncoder, state_mapping
from ppgbench_pl.encoders.layers import add_resnet1d, resnet1d_trunk
from ppgbench_pl.encoders.preprocessing import cheby2_bandpass_ba, zscore_group
from ppgbench_pl.errors import CheckpointError

#: Epsilon of upstream's InstanceNorm1d (PyTorch default).
INSTANCE_NORM_EPS = 1e-5


class PulsePPGEncoder(PPGEncoder):
    """PulsePPG: instance norm -> ResNet1D (12 blocks, base width 128, kernel 11) -> max over time."""

    uses_group_stats: ClassVar[bool] = True
    weights_source: ClassVar[str | None] = (
        "checkpoint_best.pkl from the Zenodo zip of DOI 10.5281/zenodo.17270930 "
        "(https://doi.org/10.5281/zenodo.17270930)")

    def __init__(
        self,
        base_filters: int = 128,
        kernel_size: int = 11,
        n_block: int = 12,
        dropout: float = 0.5,
        checkpoint: str | Path | None = None,
        random_init: bool = False,
    ) -> None:
        """Build the published configuration; load ``checkpoint`` strictly (or ``random_init: true``)."""
        super().__init__()
        with self.weights(checkpoint, random_init):
            add_resnet1d(self, base_filters, kernel_size, n_block, dropout)

    def preprocess(self, x: Tensor, ppg_mean: Tensor | None = None, ppg_std: Tensor | None = None) -> Tensor:
        """Per-subject z-score with the group statistics, then Chebyshev II (b, a) band-pass -> [B,1,T]."""
        self.check_raw(x)
        if ppg_mean is None or ppg_std is None:
            raise ValueError(f"{self.name} normalises with the subject statistics: pass ppg_mean and ppg_std")
        normalised = zscore_group(x, ppg_mean, ppg_std)
        return cheby2_bandpass_ba(normalised, self.sampling_rate).to(x.device).unsqueeze(1)

    def forward_features(self, x: Tensor) -> Tensor:
        """Instance norm (upstream's parameter-free ``InstanceNorm1d(512)``), ResNet trunk, global max pool."""
        return resnet1d_trunk(self, F.instance_norm(x, eps=INSTANCE_NORM_EPS)).amax(dim=-1)

    def extract_state_dict(self, checkpoint: object) -> Mapping[str, Tensor]:
        """The weights under ``checkpoint["net"]`` (no prefix)."""
        if not isinstance(checkpoint, Mapping) or "net" not in checkpoint:
            found = sorted(map(str, checkpoint))[:8] if isinstance(checkpoint, Mapping) else type(checkpoint)
            raise CheckpointError(f"{self.name}: expected a dict with the weights under 'net', found {found}")
        return state_mapping(self.name, checkpoint["net"], "checkpoint['net']")
