"""Print every figure of docs/statistics.md and write the trust table's data (issues 19, 31).

Runs the simulation suite (tests/report/trust_suite.py: six noise mixes x MAE / balanced accuracy x 15 /
30 / 53 subjects, 5 seeds re-dealing the same subjects into 5 folds), writes
``ppgbench_pl/report/trust_suite.json`` (the report's trust table and the calibration labels read it) and
prints the markdown tables. Run from the project folder:
``PYTHONPATH=. python tools/statistics_tables.py [--reps 2000] [--boot-reps 200] [--studies 200]``
(the defaults take about 1-2 CPU minutes; ``--no-write`` only prints).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from tests.report.noise_mixes import MIXES
from tests.report.trust_suite import scenario, study

OUT = Path(__file__).resolve().parents[1] / "ppgbench_pl" / "report" / "trust_suite.json"
KINDS = ("regression", "classification")
SUBJECTS = (15, 30, 53)
METHODS = ("two_level", "corrected_t", "bootstrap", "seed_interval", "published_rule")


def run(reps: int, boot_reps: int, studies: int) -> dict[str, object]:
    """Every scenario and the 68-cell studies (N = 30), seeded so the numbers repeat."""
    rows, seed = [], 0
    for kind in KINDS:
        for n in SUBJECTS:
            for mix in MIXES:
                seed += 1
                rows.append(scenario(seed, mix, kind, n, reps, boot_reps))
    multi = [study(1000 + i, mix, "regression", 30, studies) for i, mix in enumerate(MIXES)] if studies else []
    return {"generated_by": "tools/statistics_tables.py", "reps": reps, "boot_reps": boot_reps,
            "boot_draws": 300, "alpha": 0.05, "scenarios": rows, "studies": multi}


def print_tables(data: dict[str, object]) -> None:
    """The markdown tables of docs/statistics.md."""
    print("| metric | subjects | mix | MDD two-level | MDD corrected t | "
          + " | ".join(f"{m}: FPR | power" for m in METHODS) + " |")
    print("| --- | --- | --- | --- | --- | " + " | ".join("--- | ---" for _ in METHODS) + " |")
    for r in data["scenarios"]:  # type: ignore[attr-defined]
        cells = [f"{r[m]['fpr']:.3f} | {r[m]['power']:.2f}" if m in r else "- | -" for m in METHODS]
        kind = "MAE" if r["kind"] == "regression" else "bal. acc."
        print(f"| {kind} | {r['n']} | {r['mix']} | {r['mdd_two_level']:.3g} | {r['mdd']:.3g} | "
              + " | ".join(cells) + " |")
    if data["studies"]:
        print()
        print("| mix (MAE, 30 subjects; 68 cells, 10 with a gain; two-level, BH) | MDD | MDD after correction | "
              "power per gain cell at MDD | at MDD after correction | FWER, complete null |")
        print("| --- | --- | --- | --- | --- | --- |")
        for s in data["studies"]:  # type: ignore[attr-defined]
            print(f"| {s['mix']} | {s['mdd']:.3g} | {s['mdd_adj']:.3g} | {s['power_at_mdd']:.2f} | "
                  f"{s['power_at_mdd_adj']:.2f} | {s['fwer_null']:.3f} |")


def main() -> None:
    """Run, write the JSON (unless --no-write) and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--boot-reps", type=int, default=200)
    parser.add_argument("--studies", type=int, default=200)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    start = time.process_time()
    data = run(args.reps, args.boot_reps, args.studies)
    if not args.no_write:
        from ppgbench_pl.atomic_io import write_text_atomic

        write_text_atomic(OUT, json.dumps(data, indent=1) + "\n")
    print_tables(data)
    print(f"\n({time.process_time() - start:.0f} s CPU; {args.reps} replicates per scenario, "
          f"{args.boot_reps} for the bootstrap)")


if __name__ == "__main__":
    main()
