"""``base: base.yaml`` atop a YAML config: ``--config FILE`` becomes ``--config BASE --config FILE``, bases first."""

from __future__ import annotations

from pathlib import Path

import yaml

from ppgbench_pl.commands import flag_values
from ppgbench_pl.errors import ConfigError

BASE_KEY = "base"


def chain(path: Path, seen: tuple[Path, ...] = ()) -> list[tuple[Path, dict | None]]:
    """The files a config stacks on, base first: (path, its content without ``base``, or None if it has none)."""
    text = path.read_text()
    try:
        content = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError:
        return [(path, None)]  # not YAML: the parser reports it in its own words
    if not isinstance(content, dict) or BASE_KEY not in content:
        return [(path, None)]
    base = content.pop(BASE_KEY)
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{path}: 'base' must name a YAML file (relative to {path.parent}), got {base!r}")
    base_path = (path.parent / base).resolve()
    if base_path in seen or base_path == path.resolve():
        raise ConfigError(f"{path}: base {base} is already in the chain of bases ({' -> '.join(map(str, seen))})")
    if not base_path.is_file():
        raise ConfigError(f"{path}: base {base}: no such file ({base_path})")
    return [*chain(base_path, (*seen, path.resolve())), (path, content)]


def expand_bases(argv: list[str]) -> list[str]:
    """``argv`` with each ``--config FILE`` that names a base preceded by its bases; refuses a missing file."""
    out = list(argv)
    for index, value, joined in reversed(flag_values(argv, "--config")):
        path = Path(value)
        if value.lstrip().startswith(("{", "[")) or "\n" in value:
            continue  # an inline YAML/JSON config
        if not path.is_file():
            what = "is a folder, not a YAML file" if path.is_dir() else "no such file"
            raise ConfigError(f"--config {value}: {what}")
        files = chain(path)
        if len(files) == 1:
            continue
        args: list[str] = []
        for file, content in files:
            args += ["--config", str(file) if content is None else yaml.safe_dump(content, sort_keys=False)]
        start = index if joined else index - 1
        out[start:index + 1] = args
    return out
