"""``ppgbench leaderboard``: one offline page, a table per regime, model cards; every number the report's (no torch)."""

from __future__ import annotations

import html
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ppgbench_pl
from ppgbench_pl.atomic_io import write_text_atomic
from ppgbench_pl.cards.overlap import dataset_of
from ppgbench_pl.data.registry import TASKS
from ppgbench_pl.leaderboard.assets import CSS, SCRIPT
from ppgbench_pl.naming import is_baseline
from ppgbench_pl.report import findings, tables
from ppgbench_pl.report.compare import Rule, Scores
from ppgbench_pl.report.findings import LEGEND
from ppgbench_pl.report.folder import document
from ppgbench_pl.report.load import ReportError, RunSet, is_control, load_runs, record_id
from ppgbench_pl.results.export import model_card
from ppgbench_pl.results.provenance import input_label, scrub

TITLE = "ppgbench leaderboard"
RULE = Rule("ci")


@dataclass(frozen=True)
class Column:
    """One task of one regime's table: what its header says and what the filters match."""

    task: str
    dataset: str
    tier: str
    label: str  # ``MAE (bpm) ↓``
    higher_is_better: bool
    row_status: str  # near_chance, undetermined, above_chance, no_baseline


def role(model: str) -> str:
    """``baseline`` (a constant), ``control`` (PRV, MOMENT) or ``model``."""
    return "baseline" if is_baseline(model) else "control" if is_control(model) else "model"


class Board:
    """Everything the page draws: the report's ``main_cells`` rows, the task columns, where each model comes from."""

    def __init__(self, inputs: Sequence[str | Path]) -> None:
        self.inputs = [Path(p) for p in inputs]
        self.runs: RunSet = load_runs(inputs)
        self.labels = {p.resolve(): input_label(p) for p in self.inputs}  # file name and digest, never a path
        scores = Scores(self.runs.records, "seed")
        self.regimes, self.models = scores.regimes, scores.models
        self.cells = tables.main_cells(scores, RULE, findings.chance_cells(scores, RULE))
        self.columns: dict[str, list[Column]] = {}  # regime -> its task columns, in registry order
        for regime in self.regimes:
            part, self.columns[regime] = self.cells[self.cells["regime"] == regime], []
            for task in (t for t in scores.tasks(regime) if (part["task"] == t).any()):
                first, spec = part[part["task"] == task].iloc[0], TASKS.get(task)
                metric, tier = str(first["metric"]), spec.tier if spec is not None else "unknown"  # not in the registry
                higher = bool(scores.higher_is_better.get(task, metric != "mae"))
                self.columns[regime].append(Column(task, dataset_of(task), tier, tables.metric_label(metric, task),
                                                   higher, str(first["row_status"])))
        self.index = {(r.regime, r.task, r.model): r for r in self.cells.itertuples()}
        self.via: dict[tuple[str, str], list[str]] = {}  # (model, task) -> the sources an overlap flag rests on
        self.sources: dict[str, list[Path]] = {}  # model -> the inputs its scores come from
        for rec in self.runs.records:
            model = str(rec.get("model", ""))
            if rec.get("pretraining_overlap_via"):
                self.via.setdefault((model, str(rec.get("task", ""))), [str(v) for v in rec["pretraining_overlap_via"]])
            where = self.runs.sources[record_id(rec)]
            where = where if where.is_file() else where.parent.parent  # the exported file, or the run folder
            if where not in self.sources.setdefault(model, []):
                self.sources[model].append(where)

    def label(self, path: Path) -> str:
        """How the page names an input: its file name and content digest."""
        return self.labels.get(path.resolve()) or input_label(path)


def pretraining_text(card: dict[str, Any]) -> str:
    """``mesa, vitaldb (unconfirmed)``, ``none (not pretrained)`` or ``unknown`` (the listing's words)."""
    data = card.get("pretraining_data", "unknown")
    if isinstance(data, str) or data is None:
        return "unknown (not declared)" if data in (None, "unknown") else str(data)
    if not data:
        return "none (not pretrained)"
    text = ", ".join(str(i.get("name")) + ("" if i.get("status", "confirmed") == "confirmed" else f" ({i['status']})")
                     if isinstance(i, dict) else str(i) for i in data)
    return text if card.get("pretraining_complete", True) else f"{text}; list not confirmed complete"


def card_section(board: Board, model: str, ident: str) -> str:
    """One model's card: its facts as a definition list and its BibTeX (collapsed); an exported one as sent."""
    origin = ", ".join(board.label(p) for p in board.sources.get(model, []))
    exported = [(p, d) for p, d in board.runs.documents.items() if str(d["model"]) == model]  # first file wins
    if exported:
        path, doc = exported[0]
        card = dict(doc.get("model_card") or {})
        origin = (f"{board.label(path)} (exported {doc.get('created', 'at an unrecorded time')} by ppgbench "
                  f"{(doc.get('versions') or {}).get('ppgbench') or 'unknown'}, format {doc['format_version']})")
    else:
        card = model_card(model, [r for r in board.runs.records if r.get("model") == model])
    licence = str(card.get("weights_license") or "")
    if licence and card.get("weights_license_status") == "unconfirmed":
        licence += " (unconfirmed)"
    facts = [("pretraining data", pretraining_text(card)),
             ("paper", str(card.get("paper_title") or card.get("paper") or "")),
             ("weights licence", licence), ("code licence", str(card.get("code_license") or "")),
             ("parameters", ", ".join(f"{k} {v:,}" for k, v in (board.runs.parameters.get(model) or {}).items())),
             ("notes", str(card.get("card_notes") or "")), ("results from", origin)]
    title, kind, bibtex = str(card.get("display_name") or model), role(model), str(card.get("bibtex") or "")
    dl = "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in facts if v)
    tag = f' <span class="role">{_esc(kind)}</span>' if kind != "model" else ""
    name = f" ({_esc(model)})" if title != model else ""
    bib = f"<details><summary>BibTeX</summary><pre>{_esc(bibtex)}</pre></details>" if bibtex else ""
    return (f'<section class="card" id="{ident}" data-model="{_esc(model)}"><h3>{_esc(title)}{name}'
            f"{tag}</h3><dl>{dl}</dl>{bib}</section>")


def _esc(value: object) -> str:
    return html.escape(str(value))


def _header(column: Column) -> str:
    marker = tables.ROW_MARKERS.get(column.row_status, "")
    cls = ' class="near_chance"' if column.row_status == "near_chance" else ""
    return (f'<th scope="col" tabindex="0" aria-sort="none" data-key="task" data-task="{_esc(column.task)}" '
            f'data-dataset="{_esc(column.dataset)}" data-tier="{_esc(column.tier)}" '
            f'data-higher="{int(column.higher_is_better)}" title="{_esc(column.dataset)}, {_esc(column.tier)} '
            f'task; click to sort"{cls}>{_esc(column.task)}{" " + marker if marker else ""}'
            f'<span class="metric">{_esc(column.label)}</span></th>')


def _cell(board: Board, regime: str, column: Column, model: str, usual: str) -> str:
    row = board.index.get((regime, column.task, model))
    keys = f'data-model="{_esc(model)}" data-task="{_esc(column.task)}"'
    if row is None:
        return f'<td {keys} data-value="" title="not run">{tables.MISSING}</td>'
    text = tables.cell_text(row, usual, lambda t: f"<strong>{t}</strong>")  # digits and marks: nothing to escape
    overlap = str(row.pretraining_overlap)
    unit = f" {row.unit}" if row.unit else ""
    about = [f"{row.n_seeds} seeds x {row.n_folds} folds", f"mean {row.mean:.6g}{unit}"]
    if not math.isnan(row.ci95):
        about.append(f"95% CI ± {row.ci95:.6g}")
    if overlap in LEGEND:
        via = ", ".join(board.via.get((model, column.task), []))
        about.append(f"pretraining overlap: {overlap}{' via ' + via if via else ''} ({LEGEND[overlap]})")
    if row.deviations:
        about.append(f"not the published protocol: {str(row.deviations).replace(';', '; ')}")
    cls = f' class="{overlap}"' if overlap in LEGEND else ""
    return (f'<td {keys} data-value="{row.mean!r}" data-overlap="{_esc(overlap)}"{cls} '
            f'title="{_esc("; ".join(about))}">{text}</td>')


def regime_table(board: Board, regime: str, ids: dict[str, str]) -> str:
    """One regime's section: its heading, its sortable table and the report's caption below it."""
    columns = board.columns[regime]
    head = ('<th scope="col" tabindex="0" aria-sort="none" data-key="model" title="click to sort">model</th>'
            + "".join(_header(c) for c in columns))
    rows, usual = [], tables.usual_grid(board.cells, regime)
    present = set(board.cells.loc[board.cells["regime"] == regime, "model"])
    for model in (m for m in board.models if m in present):
        name = _esc(model) if model not in ids else f'<a href="#{ids[model]}">{_esc(model)}</a>'
        tag = f'<span class="role">{role(model)}</span>' if role(model) != "model" else ""
        cells = "".join(_cell(board, regime, c, model, usual) for c in columns)
        rows.append(f'<tr data-model="{_esc(model)}" class="{role(model)}"><th scope="row">{name}{tag}</th>'
                    f"{cells}</tr>")
    caption = tables.caption(regime, RULE, "seed", board.cells)
    return (f'<section class="regime" data-regime="{_esc(regime)}" id="regime-{_esc(regime)}">'
            f"<h2>{_esc(regime)}</h2>"
            f'<div class="scroll"><table class="board" aria-describedby="legend-{_esc(regime)}">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
            f'<p class="note" id="legend-{_esc(regime)}">{_esc(caption)}</p></section>')


def filters(board: Board) -> str:
    """The regime, tier and dataset choices (each ``all`` first), and the line saying what is shown."""
    columns = [c for cs in board.columns.values() for c in cs]
    tiers = sorted({c.tier for c in columns}, key=lambda t: (t != "primary", t != "secondary", t))
    selects = "".join(f'<label>{label}<select id="f-{label}"><option value="">all</option>'
                      + "".join(f'<option value="{_esc(v)}">{_esc(v)}</option>' for v in values) + "</select></label>"
                      for label, values in (("regime", board.regimes), ("tier", tiers),
                                            ("dataset", list(dict.fromkeys(c.dataset for c in columns)))))
    return (f'<div id="filters" role="group" aria-label="filters">{selects}'
            '<span id="shown" aria-live="polite"></span></div>')


def _meta(board: Board) -> list[str]:
    models = [m for m in board.models if role(m) == "model"]
    inputs = ", ".join(board.label(p) for p in board.inputs)
    parts = [f'<p class="meta">From {len(board.inputs)} input(s): {_esc(inputs)}. {len(models)} model(s), '
             f"{len(board.regimes)} regime(s). Each cell: mean ± Student-t 95% CI over seed means (protocol "
             f"section 9), in the unit of its column; hover a cell for its counts. Click a column header to "
             f"sort (best first, then the other way). Made by ppgbench {_esc(ppgbench_pl.__version__)} on "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.</p>"]
    if note := tables.budget_note(board.cells):
        parts.append(f'<p class="warning">{_esc(note)}</p>')
    for label, lines in (("jobs had conflicting records across inputs (first input kept)", board.runs.conflicts),
                         ("job records could not be read and count as not run", board.runs.problems)):
        if lines:
            items = "".join(f"<li>{_esc(scrub(line, board.inputs, [board.label(p) for p in board.inputs]))}</li>"
                            for line in lines)
            parts.append(f"<details><summary>{len(lines)} {_esc(label)}</summary><ul>{items}</ul></details>")
    return parts


def render(board: Board) -> str:
    """The whole page (one HTML document, style and script inline)."""
    ids: dict[str, str] = {}  # model -> a unique HTML id for its card (``card-papagei_s``)
    for name in (m for m in board.models if role(m) != "baseline"):
        base = "card-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "model")
        ident, n = base, 1
        while ident in ids.values():
            n += 1
            ident = f"{base}-{n}"
        ids[name] = ident
    settings: dict[str, Any] = {}  # the protocol settings the exported inputs share (the loader refused others)
    for doc in board.runs.documents.values():
        for key, value in sorted(doc["protocol"].items()):
            settings.setdefault(str(key), str(value))
    rows = "".join(f'<tr><td>{_esc(k)}</td><td class="text">{_esc(v)}</td></tr>' for k, v in settings.items())
    protocol = ('<h2 id="protocol">Protocol settings</h2><details><summary>Settings shared by the exported files '
                f"({len(settings)})</summary><table><thead><tr><th>setting</th><th>value</th></tr></thead>"
                f"<tbody>{rows}</tbody></table></details>") if settings else ""
    body = [f"<h1>{TITLE}</h1>", *_meta(board), filters(board),
            *(regime_table(board, r, ids) for r in board.regimes),
            '<h2 id="cards">Model cards</h2>',
            '<p class="note">As each file declares them (ppgbench list encoders shows the catalog\'s); the '
            "overlap marks of the tables come from the pretraining data and each dataset's provenance.</p>",
            *(card_section(board, m, ident) for m, ident in ids.items()), protocol]
    if any(is_baseline(m) for m in board.models):
        body.insert(-1, '<p class="note">constant: the baseline that predicts the training labels\' mean '
                        "(regression) or most frequent class, from the same jobs; it has no card.</p>")
    return document(TITLE, CSS, "\n".join(body) + f"\n<script>{SCRIPT}</script>")


def build_leaderboard(inputs: Sequence[str | Path], output_dir: str | Path) -> Path:
    """Write the leaderboard of ``inputs`` to ``output_dir/index.html`` and return its path.

    Raises:
        ReportError: A bad input or output (one line naming it); nothing is written then.
    """
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise ReportError(f"{out}: the leaderboard folder is a file; choose another --output")
    for path in map(Path, inputs):
        if not path.exists():
            raise ReportError(f"{path}: no such file or run folder")
    text = render(Board(inputs))  # every input is read and checked before anything is written
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"{out}: cannot create the leaderboard folder ({exc.strerror or exc})") from None
    write_text_atomic(out / "index.html", text)
    return out / "index.html"
