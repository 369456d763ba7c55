"""The encoder contract in plain PyTorch: windows ``[B, T]`` -> own preprocessing -> embeddings ``[B, D]``."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from ppgbench_pl.encoders.catalog import CATALOG
from ppgbench_pl.encoders.checkpoint import read_checkpoint_file
from ppgbench_pl.errors import CheckpointError, ConfigError
from ppgbench_pl.naming import snake_case

#: Appended to the name of a published model evaluated untrained, so every table says so.
RANDOM_INIT_SUFFIX = " (random init)"
#: Seed of a deliberate random init: the same "random" weights in every run and on resume.
RANDOM_INIT_SEED = 0


class PPGEncoder(nn.Module):
    """Base class: subclasses set ``name``, ``sampling_rate``, ``embed_dim`` and implement ``forward_features``."""

    name: ClassVar[str] = "encoder"
    sampling_rate: ClassVar[float] = 64.0
    embed_dim: ClassVar[int] = 0
    #: Shortest window (in samples at ``sampling_rate``) the model accepts.
    min_samples: ClassVar[int] = 1
    #: False for parameter-free controls (PRV): they cannot be finetuned.
    trainable: ClassVar[bool] = True
    #: True when ``preprocess`` needs the group statistics ``ppg_mean``/``ppg_std``.
    uses_group_stats: ClassVar[bool] = False
    #: Where the authors publish the weights, for the refusal without a checkpoint (None: not a published model).
    weights_source: ClassVar[str | None] = None
    #: Settings that may follow the authors' code instead of the protocol -> published value: another value is a
    #: deviation (:meth:`deviations`); at the published value it stays out of the settings digest.
    protocol_switches: ClassVar[dict[str, object]] = {}

    def __init__(self) -> None:
        super().__init__()
        self.checkpoint_path: str | None = None

    @classmethod
    def random_weights(cls, init_args: Mapping[str, Any]) -> bool:
        """Whether ``init_args`` ask for deliberate random weights; refuses both or neither with a checkpoint."""
        if cls.weights_source is None:
            return False
        checkpoint = checkpoint_setting(cls.name, init_args.get("checkpoint"))
        random_init = bool(init_args.get("random_init", False))
        if checkpoint is not None and random_init:
            raise ConfigError(f"{cls.name}: checkpoint {checkpoint} and random_init: true contradict each "
                              "other; drop one of them")
        if checkpoint is None and not random_init:
            raise ConfigError(
                f"{cls.name}: no checkpoint given, so its weights would be random; get {cls.weights_source} "
                f"and set checkpoint: <path> in the encoder's init_args, or set random_init: true to "
                f"evaluate it untrained (reported as '{cls.name}{RANDOM_INIT_SUFFIX}')")
        return checkpoint is None

    @classmethod
    def config_name(cls, init_args: Mapping[str, Any] | None = None) -> str:
        """The name an encoder built from ``init_args`` will have, without building it (raises as it would)."""
        args = dict(init_args or {})
        return cls.default_name(args) + (RANDOM_INIT_SUFFIX if cls.random_weights(args) else "")

    @classmethod
    def default_name(cls, init_args: Mapping[str, Any]) -> str:
        """The name given in ``init_args``, else the class's ``name``."""
        return str(init_args.get("name") or cls.name)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A catalog class takes name, rate and sizes from its entry; another without a ``name`` is named after it."""
        super().__init_subclass__(**kwargs)
        entry = next((e for e in CATALOG.values() if e.class_path == f"{cls.__module__}.{cls.__qualname__}"), None)
        if entry is not None and entry.native_fs is not None:
            facts = {"name": entry.name, "sampling_rate": entry.native_fs, "embed_dim": entry.embedding_dim,
                     "min_samples": entry.min_samples}
            if clash := [k for k, v in facts.items() if k in vars(cls) and vars(cls)[k] != v]:
                raise TypeError(f"{cls.__qualname__}: {', '.join(clash)} differ from its catalog entry "
                                f"(encoders/catalog.py holds them; change them there)")
            for key, value in facts.items():
                setattr(cls, key, value)
        elif not any("name" in vars(base) for base in cls.__mro__[:cls.__mro__.index(PPGEncoder)]):
            cls.name = snake_case(cls.__name__)  # type: ignore[misc]

    @contextlib.contextmanager
    def weights(self, checkpoint: str | Path | None, random_init: bool) -> Iterator[None]:
        """Build the network inside: refused or seeded per :meth:`random_weights`; ``checkpoint`` loads after."""
        self.random_init = type(self).random_weights({"checkpoint": checkpoint, "random_init": random_init})
        if self.random_init:
            self.name = type(self).name + RANDOM_INIT_SUFFIX  # type: ignore[misc]  # per-instance name
        with torch.random.fork_rng(devices=[], enabled=self.random_init):
            if self.random_init:
                torch.manual_seed(RANDOM_INIT_SEED)
            yield
        if checkpoint is not None:
            self.load_pretrained(checkpoint)

    def deviations(self) -> list[str]:
        """``<encoder>.<setting>=<value>`` for each of :attr:`protocol_switches` set off its published value."""
        return [f"{type(self).name}.{key}={getattr(self, key)}" for key, published in self.protocol_switches.items()
                if getattr(self, key) != published]

    def preprocess(self, x: Tensor, ppg_mean: Tensor | None = None, ppg_std: Tensor | None = None) -> Tensor:
        """Turn raw windows ``[B, T]`` into the network input (default: ``[B, 1, T]``)."""
        if x.shape[-1] < self.min_samples:
            raise ValueError(f"{self.name} needs windows of at least {self.min_samples} samples, got {x.shape[-1]}")
        return x.unsqueeze(1) if x.ndim == 2 else x

    def check_raw(self, x: Tensor) -> None:
        """Refuse anything but raw windows ``[B, T]`` long enough for the model."""
        if x.ndim != 2:
            raise ValueError(f"{self.name} expects raw windows [B, T], got shape {tuple(x.shape)}")
        PPGEncoder.preprocess(self, x)

    def forward_features(self, x: Tensor) -> Tensor:
        """Embed preprocessed input into ``[B, embed_dim]``."""
        raise NotImplementedError

    def forward(self, x: Tensor, ppg_mean: Tensor | None = None, ppg_std: Tensor | None = None) -> Tensor:
        """Native preprocessing followed by feature extraction: windows -> embeddings."""
        return self.forward_features(self.preprocess(x, ppg_mean, ppg_std))

    def extract_state_dict(self, checkpoint: object) -> Mapping[str, Tensor]:
        """Pull this model's state dict out of a loaded checkpoint object (prefixes, nesting)."""
        return state_mapping(self.name, checkpoint)

    def read_checkpoint(self, path: Path) -> object:
        """Read the checkpoint file, unpickling only allow-listed types (never code from the file)."""
        return read_checkpoint_file(path)

    def load_pretrained(self, path: str | Path) -> None:
        """Load the authors' checkpoint strictly; a mismatch lists missing and unexpected keys."""
        path = Path(path)
        if not path.exists():
            where = f"; get {self.weights_source}" if self.weights_source else ""
            raise CheckpointError(f"{path}: checkpoint file not found{where}")
        try:
            raw = self.read_checkpoint(path)
        except CheckpointError:
            raise
        except Exception as exc:  # unreadable or unsafe pickle: one line naming the file
            raise CheckpointError(f"{path}: cannot read checkpoint ({type(exc).__name__}: {exc})") from exc
        load_state_dict_strict(self.weights_module(), self.extract_state_dict(raw), source=str(path))
        self.checkpoint_path = str(path)

    def weights_module(self) -> nn.Module:
        """The submodule whose state dict the checkpoint holds (the encoder itself by default)."""
        return self

    def checkpoint_digest(self) -> str:
        """Content hash of the weights (embedding-cache key): the checkpoint file's SHA-256, else the state dict's."""
        if self.checkpoint_path is not None:
            return file_sha256(Path(self.checkpoint_path))
        digest = hashlib.sha256(type(self).__qualname__.encode())
        for key, value in sorted(self.state_dict().items()):
            digest.update(key.encode())
            digest.update(value.detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()


def switch_flag(name: str, setting: str, value: object) -> bool:
    """A true/false protocol switch as given, refusing anything else (``"false"`` would read as on)."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name}: {setting} must be true or false, got {value!r}")
    return value


def checkpoint_setting(name: str, value: object) -> object:
    """``checkpoint`` as given, refusing text that means "no checkpoint" (``None`` from a command line)."""
    if isinstance(value, str) and value.strip().lower() in ("", "none", "null"):
        raise ConfigError(f"{name}: checkpoint {value!r} is text, not a file; to give no checkpoint leave it "
                          "out (or write checkpoint: null in YAML)")
    return value


def state_mapping(name: str, state: object, what: str = "checkpoint") -> Mapping[str, Tensor]:
    """``state`` if it is a mapping, else a one-line refusal."""
    if not isinstance(state, Mapping):
        raise CheckpointError(f"{name}: {what} is a {type(state).__name__}, not a state dict")
    return state


def _some(keys: list[str]) -> str:
    return ", ".join(keys[:8]) + (f" (+{len(keys) - 8} more)" if len(keys) > 8 else "")


def load_state_dict_strict(module: nn.Module, state: Mapping[str, Tensor], source: str) -> None:
    """``load_state_dict(strict=True)`` with a one-line error that lists what does not fit."""
    own = module.state_dict()
    loose = sorted(k for k, v in state.items() if k in own and not isinstance(v, Tensor))
    if loose:  # e.g. a 0-d tensor saved as a Python int: torch would raise deep inside load_state_dict
        kinds = sorted({type(state[k]).__name__ for k in loose})
        raise CheckpointError(f"{source}: checkpoint entries [{_some(loose)}] are {'/'.join(kinds)} values, not "
                              "tensors (0-d tensors saved as Python numbers?); save the weights with "
                              "torch.save(model.state_dict())")
    problems = {"missing keys": sorted(set(own) - set(state)), "unexpected keys": sorted(set(state) - set(own)),
                "wrong shapes": sorted(k for k in set(own) & set(state) if own[k].shape != state[k].shape)}
    parts = [f"{label} [{_some(keys)}]" for label, keys in problems.items() if keys]
    if parts:
        raise CheckpointError(f"{source}: checkpoint does not fit {type(module).__name__}: " + "; ".join(parts))
    module.load_state_dict(state, strict=True)


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, streamed."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
