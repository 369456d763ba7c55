"""Best-epoch weights of complete trials beside the study (saved before the tell), so a resume keeps its winner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import torch
from optuna.trial import TrialState


class TrialWeights:
    """Weights files ``trial<number>.pt`` in one study's folder (created when missing)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def path(self, number: int) -> Path:
        """File of one trial."""
        return self.directory / f"trial{number}.pt"

    def save(self, number: int, state: dict[str, Any]) -> None:
        """Write atomically (unique temporary file, then rename; readable by others as the umask allows)."""
        from ppgbench_pl.atomic_io import atomic_open

        with atomic_open(self.path(number), "wb") as handle:
            torch.save({k: v.detach().cpu() for k, v in state.items()}, handle)

    def load(self, number: int) -> dict[str, Any] | None:
        """The stored state dict, or ``None`` when the file is gone."""
        path = self.path(number)
        return torch.load(path, map_location="cpu", weights_only=True) if path.exists() else None

    def offer(self, study: optuna.Study, number: int, value: float, state: dict[str, Any]) -> bool:
        """Save a just-finished trial's weights if it beats every stored complete trial (ties: lower number)."""
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        ranks = [(float(t.value), -t.number) for t in complete if t.value is not None]
        if ranks and max(ranks) > (value, -number):
            return False
        self.save(number, state)  # the losers' files go only once this trial is stored (drop_losers)
        return True

    def drop_losers(self, study: optuna.Study) -> None:
        """After a tell: delete the files of complete trials that are no longer the best (ties: lower number)."""
        from ppgbench_pl.hpo.optuna_search import best_trial  # the selection rule the winner is read with

        if study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            self.keep_best(study, best_trial(study).number)

    def keep_best(self, study: optuna.Study, best_number: int) -> None:
        """Delete files of complete trials other than the current best (they can no longer win)."""
        for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            if trial.number != best_number:
                self.path(trial.number).unlink(missing_ok=True)
