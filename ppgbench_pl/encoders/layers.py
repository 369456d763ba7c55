"""The CNN encoders' 1-D blocks, named as upstream (the checkpoint keys), with its hand-made "SAME" padding."""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn


class SameConv1d(nn.Module):
    """Conv1d with bias and SAME padding (output ``ceil(L/s)``); the conv is ``.conv`` as upstream."""

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, groups: int = 1
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride, groups=groups)

    def forward(self, x: Tensor) -> Tensor:
        """Pad the time axis so the strided windows give ``ceil(L/s)`` outputs, then convolve."""
        length = x.shape[-1]
        total = max(0, (-(-length // self.stride) - 1) * self.stride + self.kernel_size - length)
        return self.conv(F.pad(x, (total // 2, total - total // 2)))


class SamePadMaxPool1d(nn.Module):
    """Zero-pad ``kernel_size - 1`` samples (floor left; zeros, not -inf, as upstream), then MaxPool1d(k, stride k)."""

    def __init__(self, kernel_size: int) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.max_pool = nn.MaxPool1d(kernel_size=kernel_size)

    def forward(self, x: Tensor) -> Tensor:
        """Pad, then pool with stride equal to the kernel."""
        total = max(0, self.kernel_size - 1)
        return self.max_pool(F.pad(x, (total // 2, total - total // 2)))


def pad_channels(x: Tensor, out_channels: int) -> Tensor:
    """Zero-pad the channel axis of ``[B, C, T]`` to ``out_channels`` (floor in front, rest behind)."""
    extra = out_channels - x.shape[1]
    if extra <= 0:
        return x
    return F.pad(x, (0, 0, extra // 2, extra - extra // 2))


class PreActBlock1d(nn.Module):
    """Pre-activation residual block of Hong's resnet1d (PaPaGei, PulsePPG).

    ``[BN -> ReLU -> Dropout] -> SAME conv(k, s) -> BN -> ReLU -> Dropout -> SAME conv(k, 1)`` plus the
    (pooled, channel-padded) identity. The first block skips the bracket but owns ``bn1`` for the keys.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 2,
                 downsample: bool = False, is_first_block: bool = False, dropout: float = 0.5) -> None:
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.downsample, self.is_first_block = downsample, is_first_block
        conv_stride = stride if downsample else 1
        self.bn1 = nn.BatchNorm1d(in_channels)
        self.relu1 = nn.ReLU()
        self.do1 = nn.Dropout(p=dropout)
        self.conv1 = SameConv1d(in_channels, out_channels, kernel_size, stride=conv_stride)
        self.bn2 = nn.BatchNorm1d(out_channels)
        self.relu2 = nn.ReLU()
        self.do2 = nn.Dropout(p=dropout)
        self.conv2 = SameConv1d(out_channels, out_channels, kernel_size, stride=1)
        self.max_pool = SamePadMaxPool1d(kernel_size=conv_stride)

    def forward(self, x: Tensor) -> Tensor:
        """Residual branch plus identity shortcut (no activation after the add)."""
        out = x if self.is_first_block else self.do1(self.relu1(self.bn1(x)))
        out = self.conv2(self.do2(self.relu2(self.bn2(self.conv1(out)))))
        identity = self.max_pool(x) if self.downsample else x
        return out + pad_channels(identity, self.out_channels)


def add_resnet1d(owner: nn.Module, base_filters: int, kernel_size: int, n_block: int, dropout: float) -> int:
    """Give ``owner`` Hong's ResNet1D stem and blocks under upstream's names; returns the last width."""
    owner.first_block_conv = SameConv1d(1, base_filters, kernel_size, stride=1)
    owner.first_block_bn = nn.BatchNorm1d(base_filters)
    blocks, c_out = [], base_filters
    for i in range(n_block):
        c_in = base_filters if i == 0 else base_filters * 2 ** ((i - 1) // 4)
        c_out = c_in * 2 if i > 0 and i % 4 == 0 else c_in
        blocks.append(PreActBlock1d(c_in, c_out, kernel_size, stride=2, downsample=i % 2 == 1,
                                    is_first_block=i == 0, dropout=dropout))
    owner.basicblock_list = nn.ModuleList(blocks)
    return c_out


def resnet1d_trunk(owner: Any, x: Tensor) -> Tensor:
    """Stem conv -> BN -> ReLU -> the blocks of :func:`add_resnet1d`; returns the last map ``[B, C, T']``."""
    out = F.relu(owner.first_block_bn(owner.first_block_conv(x)))
    for block in owner.basicblock_list:
        out = block(out)
    return out
