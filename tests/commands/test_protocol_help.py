"""``ppgbench fit --help``: ppgbench's options first, the refused trainer flags collapsed into one entry (issue 20)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ppgbench_pl.benchmark.trainer_block import HONOURED_TRAINER, REFUSED_TRAINER
from tests.cli_helpers import run_cli

QUICKSTART = str(Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml")


def help_of(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = run_cli([command, "--help"], capsys)
    assert code == 0, err
    return out


def entries(text: str) -> list[str]:
    """The option each help entry starts with (``  --name ...`` at the start of a line)."""
    return re.findall(r"^  (--[\w.]+)", text, flags=re.MULTILINE)


@pytest.mark.parametrize("command", ["fit", "benchmark"])
def test_ppgbench_options_come_first_and_refused_flags_are_one_entry(command, capsys):
    text = help_of(command, capsys)
    assert text.startswith(f"usage: ppgbench {command} --config FILE")
    listed = entries(text)
    order = [listed.index(flag) for flag in ("--output_dir", "--dry_run", "--budget", "--model", "--data",
                                             "--trainer.accelerator")]
    assert order == sorted(order), listed  # run options, budget, model, data, then the trainer's devices
    assert all(f"--trainer.{key}" in listed for key in HONOURED_TRAINER)
    refused = [f"--trainer.{key}" for key in REFUSED_TRAINER] + ["--trainer.logger", "--ckpt_path", "--weights_only"]
    assert not set(refused) & set(listed), "a refused flag still has its own entry"
    section = text.split("Refused trainer flags:", 1)[1]
    block = " ".join(section.split("\n\n", 1)[0].split())
    assert all(key in block for key in REFUSED_TRAINER) and "--ckpt_path" in block and "--weights_only" in block
    assert text.count("Refused trainer flags:") == 1 and "refused, each with its reason" in block


def test_a_refused_flag_is_still_parsed_and_refused_with_its_reason(capsys):
    code, _, err = run_cli(["fit", "--config", QUICKSTART, "--trainer.limit_train_batches", "2"], capsys)
    assert code == 2 and "limit_train_batches is fixed by the protocol" in err
