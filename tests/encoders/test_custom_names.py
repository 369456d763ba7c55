"""A custom encoder may not take a name ppgbench already gives a meaning (it would take that card and role)."""

from __future__ import annotations

import pytest
import torch

from ppgbench_pl.encoders.custom import CustomEncoder
from ppgbench_pl.errors import ConfigError


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(10, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x[:, :10])


@pytest.mark.parametrize("name", ["prv_published", "prv_neurokit2", "prv", "moment_small", "papagei_p", "constant",
                                  "constant @64Hz"])
def test_a_taken_name_is_refused_in_one_line(name):
    with pytest.raises(ConfigError, match=rf"^name '{name}' is taken by .*give your model its own name$"):
        CustomEncoder(module=_Net(), name=name, random_init=True, sampling_rate=64, input_shape="BT")


def test_an_own_name_is_accepted():
    assert CustomEncoder(module=_Net(), name="my_net", random_init=True, sampling_rate=64,
                         input_shape="BT").name == "my_net (random init)"
