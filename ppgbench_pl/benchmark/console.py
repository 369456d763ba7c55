"""Keep the hundreds of inner trainers quiet: their banners and expected warnings are noise."""

from __future__ import annotations

import logging
import warnings

QUIET_LOGGERS = ("lightning.pytorch", "lightning.fabric", "pytorch_lightning")
#: Lightning's notices about what the engine does on purpose (frozen encoders are in eval mode...).
NOTICES = (r".*configure_optimizers.* returned .None.*", r".*training_step.* returned .None.*", r".*LeafSpec.*",
           r".*does not have many workers.*", r".*module\(s\) in eval mode.*")
QUIET_WARNINGS = (*NOTICES, r".*val_dataloader.*but have no.*validation_step.*")


def quiet_lightning() -> None:
    """Keep the inner trainers' banners and by-design warnings out (Lightning imported first: it sets the levels)."""
    import lightning.pytorch  # noqa: F401

    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    for pattern in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)
