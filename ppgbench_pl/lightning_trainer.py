"""Every trainer is built here, so a precision Lightning would silently replace (16-mixed on CPU) is refused."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ppgbench_pl.errors import ConfigError

if TYPE_CHECKING:
    import lightning as L

def normalise_precision(value: Any) -> str:
    """Lightning's precision spellings to one canonical string (``32`` and ``32-true`` are one setting)."""
    text = str(value)
    return {"32": "32-true", "16": "16-mixed", "bf16": "bf16-mixed", "64": "64-true"}.get(text, text)


def precision_refusal(asked: Any, ran: str, device: str) -> str:
    """The one line for a precision Lightning would not run as asked."""
    hint = "; fp16 mixed precision needs CUDA: ask for bf16-mixed or 32-true" \
        if normalise_precision(asked) == "16-mixed" else ""
    return f"trainer.precision {normalise_precision(asked)}: Lightning would run {ran} on {device}{hint}"


def build_trainer(**kwargs: Any) -> L.Trainer:
    """``lightning.Trainer(**kwargs)``, refused when it would not run the precision asked for."""
    import lightning as L

    trainer = L.Trainer(**kwargs)
    asked = kwargs.get("precision")
    if asked is not None and normalise_precision(asked) != trainer.precision:
        raise ConfigError(precision_refusal(asked, str(trainer.precision), trainer.strategy.root_device.type))
    return trainer
