"""From job records to summary.csv: mean and Student-t 95% CI per model x task x regime (protocol.md 9).

Fold = mean of its repeats, seed = mean of its folds, ``mean`` = mean of the seeds; CI unit ``seed`` or ``fold``.
The constant baseline gets one row per rate, or one for rates that agree; the record order never matters.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppgbench_pl.cards.types import OVERLAPS
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.naming import BASELINE_MODEL, is_baseline
from ppgbench_pl.results.fold_entry import FoldEntry, entry_or_id, short_mean, student_t_ci, task_facts, view_label
from ppgbench_pl.results.inference import entries_mdd, with_adjusted_mdd

if TYPE_CHECKING:
    import pandas as pd

SUMMARY_FILE = "summary.csv"
SUMMARY_COLUMNS = [
    "model", "task", "regime", "metric", "mean", "ci95", "ci_low", "ci_high", "n_seeds", "n_folds", "ci_unit",
    "view", "baseline", "backend", "code_version",
    # how a row reads itself: dataset, unit and direction of the metric, its baseline row's mean, the budget
    "dataset", "unit", "higher_is_better", "baseline_mean", "budget",
    "mdd", "mdd_adj",  # MDD against the row's baseline at power 0.8, alpha 0.05 and alpha / m (inference.py)
    "pretraining_overlap",  # direct/source/unknown/none (cards/overlap.py)
    "deviations",  # settings that differ from the published protocol ('' for none)
]
FOLD_COLUMNS = ["model", "task", "regime", "seed", "fold", "metric", "value", "view", "backend",
                "code_version"]


# -- baseline rows: ``constant`` for rates agreeing on linked folds, else ``constant @64Hz`` (``/<model>``) --
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
    import numpy as np
    from scipy.sparse.csgraph import connected_components

    folds = [{k for unit in per_model.values() for k in unit} for per_model in views.values()]
    return connected_components(np.array([[bool(a & b) for b in folds] for a in folds]), directed=False)[0] == 1


def baseline_parts(views: dict[float | None, dict[str, dict[tuple[int, int], FoldEntry]]]
                    ) -> list[tuple[str, str, list[tuple[float | None, str]]]]:
    """(name, view label, [(rate, model), ...]) of each baseline row of a group (the comment above)."""
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


def _joined(values: Iterable[str]) -> str:
    return ";".join(sorted({v for v in values if v}))


def _rows(model: str, group: tuple[str, str, str], cells: dict[tuple[int, int], FoldEntry], attr: str, ci_unit: str,
          view: str, baseline: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The summary row and fold rows of one model or baseline from (seed, fold) -> entry, valued by ``attr``."""
    values = {k: float(getattr(e, attr)) for k, e in sorted(cells.items())}
    by_seed = itertools.groupby(values.items(), key=lambda item: item[0][0])  # sorted by (seed, fold)
    seed_means = [short_mean([value for _, value in folds]) for _, folds in by_seed]
    mean, half = short_mean(seed_means), student_t_ci(seed_means if ci_unit == "seed" else list(values.values()))
    task, regime, metric = group
    dataset, unit, higher = task_facts(task)
    sources = cells.values()
    overlaps = {e.overlap for e in sources}  # the most serious one counts (they agree unless the card changed)
    row = {
        "model": model, "task": task, "regime": regime, "metric": metric, "mean": mean, "ci95": half,
        "ci_low": mean - half, "ci_high": mean + half, "n_seeds": len(seed_means), "n_folds": len(values),
        "ci_unit": ci_unit, "view": view, "baseline": baseline,
        "backend": _joined(e.backend for e in sources),
        "code_version": _joined(e.code_version for e in sources),
        "dataset": dataset, "unit": unit, "higher_is_better": higher, "baseline_mean": math.nan,
        "budget": _joined(e.budget for e in sources) or "published",
        "pretraining_overlap": "none" if is_baseline(model) else next((v for v in OVERLAPS if v in overlaps), "none"),
        "deviations": _joined(e.deviations for e in sources),
    }
    return row, [{"model": model, "task": task, "regime": regime, "seed": seed, "fold": fold, "metric": metric,
                  "value": value, "view": view, "backend": cells[(seed, fold)].backend,
                  "code_version": cells[(seed, fold)].code_version} for (seed, fold), value in values.items()]


def summarise_group(entries: Iterable[FoldEntry], ci_unit: str = "seed"
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Summary rows and fold rows of one (task, regime, metric) group (the entries' order never matters)."""
    entries = sorted(entries, key=lambda e: (e.model, e.seed, e.fold, e.job_id))
    if not entries:
        return [], []
    group = entries[0].group
    summary: list[dict[str, Any]] = []
    folds: list[dict[str, Any]] = []
    # baselines: view (rate) -> model -> (seed, fold) -> entry
    views: dict[float | None, dict[str, dict[tuple[int, int], FoldEntry]]] = {}
    model_views: dict[str, set[float | None]] = {}
    by_model: dict[str, dict[tuple[int, int], FoldEntry]] = {}
    for e in entries:
        model_views.setdefault(e.model, set()).add(e.fs)
        if e.baseline is not None:
            views.setdefault(e.fs, {}).setdefault(e.model, {}).setdefault((e.seed, e.fold), e)
        if e.value is not None:
            by_model.setdefault(e.model, {}).setdefault((e.seed, e.fold), e)
    baseline_of: dict[tuple[str, float | None], str] = {}
    for name, view, members in baseline_parts(views):
        chosen: dict[tuple[int, int], FoldEntry] = {}
        for fs, m in members:  # sorted: the first member's entry stands for a fold they all agree on
            for key, entry in views[fs][m].items():
                chosen.setdefault(key, entry)
            baseline_of[(m, fs)] = name
        row, rows = _rows(name, group, chosen, "baseline", ci_unit, view, "")
        summary.append(row)
        folds += rows
    baseline_means = {row["model"]: row["mean"] for row in summary}
    for model, cells in by_model.items():
        rates = sorted(model_views[model], key=rate_key)
        baseline = _joined(baseline_of.get((model, f), "") for f in rates)
        row, rows = _rows(model, group, cells, "value", ci_unit, ";".join(view_label(f) for f in rates), baseline)
        row.update(baseline_mean=baseline_means.get(baseline, math.nan), mdd=entries_mdd(cells.values()))
        summary.append(row)
        folds += rows
    return summary, folds


class SummaryBook:
    """Slim records and their summary, updated one job at a time; ``every_s`` throttles :meth:`write`."""

    def __init__(self, ci_unit: str = "seed", every_s: float = 5.0) -> None:
        if ci_unit not in ("seed", "fold"):
            raise ConfigError(f"ci_unit must be 'seed' or 'fold', got '{ci_unit}'")
        self.ci_unit, self.every_s = ci_unit, every_s
        self._entries: dict[str, FoldEntry] = {}
        self._groups: dict[tuple[str, str, str], dict[str, FoldEntry]] = {}
        self._rows: dict[tuple[str, str, str], tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
        self._dirty: set[tuple[str, str, str]] = set()
        self.failed_ids: set[str] = set()  # jobs whose latest record added is not ``ok``
        self._last_write = -math.inf
        self._written_version = -1
        self._version = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def ok_ids(self) -> set[str]:
        """Job ids with an ``ok`` record (to judge ``complete`` against the union of plans)."""
        return set(self._entries)

    def add(self, record: Mapping[str, Any]) -> None:
        """Take one job record; one that is not ``ok`` removes the job's entry (``MalformedRecord``: unusable)."""
        self.take(entry_or_id(record))

    def take(self, item: FoldEntry | str) -> None:
        """Take what :func:`entry_or_id` made of a record: its entry, or the id of a job that is not ``ok``."""
        if isinstance(item, FoldEntry):
            self.forget(item.job_id)
            self._entries[item.job_id] = item
            self._groups.setdefault(item.group, {})[item.job_id] = item
            self._dirty.add(item.group)
            self._version += 1
        elif item:
            self.discard(item)
            self.failed_ids.add(item)

    def forget(self, job_id: str) -> None:
        """Forget a job whatever its last record said (ok or failed)."""
        self.discard(job_id)
        self.failed_ids.discard(job_id)

    def discard(self, job_id: str) -> None:
        """Forget a job (its folder was removed, or its record is no longer ``ok``)."""
        old = self._entries.pop(job_id, None)
        if old is not None:
            members = self._groups[old.group]
            members.pop(job_id, None)
            if not members:
                del self._groups[old.group]
            self._dirty.add(old.group)
            self._version += 1

    def _refresh(self) -> None:
        for group in self._dirty:
            members = self._groups.get(group)
            if members:
                self._rows[group] = summarise_group(members.values(), self.ci_unit)
            else:
                self._rows.pop(group, None)
        self._dirty = set()

    def summary(self) -> pd.DataFrame:
        """Return the summary table (columns :data:`SUMMARY_COLUMNS`), sorted by model, task, regime."""
        import pandas as pd

        self._refresh()
        rows = sorted((r for summary, _ in self._rows.values() for r in summary),
                      key=lambda r: (r["model"], r["task"], r["regime"], r["metric"]))
        return with_adjusted_mdd(pd.DataFrame(rows, columns=SUMMARY_COLUMNS))

    def fold_table(self) -> pd.DataFrame:
        """One row per (model or baseline, task, regime, seed, fold) with that fold's value."""
        import pandas as pd

        self._refresh()
        rows = [r for _, folds in self._rows.values() for r in folds]
        rows.sort(key=lambda r: (r["model"], r["task"], r["regime"], r["metric"], r["seed"], r["fold"]))
        return pd.DataFrame(rows, columns=FOLD_COLUMNS)

    def write(self, run_dir: str | Path, *, force: bool = False) -> Path | None:
        """Write ``summary.csv`` atomically (throttled unless ``force``); its path, or None when throttled."""
        path = Path(run_dir) / SUMMARY_FILE
        now = time.monotonic()
        if not force and (now - self._last_write < self.every_s
                          or (self._written_version == self._version and path.exists())):
            return None
        from ppgbench_pl.atomic_io import write_text_atomic

        write_text_atomic(path, self.summary().to_csv(index=False))
        self._last_write, self._written_version = time.monotonic(), self._version
        return path

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], ci_unit: str = "seed") -> SummaryBook:
        """Build a book of the given records (later records of the same job id replace earlier ones)."""
        book = cls(ci_unit)
        for record in records:
            book.add(record)
        return book


def summarise(records: Iterable[Mapping[str, Any]], ci_unit: str = "seed") -> pd.DataFrame:
    """Summarise a set of records (module docstring)."""
    return SummaryBook.from_records(records, ci_unit).summary()
