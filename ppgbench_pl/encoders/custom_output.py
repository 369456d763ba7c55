"""A user's module output as embeddings ``[B, D]``, and its errors as one line (for :mod:`.custom`)."""

from __future__ import annotations

from typing import Any

from torch import Tensor


def reduce_output(out: Any, pooling: str, batch: int) -> Tensor:
    """Reduce a module's output to ``[batch, D]``: element 0 of a tuple/list, then ``pooling`` (last axis).

    Raises:
        ValueError: The output is no tensor, or cannot become ``[batch, D]`` under ``pooling``.

    """
    if isinstance(out, (tuple, list)):
        if not out:
            raise ValueError(f"the module returned an empty {type(out).__name__}")
        out = out[0]
    if not isinstance(out, Tensor):
        raise ValueError(f"the module returned {type(out).__name__}, expected a tensor or a tuple")
    if pooling != "none":
        if out.ndim != 3:
            raise ValueError(f"pooling: {pooling} expects a [B, C, T] output, the module returned "
                             f"{list(out.shape)}")
        out = out.mean(dim=-1) if pooling == "mean" else out.amax(dim=-1)
    if out.ndim != 2 or out.shape[0] != batch:
        raise ValueError(f"expected embeddings [B, D] for a batch of {batch}, the module returned "
                         f"{list(out.shape)}")
    return out


def shape_hint(input_shape: str) -> str:
    """What to change when a module refuses the input shape it was given."""
    other = "BT" if input_shape == "BCT" else "BCT"
    return f"input_shape: {input_shape}; a module that wants {'[B, T]' if other == 'BT' else '[B, 1, T]'} " \
           f"needs input_shape: {other}, a [B, C, T] output needs pooling: mean or max"


def one_line(exc: BaseException, limit: int = 200) -> str:
    """An exception from a user's module as one short line."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
