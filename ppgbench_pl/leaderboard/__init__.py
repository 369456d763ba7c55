"""``ppgbench leaderboard FILE... --output site/``: many submissions side by side on one offline page.

Every number is the report's; the page is written atomically, after every input was read and checked. Nothing
here imports torch.
"""

from ppgbench_pl.leaderboard.page import build_leaderboard

__all__ = ["build_leaderboard"]
