"""The datasets and tasks ppgbench knows, as plain declarative records (PROTOCOL.md sections 1-2).

Everything that names a dataset or task (configs, the CLI, the benchmark plan) resolves it here, so a
typo fails fast with a one-line error instead of deep inside a job.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

from ppgbench_pl.errors import ConfigError

TaskKind = Literal["regression", "classification", "regression_cls"]
TaskLevel = Literal["window", "subject"]
TaskTier = Literal["primary", "secondary"]


@dataclass(frozen=True)
class DatasetInfo:
    """What the protocol says about one dataset: folder name, native rate, windows, group unit."""

    key: str
    display_name: str
    native_fs: float
    window_s: float
    stride_s: float
    group: str
    source: str


@dataclass(frozen=True)
class TaskSpec:
    """One evaluation task: which target file of which dataset, its type, level and tier."""

    name: str
    dataset: str
    target: str
    kind: TaskKind
    level: TaskLevel
    tier: TaskTier
    #: Number of regression outputs (6 for the ECSMP emotion task), 1 otherwise.
    n_targets: int = 1
    description: str = ""

    @property
    def metric(self) -> str:
        """The reported metric of PROTOCOL.md section 2."""
        return {
            "regression": "mae",
            "classification": "balanced_accuracy",
            "regression_cls": "argmax_balanced_accuracy",
        }[self.kind]

    @property
    def higher_is_better(self) -> bool:
        """Direction of the reported metric."""
        return self.kind != "regression"


def _datasets() -> dict[str, DatasetInfo]:
    rows = [
        ("synthetic", "Synthetic", 128, 10, 10, "simulated subject", "built in (neurokit2 ppg_simulate)"),
        ("dalia", "Dalia", 64, 8, 2, "participant", "UCI ML Repository PPG-DaLiA (495)"),
        ("dreamt", "DREAMT", 64, 10, 10, "participant", "PhysioNet DREAMT 2.1.0 (credentialed)"),
        ("wesad", "WESAD", 64, 10, 10, "participant", "WESAD (Univ. Siegen)"),
        ("ecsmp", "ECSMP", 64, 10, 10, "participant", "Mendeley Data vn5nknh3mn v2"),
        ("ppgbp", "PPG-BP", 1000, 2.1, 2.1, "participant", "Figshare 5459299 v5"),
        ("bidmc", "BIDMC", 125, 10, 10, "record", "PhysioNet BIDMC 1.0.0"),
        ("butppg", "BUT-PPG", 30, 10, 10, "participant", "PhysioNet BUT PPG 2.0.0"),
        ("realworldppg", "RealWorldPPG", 50, 6, 6, "record", "Mendeley Data yynb8t9x3d v1"),
        ("wildppg", "WildPPG", 128, 8, 8, "participant", "WildPPG (ETH SIPLab)"),
    ]
    return {r[0]: DatasetInfo(*r) for r in rows}


def _tasks() -> dict[str, TaskSpec]:
    R, C, RC = "regression", "classification", "regression_cls"
    W, S = "window", "subject"
    P, X = "primary", "secondary"
    rows: list[tuple[str, str, str, str, str, str, int, str]] = [
        ("synthetic-hr", "synthetic", "hr", R, W, P, 1, "heart rate the simulator was driven with (bpm)"),
        ("synthetic-activity", "synthetic", "activity", C, W, P, 1, "rest / walk / run from motion level"),
        ("synthetic-stiffness", "synthetic", "stiffness", C, S, P, 1, "arterial stiffness (reflected wave)"),
        ("synthetic-age", "synthetic", "age", R, S, X, 1, "age, which drives stiffness and resting HR"),
        ("dalia-hr", "dalia", "hr", R, W, P, 1, ""),
        ("dalia-activity", "dalia", "activity", C, W, P, 1, ""),
        ("dreamt-sleep-5class", "dreamt", "sleep_5class", C, W, P, 1, ""),
        ("wesad-4class", "wesad", "condition_4class", C, W, P, 1, ""),
        ("wesad-valence-reg", "wesad", "valence_reg", R, W, X, 1, ""),
        ("wesad-arousal-reg", "wesad", "arousal_reg", R, W, X, 1, ""),
        ("ecsmp-sds-subject", "ecsmp", "sds_class", C, S, P, 1, "SDS >= 50"),
        ("ecsmp-emotion-reg-cls", "ecsmp", "cesaf_scores", RC, W, X, 6, "argmax of six felt scores"),
        ("ppgbp-age", "ppgbp", "age", R, S, P, 1, ""),
        ("ppgbp-bmi", "ppgbp", "bmi", R, S, P, 1, ""),
        ("ppgbp-sysbp", "ppgbp", "sysbp", R, S, P, 1, ""),
        ("ppgbp-diasbp", "ppgbp", "diasbp", R, S, P, 1, ""),
        ("ppgbp-hr", "ppgbp", "hr", R, S, P, 1, ""),
        ("ppgbp-hypertension", "ppgbp", "hypertension", C, S, P, 1, ""),
        ("ppgbp-diabetes", "ppgbp", "diabetes", C, S, P, 1, ""),
        ("ppgbp-hypertension-binary", "ppgbp", "hypertension_binary", C, S, X, 1, ""),
        ("ppgbp-cerebral-infarction", "ppgbp", "cerebral_infarction", C, S, X, 1, ""),
        ("ppgbp-cerebrovascular-disease", "ppgbp", "cerebrovascular_disease", C, S, X, 1, ""),
        ("bidmc-resp", "bidmc", "resp", R, W, P, 1, ""),
        ("bidmc-spo2", "bidmc", "spo2", R, W, P, 1, ""),
        ("butppg-glyc", "butppg", "glyc", R, W, P, 1, ""),
        ("butppg-sbp", "butppg", "sbp", R, W, X, 1, ""),
        ("butppg-dbp", "butppg", "dbp", R, W, X, 1, ""),
        ("butppg-spo2", "butppg", "spo2", R, W, X, 1, ""),
        ("realworldppg-identification", "realworldppg", "id", C, W, P, 1, "closed-set, split by record"),
        ("wildppg-hr", "wildppg", "hr", R, W, P, 1, ""),
    ]
    return {r[0]: TaskSpec(*r) for r in rows}  # type: ignore[arg-type]


DATASETS: dict[str, DatasetInfo] = _datasets()
TASKS: dict[str, TaskSpec] = _tasks()


def _unknown(kind: str, name: str, known: list[str]) -> ConfigError:
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(known))}"
    return ConfigError(f"unknown {kind} '{name}'{hint}")


def get_dataset(key: str) -> DatasetInfo:
    """Look up a dataset by key, with a one-line error and suggestions when unknown."""
    if key not in DATASETS:
        raise _unknown("dataset", key, list(DATASETS))
    return DATASETS[key]


def get_task(name: str) -> TaskSpec:
    """Look up a task by name, with a one-line error and suggestions when unknown."""
    if name not in TASKS:
        raise _unknown("task", name, list(TASKS))
    return TASKS[name]


def tasks_of(dataset: str) -> list[TaskSpec]:
    """All tasks defined on one dataset, in registry order."""
    get_dataset(dataset)
    return [t for t in TASKS.values() if t.dataset == dataset]
