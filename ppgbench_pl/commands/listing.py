"""``ppgbench list``: every dataset and task the registry knows, with type, level and tier."""

from __future__ import annotations

import argparse

from ppgbench_pl.data.registry import DATASETS, TASKS


def add_list_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``list``."""
    parser = sub.add_parser("list", help="List datasets and tasks.")
    parser.set_defaults(func=run_list)


def run_list(_: argparse.Namespace) -> None:
    """Print datasets, then tasks grouped by dataset."""
    print("datasets:")
    for d in DATASETS.values():
        print(f"  {d.key:<13} {d.display_name:<13} native {d.native_fs:g} Hz, window {d.window_s:g} s / "
              f"stride {d.stride_s:g} s, group = {d.group}; source: {d.source}")
    print("tasks:")
    print(f"  {'task':<31} {'type':<15} {'level':<8} {'tier':<10} metric")
    for t in TASKS.values():
        print(f"  {t.name:<31} {t.kind:<15} {t.level:<8} {t.tier:<10} {t.metric}")
    real = [t for t in TASKS.values() if t.dataset != "synthetic"]
    print(f"{len(real)} benchmark tasks ({sum(t.tier == 'primary' for t in real)} primary, "
          f"{sum(t.tier == 'secondary' for t in real)} secondary) + "
          f"{len(TASKS) - len(real)} synthetic")
