"""ppgbench: one controlled protocol for evaluating PPG foundation models; the API is imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppgbench_pl.lazy import lazy_getattr

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ppgbench_pl.api import (
        PUBLISHED_CONTROLS,
        PUBLISHED_FOLDS,
        PUBLISHED_SEEDS,
        Results,
        evaluate,
        list_controls,
        list_datasets,
        list_encoders,
        list_regimes,
        list_tasks,
        load_run,
    )
    from ppgbench_pl.report.compare_runs import compare

__all__ = [
    "PUBLISHED_CONTROLS", "PUBLISHED_FOLDS", "PUBLISHED_SEEDS", "Results", "__version__", "compare", "evaluate",
    "list_controls", "list_datasets", "list_encoders", "list_regimes", "list_tasks", "load_run",
]
_API = [name for name in __all__ if name not in ("__version__", "compare")]
#: The API's names, and ``pb.compare`` (two runs, paired per cell) from another torch-free module.
__getattr__ = lazy_getattr(__name__, {**dict.fromkeys(_API, "api"), "compare": "report.compare_runs"})


def __dir__() -> list[str]:
    """List the module's names, the lazy API included (tab completion in notebooks)."""
    return sorted({*globals(), *__all__})
