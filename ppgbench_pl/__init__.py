"""ppgbench: one controlled protocol for evaluating PPG foundation models.

The Python API (:mod:`ppgbench_pl.api`) is re-exported here and imported on first use, so
``import ppgbench_pl`` loads neither torch nor Lightning::

    import ppgbench_pl as pb

    res = pb.evaluate("small_cnn", dataset="synthetic", regimes=("linear",), output_dir="results/demo")
    res.summary
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

_API = ("PUBLISHED_CONTROLS", "PUBLISHED_FOLDS", "PUBLISHED_SEEDS", "Results", "evaluate", "list_controls",
        "list_datasets", "list_encoders", "list_regimes", "list_tasks", "load_run")
#: Names served by other torch-free modules (``pb.compare``: two runs, paired per cell).
_ELSEWHERE = {"compare": "ppgbench_pl.report.compare_runs"}


def __getattr__(name: str) -> Any:
    """Import the API (and what it needs) when one of its names is first asked for."""
    if name in _API or name in _ELSEWHERE:
        value = getattr(importlib.import_module(_ELSEWHERE.get(name, "ppgbench_pl.api")), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """List the module's names, the lazy API included (tab completion in notebooks)."""
    return sorted([*globals(), *_API, *_ELSEWHERE])


__all__ = [
    "PUBLISHED_CONTROLS", "PUBLISHED_FOLDS", "PUBLISHED_SEEDS", "Results", "__version__", "compare", "evaluate",
    "list_controls", "list_datasets", "list_encoders", "list_regimes", "list_tasks", "load_run",
]
