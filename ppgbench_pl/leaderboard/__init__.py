"""``ppgbench leaderboard FILE... --output site/``: many submissions side by side on one offline page.

Every number is the report's; the page (:mod:`.page`) is written atomically, after every input was read and
checked. Nothing here imports torch.
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
        ReportError: A bad input or output (one line naming it); nothing is written then.

    """
    from ppgbench_pl.atomic_io import write_text_atomic
    from ppgbench_pl.leaderboard.page import Board, render

    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise ReportError(f"{out}: the leaderboard folder is a file; choose another --output")
    for path in map(Path, inputs):
        if not path.exists():
            raise ReportError(f"{path}: no such file or run folder")
    text = render(Board(inputs))  # every input is read and checked before anything is written
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"{out}: cannot create the leaderboard folder ({exc.strerror or exc})") from None
    path = out / PAGE
    write_text_atomic(path, text)
    return path
