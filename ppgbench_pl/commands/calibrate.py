"""``ppgbench calibrate``: measure this machine's rates once (``--config``: its encoders' throughput too)."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from ppgbench_pl.errors import ConfigError


def add_calibrate_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``calibrate``."""
    parser = sub.add_parser("calibrate", help="Measure this machine's rates (for --dry-run estimates).")
    parser.add_argument("--config", action="append", default=[],
                        help="A fit/benchmark config (repeat to stack, as for fit): measure its encoders too.")
    parser.add_argument("--force", action="store_true", help="Measure again although this machine has a calibration.")
    parser.add_argument("--show", action="store_true", help="Print the stored calibration and exit.")
    parser.add_argument("--json", action="store_true", help="Print the calibration as JSON.")
    parser.set_defaults(func=run_calibrate)


def describe(model: Any, path: Any) -> str:
    """The calibration in a few lines."""
    from ppgbench_pl.benchmark.cost_model import RATES

    lines = [f"calibration of {model.machine} ({model.created}, {model.seconds:g} s, 1 thread, {model.device}): "
             f"{path}", f"  start-up  {model.startup_s:.2f} s CPU per process (importing the engine)"]
    lines += [f"  {kind:<9} {model.rates.get(kind, default):.3g} s per unit"
              + ("" if kind in model.rates else " (default: not measured)") for kind, default in RATES.items()]
    lines += [f"  encoder {e['name']}: {e['inference_per_s']:.0f} windows/s inference, {e['training_per_s']:.0f} "
              f"training ({e['training']}), {e['embed_dim']}-d, {e['device']}" for e in model.encoders.values()]
    return "\n".join(lines)


def run_calibrate(ns: argparse.Namespace) -> None:
    """Show, or measure and store, this machine's calibration."""
    from ppgbench_pl.benchmark.cost_model import calibration_path, load_model, save_model

    stored = load_model()
    if ns.show or (stored.calibrated and not ns.force and not ns.config):
        if not stored.calibrated:
            print(f"no calibration for this machine ({calibration_path()}); run `ppgbench calibrate`", file=sys.stderr)
            raise SystemExit(1)
        print(json.dumps(stored.to_json(), indent=1) if ns.json else describe(stored, calibration_path(
            stored.machine)) + ("" if ns.show else "\n(already calibrated; --force measures again)"))
        return
    from ppgbench_pl.benchmark import calibrate  # the engine: imported only to measure
    from ppgbench_pl.benchmark.console import quiet_lightning
    from ppgbench_pl.benchmark.protocol_cli import parse_setup
    from ppgbench_pl.commands.config_bases import expand_bases

    suite = None
    if ns.config:  # the stacked fit configs, parsed as ``ppgbench fit`` parses them (nothing run, no encoder built)
        for name in ns.config:
            if not Path(name).is_file():
                raise ConfigError(f"--config {name}: no such file")
        quiet_lightning()
        warnings.filterwarnings("ignore", message=".*LightningCLI's args parameter.*")
        suite = parse_setup(expand_bases([arg for f in ns.config for arg in ("--config", f)])).suite
    encoders = list(suite.encoder_configs) if suite else []
    trainer = dict(suite.trainer_kwargs) if suite else {}
    window_s = next(iter(suite.datamodules.values())).info.window_s if suite else 10.0
    print("calibrating: a short measured run of each regime and encoder (about a minute) ...", file=sys.stderr)
    if stored.calibrated and not ns.force:  # only the config's encoders are new
        model = calibrate.measure_listed(stored, encoders, trainer, window_s)
    else:
        model = calibrate.calibrate(encoders, trainer, window_s=window_s)
        model.encoders = {**(stored.encoders if stored.calibrated else {}), **model.encoders}
    written = save_model(model)
    print(json.dumps(model.to_json(), indent=1) if ns.json else describe(model, written))
