"""Subject-level ties follow the published argmax (PROTOCOL.md 6); window-level labels keep p >= 0.5 (4.3)."""

import numpy as np

from ppgbench_pl.metrics.scores import Predictions
from ppgbench_pl.probes.search import subject_predictions


def test_an_exact_binary_tie_is_positive_for_a_window_and_negative_for_a_subject():
    classes = np.array([3, 7])
    windows = Predictions("classification", np.array([[0.5, 0.5], [0.4, 0.6], [0.6, 0.4], [0.5, 0.5]]), classes)
    assert windows.labels.tolist() == [7, 7, 3, 7]  # p >= 0.5
    subjects = subject_predictions(windows, np.array(["a", "a", "b", "b"]), "mean")
    assert subjects.subject_level and subjects.values.tolist() == [[0.45, 0.55], [0.55, 0.45]]
    tie = subject_predictions(Predictions("classification", np.array([[0.4, 0.6], [0.6, 0.4]]), classes),
                              np.array(["a", "a"]), "mean")
    assert tie.values.tolist() == [[0.5, 0.5]] and tie.labels.tolist() == [3]  # argmax: the first class
