"""Shared 1-D building blocks for the CNN encoders (PaPaGei, PulsePPG, AnyPPG).

The authors' checkpoints were trained with TensorFlow-style "SAME" padding done by hand (asymmetric,
floor on the left), so these layers reproduce that padding exactly instead of using PyTorch's
symmetric ``padding=``. Submodule attribute names follow the upstream code so that state-dict keys
match the checkpoints (e.g. ``conv1.conv.weight``).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


def same_padding(length: int, kernel_size: int, stride: int) -> tuple[int, int]:
    """(left, right) zero padding so a strided window yields ``ceil(length / stride)`` outputs."""
    out_len = -(-length // stride)
    total = max(0, (out_len - 1) * stride + kernel_size - length)
    return total // 2, total - total // 2


class SameConv1d(nn.Module):
    """Conv1d with bias and TF-style SAME padding (floor left, rest right); output ``ceil(L/s)``.

    The convolution lives in ``.conv`` so the keys read ``<name>.conv.weight`` like upstream.
    """

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, groups: int = 1
    ) -> None:
        """Wrap ``nn.Conv1d`` (bias on, no built-in padding) and remember kernel and stride."""
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride, groups=groups)

    def forward(self, x: Tensor) -> Tensor:
        """Pad the time axis, then convolve."""
        left, right = same_padding(x.shape[-1], self.kernel_size, self.stride)
        return self.conv(F.pad(x, (left, right), mode="constant", value=0.0))


class SamePadMaxPool1d(nn.Module):
    """Shortcut pool: zero-pad ``kernel_size - 1`` samples (floor left), then MaxPool1d(k, stride k).

    Zero padding (not -inf) is what upstream does, so a padded sample can win the max; kept for
    parity. With ``kernel_size`` 1 it is the identity. It has no parameters.
    """

    def __init__(self, kernel_size: int) -> None:
        """Build the pool; ``kernel_size`` is also its stride."""
        super().__init__()
        self.kernel_size = kernel_size
        self.max_pool = nn.MaxPool1d(kernel_size=kernel_size)

    def forward(self, x: Tensor) -> Tensor:
        """Pad, then pool with stride equal to the kernel."""
        total = max(0, self.kernel_size - 1)
        left = total // 2
        return self.max_pool(F.pad(x, (left, total - left), mode="constant", value=0.0))


def pad_channels(x: Tensor, out_channels: int) -> Tensor:
    """Zero-pad the channel axis of ``[B, C, T]`` to ``out_channels`` (floor in front, rest behind).

    Used on the identity path of a residual block that widens; a no-op when widths already match.
    """
    extra = out_channels - x.shape[1]
    if extra <= 0:
        return x
    front = extra // 2
    return F.pad(x, (0, 0, front, extra - front), mode="constant", value=0.0)


class PreActBlock1d(nn.Module):
    """Pre-activation residual block of Hong's resnet1d (PaPaGei, PulsePPG).

    ``[BN -> ReLU -> Dropout] -> SAME conv(k, s) -> BN -> ReLU -> Dropout -> SAME conv(k, 1)`` plus the
    (pooled, channel-padded) identity; no activation after the add. The first block of a network skips
    the bracketed pre-activation but still owns ``bn1`` so the checkpoint keys exist.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 2,
        groups: int = 1,
        downsample: bool = False,
        is_first_block: bool = False,
        dropout: float = 0.5,
    ) -> None:
        """Build both convs; ``stride`` only applies (to conv1 and the pool) when ``downsample``."""
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.downsample = downsample
        self.is_first_block = is_first_block
        conv_stride = stride if downsample else 1
        self.bn1 = nn.BatchNorm1d(in_channels)
        self.relu1 = nn.ReLU()
        self.do1 = nn.Dropout(p=dropout)
        self.conv1 = SameConv1d(in_channels, out_channels, kernel_size, stride=conv_stride, groups=groups)
        self.bn2 = nn.BatchNorm1d(out_channels)
        self.relu2 = nn.ReLU()
        self.do2 = nn.Dropout(p=dropout)
        self.conv2 = SameConv1d(out_channels, out_channels, kernel_size, stride=1, groups=groups)
        self.max_pool = SamePadMaxPool1d(kernel_size=conv_stride)

    def forward(self, x: Tensor) -> Tensor:
        """Residual branch plus identity shortcut."""
        out = x
        if not self.is_first_block:
            out = self.do1(self.relu1(self.bn1(out)))
        out = self.conv1(out)
        out = self.do2(self.relu2(self.bn2(out)))
        out = self.conv2(out)
        identity = self.max_pool(x) if self.downsample else x
        return out + pad_channels(identity, self.out_channels)


def resnet1d_block_widths(
    base_filters: int, n_block: int, downsample_gap: int = 2, increasefilter_gap: int = 4
) -> list[tuple[int, int, bool]]:
    """The (in, out, downsample) plan of Hong's ResNet1D: downsample on odd blocks, widen every 4th."""
    plan: list[tuple[int, int, bool]] = []
    for i in range(n_block):
        downsample = i % downsample_gap == 1
        if i == 0:
            c_in = c_out = base_filters
        else:
            c_in = base_filters * 2 ** ((i - 1) // increasefilter_gap)
            c_out = c_in * 2 if i % increasefilter_gap == 0 else c_in
        plan.append((c_in, c_out, downsample))
    return plan


def resnet1d_blocks(
    base_filters: int,
    kernel_size: int,
    n_block: int,
    stride: int = 2,
    groups: int = 1,
    dropout: float = 0.5,
) -> nn.ModuleList:
    """The ``basicblock_list`` of Hong's ResNet1D for the given width, kernel and depth."""
    return nn.ModuleList(
        PreActBlock1d(
            c_in, c_out, kernel_size, stride=stride, groups=groups, downsample=down, is_first_block=(i == 0),
            dropout=dropout,
        )
        for i, (c_in, c_out, down) in enumerate(resnet1d_block_widths(base_filters, n_block))
    )


def resnet1d_trunk(x: Tensor, stem_conv: nn.Module, stem_bn: nn.Module, blocks: nn.ModuleList) -> Tensor:
    """Stem conv -> BN -> ReLU -> residual blocks; returns the last feature map ``[B, C, T']``."""
    out = F.relu(stem_bn(stem_conv(x)))
    for block in blocks:
        out = block(out)
    return out
