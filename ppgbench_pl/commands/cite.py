"""``ppgbench cite [--datasets ...] [--models ...]``: the BibTeX of the benchmark and what you name (``all``)."""

from __future__ import annotations

import argparse


def add_cite_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``cite``."""
    parser = sub.add_parser(
        "cite", description="BibTeX of ppgbench and of the named datasets and encoders (from their cards).")
    parser.add_argument("--datasets", nargs="*", default=[], metavar="KEY",
                        help="dataset keys (ppgbench list datasets), or all")
    parser.add_argument("--models", nargs="*", default=[], metavar="NAME",
                        help="encoder names (ppgbench list encoders), or all")
    parser.set_defaults(func=_command)


def cite_text(datasets: list[str], models: list[str]) -> str:
    """The BibTeX ``ppgbench cite`` prints (``all``: every card); an unknown name is a one-line ConfigError."""
    from ppgbench_pl.cards.bibtex import render_all
    from ppgbench_pl.cards.citations import check_names, references
    from ppgbench_pl.data.registry import CARDS
    from ppgbench_pl.encoders.cards import MODEL_CARDS

    datasets = list(CARDS) if datasets == ["all"] else datasets
    models = list(MODEL_CARDS) if models == ["all"] else models
    check_names(datasets, models)
    return render_all(references(datasets, models))


def _command(ns: argparse.Namespace) -> None:
    print(cite_text(ns.datasets, ns.models), end="")
