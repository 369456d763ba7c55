"""Run the ``ppgbench`` entry point in-process and capture what a user would see."""

from __future__ import annotations

import pytest

from ppgbench_pl.cli import main


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``ppgbench <args>``."""
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err
