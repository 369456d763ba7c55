"""``ppgbench leaderboard FILE... --output site/``: many submissions side by side on one offline page.

:func:`build_leaderboard` reads exported files (``ppgbench export``) and run folders with the report's
loader, computes every number with the report's code (:mod:`.board`), draws one sortable, filterable table
per regime and each model's card (:mod:`.page`), and writes ``index.html`` atomically: on bad input
nothing is written. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ppgbench_pl.report.load import ReportError

__all__ = ["build_leaderboard"]

PAGE = "index.html"


def build_leaderboard(inputs: Sequence[str | Path], output_dir: str | Path) -> Path:
    """Write the leaderboard of ``inputs`` to ``output_dir/index.html`` and return its path.

    Raises:
        ReportError: A bad input (one line naming it: missing, unreadable, not a results file or run folder,
            no completed job, protocol settings that differ from another input's), or an output that is a
            file or cannot be created. Nothing is written then.

    """
    from ppgbench_pl.atomic_io import write_text_atomic
    from ppgbench_pl.leaderboard.board import collect
    from ppgbench_pl.leaderboard.page import render

    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise ReportError(f"{out}: the leaderboard folder is a file; choose another --output")
    for path in map(Path, inputs):
        if not path.exists():
            raise ReportError(f"{path}: no such file or run folder")
    text = render(collect(inputs))  # every input is read and checked before anything is written
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"{out}: cannot create the leaderboard folder ({exc.strerror or exc})") from None
    path = out / PAGE
    write_text_atomic(path, text)
    return path
