"""A real single-node Slurm cluster for the tests: a private ``munged``, ``slurmctld`` and
``slurmd`` (Debian's ``slurm-wlm``; ``scripts/system.d/30-slurm.sh`` installs it), each started
in the foreground by the test with its own configuration, ports and state under a temporary
folder, and stopped by process id at the end. Clients (``sbatch``, ``squeue``) find it through
``SLURM_CONF``.

Job steps (``slurmstepd``, the ``srun`` of a batch script) run in sessions of their own, so
stopping the daemons' process groups leaves those of a task killed mid-run alive: at the end
every process whose environment names this cluster's ``SLURM_CONF`` (or whose command line
or working directory lies in its folder) is killed, and the cluster fails its test if one is
still there after that.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["missing", "slurm_cluster"]

_DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo")
_SBIN = ("/usr/sbin", "/usr/bin", "/sbin")


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(_SBIN))


def missing() -> str | None:
    """Why no Slurm can start here (None when it can)."""
    absent = [d for d in _DAEMONS if _which(d) is None]
    if absent:
        return f"no {', '.join(absent)} (run scripts/system.d/30-slurm.sh as root)"
    if os.geteuid() != 0:
        return "the test cluster runs its daemons as root"
    if not Path("/etc/munge/munge.key").is_file():
        return "no /etc/munge/munge.key (run scripts/system.d/30-slurm.sh as root)"
    return None


def _read(path: Path) -> bytes:
    """The bytes of a ``/proc`` file; nothing when it cannot be read (gone, or not ours)."""
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _names(pid: int, conf: Path, root: Path) -> bool:
    """Whether live process ``pid`` belongs to the cluster: its environment holds
    ``SLURM_CONF=conf``, or its command line or working directory lies in ``root``.
    """
    proc = Path(f"/proc/{pid}")
    stat = _read(proc / "stat").rsplit(b")", 1)[-1].split()
    if not stat or stat[0] == b"Z":
        return False  # gone, or a zombie: it runs nothing and its parent (or init) reaps it
    if f"SLURM_CONF={conf}".encode() in _read(proc / "environ").split(b"\0"):
        return True
    inside = f"{root}/".encode()
    if any(a == bytes(root) or inside in a for a in _read(proc / "cmdline").split(b"\0")):
        return True
    try:
        return f"{os.readlink(proc / 'cwd')}/".startswith(f"{root}/")
    except OSError:
        return False


def _left(conf: Path, root: Path) -> dict[int, str]:
    """The live processes of the cluster (pid: command line), but this one."""
    out: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if (
            entry.name.isdigit()
            and int(entry.name) != os.getpid()
            and _names(int(entry.name), conf, root)
        ):
            with contextlib.suppress(OSError):
                out[int(entry.name)] = (
                    (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                )
    return out


def _kill_left(conf: Path, root: Path) -> None:
    """SIGKILL every process of the cluster still alive and wait (20 s at most) until none is.

    Raises:
        AssertionError: one is still alive after that (what it is is said).
    """
    deadline = time.monotonic() + 20
    left = _left(conf, root)
    if left:
        print(f"killing {len(left)} processes of the test cluster: {left}")
    while left and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
        left = _left(conf, root)
    assert not left, f"processes of the test cluster outlived it: {left}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _conf(root: Path, host: str, cpus: int) -> str:
    return "\n".join(
        [
            "ClusterName=openmletest",
            f"SlurmctldHost={host}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={root}/munge.sock",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            f"StateSaveLocation={root}/state",
            f"SlurmdSpoolDir={root}/spool",
            f"SlurmctldPidFile={root}/slurmctld.pid",
            f"SlurmdPidFile={root}/slurmd.pid",
            f"SlurmctldLogFile={root}/slurmctld.log",
            f"SlurmdLogFile={root}/slurmd.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SchedulerType=sched/builtin",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "ReturnToService=2",
            "MpiDefault=none",
            f"NodeName={host} CPUs={cpus} RealMemory=2000 State=UNKNOWN",
            f"PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


@contextlib.contextmanager
def slurm_cluster(root: Path, *, cpus: int = 2) -> Iterator[dict[str, str]]:
    """Start the cluster under ``root``; yields the environment clients need."""
    for d in ("state", "spool"):
        (root / d).mkdir(parents=True, exist_ok=True)
    host = socket.gethostname().split(".")[0]
    conf = root / "slurm.conf"
    conf.write_text(_conf(root, host, cpus))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    procs: list[subprocess.Popen[bytes]] = []

    def start(*cmd: str) -> None:
        with (root / f"{Path(cmd[0]).name}.out").open("wb") as log:
            procs.append(
                subprocess.Popen(
                    list(cmd),
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    try:
        start(str(_which("munged")), "-F", "--force", f"--socket={root}/munge.sock",
              f"--pid-file={root}/munged.pid", f"--seed-file={root}/munge.seed")  # fmt: skip
        deadline = time.monotonic() + 30
        while not (root / "munge.sock").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        start(str(_which("slurmctld")), "-D", "-i", "-f", str(conf))
        start(str(_which("slurmd")), "-D", "-f", str(conf))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = subprocess.run(
                [str(_which("sinfo")), "-h", "-o", "%t"], env=env, capture_output=True,
                text=True, timeout=20, check=False,
            )  # fmt: skip
            if out.stdout.strip() in {"idle", "mix", "alloc"}:
                break
            for name, p in zip(("munged", "slurmctld", "slurmd"), procs, strict=False):
                assert p.poll() is None, (root / f"{name}.out").read_text()
            time.sleep(0.3)
        else:
            raise AssertionError(
                "Slurm did not come up: " + (root / "slurmd.log").read_text()[-2000:]
            )
        yield {"SLURM_CONF": str(conf)}
    finally:
        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
        _kill_left(conf, root)  # job steps run in sessions of their own
