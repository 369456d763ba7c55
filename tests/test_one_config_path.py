"""One config path: LightningCLI parses and builds the run's objects once; nothing rebuilds them from dicts.

A traced ``ppgbench fit`` of an MLP regime under the smoke budget: the regime is constructed once, the search
budget ``n_trials`` is validated in one function (``SearchSettings.resolved``), and a worker in another process
rebuilds the suite with the CLI's own parser from the resolved config.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

from ppgbench_pl.errors import ConfigError
from ppgbench_pl.regimes.mlp import MLPRegime
from tests.benchmark.helpers import CNN, records, run, suite_config, write_config

ROOT = Path(__file__).resolve().parents[1]
MLP = {"class_path": "ppgbench_pl.regimes.mlp.MLPRegime"}
SMOKE = str(ROOT / "configs" / "budget" / "smoke.yaml")


def _validates_n_trials(code) -> bool:
    """A function that raises ConfigError and names ``n_trials`` (a name, or a string constant) validates it."""
    strings = {c for c in code.co_consts if isinstance(c, str)}
    names = set(code.co_names) | set(code.co_varnames)
    mentions = "n_trials" in names or any(s == "n_trials" or "n_trials=" in s for s in strings)
    return mentions and "ConfigError" in names


def test_a_traced_mlp_fit_builds_its_regime_once_and_validates_n_trials_in_one_function(tmp_path, engine_root):
    config = suite_config(engine_root, tmp_path / "run", encoders=[CNN], regimes=[MLP], tasks=["synthetic-hr"],
                          folds=[0])
    path = write_config(tmp_path / "mlp.yaml", config)
    built: Counter[str] = Counter()
    called: set = set()
    package = str(ROOT / "ppgbench_pl")

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(package):
            called.add(frame.f_code)
            if frame.f_code is MLPRegime.__init__.__code__ and frame.f_back.f_code.co_name != "_published_settings":
                built[type(frame.f_locals["self"]).__name__] += 1

    sys.setprofile(profile)
    try:
        code = run(["--config", str(path), "--config", SMOKE, "--data.init_args.max_subjects", "null",
                    "--data.init_args.max_windows_per_subject", "null"], "fit")
    finally:
        sys.setprofile(None)
    assert code == 0
    (record,) = records(tmp_path / "run").values()
    assert record["status"] == "ok" and record["budget"] == "smoke"
    # LightningCLI built it; the budget capped it; every job ran on it (the class's published defaults, which
    # ``deviations`` compares with, come from one default instance per class, not counted)
    assert built == {"MLPRegime": 1}
    validators = sorted(f"{c.co_filename.removeprefix(package)}:{c.co_qualname}" for c in called
                        if _validates_n_trials(c))
    assert validators == ["/hpo/optuna_search.py:SearchSettings.resolved"], validators
    for gone in ("spec", "entries"):  # the second config path (dicts rewritten, then parsed again)
        assert importlib.util.find_spec(f"ppgbench_pl.benchmark.{gone}") is None


def test_a_bad_n_trials_is_refused_by_that_one_function(tmp_path, engine_root, capsys):
    config = suite_config(engine_root, tmp_path / "run", regimes=[{**MLP, "init_args": {"search": {"n_trials": 0}}}])
    code = run(["--config", str(write_config(tmp_path / "bad.yaml", config))], "fit")
    assert code == 2
    assert "search: n_trials=0; counts must be >= 1" in capsys.readouterr().err
    try:
        MLPRegime(search={"n_trials": 0})
    except ConfigError as exc:
        assert "n_trials=0" in str(exc)
    else:
        raise AssertionError("n_trials=0 was accepted")


def test_a_worker_rebuilds_the_suite_with_the_clis_parser(tmp_path, engine_root):
    from ppgbench_pl.benchmark.protocol_cli import parse_setup, suite_of_resolved

    config = suite_config(engine_root, tmp_path / "run", regimes=[MLP], tasks=["synthetic-hr"], folds=[0])
    setup = parse_setup(config)
    assert setup.parse == "ppgbench_pl.benchmark.protocol_cli.suite_of_resolved" and setup.resolved is not None
    rebuilt = suite_of_resolved(setup.resolved)
    assert [r.settings() for r in rebuilt.regimes] == [r.settings() for r in setup.suite.regimes]
    assert rebuilt.encoder_entries == setup.suite.encoder_entries
    assert [j.job_id for j in rebuilt.plan(dry=True)] == [j.job_id for j in setup.suite.plan(dry=True)]
    assert json.loads(setup.resolved)["output_dir"] == str(tmp_path / "run")
