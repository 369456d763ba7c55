"""The one reader of results files others send: ``ppgbench report``, ``leaderboard``, ``pb.load_run``.

An exported file (``*.ppgbench.json``) is validated before anything is read from it, in this order, each
problem one line naming the file and the field (:class:`~ppgbench_pl.errors.DataError`):

1. its size, before reading (:data:`MAX_FILE_BYTES`, or ``PPGBENCH_MAX_RESULTS_MB`` for a larger file
   you trust), and its nesting depth, before parsing (:mod:`~ppgbench_pl.results.strict_json`);
2. JSON without duplicate keys, non-finite numbers or overlong integers;
3. ``format`` and ``format_version`` (a newer version: upgrade ppgbench);
4. the JSON Schema of its version (``ppgbench_pl/schema/``, with :mod:`jsonschema`);
5. what a run can have written (:mod:`~ppgbench_pl.results.plausible`): metric ranges, counts, the
   protocol block, datasets against protocol and digests, the declared sizes of its packed arrays.

The arrays themselves are decoded later, one prediction file at a time, bounded by the sizes checked here
(:func:`~ppgbench_pl.results.packed_arrays.unpack_all`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ppgbench_pl.errors import DataError

FORMAT = "ppgbench.results"
FORMAT_VERSION = 2
#: Versions this ppgbench reads (1: no ``predictions``).
READABLE_VERSIONS = (1, 2)
#: Largest file read (the quickstart's export is about 1.5 MB; a whole benchmark with its predictions
#: stays well below). ``PPGBENCH_MAX_RESULTS_MB`` raises it for a file you trust.
MAX_FILE_BYTES = 256 << 20


def max_file_bytes() -> int:
    """:data:`MAX_FILE_BYTES`, or ``PPGBENCH_MAX_RESULTS_MB`` megabytes when set."""
    text = os.environ.get("PPGBENCH_MAX_RESULTS_MB", "").strip()
    if not text:
        return MAX_FILE_BYTES
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e6:
        raise DataError(f"PPGBENCH_MAX_RESULTS_MB={text!r}: give a size in MB (e.g. 1024)")
    return int(value * 2**20)


def read_results_file(path: str | Path) -> dict[str, Any]:
    """An exported results file, validated (module docstring) before anything is read from it.

    Raises:
        DataError: The file cannot be read or is refused by one of the checks (one line naming the file
            and the field).

    """
    from ppgbench_pl.results import schemas
    from ppgbench_pl.results.strict_json import loads_bounded, read_bytes_bounded

    path = Path(path)
    try:
        data = read_bytes_bounded(path, max_file_bytes())
        document = loads_bounded(data)
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise DataError(f"{path}: {exc}") from None
    version = _version(path, document)
    error = schemas.first_error(document, schemas.EXPORT if version == 2 else schemas.EXPORT_V1)
    if error is not None:
        raise DataError(f"{path}: field {error}")
    problem = check_document(document, len(data))
    if problem is not None:
        raise DataError(f"{path}: field {problem}")
    return document


def check_document(document: dict[str, Any], file_bytes: int) -> str | None:
    """The first reason a schema-valid document cannot be a run's export (``<field>: <why>``), or None."""
    from ppgbench_pl.results.plausible import control_names, first_problem

    return first_problem(document, file_bytes, control_names())


def _version(path: Path, document: Any) -> int:
    """The file's format version, once it says it is a ppgbench results file this ppgbench reads."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise DataError(f"{path}: not a ppgbench results file (expected \"format\": \"{FORMAT}\"; "
                        "make one with ppgbench export RUN)")
    version = document.get("format_version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise DataError(f"{path}: format_version {str(version)[:20]} is not one this ppgbench reads (1 to "
                        f"{FORMAT_VERSION}); upgrade ppgbench")
    return int(version)
