"""Shared set-up of the neural-regime tests: tiny synthetic data, job contexts, one torch thread."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from ppgbench_pl.benchmark.embeddings import extract_embeddings
from ppgbench_pl.data.registry import get_task
from ppgbench_pl.data.splits import OuterSplit
from ppgbench_pl.data.task_data import TaskView
from ppgbench_pl.datamodules.job import JobDataModule
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.regimes.base import JobContext

CPU = {"accelerator": "cpu", "devices": 1}
# synthetic_seed 2 gives both stiffness classes in every holdout repeat of seed 42 fold 0 and in its test fold
DATA = {"synthetic_subjects": 10, "synthetic_windows": 6, "synthetic_seed": 2}


def datamodule(root: Path, **overrides: int) -> PPGDataModule:
    """Seed 42, fold 0 of the tiny synthetic dataset."""
    return PPGDataModule(dataset="synthetic", root=str(root), seeds=[42], folds=[0], **{**DATA, **overrides})


def embeddings(encoder: PPGEncoder, dm: PPGDataModule) -> np.ndarray:
    """Frozen embeddings of every window, as the runner's cache holds them."""
    return extract_embeddings(encoder, dm, float(encoder.sampling_rate), CPU)


def context(dm: PPGDataModule, encoder: PPGEncoder, task: str, work_dir: Path,
            embeddings: np.ndarray | None = None) -> JobContext:
    """A job context for seed 42, fold 0 (view, outer split and raw windows computed once, by the engine's builder)."""
    return JobContext.build(dm, encoder, get_task(task), 42, 0, work_dir,
                            job_id=f"{encoder.name}__{task}__{work_dir.name}", embeddings=embeddings,
                            trainer_kwargs=dict(CPU))


class ViewSource:
    """A stand-in PPGDataModule serving one hand-made task view and outer split (contexts built without files)."""

    batch_size = 256

    def __init__(self, view: TaskView, split: OuterSplit) -> None:
        self.view, self.split, self.dataset = view, split, view.task.dataset

    def task_view(self, fs: float, task: object) -> TaskView:
        return self.view

    def outer_split(self, view: TaskView, seed: int, fold: int) -> OuterSplit:
        return self.split


def view_context(job_id: str, view: TaskView, split: OuterSplit, embeddings: np.ndarray, seed: int = 42,
                 fold: int = 0) -> JobContext:
    """A context over a given view and outer split, with embeddings (the encoder "m1" at 64 Hz)."""

    class Encoder:
        name, sampling_rate = "m1", 64.0

    data = JobDataModule(ViewSource(view, split), view.task, seed, fold, fs=64.0)  # type: ignore[arg-type]
    return JobContext(job_id, "m1", Encoder(), data, work_dir=None, embeddings=embeddings)  # type: ignore[arg-type]


class OneThread:
    """Run torch on one thread (tiny ops on a shared CPU are much faster that way); restore afterwards."""

    def __enter__(self) -> None:
        self.before = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc: object) -> None:
        torch.set_num_threads(self.before)


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Every test of a module that imports this fixture runs torch on one thread."""
    with OneThread():
        yield


class Killed(BaseException):
    """What the coordinator's signal handler raises (a BaseException: Lightning re-raises it)."""


def kill_on_ask(monkeypatch, nth: int) -> list:
    """Make the search's ``nth`` ask raise :class:`Killed` (a kill between batches); returns the asks seen."""
    from ppgbench_pl.hpo.stack_search import StackSearch

    original, calls = StackSearch.ask, []

    def dies(self, plan):
        calls.append(plan.key)
        if len(calls) == nth:
            raise Killed
        return original(self, plan)

    monkeypatch.setattr(StackSearch, "ask", dies)
    return calls


def small_cnn_data(root: Path, **overrides: int) -> tuple[PPGDataModule, PPGEncoder, np.ndarray]:
    """The tiny datamodule, an 8-d small CNN and its frozen embeddings (computed on one thread)."""
    from ppgbench_pl.encoders.cnn import SmallCNNEncoder

    with OneThread():
        dm = datamodule(root, **overrides)
        encoder = SmallCNNEncoder(embed_dim=8)
        return dm, encoder, embeddings(encoder, dm)
