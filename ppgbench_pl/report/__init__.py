"""The report layer: reads run folders only (never Lightning or torch), writes tables, figures and HTML.

Entry point: :func:`build_report`. See ``docs/report.md`` for what each output is and the rules used.
"""

from ppgbench_pl.report.build import build_report
from ppgbench_pl.report.load import ReportError

__all__ = ["ReportError", "build_report"]
