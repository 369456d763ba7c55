"""The built-in synthetic dataset: seeded subjects with known physiology, simulated by NeuroKit2 at 128 Hz."""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppgbench_pl.data import processed, signal
from ppgbench_pl.data.datasets.base import RawDataset
from ppgbench_pl.data.processed import GroupData
from ppgbench_pl.data.processed_writer import MarkerMismatch
from ppgbench_pl.errors import ConfigError

NATIVE_FS = 128
ACTIVITY_HR_RISE = (0.0, 18.0, 40.0)
ACTIVITY_MOTION = (0.02, 0.25, 0.6)
ACTIVITY_PROBS = (0.5, 0.3, 0.2)


@dataclass(frozen=True)
class SubjectProfile:
    """The physiology one simulated subject is generated from."""

    name: str
    age: float
    stiff: int
    resting_hr: float
    ibi_randomness: float
    reflection_amplitude: float
    reflection_delay_s: float
    noise: float


class SyntheticPPGDataset(RawDataset):
    """Seeded synthetic PPG subjects written as a processed tree at any rate (one seed: the same data)."""

    key = "synthetic"

    def __init__(self, n_subjects: int = 30, windows_per_subject: int = 20, window_s: float = 10.0,
                 seed: int = 0) -> None:
        if n_subjects < 5:
            raise ConfigError(f"the synthetic dataset needs at least 5 subjects for 5-fold CV, got {n_subjects}")
        self.n_subjects = n_subjects
        self.windows_per_subject = windows_per_subject
        self.window_s = window_s
        self.seed = seed

    def settings(self) -> dict[str, Any]:
        """Generator settings: part of the marker, so other settings never reuse a tree."""
        return {"name": self.key, "n_subjects": self.n_subjects, "windows_per_subject": self.windows_per_subject,
                "window_s": self.window_s, "seed": self.seed, "native_fs": NATIVE_FS}

    def marker(self, fs: float) -> dict[str, Any]:
        """Identity of the generated tree: settings, generator source and rate."""
        return {"source_sha256": processed.source_digest(__file__, signal.__file__), "target_fs": fs,
                "settings": self.settings()}

    def subjects(self) -> list[SubjectProfile]:
        """Per-subject physiology drawn from the master seed."""
        rng = np.random.default_rng(self.seed)
        ages = rng.uniform(20, 80, size=self.n_subjects)
        # Stiffness follows age with individual variation; thresholding at the cohort median keeps the
        # two classes balanced whatever the subject count.
        stiffness_score = ages + rng.normal(0, 8, size=self.n_subjects)
        threshold = np.median(stiffness_score)
        out = []
        for i, age in enumerate(ages):
            stiff = int(stiffness_score[i] > threshold)
            out.append(
                SubjectProfile(
                    name=f"S{i + 1:02d}",
                    age=round(float(age), 1),
                    stiff=stiff,
                    resting_hr=float(rng.uniform(55, 85) + 0.1 * (age - 50)),
                    ibi_randomness=float(rng.uniform(0.02, 0.12)),
                    reflection_amplitude=float((0.55 if stiff else 0.2) + rng.normal(0, 0.05)),
                    reflection_delay_s=float((0.12 if stiff else 0.26) + rng.normal(0, 0.015)),
                    noise=float(rng.uniform(0.02, 0.08)),
                )
            )
        return out

    def simulate_window(self, subject: SubjectProfile, activity: int, hr: float, seed: int) -> np.ndarray:
        """One window at the native rate: simulator pulse, reflected wave, motion and sensor noise."""
        import neurokit2 as nk  # deferred: importing neurokit2 costs seconds

        rng = np.random.default_rng(seed)
        n = int(round(self.window_s * NATIVE_FS))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pulse = nk.ppg_simulate(
                duration=self.window_s + 1,
                sampling_rate=NATIVE_FS,
                heart_rate=hr,
                ibi_randomness=subject.ibi_randomness,
                motion_amplitude=ACTIVITY_MOTION[activity],
                burst_number=int(activity > 0) * int(rng.integers(0, 3)),
                burst_amplitude=0.3 * activity,
                random_state=seed,
            ).astype(np.float64)
        delay = int(round(subject.reflection_delay_s * NATIVE_FS))
        shaped = pulse.copy()
        shaped[delay:] += subject.reflection_amplitude * (pulse[:-delay] - pulse.mean())
        shaped = shaped[NATIVE_FS // 2 : NATIVE_FS // 2 + n]
        shaped = shaped + rng.normal(0.0, subject.noise, size=n)
        return shaped

    def iter_groups(self, fs: float) -> Iterator[GroupData]:
        """Simulate every subject at the native rate and resample each window to ``fs``."""
        import pandas as pd

        for k, subject in enumerate(self.subjects()):
            rng = np.random.default_rng([self.seed, k])
            activity = rng.choice(3, size=self.windows_per_subject, p=ACTIVITY_PROBS)
            hr = subject.resting_hr + np.asarray(ACTIVITY_HR_RISE)[activity] + rng.normal(0, 3, size=len(activity))
            native = [self.simulate_window(subject, int(a), float(h), seed=int(rng.integers(2**31)))
                      for a, h in zip(activity, hr, strict=True)]
            windows = np.stack([signal.resample(w, NATIVE_FS, fs, what="synthetic") for w in native])
            n = len(windows)
            starts = np.arange(n) * self.window_s
            targets = {"hr": processed.as_regression_target(hr), "activity": processed.as_class_target(activity),
                       "stiffness": processed.as_class_target([subject.stiff] * n),
                       "age": processed.as_regression_target([subject.age] * n)}
            stats = {"subject": subject.name, "ppg_mean": float(windows.mean()), "ppg_std": float(windows.std()),
                     "profile": asdict(subject)}
            metadata = pd.DataFrame({"subject": subject.name, "window_idx": np.arange(n), "start_sec": starts,
                                     "end_sec": starts + self.window_s, "hr": hr, "activity": activity})
            yield GroupData(name=subject.name, ppg=windows, targets=targets, stats=stats, metadata=metadata)

    def build(self, output_root: str | Path, fs: float) -> Path:
        """Write the tree; one made by other settings or code is regenerated (it is a pure function of both)."""
        try:
            return super().build(output_root, fs)
        except MarkerMismatch:
            final = processed.dataset_dir(output_root, fs, self.info.display_name)
            marker = processed.ProcessedDataset(final).marker() or {}
            if marker.get("settings", {}).get("name") != self.key:
                raise
            shutil.rmtree(final)
            return super().build(output_root, fs)

