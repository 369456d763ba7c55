"""Frozen embeddings of every window of a dataset: one Lightning ``predict`` pass per entry of the cache."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Subset

from ppgbench_pl.benchmark.cache import EmbeddingCache, SpotCheck, tolerance_for
from ppgbench_pl.benchmark.cache_store import record_use
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.errors import DataError
from ppgbench_pl.lightning_trainer import build_trainer
from ppgbench_pl.tasks.encoder_task import EncoderTask


def extraction_trainer_kwargs(trainer_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The run's device settings on its first device only (DDP would give each rank a part of the windows)."""
    out = {k: trainer_kwargs[k] for k in ("accelerator", "precision", "deterministic", "benchmark")
           if trainer_kwargs.get(k) is not None}
    devices = trainer_kwargs.get("devices")
    out["devices"] = [devices[0]] if isinstance(devices, (list, tuple)) and devices else 1
    return out


class FiniteEmbeddings(L.Callback):
    """Stops the extraction pass at the first batch whose embeddings hold NaN/inf, naming the model."""

    def __init__(self, name: str, datamodule: PPGDataModule, fs: float) -> None:  # noqa: D107
        self.name, self.where = name, f"{datamodule.dataset} at {fs:g} Hz"

    def on_predict_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,  # noqa: D102
                             batch_idx: int, dataloader_idx: int = 0) -> None:
        if not isinstance(outputs, torch.Tensor):
            return
        bad = ~torch.isfinite(outputs.detach().reshape(len(outputs), -1)).all(dim=1)
        if bool(bad.any()):
            raise DataError(f"encoder {self.name}: embeddings of batch {batch_idx} on {self.where} contain NaN/inf "
                            f"in {int(bad.sum())} of {len(outputs)} rows; check its checkpoint (non-finite "
                            "weights?) and its numerics (precision); stopped before any job ran")


def extract_embeddings(encoder: PPGEncoder, datamodule: PPGDataModule, fs: float,
                       trainer_kwargs: dict[str, Any], rows: np.ndarray | None = None) -> np.ndarray:
    """One frozen pass over every window at ``fs``, its throughput on stderr (``rows``: those only, quietly)."""
    loader = datamodule.windows_loader(fs)
    if rows is not None:
        loader = DataLoader(Subset(loader.dataset, [int(r) for r in rows]), batch_size=loader.batch_size,
                            shuffle=False)
    trainer = build_trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                            enable_model_summary=False, callbacks=[FiniteEmbeddings(encoder.name, datamodule, fs)],
                            **extraction_trainer_kwargs(trainer_kwargs))
    start = time.perf_counter()
    batches = trainer.predict(EncoderTask(encoder, mode="frozen"), dataloaders=loader)
    values = torch.cat(batches).numpy() if batches else np.zeros((0, encoder.embed_dim), dtype=np.float32)  # type: ignore[arg-type]
    seconds = time.perf_counter() - start
    if rows is None:
        print(f"embeddings: {encoder.name} on {datamodule.dataset} at {fs:g} Hz: {len(values):,} windows in "
              f"{seconds:.1f} s ({len(values) / max(seconds, 1e-9):,.0f} windows/s)", file=sys.stderr)
    return values


def needs_embeddings(uses_embeddings: bool, encoder: Any) -> bool:
    """Whether a job gets the cached embeddings: frozen regimes, and parameter-free encoders (PRV) anywhere."""
    return uses_embeddings or not getattr(encoder, "trainable", True)


class EmbeddingSource:
    """Cached embeddings of the encoders of a run, with each cache key computed once per process."""

    def __init__(self, cache: EmbeddingCache, trainer_kwargs: dict[str, Any], max_bytes: float | None = None) -> None:
        self.cache, self.trainer_kwargs, self.max_bytes = cache, dict(trainer_kwargs), max_bytes
        self.run_dir: Path | None = None  # set by the suite: the run folder records the entries it used
        self._recorded: set[str] = set()
        self._keys: dict[tuple[int, str, float], str] = {}

    def key(self, encoder: PPGEncoder, datamodule: PPGDataModule) -> str:
        """Content key (hashing a checkpoint and the windows is slow, so it is memoised per encoder object)."""
        fs = float(encoder.sampling_rate)
        memo = (id(encoder), datamodule.dataset, fs)
        if memo not in self._keys:
            content = datamodule.windows(fs).content_digest()
            self._keys[memo] = self.cache.key(encoder, datamodule.store(fs).directory, fs,
                                              self.trainer_kwargs.get("precision"), content)
        return self._keys[memo]

    def expected_bytes(self, encoder: PPGEncoder, datamodule: PPGDataModule) -> int:
        """Estimated size of the entry: windows x embedding size x 4 bytes."""
        return len(datamodule.windows(float(encoder.sampling_rate)).x) * int(getattr(encoder, "embed_dim", 1) or 1) * 4

    def check_space(self, encoder: PPGEncoder, datamodule: PPGDataModule) -> None:
        """Refuse now, before anything is written, an entry that would exceed the cap or the free disk."""
        if not self.cache.path(self.key(encoder, datamodule)).exists():
            describe = {"encoder": encoder.name, "dataset": datamodule.dataset, "fs": float(encoder.sampling_rate)}
            self.cache.check_space(self.expected_bytes(encoder, datamodule), self.max_bytes, describe)

    def get(self, encoder: PPGEncoder, datamodule: PPGDataModule) -> np.ndarray:
        """Embeddings of every window of ``datamodule`` at the encoder's rate (computed on a miss)."""
        fs = float(encoder.sampling_rate)
        describe = {"encoder": encoder.name, "dataset": datamodule.dataset, "fs": fs}
        key = self.key(encoder, datamodule)
        check = SpotCheck(lambda rows: extract_embeddings(encoder, datamodule, fs, self.trainer_kwargs, rows),
                          tolerance_for(self.trainer_kwargs.get("precision")))
        values = self.cache.get_or_compute(
            key, lambda: extract_embeddings(encoder, datamodule, fs, self.trainer_kwargs), describe,
            expected_bytes=self.expected_bytes(encoder, datamodule), max_bytes=self.max_bytes, check=check)
        if self.run_dir is not None and key not in self._recorded:
            record_use(self.run_dir, self.cache.root, key, {**describe, "shape": list(values.shape)})
            self._recorded.add(key)
        return values
