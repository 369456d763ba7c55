"""AnyPPG: a squeeze-excitation Net1D PPG encoder at 125 Hz, named so ``anyppg_ckpt.pth`` loads strictly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import torch
from torch import Tensor, nn

from ppgbench_pl.encoders.base import PPGEncoder, switch_flag
from ppgbench_pl.encoders.layers import SameConv1d, SamePadMaxPool1d, pad_channels
from ppgbench_pl.encoders.preprocessing import butter_bandpass_sos, zscore_window

FILTER_LIST: tuple[int, ...] = (64, 160, 160, 400, 400, 512)
BLOCKS_PER_STAGE: tuple[int, ...] = (2, 2, 2, 3, 3, 1)
BAND_HZ = (0.5, 8.0)


class SEBottleneckBlock(nn.Module):
    """Pre-activation bottleneck (1x1, grouped kx1, 1x1) with squeeze-excitation and a pooled identity.

    The first block of the network skips its pre-activation but still owns ``bn1`` so the checkpoint fits.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, groups: int,
                 downsample: bool, is_first_block: bool = False, dropout: float = 0.5) -> None:
        super().__init__()
        mid = out_channels  # upstream's bottleneck ratio is 1
        self.in_channels, self.out_channels = in_channels, out_channels
        self.is_first_block = is_first_block
        self.bn1 = nn.BatchNorm1d(in_channels)
        self.conv1 = SameConv1d(in_channels, mid, kernel_size=1)
        self.bn2 = nn.BatchNorm1d(mid)
        self.conv2 = SameConv1d(mid, mid, kernel_size, stride=stride if downsample else 1, groups=groups)
        self.bn3 = nn.BatchNorm1d(mid)
        self.conv3 = SameConv1d(mid, out_channels, kernel_size=1)
        self.se_fc1 = nn.Linear(out_channels, out_channels // 2)
        self.se_fc2 = nn.Linear(out_channels // 2, out_channels)
        self.act = nn.SiLU()  # Swish: x * sigmoid(x)
        self.drop = nn.Dropout(dropout)
        self.max_pool = SamePadMaxPool1d(stride) if downsample else None  # parameter-free: only where it acts

    def forward(self, x: Tensor) -> Tensor:
        """Bottleneck, channel gating, then residual add."""
        out = x if self.is_first_block else self.drop(self.act(self.bn1(x)))
        out = self.conv2(self.drop(self.act(self.bn2(self.conv1(out)))))
        out = self.conv3(self.drop(self.act(self.bn3(out))))
        gate = torch.sigmoid(self.se_fc2(self.act(self.se_fc1(out.mean(dim=-1)))))
        identity = x if self.max_pool is None else self.max_pool(x)
        return out * gate.unsqueeze(-1) + pad_channels(identity, self.out_channels)


class SEStage(nn.Module):
    """A run of blocks of one width (``block_list``); only the first one downsamples and widens."""

    def __init__(self, blocks: list[SEBottleneckBlock]) -> None:
        super().__init__()
        self.block_list = nn.ModuleList(blocks)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the blocks in order."""
        for block in self.block_list:
            x = block(x)
        return x


class AnyPPGEncoder(PPGEncoder):
    """AnyPPG backbone: stride-2 stem, six SE stages (x128 downsampling), time mean -> 512-d."""

    weights_source: ClassVar[str | None] = (
        "load_anyppg/anyppg_ckpt.pth from the authors' GitHub repository (https://github.com/PKUDigitalHealth/AnyPPG)")
    protocol_switches: ClassVar[dict[str, object]] = {"native_filter_padding": False}

    def __init__(
        self,
        checkpoint: str | None = None,
        base_filters: int = 64,
        filter_list: Sequence[int] = FILTER_LIST,
        blocks_per_stage: Sequence[int] = BLOCKS_PER_STAGE,
        kernel_size: int = 3,
        stride: int = 2,
        groups_width: int = 16,
        random_init: bool = False,
        native_filter_padding: bool = False,
    ) -> None:
        """Build; load ``checkpoint`` strictly. ``native_filter_padding``: pad as the authors' MNE filter (#53)."""
        super().__init__()
        self.native_filter_padding = switch_flag(self.name, "native_filter_padding", native_filter_padding)
        if len(filter_list) != len(blocks_per_stage):
            raise ValueError("filter_list and blocks_per_stage must have the same length")
        with self.weights(checkpoint, random_init):
            self.first_conv = SameConv1d(1, base_filters, kernel_size, stride=2)  # stem stride fixed upstream
            self.first_bn = nn.BatchNorm1d(base_filters)
            self.first_activation = nn.SiLU()
            widths = [base_filters, *filter_list]
            self.stage_list = nn.ModuleList(
                SEStage([SEBottleneckBlock(widths[i] if j == 0 else width, width, kernel_size, stride,
                                           width // groups_width, downsample=j == 0,
                                           is_first_block=i == 0 and j == 0) for j in range(n_blocks)])
                for i, (width, n_blocks) in enumerate(zip(filter_list, blocks_per_stage, strict=True)))

    def preprocess(self, x: Tensor, ppg_mean: Tensor | None = None, ppg_std: Tensor | None = None) -> Tensor:
        """Butterworth(3) 0.5-8 Hz zero-phase band-pass, then per-window z-score: [B, T] -> [B, 1, T]."""
        super().preprocess(x)  # length check only
        filtered = butter_bandpass_sos(x, self.sampling_rate, BAND_HZ, order=3, ringing_pad=self.native_filter_padding)
        return super().preprocess(zscore_window(filtered, eps=1e-6))

    def forward_features(self, x: Tensor) -> Tensor:
        """Stem, stages, then the plain mean over time."""
        out = self.first_activation(self.first_bn(self.first_conv(x)))
        for stage in self.stage_list:
            out = stage(out)
        return out.mean(dim=-1)
