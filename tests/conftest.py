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


@pytest.fixture(autouse=True)
def _own_embedding_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test has its own shared embedding cache ($PPGBENCH_CACHE_DIR), never the user's, and starts empty
    (tests count encoder passes); two run folders of one test share it as a user's would."""
    monkeypatch.setenv("PPGBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("embedding_cache")))


@pytest.fixture(scope="session", autouse=True)
def _own_cache_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The help cache (``$XDG_CACHE_HOME/ppgbench``) of the test session, not the user's: each session
    builds ``fit --help`` through LightningCLI once and never reads text an older checkout cached."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg_cache"))


@pytest.fixture(scope="session")
def synthetic_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A processed root shared by tests; the synthetic trees are built on first use at any rate."""
    return tmp_path_factory.mktemp("processed")


@pytest.fixture(scope="session")
def engine_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Processed synthetic trees of the engine tests (tests/test_engine_*.py), built on first use."""
    return tmp_path_factory.mktemp("engine_data")


@pytest.fixture
def pinned_source(monkeypatch: pytest.MonkeyPatch) -> str:
    """A fixed source digest, as the subprocesses of a test get it (others edit the package meanwhile)."""
    import ppgbench_pl.benchmark.identity as identity
    from tests.benchmark.helpers import PINNED_SOURCE

    monkeypatch.setattr(identity, "_SOURCE_DIGEST", PINNED_SOURCE)
    return PINNED_SOURCE
