"""A SLURM cluster of three nodes on this machine for a test: munged, slurmctld and three slurmd (one per
node name, `slurmd -N`), in a folder of its own with free ports. Needs Debian's slurm-wlm and munge and
root; the node names are host names /etc/hosts gives to 127.0.0.1 (the job's parts reach each other by
node name). `unavailable()` says why it cannot start here."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from prime_cli.serve.server import free_port

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol")


def loopback_names() -> list[str]:
    """Names /etc/hosts gives 127.0.0.1, other than localhost and this machine's own name (slurmd's host)."""
    names: list[str] = []
    taken = {"localhost", socket.gethostname()}
    for line in Path("/etc/hosts").read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if fields and fields[0] == "127.0.0.1":
            names += [n for n in fields[1:] if n not in names and n not in taken]
    return names


def unavailable() -> str | None:
    missing = [d for d in DAEMONS if shutil.which(d) is None]
    if missing:
        return f"{', '.join(missing)} not installed (apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return "the SLURM daemons of the test cluster run as root"
    if len(loopback_names()) < 3:
        return "needs three host names for 127.0.0.1 in /etc/hosts (e.g. `127.0.0.1 n1 n2 n3`)"
    return None


CONFIG = """\
ClusterName=primetest
SlurmctldHost={host}
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={socket}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
{nodes}
PartitionName=debug Nodes={node_list} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
"""


class LocalSlurm:
    def __init__(self, root: Path):
        self.root = root
        self.names = loopback_names()[:3]
        self.procs: list[subprocess.Popen] = []
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self) -> LocalSlurm:
        for sub in ("state", "spool", "munge"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        munge = self.root / "munge"
        key = munge / "munge.key"
        key.write_bytes(os.urandom(128))
        key.chmod(0o400)
        socket_path = munge / "munge.socket"
        self.procs.append(subprocess.Popen(
            ["munged", "--foreground", "--force", f"--key-file={key}", f"--socket={socket_path}",
             f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
             f"--seed-file={munge / 'munged.seed'}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        ports = [free_port() for _ in self.names]
        nodes = "\n".join(f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={p} CPUs=2 "
                          "RealMemory=2000 State=UNKNOWN" for n, p in zip(self.names, ports, strict=True))
        self.conf.write_text(CONFIG.format(host=socket.gethostname(), ctld_port=free_port(), socket=socket_path,
                                           root=self.root, nodes=nodes, node_list=",".join(self.names)))
        self._wait(lambda: socket_path.exists(), "munged")
        self.procs.append(subprocess.Popen(["slurmctld", "-D", "-f", str(self.conf)], env=self.env,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for name in self.names:
            self.procs.append(subprocess.Popen(["slurmd", "-D", "-N", name, "-f", str(self.conf)], env=self.env,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self._wait(lambda: self.idle_nodes() == len(self.names), "three idle nodes")
        return self

    def idle_nodes(self) -> int:
        done = subprocess.run(["sinfo", "-h", "-t", "idle", "-o", "%D"], env=self.env, capture_output=True, text=True)
        return int(done.stdout.strip() or 0) if done.returncode == 0 else 0

    def job_state(self, job_id: str) -> str:
        done = subprocess.run(["scontrol", "show", "job", job_id], env=self.env, capture_output=True, text=True)
        for field in done.stdout.split():
            if field.startswith("JobState="):
                return field.split("=", 1)[1]
        return "UNKNOWN"

    def _wait(self, ready, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the test SLURM cluster did not come up ({what}); logs in {self.root}")
            time.sleep(0.5)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
