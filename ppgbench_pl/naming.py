"""A model's default name: its class name in snake case, capitals split only into known acronyms (``tiny_ppg_cnn``)."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

#: Acronyms a run of capitals is split into (longest first wins); anything else stays one word.
ACRONYMS = frozenset({
    "PPG", "ECG", "EEG", "EMG", "EDA", "BVP", "ABP", "HR", "HRV", "PRV", "BP", "IMU", "ACC",
    "CNN", "RNN", "LSTM", "GRU", "MLP", "TCN", "FCN", "DNN", "NN", "GAN", "VAE", "AE", "SSL", "MAE",
    "BERT", "GPT", "UNET", "SE", "FM",
})
#: Words of a class name: capitals before a capitalised word, a (capitalised) word, capitals, or digits.
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


@cache
def _acronyms(run: str) -> tuple[str, ...] | None:
    """``run`` (capitals) as known acronyms, fewest pieces (then the longest last one); None when it is not one."""
    if not run:
        return ()
    splits = [(*head, run[i:]) for i in range(len(run))
              if run[i:] in ACRONYMS and (head := _acronyms(run[:i])) is not None]
    return min(splits, key=len, default=None)


def snake_case(class_name: str) -> str:
    """The snake-case model name of a class name (``TinyPPGCNN`` -> ``tiny_ppg_cnn``); ``model`` if empty."""
    words: list[str] = []
    after_digits = False
    for word in _WORD.findall(class_name):
        glued = bool(words) and (word.isdigit() or (after_digits and len(word) == 1 and word.isupper()))
        if glued:
            words[-1] += word
        elif word.isupper() and len(word) > 1:
            words.extend(_acronyms(word) or [word])
        else:
            words.append(word)
        after_digits = glued and word.isdigit()
    return "_".join(w.lower() for w in words) or "model"


def class_name_of(module: object) -> str:
    """The class name behind a module argument: an instance, a ``class_path`` entry or a dotted path."""
    if isinstance(module, dict):
        module = module.get("class_path", "")
    if isinstance(module, str):
        return module.rpartition(".")[2]
    return type(module).__name__


#: The constant baseline's model name in records and summaries.
BASELINE_MODEL = "constant"


def is_baseline(name: str) -> bool:
    """Whether a summary model name is a constant-baseline row (``constant``, ``constant @64Hz``, ...)."""
    return name == BASELINE_MODEL or name.startswith((f"{BASELINE_MODEL} @", f"{BASELINE_MODEL}/"))


def import_class(path: str) -> Any:
    """The class (or function) a fully qualified ``class_path`` names."""
    import importlib

    module, _, attr = str(path).rpartition(".")
    return getattr(importlib.import_module(module), attr)
