"""No private name of torch, optuna, scipy, scikit-learn or Lightning is used in ppgbench_pl (they change silently).

The one exception is the idiom everyone shares: isinstance checks against torch's ``_BatchNorm`` and
``_DropoutNd`` base classes. The scan reads every module's AST: private modules or names imported from
those packages, attribute chains rooted at a name bound to them with a private component, and private
attributes that their objects are known to carry (``study._storage``, ``module._trainer``, ...).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ppgbench_pl"
THIRD_PARTY = ("torch", "optuna", "scipy", "sklearn", "lightning", "optuna_integration", "torchmetrics")
ALLOWED = {"_BatchNorm", "_DropoutNd"}
#: Private attributes of third-party objects that a scan by name cannot root at an import.
KNOWN_PRIVATE = {"_storage", "_study_id", "_trial_id", "_trainer", "_fused_adamw_", "_cached_frozen_trial"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__")) and name not in ALLOWED


def _third_party(module: str | None) -> bool:
    return bool(module) and module.split(".")[0] in THIRD_PARTY


def private_uses(source: str) -> list[str]:
    """``line: what`` for every private third-party name used in ``source``."""
    tree = ast.parse(source)
    bound: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _third_party(alias.name):
                    bound.add((alias.asname or alias.name).split(".")[0])
                    if any(_private(p) for p in alias.name.split(".")):
                        found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and _third_party(node.module):
            if any(_private(p) for p in (node.module or "").split(".")):
                found.append(f"{node.lineno}: from {node.module} import ...")
            for alias in node.names:
                bound.add(alias.asname or alias.name)
                if _private(alias.name):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        if node.attr in KNOWN_PRIVATE:
            found.append(f"{node.lineno}: .{node.attr}")
            continue
        chain, root = [node.attr], node.value
        while isinstance(root, ast.Attribute):
            chain.append(root.attr)
            root = root.value
        if isinstance(root, ast.Name) and root.id in bound and _private(node.attr):
            found.append(f"{node.lineno}: {root.id}.{'.'.join(reversed(chain))}")
    return found


def test_scanner_finds_what_it_must_and_allows_the_batchnorm_idiom():
    bad = ("import torch\nfrom torch import nn\nimport optuna.storages._rdb\nfrom scipy.optimize import _dcsrch\n"
           "torch._fused_adamw_(1)\nstudy._storage.get_trial(t._trial_id)\nnn.modules.batchnorm._BatchNorm\n"
           "x = self._own_thing\n")
    found = private_uses(bad)
    assert sorted(int(f.split(":")[0]) for f in found) == [3, 4, 5, 6, 6], found
    assert not any("_BatchNorm" in f or "_own_thing" in f for f in found)


def test_no_private_third_party_name_in_the_package():
    problems = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        uses = private_uses(path.read_text())
        if uses:
            problems[str(path.relative_to(PACKAGE))] = uses
    assert not problems, problems
