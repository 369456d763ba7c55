"""``ppgbench list``: every table, filters, JSON for scripts, one-line errors, a light start, true budgets."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

from ppgbench_pl.commands.listing import TABLES, catalog_tables, run_list
from ppgbench_pl.data.registry import TASKS
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.regimes.catalog import FOREST_GRID, INNER_FOLDS, LOGISTIC_CS, REGIMES, RIDGE_ALPHAS

HEAVY = ("torch", "lightning", "sklearn", "optuna", "wandb", "transformers")


def _cli(*args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``ppgbench list ...`` in a fresh interpreter; return the result and the heavy modules it loaded."""
    code = (
        "import sys\n"
        "from ppgbench_pl.cli import main\n"
        "try:\n"
        f"    main(['list', *{list(args)!r}])\n"
        "finally:\n"
        f"    print('MODULES', sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    line = next(x for x in proc.stderr.splitlines() if x.startswith("MODULES"))
    return proc, json.loads(line.removeprefix("MODULES ").replace("'", '"'))


@pytest.mark.parametrize("what", [None, "tasks", "datasets", "regimes", "controls"])
def test_list_imports_nothing_heavy(what: str | None) -> None:
    proc, heavy = _cli(*([what] if what else []))
    assert proc.returncode == 0, proc.stderr
    assert heavy == [], f"ppgbench list {what or ''} imported {heavy}"


def test_json_for_scripts_and_task_fields() -> None:
    proc, _ = _cli("tasks", "--json")
    rows = json.loads(proc.stdout)
    assert [r["name"] for r in rows] == list(TASKS)
    act = next(r for r in rows if r["name"] == "dalia-activity")
    assert act["kind"] == "classification" and act["level"] == "window" and act["tier"] == "primary"
    assert act["n_classes"] == 9 and act["classes"][0] == "transient"
    assert act["regimes"] == ["linear", "rf", "mlp", "finetune"]
    sec = next(r for r in rows if r["name"] == "butppg-sbp")
    assert sec["unit"] == "mmHg" and sec["regimes"] == ["linear", "rf"] and sec["metric"] == "mae"
    overview = json.loads(run_list(None, as_json=True))
    assert set(overview) == set(TABLES)


def test_filters() -> None:
    tasks = catalog_tables(dataset="dalia", tables=("tasks",))["tasks"]
    assert [r["name"] for r in tasks] == ["dalia-hr", "dalia-activity"]
    secondary = json.loads(run_list("tasks", tier="secondary", as_json=True))
    assert sum(r["dataset"] != "synthetic" for r in secondary) == 9
    assert [r["name"] for r in json.loads(run_list("tasks", kind="regression_cls", as_json=True))] == [
        "ecsmp-emotion-reg-cls"]
    assert [r["name"] for r in json.loads(run_list("regimes", tier="secondary", as_json=True))] == [
        "linear", "rf", "linear_frac"]
    text = run_list("tasks", dataset="ppgbp", tier="primary")
    assert "ppgbp-hypertension " in text and "ppgbp-cerebral-infarction" not in text
    assert "7 benchmark tasks (7 primary, 0 secondary)\n" in text + "\n"
    dalia = json.loads(run_list("datasets", dataset="dalia", as_json=True))
    assert len(dalia) == 1 and dalia[0]["native_fs"] == 64 and dalia[0]["page"].startswith("https://")
    # The overview keeps only the tables a filter applies to.
    assert set(json.loads(run_list(None, kind="regression", as_json=True))) == {"tasks"}


def test_text_tables() -> None:
    text = run_list("tasks")
    assert "26 benchmark tasks (17 primary, 9 secondary) + 4 synthetic" in text
    regimes = run_list("regimes")
    assert "48 trials (8 start-up), 25 epochs" in regimes and "ppgbench_pl.regimes.FinetuneRegime" in regimes
    assert "constant" in run_list("controls") and "PublishedPRVEncoder" in run_list("controls")
    overview = run_list()
    for what in ("datasets:", "tasks:", "controls:", "regimes:", "encoders"):
        assert what in overview


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("tasks", "--dataset", "dalai"), "unknown dataset 'dalai'; did you mean dalia?"),
        (("encoders", "--tier", "primary"), "--tier does not filter encoders"),
        (("datasets", "--kind", "regression"), "--kind does not filter datasets"),
        (("taks",), "cannot list 'taks': choose from datasets, tasks, encoders, controls, regimes; "
                    "did you mean 'tasks'?"),
    ],
)
def test_errors_are_one_line(args: tuple[str, ...], message: str) -> None:
    proc, _ = _cli(*args)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_unknown_table_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="did you mean 'tasks'"):
        run_list("taks")


def test_encoders_listed_with_their_facts() -> None:
    proc, heavy = _cli("encoders", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert heavy == []
    by_name = {r["name"]: r for r in rows}
    assert {"papagei_s", "pulseppg", "prv_neurokit2", "moment_small", "small_cnn", "custom"} <= set(by_name)
    papagei = by_name["papagei_s"]
    assert papagei["native_fs"] == 125 and papagei["embedding_dim"] == 512 and papagei["parameters"] > 0
    assert papagei["checkpoint_required"] is True and papagei["weights"] and not papagei["control"]
    assert by_name["prv_neurokit2"]["checkpoint_required"] is False and by_name["prv_neurokit2"]["control"] is True
    text = run_list("encoders")
    assert "\nweights:\n" in text and "5,785,612" in text and "https://zenodo.org/records/13983110" in text


# -- the regime catalog against the real classes -----------------------------------------------------------

def _resolve(class_path: str) -> type:
    module, _, name = class_path.rpartition(".")
    return getattr(__import__(module, fromlist=[name]), name)  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", list(REGIMES))
def test_regime_catalog_matches_the_classes(name: str) -> None:
    entry = REGIMES[name]
    cls = _resolve(entry.class_path)
    assert tuple(cls.tiers) == entry.tiers
    assert cls.uses_embeddings == entry.uses_embeddings
    assert cls.name == entry.name or name == "linear_frac"
    if "n_trials" in entry.budget:
        search = cls().search  # the resolved SearchSettings of a default instance
        got = {k: getattr(search, k) for k in entry.budget}
        assert got == entry.budget
    defaults = {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items()}
    if name == "rf":
        assert {k: tuple(defaults[k]) for k in FOREST_GRID} == FOREST_GRID
    if name == "linear_frac":
        assert defaults["fraction"] == entry.budget["fraction"]


def test_linear_grid_and_inner_folds_match_the_code() -> None:
    from ppgbench_pl.datamodules import PPGDataModule
    from ppgbench_pl.probes import linear

    assert linear.RIDGE_ALPHAS == RIDGE_ALPHAS and linear.LOGISTIC_CS == LOGISTIC_CS
    assert inspect.signature(PPGDataModule.__init__).parameters["n_inner_folds"].default == INNER_FOLDS


def test_controls_are_the_reports_controls() -> None:
    from ppgbench_pl.commands.listing import control_rows
    from ppgbench_pl.report.load import CONTROL_MODELS

    controls = control_rows()
    assert {c["name"] for c in controls} == set(CONTROL_MODELS)
    for c in controls:
        if c["class_path"]:
            assert _resolve(c["class_path"]).name == c["name"]
