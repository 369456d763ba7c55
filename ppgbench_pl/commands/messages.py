"""One-line user errors of the ``ppgbench`` command: ``fail``, jsonargparse errors on one line, did-you-mean.

Shared by the light front door (:mod:`ppgbench_pl.cli`) and the LightningCLI of ``fit``/``benchmark``
(:mod:`ppgbench_pl.commands.protocol`); it imports nothing heavy, so ``ppgbench list`` stays fast.
"""

from __future__ import annotations

import difflib
import re
import sys
from typing import Any, NoReturn


def did_you_mean(word: str, choices: Any) -> str:
    """`` (did you mean 'x'?)`` when a close match exists, else empty."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


# -- one-line errors ---------------------------------------------------------------------------------
_KEY = re.compile(r"""Parser key ["']([^"']+)["']""")
_CLASS = re.compile(r"""class_path ["']([\w.]+)["']""")
_NOISE = re.compile(r"Expected a <class 'NoneType'>|^Given value|^Subtypes:|^Errors:|Does not validate against any|"
                    r"^Problem with given class_path")
_OPTION = re.compile(r"""Option ["'](\w+)["'] is not accepted|No action for key ["'](?:[\w.]*\.)?(\w+)["']""")


def one_line(message: str) -> str:
    """The cause of a nested jsonargparse error on one line: the key path, then the innermost reason.

    Union alternatives that merely say "not None" are dropped; an unknown option gets a did-you-mean
    from the constructor of the class it was given to.
    """
    raw = [ln for ln in str(message).splitlines() if ln.strip()]
    if not raw:
        return "invalid arguments"
    if raw[0].startswith("Problems parsing config"):  # YAML syntax: the reasons with their line numbers
        text = " ".join(ln.strip() for ln in raw).split(":", 1)[1].strip()
        return "a --config file is not valid YAML: " + re.sub(r'\s*in "<unicode string>",', " at", text)
    if len(raw) == 1:
        return raw[0].strip()
    path: list[str] = []
    classes: list[str] = []
    cause, depth = "", -1
    for line in raw:
        indent = len(line) - len(line.lstrip())
        text = line.strip().removeprefix("- ").strip()
        classes += _CLASS.findall(text)
        keys = _KEY.findall(text)
        if keys:
            path += [k.removeprefix("init_args.") for k in keys if k not in path]
            rest = _KEY.sub("", text).strip(" :")
            if rest and not _NOISE.search(rest) and indent > depth:
                cause, depth = rest, indent
            continue
        if not _NOISE.search(text) and indent > depth:
            cause, depth = text, indent
    cause = cause or raw[0].strip()
    match = _OPTION.search(cause)
    if match and classes:
        cause = cause.rstrip(".") + did_you_mean(match.group(1) or match.group(2), _parameters(classes[-1]))
    where = ".".join(path)
    return f"{where}: {cause}" if where else cause


def _parameters(class_path: str) -> list[str]:
    """Constructor parameter names of a class (empty when it cannot be imported)."""
    import importlib
    import inspect

    module, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
        return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args", "kwargs")]
    except (ImportError, AttributeError, TypeError, ValueError):
        return []


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``ppgbench: error: <message>`` and exit."""
    print(f"ppgbench: error: {message}", file=sys.stderr)
    raise SystemExit(code)
