"""A reference run shared by the benchmark tests: the tiny suite run in-process, uninterrupted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import ppgbench_pl.benchmark.identity as identity
from tests.benchmark.helpers import PINNED_SOURCE, records, run, suite_config, write_config


@pytest.fixture(scope="session", autouse=True)
def pinned_source() -> Any:
    """Others edit the package while tests run; a stable code digest keeps run folders resumable here.

    (A changed digest is tested in tests/test_engine_identity.py by editing run.json's code_versions.)
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(identity, "_SOURCE_DIGEST", PINNED_SOURCE)
        yield


@pytest.fixture(scope="session")
def bench_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Processed synthetic trees for the benchmark tests (built on first use)."""
    return tmp_path_factory.mktemp("bench_data")


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory, bench_root: Path) -> dict[str, Any]:
    """The tiny suite, local executor, no interruption: the records every other path must reproduce."""
    out = tmp_path_factory.mktemp("reference") / "run"
    config = suite_config(bench_root, out)
    path = write_config(out.parent / "config.yaml", config)
    assert run(["--config", str(path)]) == 0
    return {"config": config, "path": path, "run_dir": out, "records": records(out), "root": bench_root}
