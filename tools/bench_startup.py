"""How long ``ppgbench`` takes to start, per command: ``python -X importtime`` totals and wall time.

For each command it prints the import time the interpreter reports (the sum over top-level imports,
and the packages that cost the most), which heavy packages got imported at all, and the wall time of the
whole process (median of ``--repeat`` runs) against its target. Two baselines are timed in the same run
so the numbers can be read on a busy machine: a bare ``python -c pass`` and ``import lightning.pytorch``
(the floor of ``fit --help``, whose LightningCLI needs Lightning and torch).

    python tools/bench_startup.py              # every command, median of 3
    python tools/bench_startup.py --repeat 5 --json

Exit status 0 when every command meets its target, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict

#: name -> (python code run in a fresh interpreter, wall-time target in seconds or None)
COMMANDS: dict[str, tuple[str, float | None]] = {
    "list": ("import sys; from ppgbench_pl.cli import main; sys.argv[0] = 'ppgbench'; main(['list'])", 1.0),
    "report --help": ("import sys; from ppgbench_pl.cli import main; sys.argv[0] = 'ppgbench'; "
                      "main(['report', '--help'])", 1.0),
    "fit --help": ("import sys; from ppgbench_pl.cli import main; sys.argv[0] = 'ppgbench'; "
                   "main(['fit', '--help'])", 2.0),
    "import ppgbench_pl": ("import ppgbench_pl", 0.5),
}
BASELINES: dict[str, str] = {
    "python -c pass": "pass",
    "import lightning.pytorch": "import lightning.pytorch",
}
HEAVY = ("torch", "lightning", "sklearn", "optuna", "wandb", "transformers", "pandas", "scipy", "matplotlib")
LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def run(code: str, importtime: bool = False) -> tuple[float, str]:
    """Wall seconds of a fresh interpreter running ``code`` (and its stderr)."""
    args = [sys.executable, *(["-X", "importtime"] if importtime else []), "-c", code]
    start = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "WANDB_MODE": "disabled"})
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 2):  # --help and argparse exit with 0; a usage error would be 2
        raise SystemExit(f"command failed ({proc.returncode}): {code}\n{proc.stderr[-2000:]}")
    return wall, proc.stderr


def importtime_summary(stderr: str) -> dict[str, object]:
    """Total import seconds (top-level cumulative), the costliest packages (self time), heavy ones loaded."""
    total = 0
    per_package: dict[str, int] = defaultdict(int)
    loaded: set[str] = set()
    for line in stderr.splitlines():
        match = LINE.match(line)
        if not match:
            continue
        self_us, cumulative_us, indent, name = int(match[1]), int(match[2]), len(match[3]), match[4]
        if indent == 1:
            total += cumulative_us
        package = name.split(".")[0]
        per_package[package] += self_us
        loaded.add(package)
    top = sorted(per_package.items(), key=lambda kv: -kv[1])[:6]
    return {"import_s": total / 1e6, "top": [(k, v / 1e6) for k, v in top],
            "heavy": [h for h in HEAVY if h in loaded]}


def measure(code: str, repeat: int) -> dict[str, object]:
    """Median wall time over ``repeat`` runs, plus the importtime summary of one more run."""
    walls = [run(code)[0] for _ in range(repeat)]
    _, stderr = run(code, importtime=True)
    return {"wall_s": statistics.median(walls), "walls": walls, **importtime_summary(stderr)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="wall-time runs per command (median)")
    parser.add_argument("--commands", nargs="*", choices=list(COMMANDS), default=list(COMMANDS))
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout instead of the table")
    parser.add_argument("--quick", action="store_true", help="bare-python baseline only (no Lightning)")
    args = parser.parse_args()

    names = ["python -c pass"] if args.quick else list(BASELINES)
    baselines = {name: measure(BASELINES[name], args.repeat) for name in names}
    floor = float(baselines["python -c pass"]["wall_s"])  # type: ignore[arg-type]
    results = {}
    for name in args.commands:
        code, target = COMMANDS[name]
        row = measure(code, args.repeat)
        row["target_s"] = target
        row["pass"] = target is None or float(row["wall_s"]) < target  # type: ignore[arg-type]
        row["x_python"] = float(row["wall_s"]) / floor  # type: ignore[arg-type]
        results[name] = row
    ok = all(r["pass"] for r in results.values())
    if args.json:
        print(json.dumps({"baselines": baselines, "commands": results, "pass": ok}, indent=2))
        raise SystemExit(0 if ok else 1)
    print(f"python {sys.version.split()[0]}, median of {args.repeat} runs per command\n")
    header = (f"{'command':<26} {'wall s':>7} {'target':>7} {'x bare':>7} {'imports s':>9}  result  "
              "heavy packages loaded")
    print(header)
    print("-" * len(header))
    for name, row in {**baselines, **results}.items():
        limit_s = row.get("target_s")
        verdict = "" if "pass" not in row else ("PASS" if row["pass"] else "FAIL")
        x_bare = float(row["wall_s"]) / floor  # type: ignore[arg-type]
        limit = f"< {limit_s:g}" if isinstance(limit_s, float) else "-"
        print(f"{name:<26} {row['wall_s']:>7.2f} {limit:>7} {x_bare:>7.1f} "
              f"{row['import_s']:>9.2f}  {verdict:<6}  {', '.join(row['heavy']) or '-'}")  # type: ignore[arg-type]
    print("\ncostliest packages (self import seconds):")
    for name, row in results.items():
        print(f"  {name:<24} " + ", ".join(f"{k} {v:.2f}" for k, v in row["top"]))  # type: ignore[attr-defined]
    print(f"\n{'all targets met' if ok else 'some targets missed'}")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
