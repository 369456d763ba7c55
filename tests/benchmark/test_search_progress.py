"""The progress line moves during a stacked search (issue 32 item 2): trials and epochs, ETA from the estimate."""

from __future__ import annotations

import io
import re

from ppgbench_pl.benchmark import progress as progress_module
from ppgbench_pl.benchmark.progress import PlanCost, Progress
from ppgbench_pl.hpo.search_events import EpochEvent, epoch_ended
from tests.benchmark.helpers import suite_config, write_config
from tests.cli_helpers import run_cli

MLP = {"class_path": "ppgbench_pl.regimes.mlp.MLPRegime",
       "init_args": {"search": {"n_trials": 3, "n_startup_trials": 1, "max_epochs": 3}, "subject_repeats": 1}}


def test_the_line_counts_trials_and_epochs_and_takes_its_eta_from_the_estimate_first():
    cost = PlanCost(job_seconds={"a": 90.0, "b": 10.0}, wall_seconds=100.0, trials=96, trial_epochs=800.0,
                    searched={"a"})
    stream = io.StringIO()
    bar = Progress(2, stream=stream, every_s=0.0, cost=cost)
    try:
        assert "ETA 1:40 (estimate)" in bar.line() and "trials 0/96" in bar.line()
        epoch_ended_like = EpochEvent(search=1, trial_epochs=2, trials_done=5, trials_total=48)
        for _ in range(200):
            bar.on_epoch(epoch_ended_like)
        line = stream.getvalue().splitlines()[-1]
        assert "jobs 0/2" in line and "trials 5/96" in line and "trial-epochs 400/~800" in line
        # half the search's epochs: 45 of the 100 estimated seconds done, so 55 s left by the estimate
        assert bar.fraction() == 0.45 and "ETA 0:55 (estimate)" in line
        bar.update("b", job_id="b")  # a job finished: the ETA now follows this command's pace
        assert bar.fraction() == 0.55 and "(estimate)" not in bar.line()
    finally:
        bar.close()
    bar.on_epoch(epoch_ended_like)  # closed: no longer listening, but a direct call still counts
    assert bar.trial_epochs == 402


def test_nobody_listening_costs_nothing_and_a_failing_listener_never_reaches_the_search():
    class Search:  # epoch_ended reads nothing when no listener is registered
        @property
        def batches(self):
            raise AssertionError("read without a listener")

    epoch_ended(Search())
    cost = PlanCost(job_seconds={"a": 1.0}, wall_seconds=1.0, trials=1, trial_epochs=1.0, searched={"a"})
    bar = Progress(1, stream=io.StringIO(), cost=cost)
    bar.on_epoch = lambda event: 1 / 0  # type: ignore[method-assign]
    try:
        from ppgbench_pl.hpo import search_events

        search_events.listen(bar.on_epoch)
        epoch_ended(type("S", (), {"batches": {}, "plans": []})())  # the error stays in the listener
    finally:
        search_events.unlisten(bar.on_epoch)
        bar.close()


def test_a_tiny_stacked_mlp_search_reports_its_trials_before_its_jobs_finish(engine_root, tmp_path, capsys,
                                                                           monkeypatch):
    monkeypatch.setattr(progress_module, "LINE_EVERY_S", 0.0)  # a line at every stack epoch
    config = suite_config(engine_root, tmp_path / "run", regimes=[MLP], tasks=["synthetic-hr"], progress=True)
    code, _, err = run_cli(["fit", "--config", str(write_config(tmp_path / "config.yaml", config))], capsys)
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("jobs ")]
    before = [line for line in lines if line.startswith("jobs 0/2")]
    assert before, err
    counts = [tuple(map(int, re.search(r"trials (\d+)/(\d+)", line).groups())) for line in before]
    assert counts[-1][1] == 6 and counts[-1][0] > 0  # 2 folds x 3 trials, some finished while the stack trained
    assert all("trial-epochs" in line and "(estimate)" in line for line in before)
    assert lines[-1].startswith("jobs 2/2")
