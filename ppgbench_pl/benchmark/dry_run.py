"""``--dry-run`` (CLI) and ``pb.evaluate(..., dry_run=True)``: the plan, what it would cost, nothing written.

The dry run makes the real run's checks of the settings and the run folder, in the real run's order and
through the same functions, so a folder the real run would refuse is refused here with the same line
and exit status: the trainer strategy against the executor (:func:`~ppgbench_pl.benchmark.preflight.check_strategy`),
the output folder (:func:`~ppgbench_pl.benchmark.preflight.check_output_dir`), and, when the folder already
holds a ``run.json``, the run identity (:func:`~ppgbench_pl.benchmark.identity.check_identity`: another config,
data, budget or source version). The identity needs the data and the built encoders, so it is checked only
when the folder has a ``run.json`` and the data can be read; a dry run whose data is missing says that the
identity was not checked. Not made here: the executor's own check (it may contact a scheduler) and the
size check of the embedding cache.

Then it prints the plan table, the budget line, what cannot be evaluated, and the cost estimate of the jobs
still to run (:mod:`ppgbench_pl.benchmark.estimate`) with this machine's calibration.
"""

from __future__ import annotations

from typing import Any

from ppgbench_pl.errors import PPGBenchError


def check_folder(run: Any, suite: Any) -> None:
    """The real run's identity check of ``run``'s folder, writing nothing; a note when it cannot be made."""
    from ppgbench_pl.benchmark.identity import check_identity, package_versions, suite_identity

    if not (run.run_dir / "run.json").exists():
        return
    check_identity(run.run_dir, suite_identity(suite), {"versions": package_versions()},
                   allow_code_change=run.settings.allow_code_change)


def dry_run_text(run: Any) -> str:
    """What ``BenchmarkRun.dry_run`` prints (see the module docstring); a refusal raises its ConfigError."""
    from ppgbench_pl.benchmark.budget import describe_budget
    from ppgbench_pl.benchmark.cost_model import load_model
    from ppgbench_pl.benchmark.estimate import describe_estimate, estimate_plan
    from ppgbench_pl.benchmark.plan import describe_plan
    from ppgbench_pl.benchmark.preflight import (
        check_output_dir,
        check_precision,
        check_strategy,
        degenerate_jobs,
        describe_degenerate,
        describe_skipped,
        evaluable_plan,
    )
    from ppgbench_pl.results.folder_sync import read_record_complete

    suite = run.suite()
    check_strategy(suite, run.setup.executor)
    check_precision(suite)
    check_output_dir(run.run_dir)
    plan = suite.plan(dry=True)
    data_problem = None
    found: dict[str, str] = {}
    skipped: dict[str, str] = {}
    try:  # the data may not be there yet: a dry run lists what it can
        plan, skipped = evaluable_plan(suite, plan, dry=True)
        found = degenerate_jobs(suite, plan, dry=True)
    except PPGBenchError as exc:
        data_problem = str(exc).splitlines()[0]
    if data_problem is None:
        check_folder(run, suite)
    done = {j.job_id for j in plan if read_record_complete(run.run_dir, j.job_id) is not None}
    lines = [describe_plan(plan, done), describe_budget(suite)]
    if found:
        lines.append(describe_degenerate(found))
    if skipped:
        lines.append(describe_skipped(skipped))
    if data_problem is not None:
        checked = " and the run folder's identity was not checked" if (run.run_dir / "run.json").exists() else ""
        lines.append(f"data not readable ({data_problem}): sizes below are assumed{checked}; the real run stops there")
    pending = [j for j in plan if j.job_id not in done and j.job_id not in found]
    model = load_model()
    lines.append(describe_estimate(estimate_plan(suite, pending, run.settings.executor, model,
                                                 read_tree=data_problem is None, threads=run.threads), model))
    return "\n".join(lines)
