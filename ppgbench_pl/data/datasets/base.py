"""What every raw-dataset preprocessor shares: finding the raw root, the marker, atomic writing.

A dataset module subclasses :class:`RawDataset`, declares its key and raw-root marker pattern, and
implements :meth:`RawDataset.iter_groups`, which parses the raw files and yields one
:class:`~ppgbench_pl.data.processed.GroupData` per group at the requested target rate. Resampling,
windowing and the flat-line rule live in :mod:`ppgbench_pl.data.signal`.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
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


def locate_raw_root(search_root: Path, pattern: str, levels_up: int = 1) -> Path:
    """Find the raw root from a marker pattern: a direct match first, then a recursive search.

    The first hit in sorted order wins; the root is its parent (``levels_up=1``) or grandparent (2).
    """
    search_root = Path(search_root)
    if not search_root.exists():
        raise DataError(f"{search_root}: raw data folder not found")
    hits = sorted(search_root.glob(pattern)) or sorted(search_root.rglob(pattern))
    if not hits:
        raise DataError(f"{search_root}: no '{pattern}' found; is this the raw dataset folder?")
    root = hits[0]
    for _ in range(levels_up):
        root = root.parent
    return root


def seconds_to_samples(seconds: float, fs: float) -> int:
    """Samples in ``seconds`` at ``fs`` (window and stride lengths), rounded to the nearest integer."""
    return int(round(seconds * fs))


def window_table(
    subject: str, window_idx: np.ndarray, starts: np.ndarray, window: int, fs: float
) -> pd.DataFrame:
    """The leading metadata.csv columns every windowed dataset shares.

    Args:
        subject: Group name, repeated on every row.
        window_idx: Index of each window before rejection.
        starts: First sample of each window at ``fs``.
        window: Window length in samples at ``fs``.
        fs: The target rate.

    Returns:
        Columns subject, window_idx, start_sec, end_sec, ppg_start, ppg_end.
    """
    import pandas as pd

    starts = np.asarray(starts, dtype=np.int64)
    return pd.DataFrame(
        {
            "subject": [subject] * len(starts),
            "window_idx": np.asarray(window_idx, dtype=np.int64),
            "start_sec": starts / fs,
            "end_sec": (starts + window) / fs,
            "ppg_start": starts,
            "ppg_end": starts + window,
        }
    )


def file_error(path: Path, problem: str, exc: BaseException | None = None) -> DataError:
    """One-line DataError naming the file; a parser's own message is cut to its first line.

    Args:
        path: The offending file.
        problem: What is wrong, e.g. ``"unreadable workbook"``.
        exc: The parser's exception, appended as ``(Type: first line)``.
    """
    detail = ""
    if exc is not None:
        lines = str(exc).strip().splitlines()
        detail = f" ({type(exc).__name__}{': ' + lines[0].strip() if lines else ''})"
    return DataError(f"{path}: {problem}{detail}")


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

    def __init__(self, raw_root: str | Path) -> None:
        self.raw_root = locate_raw_root(Path(raw_root), self.marker_pattern, self.root_levels_up)

    @property
    def info(self) -> DatasetInfo:
        """The registry entry (display name, native rate, window and stride)."""
        return get_dataset(self.key)

    def settings(self) -> dict[str, Any]:
        """Per-dataset settings recorded in the marker; extend in subclasses for extra options."""
        return {
            "name": self.key,
            "raw_root": str(self.raw_root.resolve()),
            "window_s": self.info.window_s,
            "stride_s": self.info.stride_s,
            "low_cutoff": -1,
            "high_cutoff": -1,
            "flatline_fraction": self.flatline_fraction if self.uses_flatline else None,
        }

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

    def iter_groups(self, fs: float) -> Iterator[GroupData]:
        """Parse the raw files and yield one processed group at ``fs`` (implemented per dataset)."""
        raise NotImplementedError

    def note_left_out(self, group: str, dropped: dict[str, int]) -> None:
        """Record a group every window of which was rejected, so the marker still counts its drops."""
        if not hasattr(self, "left_out"):
            self.left_out: dict[str, dict[str, int]] = {}
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
