"""The report's paired-effects section and the findings under paired tests (issue 19).

Kept out of build.py so the published part of the report (tables, bolding, CI-overlap findings) is built
exactly as before; this module only adds files and a section:

* ``tables/effects.csv``: every comparison of every cell (:mod:`ppgbench_pl.report.effects`): raw and
  standardised effect, the seed interval, the subject-level interval (corrected t), p and Holm p, MDD and
  verdict;
* ``tables/chance_cells_paired.csv``, ``tables/control_cells_paired.csv``: the published status of each
  cell beside its status under paired tests with Holm and Benjamini-Hochberg, and the MDD;
* lines appended to ``findings.md`` (printed by ``ppgbench report``) giving both counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ppgbench_pl.report import effects, verdicts

if TYPE_CHECKING:
    from ppgbench_pl.report.html import Page
    from ppgbench_pl.report.load import RunSet
    from ppgbench_pl.report.scores import Scores

SHOWN = ["regime", "task", "family", "model_a", "model_b", "n_seeds", "n_units", "diff", "d_z",
         "seed_ci_low", "seed_ci_high", "nb_ci_low", "nb_ci_high", "p", "p_holm", "mdd", "mdd_adj", "verdict",
         "calibration"]
TWO_LEVEL = ["interval", "tl_ci_low", "tl_ci_high"]


@dataclass
class PairedFindings:
    """The effects, the two paired cell tables, the count lines and the files written."""

    effects: pd.DataFrame
    chance: pd.DataFrame
    controls: pd.DataFrame
    lines: list[str]
    written: list[Path] = field(default_factory=list)


def compute(records: list[dict[str, Any]], chance: pd.DataFrame, controls: pd.DataFrame, out: Path,
            alpha: float, interval: str = "two-level", runs: RunSet | None = None) -> PairedFindings:
    """Compute the paired effects and verdicts and write their CSVs under ``out/tables``.

    ``interval``: the subject-level interval of the new verdicts, ``two-level`` (default), ``corrected-t`` or
    ``bootstrap``
    (:mod:`ppgbench_pl.report.subject_interval`; needs ``runs`` for the prediction files).
    """
    from ppgbench_pl.atomic_io import write_text_atomic

    table = effects.effects_table(records, alpha)
    if interval == "two-level" and runs is not None:
        from ppgbench_pl.report.two_level_rows import two_level_effects

        table = two_level_effects(table, runs, alpha)
    if interval == "bootstrap" and runs is not None:
        from ppgbench_pl.report.subject_interval import bootstrap_effects

        table = bootstrap_effects(table, runs, alpha)
    pchance = verdicts.paired_chance(table, chance, alpha)
    pcontrols = verdicts.paired_controls(table, controls, alpha)
    result = PairedFindings(table, pchance, pcontrols, verdicts.count_lines(pchance, pcontrols, alpha))
    from ppgbench_pl.report.trust import trust_table

    for name, frame in (("effects", table), ("chance_cells_paired", pchance),
                        ("control_cells_paired", pcontrols), ("trust", trust_table(table)[0])):
        path = out / "tables" / f"{name}.csv"
        write_text_atomic(path, frame.to_csv(index=False))
        result.written.append(path)
    return result


def few_seed_regimes(scores: Scores) -> list[str]:
    """Regimes where no model has :data:`~ppgbench_pl.report.effects.MIN_SEEDS` seeds (no CD diagram)."""
    most = scores.summary.groupby("regime")["n_seeds"].max()
    return [str(r) for r, n in most.items() if n < effects.MIN_SEEDS]


def cd_note(regimes: list[str]) -> str:
    """Why a regime has no critical-difference diagram."""
    return (f"No Friedman test or critical-difference diagram for {', '.join(regimes)}: fewer than "
            f"{effects.MIN_SEEDS} seeds, so the per-task means that would be ranked carry no usable "
            "uncertainty; see the paired effects instead.")


def append_findings(findings_md: Path, paired: PairedFindings) -> None:
    """Add the paired-test counts to ``findings.md`` as bullet lines, after the published ones."""
    from ppgbench_pl.atomic_io import write_text_atomic

    text = findings_md.read_text(encoding="utf-8").rstrip("\n")
    block = ["", "## Under paired tests with multiplicity control", "",
             *[f"- {line}" for line in paired.lines], ""]
    write_text_atomic(findings_md, text + "\n" + "\n".join(block))


def draw(page: Page, paired: PairedFindings, flags: Mapping[tuple[str, str], str] | None = None) -> None:
    """The findings under both rules (bullets) and the effects section of the page.

    ``flags`` ((task, model) -> pretraining overlap) marks the model names of flagged cells (overlap_marks).
    """
    from ppgbench_pl.report.html import table
    from ppgbench_pl.report.overlap_marks import marked

    page.heading("Findings under paired tests", level=3, anchor="paired_findings")
    page.bullets(paired.lines, "findings")
    page.details("Per cell: published status beside the paired status, with the MDD",
                 table(*marked(paired.chance, flags or {}, "p_cell: smallest Holm-adjusted p of the cell's models "
                                                           "against their constant; q_bh: Benjamini-Hochberg over "
                                                           "the cells."),
                       text_columns=("beat_baseline", "below_baseline")))
    page.details("Per cell: the controls under both rules",
                 table(paired.controls, "p_cell: Holm over the PPG models of their largest p against the "
                                        "controls; q_bh: Benjamini-Hochberg over the assessable cells.",
                       text_columns=("winners",)))
    from ppgbench_pl.report import trust

    trust.draw(page, paired.effects)
    page.heading("Paired effects (seed interval and subject-level interval)", anchor="effects")
    page.paragraph("diff = a - b over matched seed x fold units; d_z = gain / sd of the differences "
                   "(positive: a better). seed_ci: Student-t over the seed means of the differences "
                   "(split-to-split noise only, the published unit). p, mdd and tl_ci: the two-level test "
                   "(subject term from the per-subject predictions plus seed term; subject-level: it keeps "
                   "the uncertainty of having sampled these subjects) where interval = two-level, else the "
                   "Nadeau-Bengio corrected t over the seed x fold differences (nb_ci, always shown). "
                   "p_holm: Holm within the family of the cell. mdd: the "
                   "smallest difference detected with 80 % power at alpha 0.05; mdd_adj: the same at the "
                   "level Holm's first step demands (alpha / comparisons in the family). calibration: where "
                   "the intervals of the row leave the simulation suite's band. docs/statistics.md has "
                   "the formulas.", "note")
    if paired.effects.empty:
        page.paragraph("No comparison has matched units.", "note")
        return
    boot = [c for c in (*TWO_LEVEL, "boot_ci_low", "boot_ci_high", "p_nb") if c in paired.effects.columns]
    if "boot_ci_low" in boot:
        page.paragraph("Subject-level interval: the subject cluster bootstrap (--subject-interval bootstrap): p "
                       "and p_holm are the bootstrap's where interval = bootstrap, boot_ci its percentile "
                       "interval, p_nb the corrected t's; rows the bootstrap cannot build keep the corrected t "
                       "and say why.", "note")
    page.details(f"All {len(paired.effects)} comparisons", table(*marked(paired.effects[SHOWN + boot], flags or {}),
                                                                 text_columns=tuple(boot[:1])))
