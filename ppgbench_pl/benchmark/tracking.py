"""Weights & Biases without surprises: offline unless the user is logged in, and never a long hang."""

from __future__ import annotations

import os
from typing import Any

from lightning.pytorch.loggers import WandbLogger


def wandb_logged_in() -> bool:
    """True when an API key is available (environment or the netrc entry ``wandb login`` writes)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        import netrc

        return any("wandb" in host for host in netrc.netrc().hosts)
    except (FileNotFoundError, OSError, netrc.NetrcParseError):
        return False


class PPGBenchWandbLogger(WandbLogger):
    """:class:`WandbLogger` whose mode follows ``WANDB_MODE``, else offline unless logged in.

    ``WANDB_INIT_TIMEOUT`` defaults to 10 s so a stray online mode without network fails fast.
    """

    def __init__(self, project: str = "ppgbench", save_dir: str = ".", name: str | None = None, **kwargs: Any) -> None:
        os.environ.setdefault("WANDB_INIT_TIMEOUT", "10")
        os.environ.setdefault("WANDB_SILENT", "true")
        mode = os.environ.get("WANDB_MODE") or ("online" if wandb_logged_in() else "offline")
        kwargs.setdefault("mode", mode)
        super().__init__(project=project, save_dir=save_dir, name=name, **kwargs)
