"""The regimes ppgbench can run, a static table without torch (``tests/commands/test_listing.py`` checks it)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

#: The ridge and logistic-regression grids of the linear probe (PROTOCOL.md 4.1).
RIDGE_ALPHAS = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)
LOGISTIC_CS = (0.001, 0.01, 0.1, 1.0, 10.0)
#: The random-forest grid (PROTOCOL.md 4.2).
FOREST_GRID: dict[str, tuple[Any, ...]] = {
    "n_estimators": (100,),
    "max_depth": (5, 10, 20),
    "min_samples_split": (2,),
    "min_samples_leaf": (1,),
    "max_features": ("sqrt",),
}
#: Inner group folds of the linear and RF searches (PROTOCOL.md 3.2).
INNER_FOLDS = 4


@dataclass(frozen=True)
class RegimeEntry:
    """One runnable regime: its name, class, what it trains, the tiers it runs on and its default budget."""

    name: str
    class_path: str
    trains: str
    tiers: tuple[str, ...]
    uses_embeddings: bool
    selection: str
    #: The default search budget: grid values, or the Optuna settings (trials, epochs, Hyperband).
    budget: dict[str, Any] = field(default_factory=dict)

    def budget_text(self) -> str:
        """The budget in one line, e.g. ``48 trials (8 start-up), 25 epochs, Hyperband 1/3, 1 at a time``."""
        b = self.budget
        if "n_trials" in b:
            return (f"{b['n_trials']} trials ({b['n_startup_trials']} start-up), {b['max_epochs']} epochs, "
                    f"Hyperband min {b['min_resource']} / factor {b['reduction_factor']}, "
                    f"{b['parallel_trials']} trial(s) at a time")
        parts = [f"{k} {_values(v)}" for k, v in b.items() if k != "inner_folds"]
        return f"grid: {'; '.join(parts)} x {b.get('inner_folds', INNER_FOLDS)} inner folds"

    def budget_short(self) -> str:
        """The budget in a few words, e.g. ``48 trials, 25 epochs`` or ``7 alphas / 5 Cs x 4 inner folds``."""
        b = self.budget
        if "n_trials" in b:
            return f"{b['n_trials']} trials, {b['max_epochs']} epochs, {b['parallel_trials']} at a time"
        folds = b.get("inner_folds", INNER_FOLDS)
        if "ridge_alpha" in b:
            return f"{len(b['ridge_alpha'])} alphas / {len(b['logistic_C'])} Cs x {folds} inner folds"
        size = math.prod(len(v) for k, v in b.items() if k != "inner_folds" and isinstance(v, tuple | list))
        return f"{size} grid points x {folds} inner folds"


def _values(values: Any) -> str:
    if isinstance(values, tuple | list):
        return "{" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values) + "}"
    return str(values)


def _optuna(n_trials: int, max_epochs: int, parallel_trials: int) -> dict[str, Any]:
    return {"n_trials": n_trials, "n_startup_trials": 8, "max_epochs": max_epochs, "min_resource": 1,
            "reduction_factor": 3, "parallel_trials": parallel_trials}


_LINEAR_BUDGET = {"ridge_alpha": RIDGE_ALPHAS, "logistic_C": LOGISTIC_CS, "inner_folds": INNER_FOLDS}

REGIMES: dict[str, RegimeEntry] = {
    e.name: e
    for e in (
        RegimeEntry(
            "linear", "ppgbench_pl.regimes.LinearRegime",
            "ridge (regression) or L2 logistic regression (classification) on frozen embeddings",
            ("primary", "secondary"), True, "exhaustive grid x subject aggregation, inner group CV",
            dict(_LINEAR_BUDGET),
        ),
        RegimeEntry(
            "rf", "ppgbench_pl.regimes.RandomForestRegime",
            "random forest on frozen embeddings (scikit-learn, or cuML on a GPU)",
            ("primary", "secondary"), True, "exhaustive grid x subject aggregation, inner group CV",
            {**FOREST_GRID, "inner_folds": INNER_FOLDS},
        ),
        RegimeEntry(
            "mlp", "ppgbench_pl.regimes.MLPRegime",
            "MLP head on frozen embeddings",
            ("primary",), True, "Optuna TPE + Hyperband on a 20 % group holdout",
            _optuna(48, 25, 1),
        ),
        RegimeEntry(
            "finetune", "ppgbench_pl.regimes.FinetuneRegime",
            "encoder and MLP head end to end",
            ("primary",), False, "Optuna TPE + Hyperband on a 20 % group holdout",
            _optuna(48, 15, 8),
        ),
        RegimeEntry(
            "linear_frac", "ppgbench_pl.regimes.LabelEfficiencyRegime",
            "the linear probe on a seeded fraction of the training subjects (label efficiency; "
            "named linear_frac<percent>)",
            ("primary", "secondary"), True, "as linear, on the sampled subjects",
            {"fraction": 1.0, **_LINEAR_BUDGET},
        ),
    )
}
