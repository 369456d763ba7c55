"""Do two run folders hold the same results? Every record field and prediction array, timing fields aside.

Used to check that a change of the engine changes no number: run the same config at two commits (a git
worktree of the old one, ``PYTHONPATH`` pointing at it) and compare:

    python tools/records_identical.py results/old results/new

Prints the jobs and fields that differ and exits 1 when any does.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

#: What may differ between two runs of the same config: when, where, beside which jobs and by which source version.
VOLATILE = ("seconds", "cpu_seconds", "worker", "code_version", "embedding_cache", "stack_group")


def records(run: Path) -> dict[str, dict]:
    out = {}
    for path in sorted(run.glob("jobs/*/results.json")):
        record = json.loads(path.read_text())
        out[record["job_id"]] = {k: v for k, v in record.items() if k not in VOLATILE}
    return out


def arrays_differ(a: Path, b: Path) -> bool:
    with np.load(a) as x, np.load(b) as y:
        return set(x.files) != set(y.files) or any(not np.array_equal(x[f], y[f]) for f in x.files)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    args = parser.parse_args()
    old, new = records(args.old), records(args.new)
    problems = [f"jobs only in {args.old}: {sorted(set(old) - set(new))}"] if set(old) - set(new) else []
    problems += [f"jobs only in {args.new}: {sorted(set(new) - set(old))}"] if set(new) - set(old) else []
    for jid in sorted(set(old) & set(new)):
        fields = sorted(f for f in set(old[jid]) | set(new[jid]) if old[jid].get(f) != new[jid].get(f))
        problems += [f"{jid}: {', '.join(fields)}"] if fields else []
        for path in sorted((args.old / "jobs" / jid).glob("*.npz")):
            twin = args.new / "jobs" / jid / path.name
            if not twin.exists() or arrays_differ(path, twin):
                problems.append(f"{jid}/{path.name}: prediction arrays differ")
    print("\n".join(problems) if problems else f"identical: {len(old)} records and their prediction arrays")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
