"""Real cluster engines for the ``-m cluster`` tests: a one-node SLURM and a Dask cluster, all on 127.0.0.1.

SLURM (Debian's ``slurm-wlm`` and ``munge``; root, no systemd, no accounting): munged, slurmctld and
slurmd with every piece of state under one folder (as /work/shared/tools/slurm_up.sh does), on free
loopback ports. Dask: ``dask scheduler`` and ``dask worker --nworkers 2`` as separate processes.
Each ``start_*`` returns ``None`` and a one-line reason when the engine cannot be started here.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

SLURM_BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _which(name: str) -> str | None:
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.path.exists(p)), None)


@dataclass
class Engine:
    """Processes started for one engine (stopped in reverse order) and the environment to use it."""

    folder: Path
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    address: str = ""

    def start(self, name: str, command: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.folder / f"{name}.log", "wb")  # noqa: SIM115 - kept open for the daemon's life
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, **self.env}, start_new_session=True)
        self.procs[name] = proc
        return proc

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def stop_all(self) -> None:
        for name in reversed(list(self.procs)):
            self.stop(name)
        pid_file = self.folder / "munge" / "munged.pid"
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (ValueError, ProcessLookupError):
                pass


def _slurm_conf(folder: Path, host: str, ctld_port: int, d_port: int) -> str:
    return "\n".join([
        "ClusterName=ppgtest", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={d_port}", "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge",
        f"AuthInfo=socket={folder}/munge/munge.socket.2", "CredType=cred/munge",
        f"StateSaveLocation={folder}/state", f"SlurmdSpoolDir={folder}/spool/slurmd-%n",
        f"SlurmctldPidFile={folder}/slurmctld.pid", f"SlurmdPidFile={folder}/slurmd-%n.pid",
        f"SlurmctldLogFile={folder}/log/slurmctld.log", f"SlurmdLogFile={folder}/log/slurmd.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core", "MpiDefault=none", "ReturnToService=2", "KillWait=5", "MinJobAge=300",
        "SlurmctldTimeout=30", "MessageTimeout=5",
        f"NodeName={host} NodeAddr=127.0.0.1 NodeHostname={host} CPUs={os.cpu_count() or 2} RealMemory=4000 "
        "State=UNKNOWN",
        f"PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP", ""])


def _wait(check: object, bound_s: float) -> bool:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.3)
    return False


def start_slurm(folder: Path, bound_s: float = 40.0) -> tuple[Engine | None, str]:
    """A one-node SLURM on 127.0.0.1 with its state under ``folder``; ``(None, why)`` when it cannot start."""
    missing = [b for b in SLURM_BINARIES if _which(b) is None]
    if missing:
        return None, f"SLURM not installed ({', '.join(missing)} missing; apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return None, "a one-node SLURM needs root here (SlurmUser=root, munged run as munge)"
    host = socket.gethostname()
    for sub in ("munge", "state", "spool", "log"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    shutil.chown(folder / "munge", "munge", "munge")
    key = folder / "munge" / "munge.key"
    steps = [[_which("mungekey"), f"--create", f"--keyfile={key}"],  # noqa: F541
             ["chown", "munge:munge", str(key)], ["chmod", "400", str(key)],
             ["runuser", "-u", "munge", "--", _which("munged"), f"--key-file={key}",
              f"--socket={folder}/munge/munge.socket.2", f"--pid-file={folder}/munge/munged.pid",
              f"--log-file={folder}/munge/munged.log", f"--seed-file={folder}/munge/munged.seed"]]
    for step in steps:
        done = subprocess.run([str(s) for s in step], capture_output=True, text=True, timeout=20)
        if done.returncode != 0:
            return None, f"munge did not start ({' '.join(done.stderr.split())[:200]})"
    conf = folder / "slurm.conf"
    conf.write_text(_slurm_conf(folder, host, free_port(), free_port()))
    engine = Engine(folder, {"SLURM_CONF": str(conf)})
    engine.start("slurmctld", [str(_which("slurmctld")), "-D", "-i"])
    time.sleep(1.0)
    engine.start("slurmd", [str(_which("slurmd")), "-D"])

    if not _started(engine, lambda: _idle(engine), bound_s):
        return None, f"SLURM did not come up within {bound_s:g} s (logs in {folder}/log)"
    return engine, ""


def _started(engine: Engine, check: object, bound_s: float) -> bool:
    """``check`` held within ``bound_s``; the engine's processes are stopped otherwise (or if it raised)."""
    try:
        up = _wait(check, bound_s)
    except BaseException:
        engine.stop_all()
        raise
    if not up:
        engine.stop_all()
    return up


def _idle(engine: Engine) -> bool:
    done = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=10,
                          env={**os.environ, **engine.env})
    return "idle" in done.stdout


def stop_slurm(engine: Engine, bound_s: float = 20.0) -> None:
    """Cancel every job first (slurmd then ends their job steps), then stop the daemons."""
    env = {**os.environ, **engine.env}
    subprocess.run(["scancel", "--user", "root"], capture_output=True, timeout=10, env=env)

    def empty() -> bool:
        done = subprocess.run(["squeue", "-h"], capture_output=True, text=True, timeout=10, env=env)
        return done.returncode != 0 or not done.stdout.strip()

    _wait(empty, bound_s)
    engine.stop_all()


def restart_slurmctld(engine: Engine, bound_s: float = 40.0) -> bool:
    """Start slurmctld again after a test stopped it (its state folder keeps the jobs); slurmd re-registers."""
    engine.start("slurmctld", [str(_which("slurmctld")), "-D"])
    time.sleep(1.0)
    engine.stop("slurmd")
    engine.start("slurmd", [str(_which("slurmd")), "-D"])
    return _wait(lambda: _idle(engine) or _mixed(engine), bound_s)


def _mixed(engine: Engine) -> bool:
    done = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=10,
                          env={**os.environ, **engine.env})
    return any(state in done.stdout for state in ("mixed", "allocated"))


def start_dask(folder: Path, workers: int = 2, bound_s: float = 40.0) -> tuple[Engine | None, str]:
    """``dask scheduler`` and ``dask worker --nworkers <workers>`` on 127.0.0.1; ``(None, why)`` otherwise."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        return None, "dask[distributed] not installed"
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    engine = Engine(folder, address=f"tcp://127.0.0.1:{port}")
    engine.start("scheduler", [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", str(port), "--no-dashboard"])
    engine.start("workers", [sys.executable, "-m", "distributed.cli.dask_worker", engine.address, "--nworkers",
                             str(workers), "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard"])

    def ready() -> bool:
        from dask.distributed import Client

        try:
            with Client(engine.address, timeout=2) as client:
                return len(client.scheduler_info(n_workers=-1)["workers"]) >= workers
        except OSError:
            return False

    if not _started(engine, ready, bound_s):
        return None, f"Dask did not come up within {bound_s:g} s (logs in {folder})"
    return engine, ""
