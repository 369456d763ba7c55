"""The synthetic ground truth is known, so these checks fail when the pipeline is wrong."""

import pandas as pd

from ppgbench_pl.benchmark.coordinator import BenchmarkRun
from ppgbench_pl.benchmark.protocol_cli import parse_setup
from ppgbench_pl.encoders.prv import PRVEncoder, PublishedPRVEncoder


def test_prv_beats_the_constant_baseline_on_heart_rate_by_far(synthetic_root, tmp_path):
    # The engine's programmatic face: a fit config, built by the CLI's parser, run by the engine.
    prv, published = ({"class_path": f"ppgbench_pl.encoders.prv.{cls}", "init_args": {"n_jobs": 1}}
                      for cls in ("PRVEncoder", "PublishedPRVEncoder"))
    setup = parse_setup({
        "model": {"class_path": "ppgbench_pl.tasks.EncoderTask", "init_args": {"encoder": prv}},
        "controls": [published],
        "data": {"class_path": "ppgbench_pl.datamodules.PPGDataModule", "init_args": {
            "dataset": "synthetic", "tasks": ["synthetic-hr", "synthetic-activity"], "seeds": [42],
            "root": str(synthetic_root), "synthetic_subjects": 15, "synthetic_windows": 6}},
        "trainer": {"accelerator": "cpu", "devices": 1, "callbacks": [{"class_path": "ppgbench_pl.regimes.LinearRegime"}]},
        "output_dir": str(tmp_path / "run"), "wandb": "off", "progress": False})
    report = BenchmarkRun(setup).run()
    assert report.completed == 2 * 2 * 5 and not report.failed
    table = pd.read_csv(report.summary_path).set_index(["model", "task"])["mean"]
    prv, published = PRVEncoder(n_jobs=1).name, PublishedPRVEncoder(n_jobs=1).name
    constant = table[("constant", "synthetic-hr")]
    assert constant > 8.0  # heart rate varies by activity and subject
    assert table[(prv, "synthetic-hr")] < 0.25 * constant
    assert table[(published, "synthetic-hr")] < 0.75 * constant
    # Majority class: balanced accuracy 1/K_test, where a small test fold may hold only 2 of 3 classes.
    assert table[("constant", "synthetic-activity")] <= 0.5
    assert table[(prv, "synthetic-activity")] > table[("constant", "synthetic-activity")] + 0.2
