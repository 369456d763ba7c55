"""What to cite for a set of datasets and models: the benchmark, each dataset's paper, each model's paper."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ppgbench_pl.cards.bibtex import BENCHMARK
from ppgbench_pl.cards.overlap import RANDOM_INIT_SUFFIX
from ppgbench_pl.cards.types import Citation
from ppgbench_pl.errors import ConfigError


def card_name(model: str) -> str:
    """The catalog name behind a record's model name (``papagei_p (random init)`` -> ``papagei_p``)."""
    return model.removesuffix(RANDOM_INIT_SUFFIX)


def model_citation(model: str) -> Citation | None:
    """The paper of a model's card, or None (no card, or a card without a paper)."""
    from ppgbench_pl.encoders.cards import MODEL_CARDS

    card = MODEL_CARDS.get(card_name(model))
    return card.paper if card is not None else None


def dataset_citation(dataset: str) -> Citation | None:
    """The paper of a dataset's card, or None (the generated dataset has none)."""
    from ppgbench_pl.data.registry import CARDS

    card = CARDS.get(dataset)
    return card.paper if card is not None else None


def references(datasets: Iterable[str], models: Iterable[str]) -> list[Citation]:
    """The benchmark, then each dataset's and each model's paper, each key once, in the order given."""
    found: dict[str, Citation] = {BENCHMARK.key: BENCHMARK}
    for citation in [*map(dataset_citation, datasets), *map(model_citation, models)]:
        if citation is not None:
            found.setdefault(citation.key, citation)
    return list(found.values())


def check_names(datasets: Sequence[str], models: Sequence[str]) -> None:
    """Refuse a dataset or model name ``ppgbench cite`` does not know (one line, with suggestions)."""
    import difflib

    from ppgbench_pl.data.registry import get_dataset
    from ppgbench_pl.encoders.cards import MODEL_CARDS

    for dataset in datasets:
        get_dataset(dataset)
    for model in models:
        if card_name(model) not in MODEL_CARDS:
            close = difflib.get_close_matches(model, list(MODEL_CARDS), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(MODEL_CARDS)}"
            raise ConfigError(f"unknown encoder '{model}'{hint}")

