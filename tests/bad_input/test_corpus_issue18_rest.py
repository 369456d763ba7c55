"""The bad-input corpus, issue 18 (the rest): one line always, stuck locks, tasks that cannot run, raw rates.

The rules and the tiny suite are those of :mod:`tests.bad_input.test_corpus` (``check``: the exit status,
at most two stderr lines, no traceback, the expected line on stderr).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.bad_input.test_corpus import base, check, fit  # noqa: F401 - base: fixture

# -- 5. one line, always: the bad value and the accepted ones ---------------------------------------------
#: (extra arguments, stderr regex); each runs into a fresh output folder that must stay absent.
ONE_LINE: dict[str, tuple[list[str], str]] = {
    "precision_bogus": (["--trainer.precision", "bogus"],
                        r"^ppgbench: error: trainer\.precision: 'bogus' is not an accepted value \(choices: 64, 32, "
                        r"16, transformer-engine, .*bf16-mixed, 32-true, 64-true, bf16\)$"),
    "precision_typo": (["--trainer.precision", "bf16-mixd"],
                       r"trainer\.precision: 'bf16-mixd' is not an accepted value \(choices: .*\); did you mean "
                       r"'bf16-mixed'\?$"),
    "encoder_bare_unknown": (["--model.init_args.encoder", "papagei_x"],
                             r"^ppgbench: error: model\.encoder: 'papagei_x' is neither a class path nor a registered "
                             r"encoder name \(registered: papagei_p, papagei_s, .*small_cnn\); did you mean "
                             r"'papagei_s' \(ppgbench_pl\.encoders\.papagei\.PaPaGeiSEncoder\)\?$"),
    "encoder_bare_registered": (["--model.init_args.encoder", "small_cnn"],
                                r"^ppgbench: error: model\.encoder: 'small_cnn' is a registered encoder name; give its "
                                r"class path ppgbench_pl\.encoders\.cnn\.SmallCNNEncoder$"),
}


@pytest.mark.parametrize("case", list(ONE_LINE))
def test_one_line_names_the_value_and_the_accepted_ones(base, tmp_path, capsys, case):  # noqa: F811
    args, pattern = ONE_LINE[case]
    out = tmp_path / "new_run"
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out), *args), 2, pattern)
    assert not out.exists()


#: API regimes refused in one line naming the regime and the bad setting (a ConfigError, no argparse nesting).
API_REGIMES: dict[str, tuple[Any, str]] = {
    "unknown_key": (("linear", {"nonsense": 1}),
                    r"^regime linear \(ppgbench_pl\.regimes\.LinearRegime\): 'nonsense' is not one of its settings "
                    r"\(accepted: binary_metric, single_class\)$"),
    "typo_key": (("linear", {"binary_metrik": "auroc"}), r"'binary_metrik' is not one of its settings \(accepted: "
                                                        r"binary_metric, single_class\); did you mean 'binary_metric'\?$"),
    "nested_key": (("mlp", {"search": {"n_trialz": 3}}),
                   r"^regime mlp \(ppgbench_pl\.regimes\.MLPRegime\): search: Option 'n_trialz' is not accepted; did "
                   r"you mean 'n_trials'\?$"),
    "bad_type": (("mlp", {"search": {"n_trials": "x"}}),
                 r"^regime mlp \(ppgbench_pl\.regimes\.MLPRegime\): search\.n_trials: Expected a <class 'int'>"),
}


@pytest.mark.parametrize("case", list(API_REGIMES))
def test_api_regime_settings_refused_in_one_line(base, tmp_path, case):  # noqa: F811
    import ppgbench_pl as pb
    from ppgbench_pl.errors import ConfigError

    regime, pattern = API_REGIMES[case]
    out = tmp_path / "run"
    with pytest.raises(ConfigError) as info:
        pb.evaluate("small_cnn", dataset="synthetic", tasks=["synthetic-hr"], controls=(), output_dir=out,
                    root=str(base["root"]), synthetic_subjects=10, synthetic_windows=4, progress=False, seeds=[42],
                    folds=[0], regimes=[regime])
    message = str(info.value)
    assert re.search(pattern, message) and "\n" not in message, message
    assert not out.exists()
