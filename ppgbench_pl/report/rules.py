"""The report's stated rules: CI overlap (bolding, fixed by the paper) and "meaningfully better" (switchable).

``ci`` (default): a better mean and CIs that do not overlap; ``paired``: a better mean and a paired t-test
p < alpha; ``mean``: a better mean alone. An unknown CI or too few units leave a verdict undetermined.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ppgbench_pl.report.compare import paired_test
from ppgbench_pl.report.load import ReportError
from ppgbench_pl.report.scores import Score, Scores

RULES = ("ci", "paired", "mean")
RULE_TEXT = {
    "ci": "better mean and 95% CIs that do not overlap (|m1 - m2| > c1 + c2), CIs from the same regime's "
          "jobs",
    "paired": "better mean and a two-sided paired t-test p < {alpha:g} over the same seeds and folds",
    "mean": "better mean (no uncertainty taken into account)",
}


def overlaps(a: Score, b: Score) -> bool:
    """Whether two intervals m ± c overlap: ``|m1 - m2| <= c1 + c2`` (unknown CI counted as zero)."""
    return abs(a.mean - b.mean) <= a.half_width + b.half_width


def better_mean(a: Score, b: Score, higher_is_better: bool) -> bool:
    """Strictly better mean in the metric's direction."""
    return a.mean > b.mean if higher_is_better else a.mean < b.mean


@dataclass(frozen=True)
class Rule:
    """When one model meaningfully beats another in a cell (``name`` one of :data:`RULES`)."""

    name: str = "ci"
    alpha: float = 0.05

    def __post_init__(self) -> None:
        """Fail fast on an unknown rule name."""
        if self.name not in RULES:
            raise ReportError(f"unknown baseline rule '{self.name}'; choose from {', '.join(RULES)}")

    @property
    def text(self) -> str:
        """The rule in words, for tables and the HTML page."""
        return RULE_TEXT[self.name].format(alpha=self.alpha)

    def beats(self, scores: Scores, task: str, regime: str, model: str, other: str) -> bool | None:
        """Whether ``model`` meaningfully beats ``other`` (``constant``: its own baseline); None: undecidable."""
        resolved = scores.resolve(task, regime, model, other)
        if resolved is None:
            return None
        other = resolved
        a, b = scores.get(task, regime, model), scores.get(task, regime, other)
        if a is None or b is None:
            return None
        if not better_mean(a, b, scores.higher_is_better[task]):
            return False
        if self.name == "mean":
            return True
        if self.name == "ci":
            if math.isnan(a.ci95) or math.isnan(b.ci95):
                return None
            return not overlaps(a, b)
        va, vb = scores.paired_values(task, regime, model, other)
        if len(va) < 2:
            return None
        p = paired_test(va, vb)["t_pvalue"]
        return None if math.isnan(p) else p < self.alpha


def bold_models(scores: Scores, task: str, regime: str) -> set[str]:
    """Return the best model of a cell and every model whose CI overlaps the best's."""
    best = scores.best(task, regime)
    if best is None:
        return set()
    return {s.model for s in scores.cell(task, regime) if overlaps(s, best)}
