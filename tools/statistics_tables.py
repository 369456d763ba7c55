"""Print the calibration tables of docs/statistics.md: false-positive rate and power at the MDD (issue 19).

Simulated fold scores with known truth (tests/report/simulate.py); about ten seconds on 2 CPU cores.
Run from the project folder: ``PYTHONPATH=. python tools/statistics_tables.py``.
"""

from __future__ import annotations

import numpy as np

from ppgbench_pl.results.inference import mdd
from tests.report.simulate import (
    corrected_t_rejects,
    equicorrelated_diffs,
    published_rejects,
    seed_t_rejects,
    subject_runs,
)

RUNS = 4000


def _mdd(diff: np.ndarray) -> float:
    return float(np.mean([mdd(s, diff.shape[1], 0.25) for s in diff.std(axis=1, ddof=1)]))


def subject_rows(rng: np.random.Generator) -> list[str]:
    """One table row per training-noise level of the subject model."""
    rows = []
    for sd_t in (0.0, 0.5, 1.0, 2.0):
        null = subject_runs(rng, RUNS, 0.0, sd_t=sd_t)
        d0 = (null["a"] - null["b"]).reshape(RUNS, -1)
        at = _mdd(d0)
        eff = subject_runs(rng, RUNS, at, sd_t=sd_t)
        d1 = (eff["a"] - eff["b"]).reshape(RUNS, -1)
        rates = [corrected_t_rejects(d0).mean(), corrected_t_rejects(d1).mean(),
                 published_rejects(null["a"], null["b"]).mean(), published_rejects(eff["a"], eff["b"]).mean(),
                 seed_t_rejects(null["a"], null["b"]).mean(), seed_t_rejects(eff["a"], eff["b"]).mean()]
        rows.append(f"| subjects, sd_train {sd_t:g} | {at:.2f} | " + " | ".join(f"{r:.3f}" for r in rates) + " |")
    return rows


def main() -> None:
    """Print the markdown table."""
    rng = np.random.default_rng(0)
    print("| model | MDD | corrected t: FPR | power at MDD | published CI rule: FPR | power | "
          "seed-mean paired t: FPR | power |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    null = equicorrelated_diffs(rng, 20_000, 0.0)
    at = _mdd(null)
    eff = equicorrelated_diffs(rng, 20_000, at)
    print(f"| equicorrelated (Nadeau-Bengio) | {at:.2f} | {corrected_t_rejects(null).mean():.3f} | "
          f"{corrected_t_rejects(eff).mean():.3f} | – | – | – | – |")
    for row in subject_rows(rng):
        print(row)


if __name__ == "__main__":
    main()
