"""``ppgbench fit --help`` and ``benchmark --help``: ppgbench's own options first, refused flags in one entry."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ppgbench_pl.benchmark.trainer_block import REFUSED_TRAINER

#: Every refused destination: the refused ``Trainer`` arguments, then the other LightningCLI flags a protocol run
#: refuses (``--trainer.logger`` takes only true/false: ppgbench tracks runs itself).
REFUSED = [f"trainer.{key}" for key in REFUSED_TRAINER] + ["trainer.logger", "ckpt_path", "weights_only"]
REFUSED_TITLE = "Refused trainer flags"
#: The sections in the order the help shows them, each found by one argument it holds.
SECTION_ORDER = ("output_dir", "budget", "model", "data", "trainer")
USAGE = ("ppgbench {command} --config FILE [--config FILE ...] [--dry_run] [--output_dir DIR] [option ...]\n"
         "       (later configs and options override earlier ones; every option is below)")


def refused_line(present: list[str]) -> str:
    """The one entry that names the refused flags."""
    trainer = [d.removeprefix("trainer.") for d in present if d.startswith("trainer.") and d != "trainer.logger"]
    others = [f"--{d}" for d in present if not d.startswith("trainer.") or d == "trainer.logger"]
    names = ([f"--trainer.{{{', '.join(trainer)}}}"] if trainer else []) + others
    return (", ".join(names) + ": refused, each with its reason (epochs, steps and batches are set by each "
            "regime's search budget, the inner trainers are built by the regimes, and runs are tracked by ppgbench: "
            "--wandb; --trainer.logger takes only true or false)")


def _section_rank(group: Any) -> float:
    if group.title == REFUSED_TITLE:
        return SECTION_ORDER.index("trainer") + 0.5  # right after the trainer's device settings
    dests = {action.dest for action in group._group_actions}
    return next((i for i, dest in enumerate(SECTION_ORDER) if dest in dests), len(SECTION_ORDER) + 1)


def protocol_help(parser: argparse.ArgumentParser, format_help: Callable[[], str]) -> str:
    """The help of a ``fit``/``benchmark`` parser as described above; any other parser's help unchanged."""
    if not any(action.dest == "output_dir" for action in parser._actions):
        return format_help()
    hidden = [a for a in parser._actions if a.dest in REFUSED or a.dest.removesuffix(".help") in REFUSED]
    present = [dest for dest in REFUSED if any(a.dest == dest for a in hidden)]
    saved_help = [(action, action.help) for action in hidden]
    groups, usage = list(parser._action_groups), parser.usage
    try:
        for action in hidden:
            action.help = argparse.SUPPRESS
        if present:
            parser.add_argument_group(REFUSED_TITLE, refused_line(present))
        parser._action_groups = sorted(parser._action_groups, key=_section_rank)
        parser.usage = USAGE.format(command=parser.prog.split()[-1])
        return format_help()
    finally:
        for action, text in saved_help:
            action.help = text
        parser._action_groups, parser.usage = groups, usage
