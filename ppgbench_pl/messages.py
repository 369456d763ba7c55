"""One-line user errors of the ``ppgbench`` command and its LightningCLI: ``fail``, did-you-mean, jsonargparse's."""

from __future__ import annotations

import difflib
import re
import sys
from typing import Any, NoReturn


def did_you_mean(word: str, choices: Any) -> str:
    """`` (did you mean 'x'?)`` when a close match exists, else empty."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


_KEY = re.compile(r"""Parser key ["']([^"']+)["']""")
_CLASS = re.compile(r"""class_path ["']([\w.]+)["']""")
_NOISE = re.compile(r"Expected a <class 'NoneType'>|^Given value|^Subtypes:|^Errors:|Does not validate against any|"
                    r"^Problem with given class_path")
_OPTION = re.compile(r"""Option ["'](\w+)["'] is not accepted|No action for key ["'](?:[\w.]*\.)?(\w+)["']""")


def one_line(message: str) -> str:
    """A nested jsonargparse error on one line: the key path, the innermost reason, a did-you-mean for an option."""
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
        path += [k.removeprefix("init_args.") for k in keys if k not in path]
        rest = _KEY.sub("", text).strip(" :") if keys else text  # a key line without a reason names no cause
        if (rest or not keys) and not _NOISE.search(rest) and indent > depth:
            cause, depth = rest, indent
    cause = _choices(raw) or _bare_class_name(cause, path) or cause or raw[0].strip()
    match = _OPTION.search(cause)
    if match and classes:
        cause = cause.rstrip(".") + did_you_mean(match.group(1) or match.group(2), _parameters(classes[-1]))
    where = ".".join(path)
    return f"{where}: {cause}" if where else cause


_LITERAL = re.compile(r"typing\.Literal\[([^\]]*)\]")
_SUBTYPES = re.compile(r"^\s*Subtypes: \[(.*)\]\s*$")
_GIVEN = re.compile(r"^\s*Given value: (.*)$")
_NOT_A_PATH = re.compile(r"Expected a (?:dot import path string|path but) ?:? ?([^\s.]+?)(?: either|$)")


def _choices(raw: list[str]) -> str:
    """``'bogus' is not an accepted value (choices: ...)`` for a union of Literals (``trainer.precision``)."""
    subtypes = next((m.group(1) for ln in raw if (m := _SUBTYPES.match(ln))), None)
    given = next((m.group(1).strip() for ln in raw if (m := _GIVEN.match(ln))), None)
    if subtypes is None or given is None:
        return ""
    literals = _LITERAL.findall(subtypes)
    others = _LITERAL.sub("", subtypes).replace("<class 'NoneType'>", "").strip(" ,")
    choices = list(dict.fromkeys(item.strip().strip("'\"") for group in literals for item in group.split(",")))
    if not literals or others or given in choices:  # another kind of value could be meant: the innermost reason
        return ""
    return f"'{given}' is not an accepted value (choices: {', '.join(choices)}){did_you_mean(given, choices)}"


def _bare_class_name(cause: str, path: list[str]) -> str:
    """A bare name where a class path is expected; for an encoder, the registered names and the closest."""
    match = _NOT_A_PATH.search(cause)
    if not match:
        return ""
    word = match.group(1)
    if not any(key.split(".")[-1] in ("encoder", "encoders", "controls") for key in path):
        return f"'{word}' is not a class path (give module.Class, e.g. ppgbench_pl.regimes.LinearRegime)"
    from ppgbench_pl.encoders.catalog import CATALOG, REGISTERED  # a static table: no torch

    if word in CATALOG:
        return f"'{word}' is a registered encoder name; give its class path {CATALOG[word].class_path}"
    close = difflib.get_close_matches(word, REGISTERED, n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}' ({CATALOG[close[0]].class_path})?" if close else ""
    return (f"'{word}' is neither a class path nor a registered encoder name (registered: {', '.join(REGISTERED)})"
            f"{hint}")


def _parameters(class_path: str) -> list[str]:
    """Constructor parameter names of a class (empty when it cannot be imported)."""
    import inspect

    from ppgbench_pl.naming import import_class

    try:
        cls = import_class(class_path)
        return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args", "kwargs")]
    except (ImportError, AttributeError, TypeError, ValueError):
        return []


_FLAG = re.compile(r"(?<![\w-])(--[A-Za-z][\w.-]*)")


def unknown_flags(message: str, known: Any) -> str:
    """``unrecognized arguments: --outptu_dir x`` with a did-you-mean per unknown flag (from ``known`` flags)."""
    if not message.startswith("unrecognized arguments:"):
        return message
    hints = [f"{flag}{did_you_mean(flag, known)}" for flag in _FLAG.findall(message)]
    suggested = [h for h in hints if "did you mean" in h]
    if not suggested:
        return message
    return f"{message}; " + "; ".join(suggested).replace("; did you mean", ": did you mean")


def flags_in_help(text: str) -> set[str]:
    """The option flags a ``--help`` text lists."""
    return set(_FLAG.findall(text))


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``ppgbench: error: <message>`` and exit."""
    print(f"ppgbench: error: {message}", file=sys.stderr)
    raise SystemExit(code)
