"""What one ``ppgbench fit``/``benchmark`` command did, and the short account of it printed at the end."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RunReport:
    """What one command did (this command's plan) and where the folder stands."""

    planned: int
    completed: int
    skipped: int
    failed: list[str] = field(default_factory=list)
    failed_ids: set[str] = field(default_factory=set)
    not_evaluable: int = 0
    summary_path: Path | None = None
    cache: dict[str, int] = field(default_factory=dict)
    interrupted: int | None = None


def print_report(report: RunReport, output_dir: Path) -> None:
    """A short account of the run on stdout, failures on stderr."""
    import pandas as pd

    if report.summary_path is not None and report.summary_path.exists():
        table = pd.read_csv(report.summary_path)
        table = table.fillna({c: "" for c in ("unit", "budget") if c in table.columns})
        if len(table):
            cols = [c for c in ("model", "task", "regime", "metric", "unit", "mean", "ci_low", "ci_high", "n_seeds",
                                "n_folds", "budget") if c in table.columns]
            print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    evaluable = f", {report.not_evaluable} not evaluable" if report.not_evaluable else ""
    print(f"{report.completed} jobs run, {report.skipped} already done{evaluable}, {len(report.failed)} failed "
          f"of {report.planned}; results in {output_dir}")
    for line in report.failed[:20]:
        print(f"failed: {line}", file=sys.stderr)
    if len(report.failed) > 20:
        print(f"... and {len(report.failed) - 20} more failures (see {output_dir}/jobs/*/results.json)",
              file=sys.stderr)
