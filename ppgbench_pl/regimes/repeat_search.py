"""One search of one job (:class:`RepeatSearch`) and what builds its trials (:class:`TrialFactory`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ppgbench_pl.errors import ConfigError
from ppgbench_pl.hpo.optuna_search import PersistentStudy
from ppgbench_pl.hpo.trial_stack import Slot
from ppgbench_pl.hpo.trial_store import TrialWeights
from ppgbench_pl.regimes.base import JobContext
from ppgbench_pl.regimes.selection import SelectionScorer, Split, Targets


class TrialFactory(Protocol):
    """What a neural regime builds per repeat: its trials' slots and the winner's predictions."""

    #: The protocol search space (before user overrides and the aggregation parameter).
    space: dict[str, list[Any]]
    #: What the regime records with each repeat (mode, device, ...).
    details: dict[str, Any]

    def slot(self, name: str, params: Mapping[str, Any], seed: int, epochs: int, validate: bool) -> Slot:
        """A trial's slot: its network, rows (fit part; validation rows if ``validate``), groups, batches."""
        ...

    def predict(self, params: Mapping[str, Any], weights: dict[str, Any], positions: np.ndarray) -> np.ndarray:
        """Raw head outputs of a trained network for some view positions."""
        ...


def redact(url: str) -> str:
    """A storage URL without credentials (it goes into job records)."""
    return re.sub(r"//[^/@]*@", "//***@", url)


@dataclass
class RepeatSearch:
    """One search of one job: its repeat's split, targets, scorer, factory, study; ``seed``: its streams' seed."""

    ctx: JobContext
    repeat: int
    seed: int
    split: Split
    targets: Targets
    scorer: SelectionScorer
    aggregations: tuple[str, ...]
    factory: TrialFactory
    url: str = ""
    storage: Any = None
    study: PersistentStudy | None = None
    weights: TrialWeights | None = None
    search_seed: int = 0

    @property
    def key(self) -> str:
        """The study's key in a stack."""
        return f"{self.ctx.job_id}/repeat{self.repeat}" + (f"/search{self.search_seed}" if self.search_seed else "")

    @property
    def folder(self) -> str:
        """The search's folder in the job's work folder (study storage and weights)."""
        return f"repeat{self.repeat}" + (f"_search{self.search_seed}" if self.search_seed else "")


def one_device(regime: str, trainer_kwargs: dict[str, Any]) -> None:
    """A stack trains on one device in this process (the search state lives there; the width is the studies').

    Raises:
        ConfigError: ``trainer.strategy`` or ``trainer.devices`` asks for more than one device or process.
    """
    strategy = str(trainer_kwargs.get("strategy") or "auto")
    if strategy not in ("auto", "single_device"):
        raise ConfigError(f"trainer.strategy {strategy}: the {regime} regime trains its trials as one stack "
                          "on one device in this process; leave trainer.strategy out (auto)")
    devices = trainer_kwargs.get("devices", 1)
    if devices in ("auto", -1, "-1") or (isinstance(devices, int) and devices > 1) or (
            isinstance(devices, list) and len(devices) > 1):
        raise ConfigError(f"trainer.devices {devices!r}: the {regime} regime trains its trials as one "
                          "stack on one device; set trainer.devices: 1 (use an executor with one GPU per "
                          "worker to use several)")
