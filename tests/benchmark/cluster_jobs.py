"""Stand-ins for the cluster fault tests: job functions workers import, fake SLURM commands, submitit jobs.

Job functions take a :class:`JobSpec` whose ``run_dir`` is a scratch folder and whose ``job_id`` says
what to do: ``die`` kills its own process with SIGKILL (an out-of-memory kill), ``hold`` waits for a file
``release`` in ``run_dir`` (bounded by 30 s), anything else sleeps briefly.
"""

from __future__ import annotations

import os
import signal
import stat
import time
from pathlib import Path

from ppgbench_pl.benchmark.worker import JobOutcome, JobSpec


def spec(run_dir: Path, job_id: str) -> JobSpec:
    """A spec for these job functions."""
    return JobSpec(str(run_dir), {}, job_id)


def pool_job(job: JobSpec) -> JobOutcome:
    """Writes ``<job_id>.pid``; ``die`` kills itself, ``hold`` waits for ``release``; returns ``ok``."""
    folder = Path(job.run_dir)
    (folder / f"{job.job_id}.pid").write_text(str(os.getpid()))
    if job.job_id == "die" and not (folder / "release").exists():
        os.kill(os.getpid(), signal.SIGKILL)
    deadline = time.monotonic() + 30.0
    while job.job_id == "hold" and not (folder / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    return JobOutcome(job.job_id, "ok", worker=str(os.getpid()))


def fake_slurm(folder: Path) -> Path:
    """``squeue``/``sacct``/``sbatch``/``srun`` scripts in ``folder``/bin driven by files in ``folder``.

    ``squeue.out`` is what squeue prints (``<task> <STATE>`` lines), ``squeue.rc`` its exit status (1 also
    prints that the controller cannot be reached); sacct always fails as without accounting; sbatch
    ``--test-only`` refuses a partition named ``nope``. Returns the bin folder, to put first on PATH.
    """
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    scripts = {
        "squeue": f"""#!/bin/sh
rc=$(cat {folder}/squeue.rc 2>/dev/null || echo 0)
if [ "$rc" != 0 ]; then echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2; exit "$rc"; fi
cat {folder}/squeue.out 2>/dev/null; exit 0
""",
        "sacct": """#!/bin/sh
echo "sacct: error: Slurm accounting storage is disabled" >&2; exit 1
""",
        "sbatch": """#!/bin/sh
for a in "$@"; do case "$a" in --partition=nope) echo "sbatch: error: invalid partition specified: nope" >&2;
  echo "sbatch: error: Batch job submission failed: Invalid partition name specified" >&2; exit 1;; esac; done
echo "sbatch: Job 3 to start at 2026-01-01T00:00:00 using 1 processors on nodes n1 in partition debug" >&2
""",
        "srun": "#!/bin/sh\nexit 0\n",
    }
    for name, text in scripts.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir


class FakeJob:
    """A submitit job whose state the test controls: ``outcomes`` set means done."""

    def __init__(self, job_id: str, outcomes: list[JobOutcome] | None = None) -> None:
        self.job_id, self.outcomes, self.cancelled, self.state = job_id, outcomes, False, "PENDING"

    def done(self) -> bool:
        return self.outcomes is not None

    def result(self) -> list[JobOutcome]:
        assert self.outcomes is not None
        return self.outcomes

    def cancel(self, check: bool = True) -> None:
        self.cancelled = True
