"""A report folder is all of one report or untouched: built beside its target, then swapped into place.

Built in ``.<name>.building-<random>`` and exchanged with the target in one rename (Linux renameat2; elsewhere
two renames); a killed build's staging folder is removed by the next. A folder of other files is refused.
Its page is self-contained (inline CSS, no scripts or web fonts), so the folder opens offline.
"""

from __future__ import annotations

import ctypes
import errno
import html
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from ppgbench_pl.atomic_io import dir_mode, write_text_atomic
from ppgbench_pl.locks import LOCKS_WORK, LockBusy, file_lock
from ppgbench_pl.report.load import ReportError

#: A file every report folder carries: what makes a folder one ppgbench may replace whole.
MARKER = ".ppgbench-report"
#: What a report made before the marker holds at its top level (such a folder may be replaced too).
LEGACY_ENTRIES = frozenset({"index.html", "findings.md", "protocol.md", "tables", "figures", "references.bib",
                            "methods.tex"})
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _target(output_dir: str | Path) -> Path:
    """The absolute target, refused up front if it is a file, the current folder (or above it), or not a report."""
    out = Path(output_dir).absolute()
    if out.is_symlink():
        out = out.resolve()  # replace the folder it points to; the link stays
    if out.exists() and not out.is_dir():
        raise ReportError(f"{output_dir}: the report folder is a file; choose another --output")
    here = Path.cwd().resolve()
    if out.resolve() == here or out.resolve() in here.parents:
        raise ReportError(f"{output_dir}: the report folder would replace the current folder; choose a new "
                          "folder for --output")
    try:  # empty, or a report: the marker, or a pre-marker report's files only
        entries = {p.name for p in out.iterdir()} if out.is_dir() else set()
    except OSError as exc:
        raise ReportError(f"{output_dir}: cannot read the report folder ({exc.strerror or exc})") from None
    if entries and MARKER not in entries and not {"index.html", "findings.md"} <= entries <= LEGACY_ENTRIES:
        raise ReportError(f"{output_dir}: holds files that are not a ppgbench report (a report replaces its "
                          "folder whole); choose a new or empty folder for --output")
    return out


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step (Linux renameat2); False where the system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError, TypeError):  # no C library by that name, or no renameat2 in it
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def remove_stale(target: Path) -> None:
    """Remove staging folders of builds of ``target`` that died (their lock is free)."""
    prefix = f".{target.name}."
    for path in target.parent.iterdir():
        kind = path.name[len(prefix):].split("-", 1)[0] if path.name.startswith(prefix) else ""
        if kind not in ("building", "old") or not path.is_dir():
            continue
        if kind == "building":
            if not LOCKS_WORK or not (path / MARKER).is_file():
                continue
            try:
                with file_lock(path / MARKER, blocking=False):
                    pass
            except LockBusy:
                continue  # another build of the same folder is running
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def staged(output_dir: str | Path) -> Iterator[Path]:
    """Yield a fresh folder to build the report in; on success it replaces ``output_dir`` whole, else it goes."""
    target = _target(output_dir)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale(target)
        stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.building-", dir=target.parent))
        os.chmod(stage, dir_mode())
        (stage / "tables").mkdir()
    except OSError as exc:
        raise ReportError(f"{output_dir}: cannot create the report folder ({exc.strerror or exc})") from None
    try:
        with file_lock(stage / MARKER):
            yield stage
            if not target.exists():
                os.rename(stage, target)
            elif _exchange(stage, target):
                shutil.rmtree(stage, ignore_errors=True)  # now holds the old report
            else:
                old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
                os.rename(target, old / "report")
                os.rename(stage, target)
                shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def write_tables(out: Path, frames: dict[str, pd.DataFrame]) -> list[Path]:
    """Write each frame as ``out/tables/<name>.csv`` (atomically); return the paths."""
    paths = [out / "tables" / f"{name}.csv" for name in frames]
    for path, frame in zip(paths, frames.values(), strict=True):
        write_text_atomic(path, frame.to_csv(index=False))
    return paths


#: What a table shows for a cell that was not run or a value that is unknown.
MISSING = "–"
CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       margin: 2rem auto; max-width: 78rem; padding: 0 1.5rem; color: #1b1b1b; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; } h2 { font-size: 1.25rem; margin-top: 2.2rem;
     border-bottom: 1px solid #ccc; padding-bottom: 0.2rem; } h3 { font-size: 1.05rem; }
p.meta, p.note, figcaption, caption { color: #555; font-size: 0.88rem; }
table { border-collapse: collapse; margin: 0.6rem 0 1.2rem; font-size: 0.85rem;
        font-variant-numeric: tabular-nums; }
caption { caption-side: bottom; text-align: left; padding-top: 0.4rem; max-width: 70rem; }
th, td { padding: 0.25rem 0.6rem; border-bottom: 1px solid #e3e3e3; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; } td:first-child, th:first-child { text-align: left; }
td.text { text-align: left; white-space: normal; }
tr.near_chance td:first-child { color: #a33; }
p.warning { color: #8a4b00; font-weight: 600; }
ul.findings li { margin: 0.3rem 0; } figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto; }
details { margin: 0.5rem 0 1rem; } summary { cursor: pointer; color: #245; }
.scroll { overflow-x: auto; }
"""


def fmt_value(value: object) -> str:
    """Readable text for one table value: NaN/None as an en dash, floats with 3 decimals."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 1e5 else f"{value:.3g}"
    return str(value)


def table(frame: pd.DataFrame, caption: str = "", raw: Sequence[str] = (),
          row_class: Callable[[pd.Series], str] | None = None, text_columns: Sequence[str] = ()) -> str:
    """Render a frame as an HTML table; values are escaped unless the column is listed in ``raw``."""
    if frame.empty:
        return '<p class="note">(nothing to show)</p>'
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    columns = [(c, ' class="text"' if c in text_columns else "", c in raw) for c in frame.columns]
    rows = []
    for _, row in frame.iterrows():  # the row as iterrows makes it: its dtype decides how a number is shown
        cls = f' class="{row_class(row)}"' if row_class else ""
        cells = "".join(f"<td{td}>{row[c] if keep else html.escape(fmt_value(row[c]))}</td>" for c, td, keep in columns)
        rows.append(f"<tr{cls}>{cells}</tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f'<div class="scroll"><table>{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def document(title: str, css: str, body: str) -> str:
    """A whole HTML document: the title, the inline style and ``body``."""
    return ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(title)}</title>\n<style>{css}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


class Page:
    """An HTML document built section by section; image and link paths are relative to ``root``."""

    def __init__(self, title: str, root: Path) -> None:
        self.title, self.root = title, root
        self.parts: list[str] = [f"<h1>{html.escape(title)}</h1>"]

    def heading(self, text: str, level: int = 2, anchor: str = "") -> None:
        """Add a section heading (with an id so it can be linked)."""
        ident = f' id="{html.escape(anchor)}"' if anchor else ""
        self.parts.append(f"<h{level}{ident}>{html.escape(text)}</h{level}>")

    def paragraph(self, text: str, cls: str = "") -> None:
        """Add a paragraph of escaped text."""
        attr = f' class="{cls}"' if cls else ""
        self.parts.append(f"<p{attr}>{html.escape(text)}</p>")

    def bullets(self, items: Sequence[str], cls: str = "") -> None:
        """Add an unordered list of escaped items."""
        attr = f' class="{cls}"' if cls else ""
        self.parts.append(f"<ul{attr}>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>")

    def raw(self, fragment: str) -> None:
        """Pre-rendered HTML (a :func:`table`)."""
        self.parts.append(fragment)

    def details(self, summary: str, fragment: str) -> None:
        """Add a collapsed block (long tables, lists of cells)."""
        self.parts.append(f"<details><summary>{html.escape(summary)}</summary>{fragment}</details>")

    def write(self) -> Path:
        """Write the page into its folder as ``index.html``."""
        path = self.root / "index.html"
        path.write_text(document(self.title, CSS, "\n".join(self.parts)), encoding="utf-8")
        return path
