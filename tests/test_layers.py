"""Imports point down the layers of docs/architecture.md, never up (the one exception: ``cli.py``'s lazy entry
points, which are the top). Every module is placed in exactly one layer; a new top-level module or package must
be placed here, so the table and the code cannot drift apart."""

from __future__ import annotations

import pytest

from tests.test_architecture import import_graph

#: Layer -> packages or modules (relative to ``ppgbench_pl``); the most specific entry wins.
LAYERS: dict[int, tuple[str, ...]] = {
    # plain foundations: errors, files, names, scores, splitters, card vocabulary (numpy/scipy/sklearn at most)
    0: ("", "errors", "atomic_io", "locks", "limits", "lazy", "naming", "input_checks", "metrics", "data.splits",
        "cards.types", "cards.vocabulary", "cards.declaration", "cards.bibtex"),
    # data, models, heads, probes: each usable alone (no Lightning in encoders, data, probes)
    1: ("data", "encoders", "heads", "probes"),
    # what meets them: records and summaries, cards, Lightning modules and datamodules, one-line messages
    2: ("results", "cards", "tasks", "datamodules", "lightning_trainer", "messages"),
    3: ("regimes", "hpo"),
    4: ("benchmark", "report", "leaderboard", "exported_results"),
    5: ("commands", "api", "api_entries"),
    6: ("cli",),
}
#: Layer-1 packages import none of each other (they meet in a datamodule or a job).
INDEPENDENT = ("data", "encoders", "heads", "probes")


def layer_of(module: str) -> int:
    rel = module.removeprefix("ppgbench_pl").removeprefix(".")
    best, best_len = None, -1
    for layer, names in LAYERS.items():
        for name in names:
            if (rel == name or rel.startswith(name + ".") or name == "") and len(name) > best_len:
                best, best_len = layer, len(name)
    assert best is not None, f"{module} is in no layer of tests/test_layers.py"
    return best


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


EDGES = sorted((a, b) for a, targets in import_graph().items() for b in targets)


def test_every_module_has_a_layer() -> None:
    for module in {m for edge in EDGES for m in edge}:
        layer_of(module)


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_no_import_points_up(layer: int) -> None:
    up = [f"{a} -> {b}" for a, b in EDGES if layer_of(a) == layer and layer_of(b) > layer and a != "ppgbench_pl.cli"]
    assert not up, "imports pointing up the layers: " + "; ".join(up)


def test_layer_one_packages_do_not_import_each_other() -> None:
    across = [f"{a} -> {b}" for a, b in EDGES if layer_of(a) == layer_of(b) == 1
              and _package(a) in INDEPENDENT and _package(b) in INDEPENDENT and _package(a) != _package(b)]
    assert not across, "layer-1 packages importing each other: " + "; ".join(across)


def test_the_layer_finder_takes_the_most_specific_entry() -> None:
    assert layer_of("ppgbench_pl.cards.types") == 0 and layer_of("ppgbench_pl.cards.overlap") == 2
    assert layer_of("ppgbench_pl.data.splits") == 0 and layer_of("ppgbench_pl.data.registry") == 1
    assert layer_of("ppgbench_pl") == 0 and layer_of("ppgbench_pl.cli") == 6


def test_the_card_vocabulary_names_the_registrys_datasets() -> None:
    """The vocabulary holds the nine keys as plain names (layer 0); they must be the registry's, in its order."""
    from ppgbench_pl.cards.vocabulary import BENCHMARK_DATASETS
    from ppgbench_pl.data.registry import REAL_DATASETS

    assert BENCHMARK_DATASETS == REAL_DATASETS
