"""The synthetic ground truth is known, so these checks fail when the pipeline is wrong."""

import pandas as pd

from ppgbench_pl.benchmark.runner import ProtocolRunner
from ppgbench_pl.datamodules import PPGDataModule
from ppgbench_pl.encoders.prv import PRVEncoder, PublishedPRVEncoder
from ppgbench_pl.regimes.linear import LinearRegime


def test_prv_beats_the_constant_baseline_on_heart_rate_by_far(synthetic_root, tmp_path):
    dm = PPGDataModule(root=str(synthetic_root), tasks=["synthetic-hr", "synthetic-activity"], seeds=[42],
                       synthetic_subjects=15, synthetic_windows=6)
    runner = ProtocolRunner(tmp_path, dm, [PRVEncoder(n_jobs=1), PublishedPRVEncoder(n_jobs=1)], [LinearRegime()],
                            trainer_kwargs={"accelerator": "cpu", "devices": 1}, progress=False)
    report = runner.run()
    assert report.completed == 2 * 2 * 5 and not report.failed
    table = pd.read_csv(report.summary_path).set_index(["model", "task"])["mean"]
    constant = table[("constant", "synthetic-hr")]
    assert constant > 8.0  # heart rate varies by activity and subject
    assert table[("prv", "synthetic-hr")] < 0.25 * constant
    assert table[("prv_published", "synthetic-hr")] < 0.75 * constant
    # Majority class: balanced accuracy 1/K_test, where a small test fold may hold only 2 of 3 classes.
    assert table[("constant", "synthetic-activity")] <= 0.5
    assert table[("prv", "synthetic-activity")] > table[("constant", "synthetic-activity")] + 0.2
