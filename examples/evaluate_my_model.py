"""Evaluate your own PPG model from Python: a small nn.Module, two regimes, a report.

Runs in about a minute on 2 CPU cores: the built-in synthetic dataset, two of its tasks, 1 seed x 2 outer
folds, a 4-trial MLP search of 3 epochs. For the published protocol drop the budget arguments (every task,
5 seeds x 5 folds, the published PRV control, 48 trials of up to 25 epochs) and give a real dataset
(``ppgbench list datasets``).

    python examples/evaluate_my_model.py                   # results/example, report in results/example/report
    python examples/evaluate_my_model.py --output /tmp/ex  # somewhere else (or PPGBENCH_EXAMPLE_OUTPUT=...)
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
from torch import nn

import ppgbench_pl as pb


class MyPPGNet(nn.Module):
    """Stand-in for your network: windows [B, 1, T] -> embeddings [B, 32]."""

    def __init__(self, width: int = 32) -> None:  # noqa: D107
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 16, kernel_size=7, stride=2, padding=3), nn.GELU(),
            nn.Conv1d(16, width, kernel_size=5, stride=2, padding=2), nn.GELU(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Pool a two-layer conv feature map over time."""
        return self.features(x).mean(dim=-1)


def main() -> None:
    """Evaluate the model, print the summary and the MLP's chosen hyperparameters, write the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path,
                        default=Path(os.environ.get("PPGBENCH_EXAMPLE_OUTPUT", "results/example")),
                        help="run folder (the report goes to <output>/report, the data to <output>/data)")
    args = parser.parse_args()

    torch.manual_seed(0)  # a fixed random init: a rerun resumes instead of starting over
    model = MyPPGNet()  # load your trained weights here: model.load_state_dict(torch.load(...))
    results = pb.evaluate(
        model, sampling_rate=64, name="my_ppg_net",       # the rate your model was trained at
        dataset="synthetic", tasks=["synthetic-hr", "synthetic-activity"],
        regimes=["linear", ("mlp", {"search": {"n_trials": 4, "n_startup_trials": 2, "max_epochs": 3},
                                    "standardize_targets": True})],  # z-scored HR: 3 epochs can fit it
        seeds=[42], folds=[0, 1],                          # published: 5 seeds x 5 folds (the default)
        controls=(),                                       # published: the PRV control (the default)
        encoder_args={"normalize": "window_zscore"},       # CustomEncoder settings: pooling, input_shape, ...
        output_dir=args.output, root=str(args.output / "data"), accelerator="cpu", devices=1,
    )
    columns = ["model", "task", "regime", "metric", "mean", "n_folds"]  # 95 % CIs need more than one seed
    print(results.summary[columns].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    mlp = results.jobs[results.jobs["regime"] == "mlp"]
    print(mlp[["task", "fold", "value", "params"]].head().to_string(index=False))
    print(f"report: {results.report(args.output / 'report')}")


if __name__ == "__main__":
    main()
