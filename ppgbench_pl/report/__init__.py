"""The report layer (:func:`build_report`): reads run folders only, never Lightning or torch (see docs/report.md)."""

from ppgbench_pl.report.build import build_report
from ppgbench_pl.report.load import ReportError

__all__ = ["ReportError", "build_report"]
