"""``--dry-run`` (CLI) and ``pb.evaluate(..., dry_run=True)``: the plan, what it would cost, nothing written.

The real run's checks of the settings and the run folder, in its order and through the same functions, so a
folder the real run refuses is refused with the same line; then the plan, the budget, what cannot be evaluated,
and the estimate of the jobs still to run (:mod:`.estimate`).
"""

from __future__ import annotations

from typing import Any

from ppgbench_pl.errors import PPGBenchError


def dry_run_text(run: Any) -> str:
    """What ``BenchmarkRun.dry_run`` prints (see the module docstring); a refusal raises its ConfigError."""
    from ppgbench_pl.benchmark import preflight
    from ppgbench_pl.benchmark.budget import describe_budget
    from ppgbench_pl.benchmark.cost_model import load_model
    from ppgbench_pl.benchmark.estimate import describe_estimate, estimate_plan
    from ppgbench_pl.benchmark.identity import check_identity, package_versions, suite_identity
    from ppgbench_pl.benchmark.plan import describe_plan
    from ppgbench_pl.results.folder_sync import read_record_complete

    suite = run.suite()
    preflight.check_strategy(suite, run.setup.executor)
    preflight.check_precision(suite)
    preflight.check_output_dir(run.run_dir)
    plan = suite.plan(dry=True)
    data_problem: str | None = None
    found: dict[str, str] = {}
    skipped: dict[str, str] = {}
    try:  # the data may not be there yet: a dry run lists what it can
        plan, skipped = preflight.evaluable_plan(suite, plan, dry=True)
        found = preflight.degenerate_jobs(suite, plan, dry=True)
    except PPGBenchError as exc:
        data_problem = str(exc).splitlines()[0]
    has_run_json = (run.run_dir / "run.json").exists()
    if data_problem is None and has_run_json:  # the identity needs the data and the built encoders
        check_identity(run.run_dir, suite_identity(suite), {"versions": package_versions()},
                       allow_code_change=run.settings.allow_code_change)
    done = {j.job_id for j in plan if read_record_complete(run.run_dir, j.job_id) is not None}
    lines = [describe_plan(plan, done), describe_budget(suite)]
    if found:
        lines.append(preflight.describe_degenerate(found))
    if skipped:
        lines.append(preflight.describe_skipped(skipped))
    if data_problem is not None:
        checked = " and the run folder's identity was not checked" if has_run_json else ""
        lines.append(f"data not readable ({data_problem}): sizes below are assumed{checked}; the real run stops there")
    pending = [j for j in plan if j.job_id not in done and j.job_id not in found]
    model = load_model()
    lines.append(describe_estimate(estimate_plan(suite, pending, run.settings.executor, model,
                                                 read_tree=data_problem is None, threads=run.threads), model))
    return "\n".join(lines)
