"""What every raw-dataset preprocessor shares: the raw root, the marker, windows, stats, atomic writing."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ppgbench_pl.data import processed, processed_writer, signal
from ppgbench_pl.data.processed import GroupData, dataset_dir
from ppgbench_pl.data.processed_writer import check_existing, clean_abandoned_builds, open_writer
from ppgbench_pl.data.registry import DatasetInfo, get_dataset
from ppgbench_pl.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

#: What :meth:`RawDataset.cut` answers: window length, window starts and the windows.
Cut = tuple[int, np.ndarray, np.ndarray]


def ppg_stats(subject: str, values: np.ndarray, **extra: Any) -> dict[str, Any]:
    """A group's stats.json: subject, mean and std of ``values`` (in float64; NaN for none), then ``extra``."""
    values = np.asarray(values, dtype=np.float64)
    mean, std = (float(values.mean()), float(values.std())) if values.size else (np.nan, np.nan)
    return {"subject": subject, "ppg_mean": mean, "ppg_std": std, **extra}


def number(value: Any) -> float:
    """A cell as a float (``pd.to_numeric``); anything that is not a number becomes NaN."""
    import pandas as pd

    value = pd.to_numeric(pd.Series([value], dtype=object), errors="coerce").iloc[0]
    return float(value) if pd.notna(value) else float("nan")


def sorted_files(folder: Path, pattern: str, key: Callable[[Path], Any], what: str) -> list[Path]:
    """The files ``pattern`` finds in ``folder`` whose ``key`` is not None, sorted by it (DataError: none)."""
    found = sorted((k, path) for path in folder.glob(pattern) if (k := key(path)) is not None)
    if not found:
        raise DataError(f"{folder}: no {what} files")
    return [path for _, path in found]


def file_error(path: Path, problem: str, exc: BaseException | None = None) -> DataError:
    """One-line DataError naming the file; a parser's message is appended as ``(Type: first line)``."""
    detail = ""
    if exc is not None:
        lines = str(exc).strip().splitlines()
        detail = f" ({type(exc).__name__}{': ' + lines[0].strip() if lines else ''})"
    return DataError(f"{path}: {problem}{detail}")


def read_csv(path: Path, columns: Iterable[str], **options: Any) -> pd.DataFrame:
    """A CSV, header names trimmed, the named columns required (DataError: bad file or a missing column)."""
    import pandas as pd

    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        table = pd.read_csv(path, **options)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        raise file_error(path, "unreadable CSV", exc) from None
    table.columns = [str(c).strip() for c in table.columns]
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(repr(c) for c in missing)}")
    return table


class RawDataset:
    """Base class of the raw-dataset preprocessors (one subclass per dataset)."""

    key: ClassVar[str] = ""
    #: Glob that identifies the raw root (PROTOCOL.md 1.0 "Locating the raw root").
    marker_pattern: ClassVar[str] = ""
    #: 1: the root is the hit's parent; 2: its grandparent (DaLiA, WESAD).
    root_levels_up: ClassVar[int] = 1
    #: Whether the flat-line rule applies (DaLiA, WESAD, DREAMT, ECSMP, PPG-BP).
    uses_flatline: ClassVar[bool] = False
    flatline_fraction: ClassVar[float] = 0.05
    #: Helper modules that shape the output too; their source joins the marker's source digest.
    helper_modules: ClassVar[tuple[ModuleType, ...]] = ()
    #: The dataset's own settings, recorded in the marker after (or over) the shared ones.
    options: dict[str, Any] = {}  # shared and read only: an instance with options sets its own

    def __init__(self, raw_root: str | Path) -> None:
        search_root = Path(raw_root)
        if not search_root.exists():
            raise DataError(f"{search_root}: raw data folder not found")
        pattern = self.marker_pattern  # the first hit in sorted order, direct before recursive, wins
        hits = sorted(search_root.glob(pattern)) or sorted(search_root.rglob(pattern))
        if not hits:
            raise DataError(f"{search_root}: no '{pattern}' found; is this the raw dataset folder?")
        self.raw_root = hits[0].parents[self.root_levels_up - 1]
        #: Groups every window of which was rejected, with their drops (see :meth:`note_left_out`).
        self.left_out: dict[str, dict[str, int]] = {}

    @property
    def info(self) -> DatasetInfo:
        """The registry entry (display name, native rate, window and stride)."""
        return get_dataset(self.key)

    def settings(self) -> dict[str, Any]:
        """The settings recorded in the marker: the shared ones, then :attr:`options`."""
        return {"name": self.key, "raw_root": str(self.raw_root.resolve()), "window_s": self.info.window_s,
                "stride_s": self.info.stride_s, "low_cutoff": -1, "high_cutoff": -1,
                "flatline_fraction": self.flatline_fraction if self.uses_flatline else None} | self.options

    def marker(self, fs: float) -> dict[str, Any]:
        """What makes a processed tree this tree: raw inputs, code, rate and settings."""
        sources = {inspect.getfile(type(self)), inspect.getfile(RawDataset), signal.__file__, processed.__file__,
                   processed_writer.__file__}
        sources |= {inspect.getfile(module) for module in self.helper_modules}
        return {
            "raw_files_sha256": processed.raw_files_digest(self.raw_root),
            "source_sha256": processed.source_digest(*sorted(sources)),
            "target_fs": fs,
            "settings": self.settings(),
        }

    def cut(self, ppg: np.ndarray, fs: float, window_s: float | None = None) -> Cut:
        """Window length, starts and windows of a signal at ``fs`` (the declared window and stride by default)."""
        window = int(round((window_s or self.info.window_s) * fs))
        starts = signal.window_starts(len(ppg), window, window if window_s else int(round(self.info.stride_s * fs)))
        return window, starts, ppg[starts[:, None] + np.arange(window)]

    def units(self) -> list[Any]:
        """What :meth:`process` turns into groups (subject files, records), in group order."""
        raise NotImplementedError

    def process(self, unit: Any, fs: float) -> GroupData | None:
        """One group from one unit; None when all its windows are rejected (see :meth:`note_left_out`)."""
        raise NotImplementedError

    def windows_group(self, name: str, idx: np.ndarray, cut: Cut, fs: float, targets: dict[str, np.ndarray],
                      stats: dict[str, Any], dropped: dict[str, int], why: str = "",
                      **columns: Any) -> GroupData | None:
        """Windows ``idx`` of ``cut`` (:meth:`cut`'s answer) as a group; none kept: None, noted with ``why``."""
        import pandas as pd

        if len(idx) == 0:
            self.note_left_out(name, dropped, why)
            return None
        window, starts, windows = cut
        starts = np.asarray(starts[idx], dtype=np.int64)
        metadata = pd.DataFrame({"subject": [name] * len(starts), "window_idx": np.asarray(idx, dtype=np.int64),
                                 "start_sec": starts / fs, "end_sec": (starts + window) / fs, "ppg_start": starts,
                                 "ppg_end": starts + window, **columns})
        return GroupData(name=name, ppg=windows[idx], targets=targets, stats=stats, metadata=metadata, dropped=dropped)

    def iter_groups(self, fs: float) -> Iterator[GroupData]:
        """Parse the raw files and yield one processed group at ``fs`` per unit that keeps a window."""
        for unit in self.units():
            group = self.process(unit, fs)
            if group is not None:
                yield group

    def note_left_out(self, group: str, dropped: dict[str, int], why: str = "") -> None:
        """Record a group every window of which was rejected (logging ``why``), so the marker counts its drops."""
        if why:
            logging.getLogger(type(self).__module__).warning("%s", why)
        self.left_out[group] = dict(dropped)

    def build(self, output_root: str | Path, fs: float) -> Path:
        """Write ``<output_root>/fs_<fs>/<DisplayName>``; a rerun with the same marker is a no-op."""
        final = dataset_dir(output_root, fs, self.info.display_name)
        marker = self.marker(fs)
        clean_abandoned_builds(final)  # a build killed earlier leaves its hidden folder behind
        if check_existing(final, marker):
            return final
        self.left_out = {}
        with open_writer(final, marker) as writer:
            for group in self.iter_groups(fs):
                writer.add_group(group)
            for name, dropped in self.left_out.items():
                writer.count_dropped(name, dropped)
        return final
