"""Each model's card on the leaderboard: what it was pretrained on, its paper, licences, size and origin.

An exported model's card is shown as sent; others get :func:`ppgbench_pl.results.export.model_card`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppgbench_pl.leaderboard.board import Board, role


@dataclass
class Card:
    """One model's card as label -> text facts, its BibTeX and where its numbers come from."""

    model: str
    title: str
    role: str
    facts: list[tuple[str, str]] = field(default_factory=list)
    bibtex: str = ""


def pretraining_text(card: dict[str, Any]) -> str:
    """``mesa, vitaldb (unconfirmed)``, ``none (not pretrained)`` or ``unknown`` (the listing's words)."""
    data = card.get("pretraining_data", "unknown")
    if isinstance(data, str) or data is None:
        return "unknown (not declared)" if data in (None, "unknown") else str(data)
    if not data:
        return "none (not pretrained)"
    names = []
    for item in data:
        if isinstance(item, dict):
            status = item.get("status", "confirmed")
            names.append(str(item.get("name")) + ("" if status == "confirmed" else f" ({status})"))
        else:
            names.append(str(item))
    text = ", ".join(names)
    return text if card.get("pretraining_complete", True) else f"{text}; list not confirmed complete"


def _exported(board: Board) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Model -> (file, document) of each exported input (its own model only, first file wins)."""
    out: dict[str, tuple[Path, dict[str, Any]]] = {}
    for path, document in board.documents.items():
        out.setdefault(str(document["model"]), (path, document))
    return out


def _parameters(counts: dict[str, int] | None) -> str:
    if not counts:
        return ""
    return ", ".join(f"{k} {v:,}" for k, v in counts.items())


def _facts(card: dict[str, Any], board: Board, model: str) -> list[tuple[str, str]]:
    licence = str(card.get("weights_license") or "")
    if licence and card.get("weights_license_status") == "unconfirmed":
        licence += " (unconfirmed)"
    facts = [("pretraining data", pretraining_text(card)),
             ("paper", str(card.get("paper_title") or card.get("paper") or "")),
             ("weights licence", licence), ("code licence", str(card.get("code_license") or "")),
             ("parameters", _parameters(board.runs.parameters.get(model))),
             ("notes", str(card.get("card_notes") or ""))]
    return [(k, v) for k, v in facts if v]


def cards(board: Board) -> list[Card]:
    """The card of every model and control on the board, in board order (baselines have none)."""
    from ppgbench_pl.results.export import model_card

    exported = _exported(board)
    out = []
    for model in board.models:
        kind = role(model)
        if kind == "baseline":
            continue
        origin = ", ".join(board.label(p) for p in board.sources.get(model, []))
        if model in exported:
            path, document = exported[model]
            card = dict(document.get("model_card") or {})
            versions = document.get("versions") or {}
            origin = (f"{board.label(path)} (exported {document.get('created', 'at an unrecorded time')} by ppgbench "
                      f"{versions.get('ppgbench') or 'unknown'}, format {document['format_version']})")
        else:
            card = model_card(model, [r for r in board.runs.records if r.get("model") == model])
        facts = [*_facts(card, board, model), ("results from", origin)]
        title = str(card.get("display_name") or model)
        out.append(Card(model, title, kind, facts, str(card.get("bibtex") or "")))
    return out
