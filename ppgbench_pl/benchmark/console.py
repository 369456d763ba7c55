"""Keep the hundreds of inner trainers quiet: their banners and expected warnings are noise."""

from __future__ import annotations

import logging
import warnings

QUIET_LOGGERS = ("lightning.pytorch", "lightning.fabric", "pytorch_lightning")
QUIET_WARNINGS = (
    r".*module\(s\) in eval mode.*",  # frozen encoders and freeze_stats BatchNorm are in eval mode on purpose
    ".*configure_optimizers.*returned.*None.*",
    ".*training_step.*returned.*None.*",
    ".*val_dataloader.*but have no.*validation_step.*",
    ".*LeafSpec.*",
    ".*does not have many workers.*",
)


def quiet_lightning() -> None:
    """Keep the inner trainers' banners and by-design warnings out (Lightning imported first: it sets the levels)."""
    import lightning.pytorch  # noqa: F401

    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    for pattern in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)
