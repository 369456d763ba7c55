"""Bring your own model: wrap any importable ``nn.Module`` as a :class:`PPGEncoder` from YAML alone.

A user's network rarely follows our contract: it may want ``[B, 1, T]`` or ``[B, T]``, return a feature
map or a tuple, expect its own filtering, or ship weights nested in a training checkpoint. Every such
difference is a setting of :class:`CustomEncoder`, so no adapter class has to be written::

    encoder:
      class_path: ppgbench_pl.encoders.custom.CustomEncoder
      init_args:
        module: {class_path: mypkg.models.MyNet, init_args: {width: 64}}
        name: mynet
        sampling_rate: 125
        checkpoint: checkpoints/mynet.pt
        preprocess: mypkg.prep:bandpass
        pooling: mean
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor, nn

from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.encoders.preprocessing import zscore_window
from ppgbench_pl.errors import CheckpointError, ConfigError

PreprocessFn = Callable[[Tensor, float], Any]
#: Length of the dummy window (seconds at the native rate) used to infer ``embed_dim``.
PROBE_SECONDS = 10.0


def resolve_callable(path: str) -> PreprocessFn:
    """Import ``"pkg.module:function"`` or ``"pkg.module.function"``.

    Raises:
        ConfigError: The module cannot be imported, lacks the attribute, or it is not callable.
    """
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ConfigError(f"preprocess '{path}': expected 'package.module:function' or "
                          "'package.module.function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"preprocess '{path}': cannot import '{module_name}' ({exc})") from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ConfigError(f"preprocess '{path}': '{module_name}' has no attribute '{attr}'")
        target = getattr(target, part)
    if not callable(target):
        raise ConfigError(f"preprocess '{path}': {attr} is not callable")
    return target  # type: ignore[no-any-return]


def code_digest(*objects: object) -> str:
    """Hash of the source code of classes/functions, so editing a user's model invalidates cached embeddings.

    Objects without retrievable source (built-ins, C extensions) contribute their qualified name only.
    """
    digest = hashlib.sha256()
    for obj in objects:
        digest.update(f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', repr(obj))}".encode())
        try:
            digest.update(inspect.getsource(obj).encode())  # type: ignore[arg-type]
        except (OSError, TypeError):
            pass
    return digest.hexdigest()


class CustomEncoder(PPGEncoder):
    """Any ``nn.Module`` as an encoder: input layout, normalisation, pooling and weights set from YAML.

    The wrapper's ``preprocess`` runs, in this order: the user's ``preprocess`` callable on ``[B, T]``,
    then ``normalize``, then a channel axis when ``input_shape`` is ``BCT``. ``forward_features`` calls
    the module, keeps element 0 of a tuple/list output and applies ``pooling`` to a ``[B, C, T]`` map.

    Args:
        module: The user's network, built by jsonargparse from ``class_path``/``init_args``.
        sampling_rate: Native rate in Hz; the benchmark resamples every dataset to it.
        name: Model name in job ids, records and tables (must differ from the controls' names).
        embed_dim: Embedding size; when omitted it is measured with one forward of a 10 s dummy window.
        checkpoint: Weights to load strictly into ``module`` (``torch.load(weights_only=True)``).
        state_dict_key: Key under which the checkpoint nests the state dict (``state_dict``, ``model``,
            ``net``, ...); ``None`` for a bare state dict.
        key_prefix: Only keys starting with this prefix are taken, and it is stripped (``module.`` of
            DataParallel, ``model.`` of a Lightning checkpoint, ...).
        preprocess: Dotted path of a callable ``(x: Tensor[B, T], fs: float) -> Tensor`` (NumPy arrays
            are accepted as output) applied before normalisation: filtering, cropping, ...
        input_shape: ``BCT`` gives the module ``[B, 1, T]``, ``BT`` gives ``[B, T]``.
        normalize: ``window_zscore`` z-scores each window (population std + 1e-6); ``none`` leaves it.
        pooling: ``mean``/``max`` over the last axis of a ``[B, C, T]`` output; ``none`` expects ``[B, D]``.
        min_samples: Shortest window the module accepts (shorter ones are refused with a clear error).

    Raises:
        ConfigError: A setting is invalid or the preprocess callable cannot be imported.
        CheckpointError: The checkpoint cannot be read or does not fit the module.
    """

    def __init__(
        self,
        module: nn.Module,
        sampling_rate: float,
        name: str = "custom",
        embed_dim: int | None = None,
        checkpoint: str | None = None,
        state_dict_key: str | None = None,
        key_prefix: str = "",
        preprocess: str | None = None,
        input_shape: Literal["BCT", "BT"] = "BCT",
        normalize: Literal["none", "window_zscore"] = "none",
        pooling: Literal["none", "mean", "max"] = "none",
        min_samples: int = 1,
    ) -> None:
        super().__init__()
        _check_choice("input_shape", input_shape, ("BCT", "BT"))
        _check_choice("normalize", normalize, ("none", "window_zscore"))
        _check_choice("pooling", pooling, ("none", "mean", "max"))
        if sampling_rate <= 0:
            raise ConfigError(f"sampling_rate must be positive, got {sampling_rate}")
        if min_samples < 1:
            raise ConfigError(f"min_samples must be at least 1, got {min_samples}")
        if not name:
            raise ConfigError("name must not be empty")
        if embed_dim is not None and embed_dim < 1:
            raise ConfigError(f"embed_dim must be positive, got {embed_dim}")
        # Per-instance values of what the contract declares as class attributes.
        self.name = name  # type: ignore[misc]
        self.sampling_rate = float(sampling_rate)  # type: ignore[misc]
        self.min_samples = int(min_samples)  # type: ignore[misc]
        self.trainable = any(True for _ in module.parameters())  # type: ignore[misc]
        self.module = module
        self.module_class = f"{type(module).__module__}.{type(module).__qualname__}"
        self.state_dict_key, self.key_prefix = state_dict_key, key_prefix
        self.preprocess_path = preprocess
        self.input_shape, self.normalize, self.pooling = input_shape, normalize, pooling
        self._preprocess_fn = resolve_callable(preprocess) if preprocess else None
        sources: list[object] = [type(module)] + ([self._preprocess_fn] if self._preprocess_fn else [])
        self.code_sha256 = code_digest(*sources)  # part of the embedding-cache identity
        if checkpoint is not None:
            self.load_pretrained(checkpoint)
        measured = self.infer_embed_dim() if embed_dim is None else int(embed_dim)
        self.embed_dim = measured  # type: ignore[misc]

    # -- input ---------------------------------------------------------------------------------
    def preprocess(self, x: Tensor, ppg_mean: Tensor | None = None, ppg_std: Tensor | None = None) -> Tensor:
        """User callable, then normalisation, then the channel axis the module wants."""
        if x.ndim != 2:
            raise ValueError(f"{self.name} expects raw windows [B, T], got shape {tuple(x.shape)}")
        super().preprocess(x)
        if self._preprocess_fn is not None:
            out = self._preprocess_fn(x, self.sampling_rate)
            if isinstance(out, np.ndarray):
                out = torch.from_numpy(np.ascontiguousarray(out))
            if not isinstance(out, Tensor):
                raise TypeError(f"{self.name}: preprocess '{self.preprocess_path}' returned "
                                f"{type(out).__name__}, expected a tensor")
            x = out.to(device=x.device, dtype=torch.float32)
        if self.normalize == "window_zscore":
            x = zscore_window(x).to(x.device)
        if self.input_shape == "BCT" and x.ndim == 2:
            x = x.unsqueeze(1)
        return x

    # -- features ------------------------------------------------------------------------------
    def pooled(self, x: Tensor) -> Tensor:
        """Module output for preprocessed input, reduced to ``[B, D]`` (tuple element 0, pooling)."""
        out: Any = self.module(x)
        if isinstance(out, (tuple, list)):
            if not out:
                raise ValueError(f"{self.name}: the module returned an empty {type(out).__name__}")
            out = out[0]
        if not isinstance(out, Tensor):
            kind = type(out).__name__
            raise TypeError(f"{self.name}: the module returned {kind}, expected a tensor or a tuple")
        if self.pooling != "none":
            if out.ndim != 3:
                raise ValueError(f"{self.name}: pooling='{self.pooling}' expects a [B, C, T] output, "
                                 f"got shape {tuple(out.shape)}")
            out = out.mean(dim=-1) if self.pooling == "mean" else out.amax(dim=-1)
        if out.ndim != 2 or out.shape[0] != x.shape[0]:
            hint = " (set pooling: mean or max for a [B, C, T] output)" if out.ndim == 3 else ""
            raise ValueError(f"{self.name}: expected embeddings [B, D] for batch {x.shape[0]}, "
                             f"got shape {tuple(out.shape)}{hint}")
        return out

    def forward_features(self, x: Tensor) -> Tensor:
        """Embeddings ``[B, embed_dim]``; a size that differs from ``embed_dim`` is an error."""
        out = self.pooled(x)
        if out.shape[1] != self.embed_dim:
            raise ValueError(f"{self.name}: module gives {out.shape[1]}-d embeddings, "
                             f"but embed_dim is {self.embed_dim}")
        return out

    def infer_embed_dim(self) -> int:
        """Embedding size from one no-grad forward of a 10 s pulse-like dummy in eval mode.

        Eval mode keeps BatchNorm statistics untouched; a deterministic sine keeps the global RNG state
        and any user preprocessing (which may divide by a range) well defined.
        """
        length = max(self.min_samples, round(PROBE_SECONDS * self.sampling_rate))
        t = torch.arange(length, dtype=torch.float32) / self.sampling_rate
        dummy = torch.sin(2 * torch.pi * 1.2 * t).repeat(2, 1)
        was_training = self.training
        try:
            self.eval()
            with torch.no_grad():
                device = next(iter(self.module.parameters()), torch.empty(0)).device
                out = self.pooled(self.preprocess(dummy.to(device)))
        finally:
            self.train(was_training)
        return int(out.shape[1])

    # -- weights -------------------------------------------------------------------------------
    def weights_module(self) -> nn.Module:
        """Checkpoints hold the user's module's weights, not the wrapper's."""
        return self.module

    def extract_state_dict(self, checkpoint: object) -> Mapping[str, Tensor]:
        """Unnest ``state_dict_key``, then keep the keys under ``key_prefix`` with the prefix stripped."""
        state = checkpoint
        if self.state_dict_key is not None:
            if not isinstance(state, Mapping) or self.state_dict_key not in state:
                found = sorted(map(str, state))[:8] if isinstance(state, Mapping) else type(state).__name__
                raise CheckpointError(f"{self.name}: no '{self.state_dict_key}' entry in the checkpoint "
                                      f"(found {found})")
            state = state[self.state_dict_key]
        if not isinstance(state, Mapping):
            kind = type(state).__name__
            raise CheckpointError(f"{self.name}: checkpoint holds a {kind}, not a state dict; "
                                  "set state_dict_key if the weights are nested")
        not_tensors = [str(k) for k, v in state.items() if not isinstance(v, Tensor)]
        if not_tensors:
            nested = [str(k) for k, v in state.items() if isinstance(v, Mapping)]
            hint = f"; set state_dict_key to the entry that holds them (one of {nested})" if nested else ""
            raise CheckpointError(f"{self.name}: checkpoint is not a state dict: entries {not_tensors[:8]} "
                                  f"are not tensors{hint}")
        if self.key_prefix:
            n = len(self.key_prefix)
            state = {k[n:]: v for k, v in state.items() if k.startswith(self.key_prefix)}
            if not state:
                raise CheckpointError(f"{self.name}: no checkpoint key starts with '{self.key_prefix}'")
        return state

    def load_pretrained(self, path: str | Path) -> None:
        """Strict load into ``module``; the checkpoint file name appears in every error."""
        try:
            super().load_pretrained(path)
        except CheckpointError as exc:
            message = str(exc)
            raise CheckpointError(message if str(path) in message else f"{path}: {message}") from None


def _check_choice(option: str, value: str, choices: tuple[str, ...]) -> None:
    """Literal types are checked by jsonargparse, but direct Python callers get the same message."""
    if value not in choices:
        raise ConfigError(f"{option} must be one of {', '.join(choices)}; got '{value}'")
