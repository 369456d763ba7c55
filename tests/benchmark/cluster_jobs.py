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
    return JobOutcome(job.job_id, "ok")


#: A one-node SLURM stand-in: ``--test-only`` refuses the partition ``nope``; a submission runs its array
#: tasks one after another in the background (the SLURM environment set, state files for squeue under
#: ``state/``), except those listed in ``kill`` as ``<task index> <STATE>`` (``GONE``: SLURM forgets it).
SBATCH = r"""#!/bin/bash
for a in "$@"; do case "$a" in --partition=nope) echo "sbatch: error: invalid partition specified: nope" >&2;
  echo "sbatch: error: Batch job submission failed: Invalid partition name specified" >&2; exit 1;; esac; done
if [ "$1" = --test-only ]; then echo "sbatch: Job 3 to start at 2026-01-01T00:00:00 in partition debug" >&2; exit 0; fi
script="${@: -1}"; id=$(cat $F/next_id 2>/dev/null || echo 7); echo $((id + 1)) > $F/next_id
last=$(grep -o -- '--array=[0-9]*-[0-9]*' "$script" | head -1 | cut -d- -f4)
name() { if [ -n "$last" ]; then echo ${id}_$1; else echo $id; fi; }
mkdir -p $F/state; for i in $(seq 0 ${last:-0}); do echo PENDING > $F/state/$(name $i); done
( for i in $(seq 0 ${last:-0}); do
    task=$(name $i); fate=$(awk -v i=$i '$1 == i {print $2}' $F/kill 2>/dev/null)
    if [ "$fate" = GONE ]; then rm -f $F/state/$task; continue; fi
    if [ -n "$fate" ]; then echo $fate > $F/state/$task; continue; fi
    echo RUNNING > $F/state/$task
    jid=$id; if [ -n "$last" ]; then export SLURM_ARRAY_JOB_ID=$id SLURM_ARRAY_TASK_ID=$i; jid=$((id * 1000 + i)); fi
    SLURM_JOB_ID=$jid SLURM_NTASKS=1 SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NODEID=0 \
      SLURM_JOB_NUM_NODES=1 SLURM_JOB_NODELIST=localhost timeout 120 bash "$script" > $F/task_$task.log 2>&1
    echo COMPLETED > $F/state/$task
  done ) </dev/null >/dev/null 2>&1 &
echo "Submitted batch job $id"
"""
SRUN = r"""#!/bin/bash
while [ $# -gt 0 ]; do case "$1" in --output|--error) shift 2;; --*) shift;; *) break;; esac; done
exec "$@"
"""


def fake_slurm(folder: Path) -> Path:
    """``squeue``/``sacct``/``sbatch``/``srun`` scripts in ``folder``/bin driven by files in ``folder``.

    ``squeue.out`` is what squeue prints (``<task> <STATE>`` lines), ``squeue.rc`` its exit status (1 also
    prints that the controller cannot be reached), then the states of the submitted tasks; sacct always
    fails as without accounting; sbatch is :data:`SBATCH`. Returns the bin folder, to put first on PATH.
    """
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    scripts = {
        "squeue": f"""#!/bin/sh
rc=$(cat {folder}/squeue.rc 2>/dev/null || echo 0)
if [ "$rc" != 0 ]; then echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2; exit "$rc"; fi
cat {folder}/squeue.out 2>/dev/null
for f in {folder}/state/*; do [ -e "$f" ] && echo "$(basename "$f") $(cat "$f")"; done; exit 0
""",
        "sacct": """#!/bin/sh
echo "sacct: error: Slurm accounting storage is disabled" >&2; exit 1
""",
        "sbatch": SBATCH.replace("$F", str(folder)),
        "srun": SRUN,
        "scancel": f"#!/bin/sh\necho \"$@\" >> {folder}/scancelled\n",
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
