"""``pb.load_run("x.ppgbench.json")``: an exported file read like a run folder (validated whole when opened)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppgbench_pl.errors import DataError
from ppgbench_pl.run_results import Results

__all__ = ["ExportedResults", "Results", "load_run"]

if TYPE_CHECKING:
    import numpy as np


class ExportedResults(Results):
    """A :class:`~ppgbench_pl.run_results.Results` of one file from ``ppgbench export`` (``DataError``: unreadable)."""

    def __init__(self, path: str | Path) -> None:  # noqa: D107
        from ppgbench_pl.results.untrusted import read_results_file

        super().__init__(path)
        self.document: dict[str, Any] = read_results_file(path)

    @property
    def model_card(self) -> dict[str, Any]:
        """The model card the file carries."""
        return dict(self.document.get("model_card") or {})

    def predictions(self, job_id: str | int, repeat: int = 0) -> dict[str, np.ndarray]:
        """The arrays a job saved for one repeat, as :meth:`Results.predictions` (format version 2 files only)."""
        from ppgbench_pl.results.packed_arrays import unpack_all

        jid, which = self._job_of(job_id)
        carried = self.document.get("predictions")
        if carried is None:
            raise DataError(f"{self.run_dir}: an exported file of format version 1 carries no predictions; "
                            f"open the run folder {self.document.get('run', {}).get('source', '')} for {which}")
        name = f"predictions_repeat{repeat}.npz"
        packed = (carried.get(jid) or {}).get(name)
        if packed is None:
            raise DataError(f"{self.run_dir}: {which} saved no predictions for repeat {repeat}")
        try:
            return unpack_all(packed)
        except ValueError as exc:
            raise DataError(f"{self.run_dir}: {which} {name}: {exc}") from None

    def _read(self) -> tuple[list[dict[str, Any]], list[Any], list[str]]:
        from ppgbench_pl.results.fold_entry import entry_or_id

        records = list(self.document["records"])  # checked once, when opened: nothing is skipped
        return records, [entry_or_id(r) for r in records], []

    def _job_ids(self) -> list[str]:
        """The exported records' ids (there are no job folders)."""
        return [str(r.get("job_id")) for r in self.records()]


def load_run(path: str | Path) -> Results:
    """Open a run folder, partial or complete, or a file from ``ppgbench export`` (``DataError``: one line)."""
    run_dir = Path(path)
    if run_dir.is_file():
        return ExportedResults(run_dir)
    if not run_dir.is_dir():
        raise DataError(f"{run_dir}: no such run folder")
    if not (run_dir / "run.json").exists() and not (run_dir / "jobs").is_dir():
        raise DataError(f"{run_dir}: not a run folder (no run.json and no jobs/); give a run's output_dir")
    return Results(run_dir)
