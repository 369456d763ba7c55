"""Bring your own model: any importable ``nn.Module`` as a :class:`PPGEncoder`, from YAML alone."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor, nn

from ppgbench_pl.cards.declaration import parse_declaration
from ppgbench_pl.cards.types import PretrainingSource
from ppgbench_pl.encoders.base import RANDOM_INIT_SUFFIX, PPGEncoder, checkpoint_setting
from ppgbench_pl.encoders.custom_settings import (
    check_choice,
    check_own_name,
    check_sampling_rate,
    code_digest,
    one_line,
    reduce_output,
    resolve_callable,
    shape_hint,
)
from ppgbench_pl.encoders.preprocessing import zscore_window
from ppgbench_pl.errors import CheckpointError, ConfigError
from ppgbench_pl.naming import class_name_of, snake_case

#: Length of the dummy window (seconds at the native rate) of the build-time dry forward.
PROBE_SECONDS = 10.0


class CustomEncoder(PPGEncoder):
    """Any ``nn.Module`` as an encoder: input layout, normalisation, pooling and weights set from YAML.

    Args:
        module: The user's network, built by jsonargparse from ``class_path``/``init_args``.
        sampling_rate: Native rate in Hz; the benchmark resamples every dataset to it.
        name: Model name in records and tables; default: the snake case of the module's class name.
        embed_dim: Embedding size; when omitted it is measured with one forward of a 10 s dummy window.
        checkpoint: Weights to load strictly into ``module`` (only tensors and plain data are unpickled).
        state_dict_key: Key under which the checkpoint nests the state dict (``state_dict``, ``model``, ...).
        key_prefix: Only keys with this prefix are taken, and it is stripped (``module.``, ``model.``, ...).
        preprocess: Dotted path of a callable ``(x: Tensor[B, T], fs: float) -> Tensor`` (or NumPy array)
            applied before ``normalize``: filtering, cropping, ...
        input_shape: ``BCT`` gives the module ``[B, 1, T]``, ``BT`` gives ``[B, T]``.
        normalize: ``window_zscore`` z-scores each window (population std + 1e-6); ``none`` leaves it.
        pooling: ``mean``/``max`` over the last axis of a ``[B, C, T]`` output; ``none`` expects ``[B, D]``.
        min_samples: Shortest window the module accepts.
        random_init: No checkpoint on purpose: evaluated as initialised, named ``<name> (random init)``.
        weights_in_module: No checkpoint because the module carries its weights itself (or has none).
        pretraining_data: Source databases the module was pretrained on (``[mesa, vitaldb]``, an item may say
            ``mesa (unconfirmed)``), ``[]`` for none, or ``unknown``; sets the overlap flags, not the identity.

    Raises:
        ConfigError: A setting is invalid or the preprocess callable cannot be imported.
        CheckpointError: The checkpoint cannot be read or does not fit the module.
    """

    name = "custom"  # the catalog entry; an instance is named after its module (see ``name`` below)

    def __init__(
        self,
        module: nn.Module,
        sampling_rate: float,
        name: str | None = None,
        embed_dim: int | None = None,
        checkpoint: str | None = None,
        state_dict_key: str | None = None,
        key_prefix: str = "",
        preprocess: str | None = None,
        input_shape: Literal["BCT", "BT"] = "BCT",
        normalize: Literal["none", "window_zscore"] = "none",
        pooling: Literal["none", "mean", "max"] = "none",
        min_samples: int = 1,
        random_init: bool = False,
        weights_in_module: bool = False,
        pretraining_data: list[str | dict[str, str]] | str = "unknown",
    ) -> None:
        super().__init__()
        name = type(self).default_name({"name": name, "module": module})
        self._pretraining = parse_declaration(pretraining_data, f"{name}: pretraining_data")
        check_choice("input_shape", input_shape, ("BCT", "BT"))
        check_choice("normalize", normalize, ("none", "window_zscore"))
        check_choice("pooling", pooling, ("none", "mean", "max"))
        sampling_rate = check_sampling_rate(sampling_rate)
        if min_samples < 1:
            raise ConfigError(f"min_samples must be at least 1, got {min_samples}")
        if not name:
            raise ConfigError("name must not be empty")
        check_own_name(name)
        if embed_dim is not None and embed_dim < 1:
            raise ConfigError(f"embed_dim must be positive, got {embed_dim}")
        self.random_init = type(self).random_weights({"name": name, "checkpoint": checkpoint,
                                                      "random_init": random_init,
                                                      "weights_in_module": weights_in_module})
        self.weights_in_module = weights_in_module
        # Per-instance values of what the contract declares as class attributes.
        self.name = name + (RANDOM_INIT_SUFFIX if self.random_init else "")  # type: ignore[misc]
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
        measured = self.infer_embed_dim()
        if embed_dim is not None and int(embed_dim) != measured:
            raise ConfigError(f"{self.name}: embed_dim is {embed_dim} but the module gives {measured}-d "
                              f"embeddings; set embed_dim: {measured} or drop it (it is measured)")
        self.embed_dim = measured  # type: ignore[misc]

    @property
    def pretraining_declaration(self) -> tuple[PretrainingSource, ...] | str:
        """The declared pretraining sources, or ``unknown`` (read by the overlap flags; not in the settings digest)."""
        return self._pretraining

    @classmethod
    def default_name(cls, init_args: Mapping[str, Any]) -> str:
        """The given ``name``, else the snake case of the module's class name (module not built)."""
        given = init_args.get("name")
        return str(given) if given is not None else snake_case(class_name_of(init_args.get("module")))

    @classmethod
    def random_weights(cls, init_args: Mapping[str, Any]) -> bool:
        """Whether the module is evaluated untrained on purpose (exactly one weights source must be set)."""
        name = cls.default_name(init_args)
        random_init = bool(init_args.get("random_init", False))
        in_module = bool(init_args.get("weights_in_module", False))
        checkpoint = checkpoint_setting(name, init_args.get("checkpoint"))
        sources = [label for label, given in (("checkpoint", checkpoint is not None),
                                              ("random_init: true", random_init),
                                              ("weights_in_module: true", in_module)) if given]
        if len(sources) > 1:
            raise ConfigError(f"{name}: {' and '.join(sources)} contradict each other; set only one")
        if not sources:
            raise ConfigError(
                f"{name}: no checkpoint given, so the module would be evaluated with the weights its "
                "constructor made; set checkpoint: <path> (its trained weights), weights_in_module: true "
                "if the module loads its own weights (or has none), or random_init: true to evaluate it "
                f"untrained (reported as '{name}{RANDOM_INIT_SUFFIX}')")
        return random_init

    def preprocess(self, x: Tensor, ppg_mean: Tensor | None = None, ppg_std: Tensor | None = None) -> Tensor:
        """User callable, then normalisation, then the channel axis the module wants."""
        self.check_raw(x)
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

    def forward_features(self, x: Tensor) -> Tensor:
        """Module output reduced to ``[B, embed_dim]`` (tuple element 0, ``pooling``); another size is an error."""
        try:
            out = reduce_output(self.module(x), self.pooling, x.shape[0])
        except ValueError as exc:
            raise ValueError(f"{self.name}: {exc} ({shape_hint(self.input_shape)})") from None
        if out.shape[1] != self.embed_dim:
            raise ValueError(f"{self.name}: module gives {out.shape[1]}-d embeddings, "
                             f"but embed_dim is {self.embed_dim}")
        return out

    def infer_embed_dim(self) -> int:
        """Embedding size from one eval-mode forward of a 10 s sine batch; a ConfigError names settings that fit."""
        length = max(self.min_samples, round(PROBE_SECONDS * self.sampling_rate))
        t = torch.arange(length, dtype=torch.float32) / self.sampling_rate
        dummy = torch.sin(2 * torch.pi * 1.2 * t).repeat(2, 1)
        was_training = self.training
        try:
            self.eval()
            with torch.no_grad():
                device = next(iter(self.module.parameters()), torch.empty(0)).device
                try:
                    prepared = self.preprocess(dummy.to(device))
                except (TypeError, ValueError, RuntimeError) as exc:
                    raise ConfigError(f"{self.name}: preprocessing a dummy [2, {length}] batch failed: "
                                      f"{one_line(exc)}") from None
                flat = prepared.squeeze(1) if prepared.ndim == 3 and prepared.shape[1] == 1 else prepared
                result = self._dry_forward(flat, self.input_shape, self.pooling)
                if isinstance(result, Tensor):
                    return int(result.shape[1])
                raise ConfigError(self._diagnose(flat, result))
        finally:
            self.train(was_training)

    def _dry_forward(self, flat: Tensor, input_shape: str, pooling: str) -> Tensor | str:
        """Embeddings of the dummy batch under the given settings, or what went wrong (one line)."""
        x = flat.unsqueeze(1) if input_shape == "BCT" and flat.ndim == 2 else flat
        given = f"given {list(x.shape)} (input_shape: {input_shape})"
        try:
            out = self.module(x)
        except Exception as exc:  # noqa: BLE001 - any failure of the user's module is reported in one line
            detail = one_line(exc) if str(exc).strip() else ""
            return f"{given} the module raised {type(exc).__name__}" + (f": {detail}" if detail else "")
        try:
            emb = reduce_output(out, pooling, x.shape[0])
        except ValueError as exc:
            return f"{given} {exc}"
        raw = out[0] if isinstance(out, (tuple, list)) else out
        if pooling != "none" and raw.ndim == 3 and raw.shape[1] == 1 and raw.shape[2] > 1:
            return (f"{given} the module returned {list(raw.shape)}, and pooling: {pooling} over its last "
                    "axis would leave 1-d embeddings")
        return emb

    def _diagnose(self, flat: Tensor, problem: str) -> str:
        """Build the error: the problem, then the settings that make the module's output fit, if any."""
        current = (self.input_shape, self.pooling)
        candidates = [(shape, pool) for shape in ("BCT", "BT") for pool in ("none", "mean", "max")]
        # The current settings first (skipped), then one setting changed (input_shape first), then both.
        candidates.sort(key=lambda c: ((c[0] != current[0]) + (c[1] != current[1]), c[1] != current[1]))
        for shape, pool in candidates[1:]:
            result = self._dry_forward(flat, shape, pool)
            if isinstance(result, Tensor):
                fix = ", ".join(f"{key}: {value}" for key, value, now in
                                (("input_shape", shape, current[0]), ("pooling", pool, current[1]))
                                if value != now)
                return (f"{self.name}: the module's output does not fit the settings: {problem}; with {fix} "
                        f"it gives [B, {result.shape[1]}] embeddings, so set {fix}")
        return (f"{self.name}: the module's output does not fit the settings: {problem}; no input_shape / "
                "pooling setting fixes it: check the module, sampling_rate "
                f"({self.sampling_rate:g} Hz gives {flat.shape[-1]}-sample windows) and min_samples")

    def weights_module(self) -> nn.Module:
        """Checkpoints hold the user's module's weights, not the wrapper's."""
        return self.module

    def extract_state_dict(self, checkpoint: object) -> Mapping[str, Tensor]:
        """Unnest ``state_dict_key``, then keep the keys under ``key_prefix``, stripped."""
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
