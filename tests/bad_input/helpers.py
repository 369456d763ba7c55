"""Modules and regimes the corpus points configs at (importable by class path)."""

from __future__ import annotations

import os
import signal
import time

import torch
from torch import Tensor, nn

from ppgbench_pl.regimes.base import JobContext, RepeatOutcome
from ppgbench_pl.regimes.linear import LinearRegime


class FlatNet(nn.Module):
    """Takes ``[B, T]`` (a linear layer over time): given ``[B, 1, T]`` it returns ``[B, 1, dim]``."""

    def __init__(self, length: int = 640, dim: int = 4) -> None:
        super().__init__()
        self.fc = nn.Linear(length, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(x)


class NaNNet(nn.Module):
    """Returns NaN embeddings ``[B, 3]``."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x: Tensor) -> Tensor:
        return torch.full((x.shape[0], 3), float("nan")) * self.scale


class SignalsItself(LinearRegime):
    """The linear probe that sends ``signum`` to its own process first (Ctrl-C, a cluster's SIGTERM)."""

    name = "linear_signals_itself"

    def __init__(self, signum: int = int(signal.SIGINT)) -> None:
        super().__init__()
        self.signum = signum

    def run(self, ctx: JobContext) -> list[RepeatOutcome]:
        os.kill(os.getpid(), self.signum)
        time.sleep(5)  # the handler raises in here
        return super().run(ctx)
