"""``ppgbench init [FOLDER]``: a commented starter config for one's own model, and budget files; never overwrites."""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from ppgbench_pl.errors import ConfigError

TEMPLATE = "my_model.yaml"
#: The budget files written beside the template (copies of ``configs/budget/``).
BUDGETS = ("budget/smoke.yaml", "budget/published.yaml")


def template_text(name: str = TEMPLATE) -> str:
    """The packaged template's text."""
    return (resources.files("ppgbench_pl") / "templates" / name).read_text(encoding="utf-8")


def _write_new(target: Path, text: str) -> bool:
    """Write a new file (False: it exists and is left untouched); a folder or file that cannot be made: one line."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # e.g. FOLDER names an existing file
        raise ConfigError(f"{target.parent}: cannot create the folder ({exc.strerror or exc})") from None
    try:
        with target.open("x", encoding="utf-8") as handle:  # "x": fails instead of overwriting
            handle.write(text)
    except FileExistsError:
        return False
    except OSError as exc:
        raise ConfigError(f"{target}: cannot write ({exc.strerror or exc})") from None
    return True


def add_init_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``init``."""
    parser = sub.add_parser("init")
    parser.add_argument("folder", nargs="?", default=".", help="Where to write my_model.yaml (default: .).")
    parser.set_defaults(func=run_init)


def run_init(ns: argparse.Namespace) -> None:
    """Write the template (never over an existing one) and the budget files not there yet; say what to edit next."""
    path = Path(ns.folder) / TEMPLATE
    if not _write_new(path, template_text()):
        raise ConfigError(f"{path} already exists; not overwriting it (edit it, or init another folder)")
    budgets = [Path(ns.folder) / name for name in BUDGETS if _write_new(Path(ns.folder) / name, template_text(name))]
    print(f"wrote {', '.join(str(p) for p in (path, *budgets))}")
    print("\n".join(next_steps(path)))


def next_steps(path: Path) -> list[str]:
    """What ``init`` prints after writing ``path``: what to edit, then the four commands (the README's)."""
    smoke, published = (path.parent / b for b in BUDGETS)
    run = f"results/{path.parent.resolve().name}-smoke"
    steps = {
        "smoke test (minutes, prints a table)": f"ppgbench fit --config {path} --config {smoke} --output_dir {run}",
        "its report (prints where it is)": f"ppgbench report {run} --output report/{Path(run).name}",
        "the published plan and its estimate": f"ppgbench fit --config {path} --config {published} --dry-run",
        "the published run": f"ppgbench fit --config {path} --config {published}",
    }
    width = max(map(len, steps)) + 1
    return ["next: set model.init_args.encoder.init_args.module (your nn.Module) and sampling_rate, then",
            *(f"  {i}. {label + ':':<{width}} {command}" for i, (label, command) in enumerate(steps.items(), 1))]
