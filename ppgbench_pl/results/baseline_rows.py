"""Which constant-baseline rows a summary group has: one per rate, or one when the rates' baselines agree.

``constant`` for agreeing rates linked by shared folds, else ``constant @64Hz`` (``/<model>`` if its models differ).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ppgbench_pl.naming import BASELINE_MODEL
from ppgbench_pl.results.fold_entry import FoldEntry, view_label

#: Two baselines of a fold agree within these tolerances (the same labels, summed in another order).
BASELINE_RTOL, BASELINE_ATOL = 1e-9, 1e-12


def rate_key(fs: float | None) -> tuple[bool, float]:
    """Rates in order, a record without a rate last."""
    return (fs is None, fs or 0.0)


def _agree(units: Iterable[dict[tuple[int, int], FoldEntry]]) -> bool:
    """Whether every unit's baseline agrees with every other's on the folds they share."""
    seen: dict[tuple[int, int], float] = {}
    for unit in units:
        for key, entry in unit.items():
            assert entry.baseline is not None
            first = seen.setdefault(key, entry.baseline)
            if not math.isclose(first, entry.baseline, rel_tol=BASELINE_RTOL, abs_tol=BASELINE_ATOL):
                return False
    return True


def _connected(views: dict[float | None, dict[str, dict[tuple[int, int], FoldEntry]]]) -> bool:
    """Whether the rates are linked by shared folds (so their agreement was actually seen, not assumed)."""
    folds = {fs: {k for unit in per_model.values() for k in unit} for fs, per_model in views.items()}
    rates = sorted(folds, key=rate_key)
    reached, todo = {rates[0]}, [rates[0]]
    while todo:
        here = todo.pop()
        for other in rates:
            if other not in reached and folds[here] & folds[other]:
                reached.add(other)
                todo.append(other)
    return len(reached) == len(rates)


def baseline_parts(views: dict[float | None, dict[str, dict[tuple[int, int], FoldEntry]]]
                    ) -> list[tuple[str, str, list[tuple[float | None, str]]]]:
    """(name, view label, [(rate, model), ...]) of each baseline row of a group (module docstring)."""
    rates = sorted(views, key=rate_key)
    members = [(fs, m) for fs in rates for m in sorted(views[fs])]
    if len(rates) > 1 and _agree(views[fs][m] for fs, m in members) and _connected(views):
        # every rate gives the same baseline on every fold seen at two rates: one view in fact
        return [(BASELINE_MODEL, ";".join(view_label(fs) for fs in rates), members)]
    parts = []
    for fs in rates:
        suffix = f" @{view_label(fs)}" if len(rates) > 1 else ""
        models = sorted(views[fs])
        if _agree(views[fs][m] for m in models):
            parts.append((f"{BASELINE_MODEL}{suffix}", view_label(fs), [(fs, m) for m in models]))
        else:
            parts += [(f"{BASELINE_MODEL}{suffix}/{m}", view_label(fs), [(fs, m)]) for m in models]
    return parts
