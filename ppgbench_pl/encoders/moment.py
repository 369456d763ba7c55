"""MOMENT-1-small in embedding mode, its T5 stack built from a local config, so AutonLab's weights load strictly."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import T5Config
from transformers.models.t5.modeling_t5 import T5Stack

from ppgbench_pl.encoders.base import PPGEncoder, file_sha256
from ppgbench_pl.encoders.checkpoint import read_checkpoint_file
from ppgbench_pl.errors import CheckpointError

SEQ_LEN = 512
PATCH_LEN = 8
D_MODEL = 512
MAX_POSITIONS = 5000
REVIN_EPS = 1e-5
DROPOUT = 0.1
BACKBONE = "google/flan-t5-small"
HEAD_PREFIX = "head.linear."
PE_KEY = "patch_embedding.position_embedding.pe"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")

#: flan-t5-small sizes assumed by the manifest (the real config.json is checked against these).
T5_SETTINGS: dict[str, Any] = {
    "vocab_size": 32128,
    "d_model": D_MODEL,
    "d_kv": 64,
    "d_ff": 1024,
    "num_layers": 8,
    "num_heads": 6,
    "relative_attention_num_buckets": 32,
    "relative_attention_max_distance": 128,
    "layer_norm_epsilon": 1e-6,
    "feed_forward_proj": "gated-gelu",
    "dense_act_fn": "gelu_new",
}
#: MOMENT-level settings a config.json may state.
MOMENT_SETTINGS: dict[str, Any] = {
    "seq_len": SEQ_LEN,
    "patch_len": PATCH_LEN,
    "patch_stride_len": PATCH_LEN,
    "transformer_type": "encoder_only",
    "d_model": D_MODEL,
}


def t5_config() -> T5Config:
    """The flan-t5-small encoder configuration, built locally (no hub access)."""
    config = T5Config(  # type: ignore[call-arg]  # transformers' stubs lag the accepted kwargs
        **{k: v for k, v in T5_SETTINGS.items() if k != "dense_act_fn"},
        dropout_rate=DROPOUT,
        initializer_factor=1.0,
        is_encoder_decoder=False,
        use_cache=False,
        tie_word_embeddings=False,
    )
    config._attn_implementation = "eager"  # the plain T5 attention MOMENT was trained with
    return config


def revin_normalise(x: Tensor, input_mask: Tensor, eps: float = REVIN_EPS) -> Tensor:
    """RevIN without affine over the observed steps (``input_mask`` ``[B, T]``, NaN unobserved), NaN/inf -> 0."""
    observed = input_mask.bool().unsqueeze(1) & ~torch.isnan(x)
    count = observed.sum(-1, keepdim=True).to(x.dtype)
    mean = torch.where(observed, x, 0.0).sum(-1, keepdim=True) / count
    var = torch.where(observed, x - mean, 0.0).square().sum(-1, keepdim=True) / count
    std = var.sqrt() + eps
    out = (x - mean.detach()) / std.detach()
    return torch.nan_to_num(out, nan=0.0, posinf=0.0, neginf=0.0)


def sinusoid_table(length: int, dim: int) -> Tensor:
    """Fixed sine/cosine position table ``[1, length, dim]`` (sine on even, cosine on odd features)."""
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq)
    return table.unsqueeze(0)


class PatchEmbedding(nn.Module):
    """Linear patch projection; unobserved patches take the learned ``mask_embedding``; plus positions."""

    def __init__(self, patch_len: int = PATCH_LEN, dim: int = D_MODEL, dropout: float = DROPOUT) -> None:
        super().__init__()
        self.value_embedding = nn.Linear(patch_len, dim, bias=False)
        self.mask_embedding = nn.Parameter(torch.zeros(dim))
        self.position_embedding = nn.Module()  # holds the persistent sinusoid buffer ``pe``, keyed as upstream
        self.position_embedding.register_buffer("pe", sinusoid_table(MAX_POSITIONS, dim), persistent=True)
        self.dropout = nn.Dropout(dropout)

    def forward(self, patches: Tensor, patch_mask: Tensor) -> Tensor:
        """``[B, C, N, P]`` patches and ``[B, N]`` mask -> ``[B, C, N, dim]`` tokens."""
        keep = patch_mask[:, None, :, None].to(patches.dtype)
        tokens = keep * self.value_embedding(patches) + (1.0 - keep) * self.mask_embedding
        table: Tensor = self.position_embedding.pe  # type: ignore[assignment]
        if patches.shape[2] > table.shape[1]:
            raise ValueError(f"moment_small: {patches.shape[2]} patches exceed the {table.shape[1]}-row table")
        return self.dropout(tokens + table[:, :patches.shape[2]])


def _flag(name: str, want: Any, have: Any) -> str | None:
    """``name=have`` when a stated config value differs from ours (floats compared loosely)."""
    if isinstance(want, float) and isinstance(have, (int, float)):
        return None if math.isclose(want, have, rel_tol=1e-6) else f"{name}={have} (expected {want})"
    return None if want == have else f"{name}={have!r} (expected {want!r})"


def check_moment_config(config: Mapping[str, Any], source: str) -> None:
    """Refuse (CheckpointError, one line) a MOMENT config.json stating sizes other than MOMENT-1-small's."""
    if "patch_len" not in config and isinstance(config.get("config"), Mapping):
        config = config["config"]  # hub-mixin files may nest the constructor's config
    diffs = [_flag(k, want, config[k]) for k, want in MOMENT_SETTINGS.items() if config.get(k) is not None]
    t5 = config.get("t5_config")
    if isinstance(t5, Mapping):
        diffs += [_flag(k, want, t5[k]) for k, want in T5_SETTINGS.items() if t5.get(k) is not None]
    elif config.get("transformer_backbone") is not None:
        diffs.append(_flag("transformer_backbone", BACKBONE, config["transformer_backbone"]))
    found = [d for d in diffs if d is not None]
    if found:
        raise CheckpointError(f"{source}: config does not describe MOMENT-1-small: " + ", ".join(found))


class MomentSmallEncoder(PPGEncoder):
    """MOMENT-1-small embedding: RevIN, 8-sample patches, T5 encoder, mean over channels and patches.

    Args:
        checkpoint: Local checkpoint (HF-style folder or a weights file); required unless ``random_init``.
        pad_to_context: False (published): the raw window, all steps observed. True (official MOMENT usage):
            shorter windows are left-padded to 512 with zeros marked unobserved, longer ones keep their last 512.
        random_init: Evaluate with seeded random weights; the name becomes ``moment_small (random init)``.
    """

    weights_source: ClassVar[str | None] = (
        "a local copy of the Hugging Face folder AutonLab/MOMENT-1-small (https://huggingface.co/AutonLab/"
        "MOMENT-1-small: config.json and model.safetensors)")

    def __init__(self, checkpoint: str | Path | None = None, pad_to_context: bool = False,
                 random_init: bool = False) -> None:
        """Build MOMENT-1-small; load ``checkpoint`` strictly (or ``random_init: true``)."""
        super().__init__()
        self.pad_to_context = pad_to_context
        with self.weights(checkpoint, random_init):
            self.patch_embedding = PatchEmbedding()
            self.encoder = T5Stack(t5_config())
            if getattr(self.encoder, "embed_tokens", None) is None:  # transformers 4.x leaves it to us
                self.encoder.embed_tokens = nn.Embedding(T5_SETTINGS["vocab_size"], D_MODEL)
            self.encoder.gradient_checkpointing = False

    def deviations(self) -> list[str]:
        """``moment_small.pad_to_context=True`` when on (#12); no protocol switch: its default stays in the digest."""
        return [*super().deviations(), *([f"{type(self).name}.pad_to_context=True"] if self.pad_to_context else [])]

    def context(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Apply the window policy to ``[B, C, T]``: returns the signal and its ``[B, T']`` input mask."""
        length = x.shape[-1]
        if not self.pad_to_context or length == SEQ_LEN:
            return x, x.new_ones(x.shape[0], length)
        if length > SEQ_LEN:
            return x[..., -SEQ_LEN:], x.new_ones(x.shape[0], SEQ_LEN)
        pad = SEQ_LEN - length
        mask = torch.cat([x.new_zeros(x.shape[0], pad), x.new_ones(x.shape[0], length)], dim=-1)
        return F.pad(x, (pad, 0)), mask

    def embed(self, x: Tensor, input_mask: Tensor) -> Tensor:
        """Embed ``[B, C, T]`` with a ``[B, T]`` observation mask into ``[B, 512]`` (refuses unobserved windows)."""
        dtype = self.patch_embedding.value_embedding.weight.dtype
        x = x.to(dtype)
        batch, channels, _ = x.shape
        x = revin_normalise(x, input_mask)
        patches = x.unfold(-1, PATCH_LEN, PATCH_LEN)  # [B, C, N, P]; a remainder is discarded
        patch_mask = (input_mask.unfold(-1, PATCH_LEN, PATCH_LEN).sum(-1) == PATCH_LEN).to(input_mask.dtype)  # [B, N]
        if bool((patch_mask.sum(-1) == 0).any()):
            raise ValueError(f"{self.name}: a window has no fully observed {PATCH_LEN}-sample patch")
        tokens = self.patch_embedding(patches, patch_mask)
        n_patches = tokens.shape[2]
        hidden = self.encoder(
            inputs_embeds=tokens.reshape(batch * channels, n_patches, D_MODEL),
            attention_mask=patch_mask.repeat_interleave(channels, dim=0).long(),
        ).last_hidden_state
        hidden = hidden.reshape(batch, channels, n_patches, D_MODEL).mean(dim=1)
        weight = patch_mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * weight).sum(dim=1) / weight.sum(dim=1)

    def forward_features(self, x: Tensor) -> Tensor:
        """``[B, C, T]`` at 64 Hz -> ``[B, 512]`` under the configured window policy."""
        return self.embed(*self.context(x))

    def weights_file(self, path: Path) -> Path:
        """The weights inside an HF-style folder, or the file itself."""
        if not path.is_dir():
            return path
        for name in WEIGHT_FILES:
            if (path / name).is_file():
                return path / name
        raise CheckpointError(f"{path}: folder holds none of {', '.join(WEIGHT_FILES)}")

    def read_checkpoint(self, path: Path) -> object:
        """Read safetensors (or a torch file) after checking any config.json that describes it."""
        weights = self.weights_file(path)
        config_file = weights.parent / "config.json"
        if (path.is_dir() or weights.name in WEIGHT_FILES) and config_file.is_file():
            try:
                config = json.loads(config_file.read_text())
            except (OSError, ValueError) as exc:
                raise CheckpointError(f"{config_file}: unreadable config ({exc})") from exc
            if not isinstance(config, Mapping):
                raise CheckpointError(f"{config_file}: config is not a JSON object")
            check_moment_config(config, source=str(config_file))
        if weights.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(weights), device="cpu")
        return read_checkpoint_file(weights)

    def extract_state_dict(self, checkpoint: object) -> Mapping[str, Tensor]:
        """Drop the reconstruction head (identity in embedding mode); supply ``pe`` if it was not saved."""
        raw = super().extract_state_dict(checkpoint)
        state = {k: v for k, v in raw.items() if not k.startswith(HEAD_PREFIX)}
        if PE_KEY not in state:
            table: Tensor = self.patch_embedding.position_embedding.pe  # type: ignore[assignment]
            state[PE_KEY] = table.detach().clone()
        return state

    def checkpoint_digest(self) -> str:
        """As the base class, but a loaded folder is identified by the weights file inside it."""
        if self.checkpoint_path is None or not Path(self.checkpoint_path).is_dir():
            return super().checkpoint_digest()
        return file_sha256(self.weights_file(Path(self.checkpoint_path)))
