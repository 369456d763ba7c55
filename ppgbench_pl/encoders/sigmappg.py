"""SigmaPPG's student ViT over 100-sample patches at 50 Hz, named so ``sigma.pth`` loads strictly (quirks kept)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ppgbench_pl.encoders.base import PPGEncoder, switch_flag
from ppgbench_pl.encoders.preprocessing import butter_bandpass_sos, minmax_window
from ppgbench_pl.errors import CheckpointError, ConfigError

PATCH_SIZE = 100
MAX_PATCHES = 120
STUDENT_PREFIX = "student."
BAND_HZ = (0.5, 8.0)
#: Min-max targets: [-1, 1] as published, or [0, 1] as the authors' pretraining scaled.
SCALES = ("symmetric", "unit")


class DropPath(nn.Module):
    """Stochastic depth: zero whole samples of a residual branch, rescaling the survivors (identity in eval)."""

    def __init__(self, prob: float = 0.0) -> None:
        super().__init__()
        self.prob = prob

    def forward(self, x: Tensor) -> Tensor:
        """``x`` with whole samples dropped while training."""
        if self.prob == 0.0 or not self.training:
            return x
        keep = 1.0 - self.prob
        mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
        return x * mask / keep


class TemporalConv(nn.Module):
    """Three Conv2d layers acting only along each patch's samples (conv -> GroupNorm -> GELU each)."""

    def __init__(self, out_chans: int = 12) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, out_chans, kernel_size=(1, 15), stride=(1, 8), padding=(0, 7))
        self.norm1 = nn.GroupNorm(4, out_chans)
        self.conv2 = nn.Conv2d(out_chans, out_chans, kernel_size=(1, 3), padding=(0, 1))
        self.norm2 = nn.GroupNorm(4, out_chans)
        self.conv3 = nn.Conv2d(out_chans, out_chans, kernel_size=(1, 3), padding=(0, 1))
        self.norm3 = nn.GroupNorm(4, out_chans)

    def forward(self, x: Tensor) -> Tensor:
        """[B, N, A, P] patches -> [B, N*A, P' * C] with position outer, channel inner."""
        b, n, a, p = x.shape
        x = x.reshape(b, 1, n * a, p)
        x = F.gelu(self.norm1(self.conv1(x)))
        x = F.gelu(self.norm2(self.conv2(x)))
        x = F.gelu(self.norm3(self.conv3(x)))  # [B, C, NA, P']
        return x.permute(0, 2, 3, 1).flatten(2)  # feature index = position * C + channel


class Attention(nn.Module):
    """Multi-head self-attention with a bias-free qkv projection and per-head q/k LayerNorm."""

    def __init__(self, dim: int, num_heads: int, attn_drop: float, proj_drop: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        head_dim = dim // num_heads
        self.scale = head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.q_norm = nn.LayerNorm(head_dim, eps=1e-6)
        self.k_norm = nn.LayerNorm(head_dim, eps=1e-6)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x: Tensor) -> Tensor:
        """[B, N, D] -> [B, N, D]."""
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        q = self.q_norm(q) * self.scale
        k = self.k_norm(k)
        attn = self.attn_drop((q @ k.transpose(-2, -1)).softmax(dim=-1))
        out = (attn @ v).transpose(1, 2).reshape(b, n, d)
        return self.proj_drop(self.proj(out))


class Mlp(nn.Module):
    """fc1 -> exact GELU -> fc2 -> dropout: one dropout per block, after ``fc2``, as the authors' ``Mlp``."""

    def __init__(self, dim: int, hidden: int, drop: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(drop)

    def forward(self, x: Tensor) -> Tensor:
        """[B, N, D] -> [B, N, D]."""
        return self.drop(self.fc2(F.gelu(self.fc1(x))))


class Block(nn.Module):
    """Pre-norm transformer block with learned per-channel layer scale and stochastic depth."""

    def __init__(
        self, dim: int, num_heads: int, mlp_ratio: float, drop: float, attn_drop: float, path_drop: float,
        init_values: float,
    ) -> None:
        super().__init__()
        # Parameters are registered first so the state-dict order matches the checkpoint.
        self.gamma_1 = nn.Parameter(torch.full((dim,), init_values))
        self.gamma_2 = nn.Parameter(torch.full((dim,), init_values))
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, num_heads, attn_drop, drop)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), drop)
        self.drop_path = DropPath(path_drop)

    def forward(self, x: Tensor) -> Tensor:
        """Two gated residual branches."""
        x = x + self.drop_path(self.gamma_1 * self.attn(self.norm1(x)))
        return x + self.drop_path(self.gamma_2 * self.mlp(self.norm2(x)))


class SigmaPPGEncoder(PPGEncoder):
    """SigmaPPG student (patch 100, dim 360, 18 layers, 12 heads); embedding = mean of patch tokens."""

    weights_source: ClassVar[str | None] = (
        "sigma.pth from Hugging Face zonhengu/sigmappg (https://huggingface.co/zonhengu/sigmappg)")
    protocol_switches: ClassVar[dict[str, object]] = {"scale": "symmetric", "filter_before_crop": False}

    def __init__(
        self,
        checkpoint: str | None = None,
        depth: int = 18,
        num_heads: int = 12,
        mlp_ratio: float = 4.0,
        out_chans: int = 12,
        vocab_size: int = 4096,
        drop_rate: float = 0.08,
        attn_drop_rate: float = 0.08,
        drop_path_rate: float = 0.1,
        init_values: float = 0.1,
        random_init: bool = False,
        scale: str = "symmetric",
        filter_before_crop: bool = False,
    ) -> None:
        """Build the student; load ``checkpoint`` strictly (or ``random_init: true``).

        The authors' input, a deviation (#53): ``scale: unit`` scales to [0, 1]; ``filter_before_crop`` crops after.
        """
        super().__init__()
        if scale not in SCALES:
            raise ConfigError(f"{self.name}: scale must be one of {', '.join(SCALES)}, got {scale!r}")
        self.scale = scale
        self.filter_before_crop = switch_flag(self.name, "filter_before_crop", filter_before_crop)
        with self.weights(checkpoint, random_init):
            dim = self.embed_dim  # the checkpoint's modules, trunc-normal (std 0.02) as in BEiT pretraining
            conv_width = (PATCH_SIZE + 2 * 7 - 15) // 8 + 1
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.mask_token = nn.Parameter(torch.zeros(1, 1, dim))  # pretraining only; kept for strict loading
            self.pos_embed = nn.Parameter(torch.zeros(1, 128 + 1, dim))
            self.time_embed = nn.Parameter(torch.zeros(1, MAX_PATCHES, dim))
            self.patch_embed_conv = TemporalConv(out_chans)
            self.patch_embed_projection = nn.Linear(out_chans * conv_width, dim)
            # Upstream registers the same two modules again in a Sequential: both key families exist and
            # share tensors (parameters() counts them once).
            self.patch_embed_seq = nn.Sequential(self.patch_embed_conv, self.patch_embed_projection)
            self.pos_drop = nn.Dropout(drop_rate)
            rates = torch.linspace(0, drop_path_rate, depth).tolist()
            self.blocks = nn.ModuleList(
                Block(dim, num_heads, mlp_ratio, drop_rate, attn_drop_rate, rate, init_values) for rate in rates
            )
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.lm_head = nn.Linear(dim, vocab_size)  # unused for embeddings; present for strict loading
            for p in (self.cls_token, self.mask_token, self.pos_embed, self.time_embed):
                nn.init.trunc_normal_(p, std=0.02)
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    nn.init.trunc_normal_(m.weight, std=0.02)
                    if m.bias is not None:
                        nn.init.zeros_(m.bias)

    def preprocess(self, x: Tensor, ppg_mean: Tensor | None = None, ppg_std: Tensor | None = None) -> Tensor:
        """Crop to whole patches, Butterworth(2) 0.5-8 Hz zero-phase, min-max to [-1, 1] (or the switches)."""
        super().preprocess(x)  # at least one patch (min_samples)
        n = x.shape[-1]
        if n // PATCH_SIZE > MAX_PATCHES:
            raise ValueError(f"{self.name} accepts at most {MAX_PATCHES * PATCH_SIZE} samples, got {n}")
        keep = n - n % PATCH_SIZE
        window = x if self.filter_before_crop else x[..., :keep]
        out = minmax_window(butter_bandpass_sos(window, self.sampling_rate, BAND_HZ, order=2),
                            unit=self.scale == "unit")
        # A constant window filters to ~1e-14 round-off that min-max would blow up to [-1, 1]; decide
        # flatness on the raw window so such windows give zeros, as intended.
        flat = (window.amax(dim=-1) == window.amin(dim=-1)).to(out.device)
        return super().preprocess(torch.where(flat.unsqueeze(-1), torch.zeros_like(out), out)[..., :keep])

    def forward_features(self, x: Tensor) -> Tensor:
        """[B, 1, T] (T a multiple of 100) -> mean of the final-norm patch tokens (CLS dropped), [B, 360]."""
        b, c, t = x.shape
        if t % PATCH_SIZE or not 0 < t // PATCH_SIZE <= MAX_PATCHES:
            raise ValueError(f"{self.name} input length must be a multiple of {PATCH_SIZE} up to "
                             f"{MAX_PATCHES * PATCH_SIZE}, got {t}")
        a = t // PATCH_SIZE
        tokens = self.patch_embed_projection(self.patch_embed_conv(x.reshape(b, c, a, PATCH_SIZE)))
        tokens = torch.cat((self.cls_token.expand(b, -1, -1), tokens), dim=1)
        # Upstream quirk (called with input_chans=[0, 1]): every token, CLS included, gets pos_embed row 1.
        tokens = tokens + self.pos_embed[:, 1:2]
        time = self.time_embed[:, :a].unsqueeze(1).expand(b, c, -1, -1).flatten(1, 2)
        tokens = torch.cat((tokens[:, :1], tokens[:, 1:] + time), dim=1)
        tokens = self.pos_drop(tokens)
        for block in self.blocks:
            tokens = block(tokens)
        return self.norm(tokens)[:, 1:].mean(dim=1)

    def extract_state_dict(self, checkpoint: object) -> Mapping[str, Tensor]:
        """``checkpoint["model"]``: keep ``student.*`` keys with the prefix stripped, drop wrapper heads."""
        if not isinstance(checkpoint, Mapping) or not isinstance(checkpoint.get("model"), Mapping):
            raise CheckpointError(f"{self.name}: expected a dict holding a 'model' state dict (sigma.pth)")
        n = len(STUDENT_PREFIX)
        state = {k[n:]: v for k, v in checkpoint["model"].items() if k.startswith(STUDENT_PREFIX)}
        if not state:
            raise CheckpointError(f"{self.name}: checkpoint 'model' holds no '{STUDENT_PREFIX}' keys")
        return state
