"""The cards as plain rows: what ``ppgbench list``, ``pb.list_encoders()`` and the exported files show."""

from __future__ import annotations

from typing import Any

from ppgbench_pl.cards.bibtex import render
from ppgbench_pl.cards.declaration import declaration_json
from ppgbench_pl.cards.types import Citation


def paper_fields(paper: Citation | None) -> dict[str, Any]:
    """The paper of a card as row fields: key, how listings cite it, title, unconfirmed fields, BibTeX."""
    if paper is None:
        return {"paper": None, "paper_cite": None, "paper_title": None, "paper_unconfirmed": [], "bibtex": None}
    title = paper.field("title").replace("{", "").replace("}", "")
    unconfirmed = f" ({', '.join(paper.unconfirmed)} unconfirmed)" if paper.unconfirmed else ""
    return {"paper": paper.key, "paper_cite": paper.key + unconfirmed,  # ``key (title, doi unconfirmed)``
            "paper_title": f"{title} (title unconfirmed)" if "title" in paper.unconfirmed else title,
            "paper_unconfirmed": list(paper.unconfirmed), "bibtex": render(paper)}


def model_card_rows() -> dict[str, dict[str, Any]]:
    """Catalog name -> its card as JSON-ready fields (prefixed where the catalog row already has the plain name)."""
    from ppgbench_pl.encoders.cards import MODEL_CARDS

    return {name: {"display_name": card.display_name, "pretraining_data": declaration_json(card.pretraining_data),
                   "pretraining_complete": card.pretraining_complete, "pretraining": card.pretraining_text(),
                   **paper_fields(card.paper), "weights_license": card.weights_license or "not stated",
                   "weights_license_status": card.weights_license_status,
                   "code_license": card.code_license or "not stated", "card_notes": card.notes}
            for name, card in MODEL_CARDS.items()}


def dataset_card_row(key: str) -> dict[str, Any]:
    """A dataset's card as JSON-ready fields; empty for a dataset without one (the synthetic set)."""
    from ppgbench_pl.data.registry import CARDS

    card = CARDS.get(key)
    if card is None:
        return {"derived_from": [], **paper_fields(None)}
    return {**paper_fields(card.paper), "publisher": card.publisher, "card_license": card.license or "not found",
            "license_status": card.license_status, "card_access": card.access,
            "derived_from": list(card.derived_from), "card_notes": card.notes}


def pretraining_block(rows: list[dict[str, Any]]) -> str:
    """``pretraining data:`` lines of ``ppgbench list encoders``: sources with status, licences, notes."""
    width = max((len(r["name"]) for r in rows), default=0)
    lines = ["pretraining data (each source confirmed unless marked; overlap flags: ppgbench report):"]
    for r in rows:
        lines.append(f"  {r['name']:<{width}}  {r.get('pretraining', 'unknown')}")
        extra = [f"weights licence {r['weights_license']}"
                 + (" (unconfirmed)" if r.get("weights_license_status") == "unconfirmed" else ""),
                 f"code licence {r['code_license']}"]
        if r.get("paper"):
            extra.append(f"cite {r.get('paper_cite') or r['paper']}")
        lines.append(f"  {'':<{width}}  " + "; ".join(extra))
    return "\n".join(lines)
