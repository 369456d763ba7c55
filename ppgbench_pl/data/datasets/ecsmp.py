"""ECSMP (PROTOCOL.md 1.5): E4 BVP windows labelled by the one emotion video they lie in, plus the SDS score."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from ppgbench_pl.data.datasets import ecsmp_io
from ppgbench_pl.data.datasets.base import RawDataset, ppg_stats
from ppgbench_pl.data.datasets.ecsmp_io import (
    VIDEO_NAMES,
    Cesaf,
    eeg_files,
    normalise_id,
    read_bvp_csv,
    read_eeg_events,
    read_scales,
)
from ppgbench_pl.data.processed import GroupData, as_class_target, as_regression_target
from ppgbench_pl.data.signal import flatline_mask, rejection_counts, resample
from ppgbench_pl.errors import DataError

#: Event codes that start a video, in the fixed emotion order of the score columns.
START_CODES: dict[int, str] = {101 + i: name for i, name in enumerate(VIDEO_NAMES)}
END_CODE, FALLBACK_END_CODE = 20, 12
SDS_THRESHOLD = 50.0


class SkipSubject(Exception):  # noqa: N818 - a control-flow signal, not an error
    """A subject fails a published check and is left out with a message."""


def video_intervals(types: np.ndarray, latencies: np.ndarray, srate: float) -> list[tuple[str, float, float]]:
    """The six (emotion, start s, end s) videos, each ended by its first code-20, else code-12 event (SkipSubject)."""
    order = np.argsort(latencies, kind="stable")
    types, latencies = types[order], latencies[order]
    starts = [i for i, code in enumerate(types) if code in START_CODES]
    if len(starts) != len(VIDEO_NAMES):
        raise SkipSubject(f"{len(starts)} video start events, expected {len(VIDEO_NAMES)}")
    intervals = []
    for k, i in enumerate(starts):
        begin = latencies[i]
        limit = latencies[starts[k + 1]] if k + 1 < len(starts) else np.inf
        span = (latencies > begin) & (latencies < limit)
        ends = np.flatnonzero(span & (types == END_CODE))
        if len(ends) == 0:
            ends = np.flatnonzero(span & (types == FALLBACK_END_CODE))
        name = START_CODES[int(types[i])]
        if len(ends) == 0:
            raise SkipSubject(f"video {k + 1} ({name}) has no end event")
        intervals.append((name, float(begin / srate), float(latencies[ends[0]] / srate)))
    return intervals


def check_videos(intervals: list[tuple[str, float, float]], duration: float, cesaf: Cesaf) -> None:
    """SkipSubject for a video outside the ``duration`` s of BVP or in another order than CESAF's."""
    for name, begin, end in intervals:
        if begin < 0 or end > duration:
            raise SkipSubject(f"{name} video {begin:.1f}-{end:.1f} s lies outside the {duration:.1f} s of BVP")
    shown = [name for name, _, _ in intervals]
    if shown != cesaf.stimuli:
        raise SkipSubject(f"video order from the events {shown} differs from CESAF {cesaf.stimuli}")


class EcsmpDataset(RawDataset):
    """Preprocessor for ECSMP (``ecsmp``); ``skipped`` maps the ids the last build left out to the reason."""

    key: ClassVar[str] = "ecsmp"
    marker_pattern: ClassVar[str] = "scale.xlsx"
    uses_flatline: ClassVar[bool] = True
    helper_modules: ClassVar[tuple[ModuleType, ...]] = (ecsmp_io,)

    def __init__(self, raw_root: str | Path) -> None:
        super().__init__(raw_root)
        self.skipped: dict[str, str] = {}

    def units(self) -> list[tuple[str, Path, Path, Cesaf | None, float | None]]:
        """(id, BVP.csv, EEG .mat, CESAF row, SDS score) for the ids with both files, sorted numerically."""
        bvp: dict[str, Path] = {}
        for path in sorted((self.raw_root / "E4").glob("*/BVP.csv")):
            sid = normalise_id(path.parent.name)
            if sid is not None:
                bvp.setdefault(sid, path)
        eeg = eeg_files(self.raw_root / "EEG_downsample")
        common = sorted((set(bvp) & set(eeg)) - {"000"}, key=int)
        if not common:
            raise DataError(f"{self.raw_root}: no subject has both E4/<id>/BVP.csv and EEG_downsample/*_<id>.mat")
        cesaf, sds = read_scales(self.raw_root / "scale.xlsx")
        return [(sid, bvp[sid], eeg[sid], cesaf.get(sid), sds.get(sid)) for sid in common]

    def iter_groups(self, fs: float) -> Iterator[GroupData]:
        """One group per subject that passes the published checks; the others are logged, skipped and counted."""
        self.skipped = {}
        for unit in self.units():
            try:
                yield self.process(unit, fs)
            except SkipSubject as reason:
                self.skipped[unit[0]] = str(reason)
                self.note_left_out(unit[0], {f"skipped: {reason}": 1}, f"ECSMP subject {unit[0]} skipped: {reason}")

    def process(self, unit: tuple[str, Path, Path, Cesaf | None, float | None], fs: float) -> GroupData:
        """Window and label one subject (SkipSubject: a published check fails; DataError: a bad file)."""
        sid, bvp_path, eeg_path, cesaf, sds_score = unit
        if cesaf is None or not cesaf.complete:
            raise SkipSubject("CESAF scores missing or incomplete in scale.xlsx")
        if sds_score is None or not np.isfinite(sds_score):
            raise SkipSubject("SDS score missing in scale.xlsx")
        srate, types, latencies = read_eeg_events(eeg_path)
        intervals = video_intervals(types, latencies, srate)
        start_utc, native_fs, bvp = read_bvp_csv(bvp_path)
        check_videos(intervals, len(bvp) / native_fs, cesaf)

        ppg = resample(bvp, native_fs, fs, what=str(bvp_path))
        cut = window, starts, windows = self.cut(ppg, fs)
        if len(starts) == 0:
            raise DataError(f"{bvp_path}: {len(bvp)} samples, less than one {self.info.window_s:g} s window")
        video, labels = self._video_labels(starts / fs, (starts + window) / fs, intervals, cesaf)
        sds_class = int(sds_score >= SDS_THRESHOLD)
        labels["sds_score"] = as_regression_target(np.full(len(starts), sds_score))
        labels["sds_class"] = as_class_target(np.full(len(starts), sds_class))

        keep = flatline_mask(windows, self.flatline_fraction)
        idx = np.flatnonzero(keep)
        if len(idx) == 0:
            raise DataError(f"{bvp_path}: every window is flat; no window left")
        stats = ppg_stats(
            sid, ppg, sds_score=float(sds_score), sds_class=sds_class, bvp_start_utc=start_utc,
            bvp_fs_original=native_fs, target_fs=fs, eeg_fs=srate, eeg_file=eeg_path.name,
            n_windows_total=len(starts), n_windows_kept=len(idx), n_windows_rejected=int(len(starts) - len(idx)),
            n_windows_video=int(labels["has_video_label"][idx].sum()),
        )
        targets = {key: values[idx] for key, values in labels.items()}
        stimulus = [VIDEO_NAMES[s] if s >= 0 else "" for s in targets["stimulus"]]  # metadata.csv reads alone
        shown: dict[str, Any] = {key: targets[key] for key in ("felt_argmax", "felt_tie", "sds_score", "sds_class")}
        group = self.windows_group(sid, idx, cut, fs, targets, stats, rejection_counts(windows, keep),
                                   has_video_label=targets["has_video_label"], video_idx=video[idx],
                                   stimulus=stimulus, **shown)
        assert group is not None  # idx is not empty
        group.extra_arrays["reject_idx"] = ~keep
        return group

    @staticmethod
    def _video_labels(
        t0: np.ndarray, t1: np.ndarray, intervals: list[tuple[str, float, float]], cesaf: Cesaf
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Per-window video index (-1: none) and labels; only a window inside exactly one video gets them."""
        begins = np.array([begin for _, begin, _ in intervals])
        ends = np.array([end for _, _, end in intervals])
        inside = (t0[:, None] >= begins[None, :]) & (t1[:, None] <= ends[None, :])
        has_video = inside.sum(axis=1) == 1
        video = np.where(has_video, inside.argmax(axis=1), -1)
        tops = [np.flatnonzero(row == row.max()) for row in cesaf.scores]  # a shared maximum is a tie
        felt = [(-1, True) if len(top) > 1 else (int(top[0]), False) for top in tops]
        stimulus = [VIDEO_NAMES.index(name) for name, _, _ in intervals]
        scores = np.full((len(t0), len(VIDEO_NAMES)), np.nan)
        scores[has_video] = cesaf.scores[video[has_video]]
        return video, {
            "cesaf_scores": as_regression_target(scores),
            "stimulus": as_class_target([stimulus[v] if v >= 0 else -1 for v in video]),
            "felt_argmax": as_class_target([felt[v][0] if v >= 0 else -1 for v in video]),
            "felt_tie": np.array([felt[v][1] if v >= 0 else False for v in video], dtype=bool),
            "has_video_label": has_video,
        }
