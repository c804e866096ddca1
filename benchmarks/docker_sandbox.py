"""Per-job time of ``DockerSandbox`` against ``podman run`` / ``docker run`` of the same program.

Both sides run the toy task's solution in a fresh container from the same image with the same
mounts and limits (read-only data, writable workspace, no network, memory/CPU/PID limits). The
command-line side is ``<engine> run --rm ...``; the sandbox side is ``DockerSandbox.run``, which
also copies the submission out and grades it on the host (a separate Python process), so it
does strictly more. A second pair runs a program that writes no submission (nothing to grade),
isolating the container lifecycle. Runs alternate between the sides; medians are reported.

Usage: python benchmarks/docker_sandbox.py [--repeats 10]
Needs an engine: DOCKER_HOST, /var/run/docker.sock, or podman (a service is started on a
private socket and stopped at the end), and the image from scripts/build-sandbox-image.sh.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio

sys.path[:0] = [
    str(Path(__file__).resolve().parents[1]),
    str(Path(__file__).resolve().parents[1] / "src"),
]

from benchmarks._common import emit  # noqa: E402

from openmle import Job, Outcome  # noqa: E402
from openmle.backends import DockerSandbox  # noqa: E402
from openmle.testing import TOY_SOLUTION, ToyTask  # noqa: E402

IMAGE = os.environ.get("OPENMLE_SANDBOX_IMAGE", "localhost/openmle-sandbox:bookworm")
NO_SUBMISSION = "import os\nprint(len(os.listdir(os.environ['DATA_DIR'])))\n"


def _answers(path: str) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(3.0)
            sock.connect(path)
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: engine\r\n\r\n")
            return sock.recv(64).split(b" ")[1:2] == [b"200"]
    except OSError:
        return False


@contextmanager
def engine() -> Iterator[tuple[str, str]]:
    """Yield ``(base_url, cli)`` for a Docker daemon, or for a podman service we start."""
    if os.environ.get("DOCKER_HOST"):
        yield os.environ["DOCKER_HOST"], "docker"
        return
    if _answers("/var/run/docker.sock"):
        yield "unix:///var/run/docker.sock", "docker"
        return
    podman = shutil.which("podman")
    if podman is None:
        raise SystemExit("no Docker daemon and no podman: run scripts/system.d/20-podman.sh")
    tmp = tempfile.mkdtemp(prefix="openmle-bench-", dir="/tmp")
    sock = f"{tmp}/podman.sock"
    proc = subprocess.Popen(
        [podman, "system", "service", "--time=0", f"unix://{sock}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=tmp,  # conmon drops files (e.g. "oom") in its working directory
    )
    try:
        deadline = time.monotonic() + 30
        while not _answers(sock):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("podman system service did not come up")
            time.sleep(0.1)
        yield f"unix://{sock}", "podman"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        shutil.rmtree(tmp, ignore_errors=True)


def cli_run(cli: str, task: ToyTask, code: str) -> float:
    """Seconds for ``<cli> run --rm`` of ``code`` with the sandbox's mounts and limits."""
    work = Path(tempfile.mkdtemp(prefix="openmle-bench-job-"))
    (work / "main.py").write_text(code)
    cmd = [
        cli, "run", "--rm", "--network", "none", "--memory", "512m", "--memory-swap", "512m",
        "--cpus", "1", "--pids-limit", "512", "--cap-drop", "ALL",
        "--security-opt", "no-new-privileges",
        "-v", f"{task.public_dir(Job(code='', task='toy').split)}:/data:ro",
        "-v", f"{work}:/workspace:rw", "-w", "/workspace",
        "-e", "DATA_DIR=/data", "-e", "PYTHONUNBUFFERED=1", "-e", "HOME=/workspace",
        IMAGE, "python3", "main.py",
    ]  # fmt: skip
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    took = time.perf_counter() - t0
    shutil.rmtree(work, ignore_errors=True)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="openmle-bench-task-"))
    task = ToyTask.create(root / "toy")
    figures: dict[str, object] = {}
    with engine() as (base_url, cli):
        sandbox = DockerSandbox(
            image=IMAGE,
            base_url=base_url,
            resolver=ToyTask.resolver({"toy": task}),
            gpus=None,
            memory_mb=512,
        )

        def sandbox_run(code: str, expect: Outcome) -> float:
            async def one() -> float:
                t0 = time.perf_counter()
                result = await sandbox.run(Job(code=code, task="toy", timeout_s=120))
                took = time.perf_counter() - t0
                assert result.outcome is expect, (result.outcome, result.detail, result.logs)
                return took

            return anyio.run(one)

        for label, code, expect in (
            ("solution", TOY_SOLUTION, Outcome.SUCCESS),
            ("no_submission", NO_SUBMISSION, Outcome.MISSING_SUBMISSION),
        ):
            ours: list[float] = []
            theirs: list[float] = []
            sides: list[tuple[list[float], Callable[[], float]]] = [
                (ours, lambda c=code, e=expect: sandbox_run(c, e)),  # type: ignore[misc]
                (theirs, lambda c=code: cli_run(cli, task, c)),  # type: ignore[misc]
            ]
            for _, fn in sides:  # warm up both paths (image cache, client connection)
                fn()
            for i in range(args.repeats):
                for times, fn in sides if i % 2 == 0 else sides[::-1]:
                    times.append(fn())
            ours_s, theirs_s = statistics.median(ours), statistics.median(theirs)
            ratio = ours_s / theirs_s
            print(
                f"{label:>14}: DockerSandbox {ours_s * 1e3:7.1f} ms/job   "
                f"{cli} run {theirs_s * 1e3:7.1f} ms/job   ratio {ratio:.2f}x"
            )
            figures[f"{label}_sandbox_ms"] = round(ours_s * 1e3, 1)
            figures[f"{label}_cli_ms"] = round(theirs_s * 1e3, 1)
            figures[f"{label}_ratio"] = round(ratio, 3)
        anyio.run(sandbox.aclose)
    shutil.rmtree(root, ignore_errors=True)
    figures.update(engine=cli, repeats=args.repeats, target_ratio=1.1)
    emit("docker_sandbox", figures)


if __name__ == "__main__":
    main()
