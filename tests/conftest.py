"""Suite-wide settings: no W&B, no network, headless plotting, and a small shared synthetic dataset."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("WANDB_INIT_TIMEOUT", "10")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _no_wandb(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs with W&B disabled unless it sets another mode itself."""
    monkeypatch.setenv("WANDB_MODE", os.environ.get("PPGBENCH_TEST_WANDB_MODE", "disabled"))


@pytest.fixture(scope="session")
def synthetic_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A processed root shared by tests; the synthetic trees are built on first use at any rate."""
    return tmp_path_factory.mktemp("processed")
