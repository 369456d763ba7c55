"""The report's paired-effects section (issue 19), added beside the published part, which it leaves as it was.

Writes ``effects.csv``, the cell tables under paired tests and the trust table, and draws them with their findings.
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
TITLE = "Under paired tests with multiplicity control"


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
    """The paired effects (with ``interval``, read from ``runs``' predictions) and verdicts, written as CSVs."""
    from ppgbench_pl.report.folder import write_tables
    from ppgbench_pl.report.trust import trust_table
    from ppgbench_pl.report.two_level_rows import bootstrap_effects, two_level_effects

    table = effects.effects_table(records, alpha)
    if interval == "two-level" and runs is not None:
        table = two_level_effects(table, runs, alpha)
    if interval == "bootstrap" and runs is not None:
        table = bootstrap_effects(table, runs, alpha)
    pchance = verdicts.paired_chance(table, chance, alpha)
    pcontrols = verdicts.paired_controls(table, controls, alpha)
    result = PairedFindings(table, pchance, pcontrols, verdicts.count_lines(pchance, pcontrols, alpha))
    result.written = write_tables(out, {"effects": table, "chance_cells_paired": pchance,
                                        "control_cells_paired": pcontrols, "trust": trust_table(table)[0]})
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


def draw(page: Page, paired: PairedFindings, flags: Mapping[tuple[str, str], str] | None = None) -> None:
    """The findings under paired tests, the trust table and the effects; ``flags`` marks overlapping cells."""
    from ppgbench_pl.report import trust
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
