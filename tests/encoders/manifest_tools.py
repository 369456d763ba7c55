"""Helpers that compare an encoder with its manifest (tests/fixtures/encoders/<name>.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch import nn

MANIFEST_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "encoders"


def load_manifest(name: str) -> dict[str, Any]:
    """The manifest of one encoder, e.g. ``load_manifest("papagei_p")``."""
    return json.loads((MANIFEST_DIR / f"{name}.json").read_text())


def manifest_shapes(manifest: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """``{state_dict key: shape}`` as the manifest lists it."""
    return {k: tuple(v["shape"]) for k, v in manifest["state_dict"].items()}


def module_shapes(module: nn.Module) -> dict[str, tuple[int, ...]]:
    """``{state_dict key: shape}`` of a module."""
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def assert_matches_manifest(module: nn.Module, manifest: dict[str, Any]) -> None:
    """Keys and shapes equal the manifest exactly; the error lists the differences."""
    want, have = manifest_shapes(manifest), module_shapes(module)
    missing = sorted(set(want) - set(have))
    extra = sorted(set(have) - set(want))
    wrong = sorted(k for k in set(want) & set(have) if want[k] != have[k])
    assert not (missing or extra or wrong), f"missing={missing[:10]} extra={extra[:10]} wrong_shape={wrong[:10]}"


def parameter_count(module: nn.Module) -> int:
    """Parameters counted once each (shared modules are not double counted)."""
    return sum(p.numel() for p in module.parameters())
