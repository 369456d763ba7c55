"""Checks of user inputs made before anything is computed, each refusing in one line (CLI and API alike)."""

from __future__ import annotations

import string
from collections.abc import Iterable
from typing import Any

from ppgbench_pl.errors import ConfigError

#: The placeholders an ``optuna_storage`` template may hold.
STORAGE_FIELDS = ("job_id", "repeat", "work_dir")


def int_list(name: str, value: Any, minimum: int = 0) -> list[int]:
    """``value`` as a list of integers >= ``minimum``; a string, bool, fraction or single number is refused."""
    example = f"{name}=[42, 43]" if "seed" in name else f"{name}=[0, 1]"
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ConfigError(f"{name}={value!r}: must be a list of integers (e.g. {example}), "
                          f"not a {type(value).__name__}")
    out = []
    for item in value:
        integral = isinstance(item, int) or (isinstance(item, float) and item.is_integer())
        if isinstance(item, bool) or not integral:
            raise ConfigError(f"{name}={list(value)!r}: {item!r} is not an integer (e.g. {example})")
        if int(item) < minimum:
            raise ConfigError(f"{name}={list(value)!r}: {int(item)} is negative; {name} must be "
                              f"integers >= {minimum}")
        out.append(int(item))
    return out


def check_storage(url: Any) -> None:
    """An ``optuna_storage`` URL Optuna can open (``journal:<path>`` or SQLAlchemy), checked without connecting."""
    if url is None:
        return
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"optuna_storage={url!r}: give an SQLAlchemy URL (sqlite:///studies.db) or "
                          "journal:<path>")
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(url) if f is not None}
    except ValueError as exc:
        raise ConfigError(f"optuna_storage {url}: {exc}") from None
    unknown = sorted(fields - set(STORAGE_FIELDS))
    if unknown:
        raise ConfigError(f"optuna_storage {url}: unknown placeholder {{{unknown[0]}}} (it may hold "
                          f"{', '.join('{' + f + '}' for f in STORAGE_FIELDS)})")
    if url.startswith("journal:"):
        if not url.removeprefix("journal:").strip():
            raise ConfigError(f"optuna_storage {url}: journal: needs a file path (journal:studies.log)")
        return
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    filled = url.format(job_id="job", repeat=0, work_dir="work")
    try:
        make_url(filled).get_dialect()
    except NoSuchModuleError:
        raise ConfigError(f"optuna_storage {url}: SQLAlchemy has no database dialect "
                          f"'{filled.split(':', 1)[0]}' (e.g. sqlite, postgresql, mysql)") from None
    except ArgumentError:
        raise ConfigError(f"optuna_storage {url}: not a storage URL (expected dialect://..., e.g. "
                          "sqlite:///studies.db or postgresql://user@host/db, or journal:<path>)") from None


def check_accelerator(accelerator: Any) -> None:
    """Refuse a GPU accelerator where none is visible (one line instead of Lightning's traceback)."""
    name = str(accelerator or "auto").lower()
    if name not in ("gpu", "cuda", "mps"):
        return
    import torch

    if name != "mps" and not torch.cuda.is_available():
        raise ConfigError(f"trainer.accelerator {accelerator}: no CUDA GPU is visible on this machine "
                          "(torch.cuda.is_available() is False); use cpu or auto")
    if name == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"trainer.accelerator {accelerator}: Apple MPS is not available on this machine; "
                          "use cpu or auto")
