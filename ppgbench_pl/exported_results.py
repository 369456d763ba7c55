"""``pb.load_run("my_model.ppgbench.json")``: an exported file read like a run folder.

The summary, the jobs and the report come from the file's records; prediction arrays are not exported,
so :meth:`ExportedResults.predictions` says so in one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppgbench_pl.errors import DataError
from ppgbench_pl.run_results import Results
from ppgbench_pl.run_results import load_run as load_run_folder

__all__ = ["ExportedResults", "Results", "load_run"]

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


class ExportedResults(Results):
    """A :class:`~ppgbench_pl.run_results.Results` over one file from ``ppgbench export``.

    Args:
        path: The exported file (read and checked once, here).

    Raises:
        DataError: The file is not a readable ppgbench results file (one line naming it).

    """

    def __init__(self, path: str | Path) -> None:  # noqa: D107
        from ppgbench_pl.results.export import read_export

        super().__init__(path)
        self.document: dict[str, Any] = read_export(path)

    def __repr__(self) -> str:  # noqa: D105
        return f"ExportedResults({str(self.run_dir)!r})"

    def records(self) -> list[dict[str, Any]]:
        """The job records the file holds."""
        return list(self.document["records"])

    @property
    def summary(self) -> pd.DataFrame:
        """The summary recomputed from the file's records (as ``summary.csv`` of the run would be)."""
        from ppgbench_pl.results.summary import summarise

        return summarise([r for r in self.records() if r.get("status") == "ok"])

    @property
    def model_card(self) -> dict[str, Any]:
        """The model card the file carries."""
        return dict(self.document.get("model_card") or {})

    def predictions(self, job_id: str | int, repeat: int = 0) -> dict[str, np.ndarray]:
        """Refused: an exported file carries no prediction arrays.

        Raises:
            DataError: Always (one line saying where the arrays are).

        """
        raise DataError(f"{self.run_dir}: an exported file carries no predictions; open the run folder "
                        f"{self.document.get('run', {}).get('source', '')} for job {job_id}")


def load_run(path: str | Path) -> Results:
    """Open a run folder, or a file from ``ppgbench export`` (``pb.load_run``).

    Raises:
        DataError: No such folder or file, not a run folder, or not a readable exported file (one line).

    """
    return ExportedResults(path) if Path(path).is_file() else load_run_folder(path)
