"""How long ``ppgbench`` takes to answer, per command, beside the cost of ``import lightning.pytorch``.

Each command runs in a fresh interpreter (``python -c``), ``--repeat`` times; the figure is the median CPU
time (user + system of the child, from ``getrusage``), which a busy machine disturbs far less than the wall
time (printed too). Two baselines are timed in the same run, interleaved with the commands: a bare
``python -c pass`` and ``import lightning.pytorch``. The limits are those of issue 20, point 4:

* ``light``: ``help``, ``list``, ``cache``, ``cite``, ``report --help``, the cached ``fit --help`` and every
  refusal that needs no Lightning object (a missing ``--config`` file, an unknown command, an unknown
  dataset or run folder) answer in under 2 s of CPU;
* ``lightning``: a dry run, a config error and a trainer refusal cost at most Lightning's own import
  (measured here) plus 1 s of CPU, judged on the median over rounds of the command's CPU minus the import's
  in the same round (paired, so that a busier round raises both).

Each command's answer is checked too (its exit status and a piece of what it prints), so a refusal that
stopped happening cannot pass as fast. The help cache and the embedding cache point at temporary folders,
and the dry run at a run folder that does not exist: nothing outside a temporary folder is written.

    python tools/bench_startup.py                 # every command, median of 3
    python tools/bench_startup.py --repeat 5 --json
    python tools/bench_startup.py --quick         # the light commands only (no Lightning baseline)
    python tools/bench_startup.py --fit           # what `fit` imports per regime, and who pulls each heavy package

``--fit`` (issue 33, point 2) runs one small `fit` per regime (linear, rf, mlp: the small CNN on 40 synthetic
windows, one fold) under ``python -X importtime`` and prints the import seconds, the costliest packages and,
for each heavy package loaded, the chain of modules that imported it, so that a package no regime uses
(torchmetrics' text and audio metrics pulling transformers and matplotlib) shows where it comes from.

Exit status 0 when every command meets its limit, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIGHT_LIMIT_S = 2.0  # CPU seconds, absolute
LIGHTNING_MARGIN_S = 1.0  # CPU seconds above `import lightning.pytorch`
CLI = "import sys; sys.argv[0] = 'ppgbench'; from ppgbench_pl.cli import main; main({args!r})"
QUICKSTART = str(ROOT / "configs" / "quickstart.yaml")


@dataclass(frozen=True)
class Command:
    """One measured command: its arguments, its limit kind, and what its answer must hold."""

    args: tuple[str, ...] | None  # ppgbench arguments; None: ``code`` is run as is
    kind: str  # "light" (< 2 s CPU) or "lightning" (< import lightning.pytorch + 1 s CPU)
    exit_code: int = 0
    says: str = ""  # a piece of stdout + stderr
    code: str = ""

    def source(self, scratch: Path) -> str:
        """The ``python -c`` program (``{scratch}`` in an argument becomes the scratch folder)."""
        if self.args is None:
            return self.code
        return CLI.format(args=[a.replace("{scratch}", str(scratch)) for a in self.args])


COMMANDS: dict[str, Command] = {
    "help": Command(("--help",), "light", says="commands:"),
    "list": Command(("list",), "light", says="synthetic"),
    "list tasks": Command(("list", "tasks", "--dataset", "synthetic"), "light", says="bpm"),
    "cache list": Command(("cache", "list"), "light"),
    "cite": Command(("cite",), "light", says="@"),
    "report --help": Command(("report", "--help"), "light", says="usage"),
    "fit --help (cached)": Command(("fit", "--help"), "light", says="--output_dir"),
    "refusal: --config missing": Command(("fit", "--config", "{scratch}/missing.yaml"), "light", 2, "no such file"),
    "refusal: unknown command": Command(("fitt",), "light", 2, "did you mean"),
    "refusal: unknown dataset": Command(("list", "tasks", "--dataset", "dalai"), "light", 2, "dalai"),
    "refusal: not a run folder": Command(("report", "{scratch}/no_run"), "light", 2, "no_run"),
    "import ppgbench_pl": Command(None, "light", code="import ppgbench_pl"),
    "fit --help (first call)": Command(("fit", "--help"), "lightning", says="--output_dir"),
    "dry run": Command(("fit", "--config", QUICKSTART, "--output_dir", "{scratch}/dry", "--dry-run"), "lightning",
                       says="jobs planned"),
    "config error": Command(("fit", "--config", QUICKSTART, "--data.init_args.datset", "x"), "lightning", 2,
                            "did you mean 'dataset'"),
    "trainer refusal": Command(("fit", "--config", QUICKSTART, "--trainer.fast_dev_run", "true"), "lightning", 2,
                               "fast_dev_run is set by each regime"),
}
BASELINES: dict[str, str] = {"python -c pass": "pass", "import lightning.pytorch": "import lightning.pytorch"}
HEAVY = ("torch", "lightning", "sklearn", "optuna", "wandb", "transformers", "pandas", "scipy", "matplotlib")
LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def run(code: str, env: dict[str, str], importtime: bool = False) -> tuple[float, float, subprocess.CompletedProcess]:
    """(CPU seconds, wall seconds, the process) of a fresh interpreter running ``code``."""
    args = [sys.executable, *(["-X", "importtime"] if importtime else []), "-c", code]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, proc


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
    top = sorted(per_package.items(), key=lambda kv: -kv[1])[:5]
    return {"import_s": total / 1e6, "top": [(k, v / 1e6) for k, v in top],
            "heavy": [h for h in HEAVY if h in loaded]}


FIT_CONFIG = """
model:
  class_path: ppgbench_pl.tasks.EncoderTask
  init_args: {{encoder: {{class_path: ppgbench_pl.encoders.cnn.SmallCNNEncoder}}}}
controls: []
data:
  class_path: ppgbench_pl.datamodules.PPGDataModule
  init_args: {{dataset: synthetic, root: {root}, tasks: [synthetic-hr], seeds: [42], folds: [0],
               synthetic_subjects: 10, synthetic_windows: 4}}
trainer:
  accelerator: cpu
  devices: 1
  callbacks: [{regime}]
"""
FIT_REGIMES = {
    "linear": "{class_path: ppgbench_pl.regimes.LinearRegime}",
    "rf": "{class_path: ppgbench_pl.regimes.forest.RandomForestRegime, init_args: {backend: sklearn}}",
    "mlp": "{class_path: ppgbench_pl.regimes.mlp.MLPRegime, init_args: {search: {n_trials: 2, max_epochs: 2}}}",
}
#: Packages worth naming when a `fit` loads them, with what (if anything) a regime uses them for.
FIT_HEAVY = ("transformers", "matplotlib", "sympy", "scipy.signal", "PIL", "torch._dynamo", "optuna", "pandas",
             "sklearn.ensemble", "wandb", "torchvision", "tensorboard")


def import_chains(stderr: str, names: tuple[str, ...] = FIT_HEAVY) -> dict[str, tuple[float, list[str]]]:
    """For each of ``names`` imported: (its cumulative import seconds, the chain of importers up to the top).

    ``-X importtime`` prints a module after the modules it imported, indented one level deeper, so a
    module's importer is the next line below it with less indentation.
    """
    rows = [(int(m[2]), len(m[3]), m[4]) for m in map(LINE.match, stderr.splitlines()) if m]
    found = {}
    for i, (cumulative, indent, name) in enumerate(rows):
        if name not in names or name in found:
            continue
        chain, level = [], indent
        for _, upper_indent, upper in rows[i + 1:]:
            if upper_indent < level:
                chain.append(upper)
                level = upper_indent
            if level <= 1:
                break
        found[name] = (cumulative / 1e6, chain)
    return found


def fit_imports(bench: Bench, repeat: int) -> str:
    """What a small `fit` of each regime imports: import seconds, process CPU, heavy packages and who pulls them."""
    lines = ["what `fit` imports, per regime (one -X importtime run each; CPU: median of the plain runs)"]
    for regime, entry in FIT_REGIMES.items():
        config = bench.scratch / f"fit-{regime}.yaml"
        config.write_text(FIT_CONFIG.format(root=bench.scratch / "data", regime=entry))
        args = ("fit", "--config", str(config), "--wandb", "off", "--progress", "false")
        code = CLI.format(args=[*args, "--output_dir", str(bench.scratch / f"warm-{regime}")])
        run(code, bench.env)  # data and embedding cache made once, outside the figures
        cpus = [run(CLI.format(args=[*args, "--output_dir", str(bench.scratch / f"{regime}-{i}")]), bench.env)[0]
                for i in range(repeat)]
        proc = run(CLI.format(args=[*args, "--output_dir", str(bench.scratch / f"{regime}-imports")]), bench.env,
                   importtime=True)[2]
        if proc.returncode != 0:
            raise SystemExit(f"fit ({regime}) failed: {proc.stderr[-1000:]}")
        summary = importtime_summary(proc.stderr)
        lines.append(f"\n{regime}: process {statistics.median(cpus):.2f} s CPU; imports {summary['import_s']:.2f} s "
                     f"under -X importtime (wall, inflated by it; costliest: "
                     f"{', '.join(f'{k} {v:.2f}' for k, v in summary['top'])})")
        for name, (seconds, chain) in import_chains(proc.stderr).items():
            via = " <- ".join(chain if len(chain) <= 5 else [*chain[:2], "...", *chain[-3:]])
            lines.append(f"  {name:<16} {seconds:5.2f} s  <- {via or '(top level)'}")
    return "\n".join(lines)


def answer_problem(command: Command, proc: subprocess.CompletedProcess) -> str:
    """Why the command's answer is not the expected one ('' when it is)."""
    said = proc.stdout + proc.stderr
    if proc.returncode != command.exit_code:
        return f"exit status {proc.returncode}, expected {command.exit_code}: {said.strip()[-300:]}"
    if command.says and command.says not in said:
        return f"did not say {command.says!r}: {said.strip()[-300:]}"
    return ""


class Bench:
    """The scratch folders and environment of one tool run, and the measurements."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.env = {**os.environ, "WANDB_MODE": "disabled", "PPGBENCH_CACHE_DIR": str(scratch / "embeddings"),
                    "XDG_CACHE_HOME": str(scratch / "xdg"), "COLUMNS": "100"}

    def fresh_help_cache(self) -> dict[str, str]:
        """An environment whose help cache is empty (the first ``fit --help`` builds it)."""
        folder = Path(tempfile.mkdtemp(dir=self.scratch, prefix="xdg-"))
        return {**self.env, "XDG_CACHE_HOME": str(folder)}

    def sample(self, code: str, command: Command | None = None, fresh: bool = False) -> tuple[float, float, str]:
        """One run: (CPU seconds, wall seconds, what is wrong with its answer or '')."""
        cpu, wall, proc = run(code, self.fresh_help_cache() if fresh else self.env)
        if command is not None:
            return cpu, wall, answer_problem(command, proc)
        return cpu, wall, "" if proc.returncode == 0 else f"exit status {proc.returncode}: {proc.stderr[-300:]}"

    def measure_all(self, programs: dict[str, tuple[str, Command | None]], repeat: int) -> dict[str, dict]:
        """Every program ``repeat`` times, interleaved (round after round), then one ``-X importtime`` run each.

        Interleaving puts the baselines and the commands under the same load, round by round.
        """
        samples: dict[str, list[tuple[float, float, str]]] = {name: [] for name in programs}
        for _ in range(repeat):
            for name, (code, command) in programs.items():
                if name == "fit --help (cached)":  # (re)build the cache: an edit of the source in between drops it
                    run(code, self.env)
                samples[name].append(self.sample(code, command, fresh=name == "fit --help (first call)"))
        rows = {}
        for name, (code, _) in programs.items():
            cpus, walls, problems = zip(*samples[name], strict=True)
            env = self.fresh_help_cache() if name == "fit --help (first call)" else self.env
            imports = importtime_summary(run(code, env, importtime=True)[2].stderr)
            rows[name] = {"cpu_s": statistics.median(cpus), "wall_s": statistics.median(walls), "cpus": list(cpus),
                          "problem": next((p for p in problems if p), ""), **imports}
        return rows


def judge(row: dict, command: Command, lightning: dict | None) -> None:
    """Add the limit and the verdict to a measured row.

    Above Lightning is the median over rounds of (this command's CPU - ``import lightning.pytorch``'s CPU in
    the same round): paired, so a round on a busier machine raises both. A ``lightning`` command passes when
    that is under the margin; a ``light`` one when its own median is under the limit.
    """
    if lightning is None:
        row["over_lightning_s"] = None
    else:
        row["over_lightning_s"] = statistics.median(a - b for a, b in zip(row["cpus"], lightning["cpus"], strict=True))
    if command.kind == "light":
        row["limit_cpu_s"] = LIGHT_LIMIT_S
        within = row["cpu_s"] < LIGHT_LIMIT_S
    else:
        row["limit_cpu_s"] = None if lightning is None else lightning["cpu_s"] + LIGHTNING_MARGIN_S
        within = row["over_lightning_s"] is None or row["over_lightning_s"] < LIGHTNING_MARGIN_S
    row["pass"] = not row["problem"] and within


def table(baselines: dict, results: dict, repeat: int, lightning_cpu: float | None) -> str:
    """The printed report."""
    lines = [f"python {sys.version.split()[0]}, median of {repeat} runs per command; CPU = user + system",
             f"limits: light < {LIGHT_LIMIT_S:g} s CPU; lightning < import lightning.pytorch"
             f" ({'not measured' if lightning_cpu is None else f'{lightning_cpu:.2f} s'}) + {LIGHTNING_MARGIN_S:g} s"
             " (judged on the median of the paired per-round differences, the 'vs import lightning' column)",
             ""]
    header = (f"{'command':<27} {'CPU s':>6} {'wall s':>7} {'limit':>7} {'vs import lightning':>20}  result  "
              "heavy packages loaded")
    lines += [header, "-" * len(header)]
    for name, row in {**baselines, **results}.items():
        limit = "-" if row.get("limit_cpu_s") is None else f"< {row['limit_cpu_s']:.2f}"
        over = row.get("over_lightning_s")
        versus = "-" if over is None else f"{over:+.2f} s"
        verdict = "" if "pass" not in row else ("PASS" if row["pass"] else "FAIL")
        lines.append(f"{name:<27} {row['cpu_s']:>6.2f} {row['wall_s']:>7.2f} {limit:>7} {versus:>20}  {verdict:<6}  "
                     f"{', '.join(row['heavy']) or '-'}")
    problems = [(name, row["problem"]) for name, row in results.items() if row["problem"]]
    lines += [f"  {name}: {problem}" for name, problem in problems]
    lines.append("\ncostliest packages (self import seconds, one -X importtime run):")
    lines += [f"  {name:<27} " + ", ".join(f"{k} {v:.2f}" for k, v in row["top"]) for name, row in results.items()]
    ok = all(r["pass"] for r in results.values())
    lines.append(f"\n{'all limits met' if ok else 'some limits missed'}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per command (median)")
    parser.add_argument("--commands", nargs="*", choices=list(COMMANDS), default=None)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout instead of the table")
    parser.add_argument("--quick", action="store_true", help="the light commands only, no Lightning baseline")
    parser.add_argument("--fit", action="store_true", help="only: what `fit` imports per regime (no limits judged)")
    args = parser.parse_args()
    if args.fit:
        with tempfile.TemporaryDirectory(prefix="bench_startup-") as tmp:
            print(fit_imports(Bench(Path(tmp)), args.repeat))
        return
    names = args.commands or [n for n, c in COMMANDS.items() if not (args.quick and c.kind == "lightning")]
    with tempfile.TemporaryDirectory(prefix="bench_startup-") as tmp:
        bench = Bench(Path(tmp))
        if "fit --help (cached)" in names:  # build the cache the cached figure reads
            run(COMMANDS["fit --help (cached)"].source(bench.scratch), bench.env)
        programs: dict[str, tuple[str, Command | None]] = {
            name: (code, None) for name, code in BASELINES.items() if not (args.quick and "lightning" in code)}
        programs.update({name: (COMMANDS[name].source(bench.scratch), COMMANDS[name]) for name in names})
        rows = bench.measure_all(programs, args.repeat)
    baselines = {name: rows[name] for name in BASELINES if name in rows}
    lightning = baselines.get("import lightning.pytorch")
    lightning_cpu = None if lightning is None else lightning["cpu_s"]
    results = {name: rows[name] for name in names}
    for name in names:
        judge(results[name], COMMANDS[name], lightning)
    ok = all(r["pass"] for r in results.values())
    if args.json:
        print(json.dumps({"baselines": baselines, "commands": results, "pass": ok}, indent=2))
    else:
        print(table(baselines, results, args.repeat, lightning_cpu))
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
