"""Run in its own process: each file through ``report``, ``leaderboard`` and ``pb.load_run``; print what happened.

``python -m tests.bad_input.untrusted_probe OUT FILE...`` prints one JSON object: per file and entry point the
exit status (or the error line of ``load_run``), stderr, whether the output folder exists afterwards and the
peak of traced memory (:mod:`tracemalloc`: Python and NumPy allocations) during that call above what was
held before it (the modules imported so far); and the process's peak resident memory (``ru_maxrss``).
"""

from __future__ import annotations

import contextlib
import io
import json
import resource
import sys
import traceback
import tracemalloc
from pathlib import Path
from typing import Any


def _cli(args: list[str]) -> dict[str, Any]:
    from ppgbench_pl.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(args)
            code: Any = 0
        except SystemExit as exc:
            code = exc.code
        except BaseException:  # noqa: BLE001 - what the user would see as a traceback
            code, err = "traceback", io.StringIO(traceback.format_exc())
    return {"code": code, "err": err.getvalue()}


def _load_run(path: Path) -> dict[str, Any]:
    import ppgbench_pl as pb
    from ppgbench_pl.errors import PPGBenchError

    try:
        results = pb.load_run(path)
        results.summary  # noqa: B018
        for job in results.jobs.job_id:
            results.predictions(job)
        return {"code": 0, "err": ""}
    except PPGBenchError as exc:
        return {"code": 2, "err": str(exc)}
    except BaseException:  # noqa: BLE001
        return {"code": "traceback", "err": traceback.format_exc()}


def probe(out: Path, files: list[Path]) -> dict[str, Any]:
    """Every file through the three readers, one after the other, each with its own traced peak."""
    tracemalloc.start()
    found: dict[str, Any] = {}
    for path in files:
        for entry in ("report", "leaderboard", "load_run"):
            target = out / f"{path.stem}_{entry}"
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            result = _load_run(path) if entry == "load_run" else _cli([entry, str(path), "--output", str(target)])
            result.update(peak=tracemalloc.get_traced_memory()[1] - before, written=target.exists())
            found[f"{path.name}:{entry}"] = result
    tracemalloc.stop()
    return {"runs": found, "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


if __name__ == "__main__":
    print(json.dumps(probe(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])))
