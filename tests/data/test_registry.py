"""The dataset registry: every declaration is complete; raw fixture -> preprocess -> task views works.

One declaration per dataset (``ppgbench_pl/data/datasets.json``); these tests are parametrised
over the registry, so a new dataset is checked as soon as its key is listed.
"""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ppgbench_pl.data import registry
from ppgbench_pl.data.datasets import REAL_DATASETS, preprocessor
from ppgbench_pl.data.datasets.base import RawDataset
from ppgbench_pl.data.download import SOURCES
from ppgbench_pl.data.processed import ProcessedDataset
from ppgbench_pl.data.registry import DATASET_KEYS, DATASETS, DECLARATIONS, TASKS
from ppgbench_pl.data.spec import DatasetDeclaration, DatasetInfo, Source, TaskSpec
from ppgbench_pl.data.task_data import load_task, load_windows
from ppgbench_pl.errors import ConfigError

DATASETS_DIR = Path(registry.__file__).parent / "datasets"
TESTS_DIR = Path(__file__).parent
GENERATED = tuple(k for k, d in DECLARATIONS.items() if d.source is None)


def test_published_task_set() -> None:
    real = [t for t in TASKS.values() if t.dataset != "synthetic"]
    assert len(real) == 26
    assert sum(t.tier == "primary" for t in real) == 17
    assert sum(t.tier == "secondary" for t in real) == 9
    assert [t.name for t in TASKS.values() if t.dataset == "synthetic"] == [
        "synthetic-hr", "synthetic-activity", "synthetic-stiffness", "synthetic-age"]
    assert list(REAL_DATASETS) == ["dalia", "dreamt", "wesad", "ecsmp", "ppgbp", "bidmc", "butppg",
                                   "realworldppg", "wildppg"]
    assert GENERATED == ("synthetic",)
    # Published order of PROTOCOL.md section 2 (rows 1-26).
    assert real[0].name == "dalia-hr" and real[7].name == "ecsmp-emotion-reg-cls"
    assert real[-1].name == "wildppg-hr"


def test_every_declared_dataset_has_its_preprocessor_module() -> None:
    modules = {p.stem for p in DATASETS_DIR.glob("*.py")}
    assert all(key in modules for key in REAL_DATASETS)
    for key in REAL_DATASETS:  # the class the declaration names lives in the dataset's own module
        assert preprocessor(key).__module__ == f"ppgbench_pl.data.datasets.{key}"


def test_a_source_nothing_can_fetch_is_refused_when_declared() -> None:
    with pytest.raises(ValueError, match="unknown publisher 'zenodoo'"):
        Source(publisher="zenodoo", page="https://example.org", base_url="https://example.org")
    with pytest.raises(ValueError, match="PhysioNet source needs a fetch step"):
        Source(publisher="physionet", page="https://physionet.org/x", base_url="https://physionet.org/files/x/1")


@pytest.mark.parametrize("key", DATASET_KEYS)
def test_declaration_is_complete(key: str) -> None:
    decl = DECLARATIONS[key]
    info = decl.info
    assert isinstance(decl, DatasetDeclaration) and isinstance(info, DatasetInfo)
    assert info.key == key and info.display_name and info.group and info.source and info.description
    assert info.native_fs > 0 and info.window_s > 0 and info.stride_s > 0
    assert info.access in ("built in", "open", "credentialed", "authors' terms")
    assert info.subjects is None or info.subjects > 0
    # The preprocessor it names exists, is a RawDataset, and carries the same key and native rate.
    cls = preprocessor(key)
    assert issubclass(cls, RawDataset) and cls.key == key
    if hasattr(cls, "native_fs"):
        assert cls.native_fs == info.native_fs
    # Tasks: valid fields and the naming rule.
    assert decl.tasks
    for task in decl.tasks:
        assert isinstance(task, TaskSpec) and task.dataset == key
        assert task.name.startswith(f"{key}-") and task.name == task.name.lower() and "_" not in task.name
        assert task.kind in ("regression", "classification", "regression_cls")
        assert task.level in ("window", "subject") and task.tier in ("primary", "secondary")
        assert task.target and task.description and task.metric
        if task.kind == "regression":
            assert task.n_targets == 1 and task.unit and not task.classes
        elif task.kind == "regression_cls":
            assert task.n_targets == len(task.classes) > 1
        else:
            assert task.n_targets == 1 and not task.unit
            assert not task.classes or len(task.classes) >= 2
    # A downloadable dataset has a source and a fixture generator; a generated one has neither.
    if key in GENERATED:
        assert decl.source is None and info.access == "built in"
        init = inspect.signature(cls.__init__).parameters
        assert info.subjects == init["n_subjects"].default and info.window_s == init["window_s"].default
        assert importlib.import_module(cls.__module__).NATIVE_FS == info.native_fs
        return
    src = decl.source
    assert isinstance(src, Source) and src.publisher in ("archive", "figshare", "mendeley", "physionet")
    assert src.page.startswith("https://") and src.base_url.startswith("https://")
    assert src.credentialed == (info.access == "credentialed")
    assert SOURCES[key].page == src.page and SOURCES[key].base_url == src.base_url
    assert (TESTS_DIR / key / "make_data.py").is_file(), f"tests/data/{key}/make_data.py is missing"
    assert callable(importlib.import_module(f"tests.data.{key}.make_data").make)


def test_task_names_unique_and_lookups() -> None:
    names = [t.name for d in DECLARATIONS.values() for t in d.tasks]
    assert len(names) == len(set(names)) == len(TASKS)
    assert all(t.dataset in DATASETS for t in TASKS.values())
    assert [t.name for t in registry.tasks_of("bidmc")] == ["bidmc-resp", "bidmc-spo2"]
    assert registry.get_task("ecsmp-emotion-reg-cls").classes[0] == "neutral"
    assert {t.name for t in registry.select_tasks(dataset="butppg", tier="secondary")} == {
        "butppg-sbp", "butppg-dbp", "butppg-spo2"}
    assert [t.name for t in registry.select_tasks(kind="regression_cls")] == ["ecsmp-emotion-reg-cls"]
    with pytest.raises(ConfigError, match="did you mean dalia"):
        registry.get_dataset("dalai")
    with pytest.raises(ConfigError, match="did you mean dalia-hr"):
        registry.get_task("dalia-hrr")
    with pytest.raises(ConfigError, match="unknown tier 'tertiary'"):
        registry.select_tasks(tier="tertiary")


def test_declaration_refuses_a_foreign_task() -> None:
    info = DATASETS["bidmc"]
    with pytest.raises(ValueError, match="declares dataset dalia"):
        DatasetDeclaration(info, (TASKS["dalia-hr"],))


def test_registry_import_is_light() -> None:
    code = (
        "import sys; import ppgbench_pl.data.registry, ppgbench_pl.data.datasets;"
        "heavy = {'numpy', 'pandas', 'scipy', 'torch', 'h5py', 'wfdb', 'openpyxl', 'neurokit2', 'sklearn'};"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _build(key: str, tmp_path: Path) -> Path:
    """The dataset's fixture, preprocessed at 64 Hz (the generated dataset: a tiny cohort)."""
    if key in GENERATED:
        return preprocessor(key)(n_subjects=5, windows_per_subject=3).build(tmp_path / "out", 64)  # type: ignore[call-arg]
    importlib.import_module(f"tests.data.{key}.make_data").make(tmp_path / "raw")
    return preprocessor(key)(tmp_path / "raw").build(tmp_path / "out", 64)


@pytest.mark.parametrize("key", DATASET_KEYS)
def test_fixture_preprocess_task_views(key: str, tmp_path: Path) -> None:
    directory = _build(key, tmp_path)
    info = DATASETS[key]
    assert directory == tmp_path / "out" / "fs_64" / info.display_name
    store = ProcessedDataset(directory)
    windows = load_windows(store)
    assert windows.x.ndim == 2 and len(windows.x) == len(windows.groups) > 0
    assert windows.n_samples == int(np.ceil(info.window_s * 64 - 1e-9))
    for task in registry.tasks_of(key):
        view = load_task(store, windows, task)
        assert len(view) > 0, task.name
        assert len(view.y) == len(view.rows) == len(view.groups)
        if task.kind == "classification":
            assert view.y.dtype == np.int64 and (view.y >= 0).all()
            if task.classes:
                assert view.y.max() < len(task.classes), task.name
        elif task.kind == "regression_cls":
            assert view.y.shape == (len(view), task.n_targets)
        else:
            assert view.y.ndim == 1 and np.isfinite(view.y).all()
