"""The exact container request ``DockerSandbox`` sends, GPU requests included (no engine needed)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from openmle import Job, Resources
from openmle.backends import DockerSandbox
from openmle.backends._docker import (
    _PODMAN_SECCOMP,
    _check_disjoint,
    _owner_gone,
    _owner_token,
    _tightened_profile,
)
from openmle.errors import InvalidArgument, TaskPackageError

PUB = Path("/srv/task/valid/public")
WS = Path("/tmp/openmle-job-x")


def _request(sandbox: DockerSandbox, job: Job, **kw: object) -> dict[str, object]:
    body = sandbox.container_request(job, task_name="toy", public_dir=PUB, workspace=WS, **kw)  # type: ignore[arg-type]
    labels = body["Labels"]
    assert isinstance(labels, dict)
    labels.pop("openmle.sandbox")  # random per sandbox
    owner = labels.pop("openmle.owner")  # this process
    assert owner == _owner_token(os.getpid())
    assert owner.startswith(f"{socket.gethostname()}/{os.getpid()}/")
    return body


def test_a_task_with_outputs_is_told_output_dir_in_the_workspace() -> None:
    """A task that declares ``outputs`` (NatureBench's ``output``) gets
    ``OUTPUT_DIR=/workspace/output``, as the harness sets it (it was unset); the job's own
    value cannot move it; a task without ``outputs`` keeps the job's environment as it was.
    """
    sandbox = DockerSandbox(gpus=None)
    job = Job(code="print(1)", task="toy", env={"OUTPUT_DIR": "/etc", "SEED": "3"})
    env = _request(sandbox, job, outputs="output")["Env"]
    assert isinstance(env, list) and "OUTPUT_DIR=/workspace/output" in env
    assert "OUTPUT_DIR=/etc" not in env and "SEED=3" in env
    plain = _request(sandbox, Job(code="print(1)", task="toy"))["Env"]
    assert isinstance(plain, list) and not [e for e in plain if e.startswith("OUTPUT_DIR=")]


def test_cpu_job_request_is_exact() -> None:
    """A CPU job: read-only data, writable workspace, limits, no network, no devices."""
    sandbox = DockerSandbox(gpus=None, memory_mb=1024, pids_limit=128)
    job = Job(code="print(1)", task="toy", resources=Resources(cpus=1.5), env={"SEED": "3"})
    assert _request(sandbox, job) == {
        "Image": "localhost/openmle-sandbox:bookworm",
        # killed inside the container at timeout_s (600) + stop_grace_s (5) + 10 s
        "Cmd": [
            "/bin/sh",
            "-c",
            "ulimit -c 1 2>/dev/null; "
            "ulimit -f 2097152 && exec timeout -s KILL 615 python3 main.py",
        ],
        "WorkingDir": "/workspace",
        # program_env, as for the local sandbox: two thread caps for 1.5 CPUs, the locale,
        # HOME and DATA_DIR owned; no PATH (the image's), no CUDA_VISIBLE_DEVICES (the engine's)
        "Env": [
            "DATA_DIR=/data",
            "HOME=/workspace",
            "LANG=C.UTF-8",
            "LC_ALL=C.UTF-8",
            "MKL_NUM_THREADS=2",
            "MPLBACKEND=Agg",
            "NUMEXPR_NUM_THREADS=2",
            "OMP_NUM_THREADS=2",
            "OPENBLAS_NUM_THREADS=2",
            "PYTHONDONTWRITEBYTECODE=1",
            "PYTHONNOUSERSITE=1",
            "PYTHONUNBUFFERED=1",
            "SEED=3",
            "TMPDIR=/tmp",
        ],
        "Labels": {"openmle.managed": "1", "openmle.task": "toy", "openmle.job": ""},
        "NetworkDisabled": True,
        "HostConfig": {
            "Binds": [f"{PUB}:/data:ro", f"{WS}:/workspace:rw"],
            "Memory": 1024 * 2**20,
            "MemorySwap": 1024 * 2**20,
            "NanoCpus": 1_500_000_000,
            "PidsLimit": 128,
            "CapDrop": ["ALL"],
            "SecurityOpt": ["no-new-privileges"],
            "LogConfig": {"Type": "none", "Config": {}},
            "NetworkMode": "none",
        },
    }


def test_job_memory_overrides_default_and_env_cannot_move_data_dir() -> None:
    """``resources.memory_mb`` wins over the sandbox default; ``DATA_DIR`` stays ``/data``."""
    sandbox = DockerSandbox(gpus=None)
    job = Job(code="", task="toy", resources=Resources(memory_mb=300), env={"DATA_DIR": "/x"})
    body = _request(sandbox, job)
    host = body["HostConfig"]
    assert isinstance(host, dict)
    assert host["Memory"] == host["MemorySwap"] == 300 * 2**20
    assert "DATA_DIR=/data" in body["Env"]  # type: ignore[operator]
    assert "DATA_DIR=/x" not in body["Env"]  # type: ignore[operator]


def test_docker_and_local_build_the_program_env_with_one_function() -> None:
    """The job cannot move HOME or pick GPUs inside the container; the environment is
    program_env's (the local sandbox's) with the container's paths."""
    from openmle.backends._plan import program_env

    job = Job(
        code="",
        task="toy",
        resources=Resources(cpus=3),
        env={"HOME": "/etc", "CUDA_VISIBLE_DEVICES": "7", "OPENMLE_RUN_ID": "x", "K": "v"},
    )
    body = _request(DockerSandbox(gpus=None), job)
    want = program_env(
        job, info=None, data="/data", workspace="/workspace", tmp="/tmp", gpus=None, marker=None
    )
    assert body["Env"] == [f"{k}={v}" for k, v in sorted(want.items())]
    env = dict(e.split("=", 1) for e in body["Env"])
    assert env["HOME"] == "/workspace" and env["OMP_NUM_THREADS"] == "3" and env["K"] == "v"
    assert "CUDA_VISIBLE_DEVICES" not in env and "OPENMLE_RUN_ID" not in env and "PATH" not in env


def test_gpu_job_by_count_without_pool_asks_the_engine() -> None:
    """Without a GPU pool a count request becomes ``Count`` and the engine picks devices."""
    sandbox = DockerSandbox(gpus=None)
    job = Job(code="", task="toy", resources=Resources(gpus=2))
    host = _request(sandbox, job)["HostConfig"]
    assert isinstance(host, dict)
    assert host["DeviceRequests"] == [{"Driver": "nvidia", "Count": 2, "Capabilities": [["gpu"]]}]


def test_gpu_job_by_ids_maps_through_the_pool() -> None:
    """Relative ``gpu_ids`` are mapped through the pool (like CUDA_VISIBLE_DEVICES) to host ids."""
    sandbox = DockerSandbox(gpus=[4, 5, 6, 7])
    job = Job(code="", task="toy", resources=Resources(gpu_ids=(1, 3)))
    ids = sandbox.device_ids(job)
    assert ids == ("5", "7")
    host = _request(sandbox, job, device_ids=ids)["HostConfig"]
    assert isinstance(host, dict)
    assert host["DeviceRequests"] == [
        {"Driver": "nvidia", "DeviceIDs": ["5", "7"], "Capabilities": [["gpu"]]}
    ]


def test_gpu_ids_without_pool_are_host_ids_and_out_of_pool_ids_are_refused() -> None:
    """Without a pool ids pass through; with one, an id past its end is an InvalidArgument."""
    job = Job(code="", task="toy", resources=Resources(gpu_ids=(0, 2)))
    assert DockerSandbox(gpus=None).device_ids(job) == ("0", "2")
    with pytest.raises(InvalidArgument, match="gpu_ids"):
        DockerSandbox(gpus=["GPU-a"]).device_ids(job)


def test_pool_defaults_to_inherited_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inherited CUDA_VISIBLE_DEVICES mask is the default pool, so runs compose with it."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    sandbox = DockerSandbox()
    assert sandbox.gpus == ("2", "3")
    job = Job(code="", task="toy", resources=Resources(gpu_ids=(1,)))
    assert sandbox.device_ids(job) == ("3",)


@pytest.mark.parametrize("mask", ["", "-1", " "])
def test_a_mask_that_hides_every_gpu_is_an_empty_pool(
    monkeypatch: pytest.MonkeyPatch, mask: str
) -> None:
    """CUDA_VISIBLE_DEVICES set but empty hides every GPU from CUDA; the sandbox does not hand
    GPU requests to the engine instead."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", mask)
    assert DockerSandbox().gpus == ()


def test_container_deadline_and_file_limit_combinations() -> None:
    """The in-container deadline follows the job's limit; each wrapper can be turned off."""
    job = Job(code="", task="toy", timeout_s=20.5)
    with_both = _request(DockerSandbox(gpus=None, stop_grace_s=1.0), job)["Cmd"]
    assert with_both == [
        "/bin/sh",
        "-c",
        "ulimit -c 1 2>/dev/null; ulimit -f 2097152 && exec timeout -s KILL 32 python3 main.py",
    ]
    no_limit = _request(DockerSandbox(gpus=None, max_file_mb=None), job)["Cmd"]
    assert no_limit == [
        "/bin/sh",
        "-c",
        "ulimit -c 1 2>/dev/null; exec timeout -s KILL 36 python3 main.py",
    ]
    bare = DockerSandbox(gpus=None, max_file_mb=None, container_deadline=False)
    assert _request(bare, job)["Cmd"] == ["python3", "main.py"]
    quoted = DockerSandbox(gpus=None, python="/opt/my python", container_deadline=False)
    assert _request(quoted, job)["Cmd"] == [
        "/bin/sh",
        "-c",
        "ulimit -c 1 2>/dev/null; ulimit -f 2097152 && exec '/opt/my python' main.py",
    ]


def test_owner_label_tells_live_dead_and_foreign_owners_apart() -> None:
    """A live owner is kept, an exited one (or a reused pid) is gone, another host's is kept."""
    me = _owner_token(os.getpid())
    assert me is not None and not _owner_gone(me)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    dead = _owner_token(proc.pid)
    proc.wait()
    assert dead is not None and _owner_gone(dead)
    host, pid, start = me.rsplit("/", 2)
    assert _owner_gone(f"{host}/{pid}/{int(start) + 1}")  # same pid, another process
    assert not _owner_gone(f"elsewhere.example/{proc.pid}/1")
    assert not _owner_gone("garbage")


def test_seccomp_profile_refuses_namespace_clones_and_clone3() -> None:
    """``clone`` is allowed only without namespace flags; ``clone3`` gets ENOSYS; unshare,
    setns and the keyring calls are in no allow list."""
    if not _PODMAN_SECCOMP.exists():
        pytest.skip("Podman's default seccomp profile is not installed here")
    profile = _tightened_profile(json.loads(_PODMAN_SECCOMP.read_text()))
    rules = profile["syscalls"]
    allowed = {
        n
        for r in rules
        if r["action"] == "SCMP_ACT_ALLOW" and not r.get("args")
        for n in r["names"]
    }
    assert not allowed & {"clone", "clone3", "unshare", "setns", "keyctl", "add_key"}
    clone = [r for r in rules if "clone" in r["names"]]
    assert {r["args"][0]["index"] for r in clone} == {0, 1}  # s390 passes flags second
    for r in clone:
        assert r["names"] == ["clone"] and r["action"] == "SCMP_ACT_ALLOW"
        assert r["args"] == [
            {
                "index": r["args"][0]["index"],
                "value": 0x7E020000,
                "valueTwo": 0,
                "op": "SCMP_CMP_MASKED_EQ",
            }
        ]
    assert [r for r in rules if "clone3" in r["names"]] == [
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}
    ]


def test_seccomp_profile_allows_only_built_in_socket_families() -> None:
    """``socket`` only for Unix, netlink route/uevent and IPv4/IPv6 with TCP, UDP, ICMP,
    ICMPv6 or the type's default protocol, each by exact value (any other family or protocol
    makes the kernel load a module on the host); ``socketpair`` for Unix only; no rule of
    Podman's own for either is left."""
    if not _PODMAN_SECCOMP.exists():
        pytest.skip("Podman's default seccomp profile is not installed here")
    profile = _tightened_profile(json.loads(_PODMAN_SECCOMP.read_text()))
    rules = [r for r in profile["syscalls"] if {"socket", "socketpair"} & set(r["names"])]
    assert all(r["action"] == "SCMP_ACT_ALLOW" and len(r["names"]) == 1 for r in rules)
    allowed = {(r["names"][0], *((a["index"], a["value"]) for a in r["args"])) for r in rules}
    assert all(a["op"] == "SCMP_CMP_EQ" for r in rules for a in r["args"])
    ip = {("socket", (0, f), (2, p)) for f in (2, 10) for p in (0, 1, 6, 17, 58)}
    netlink = {("socket", (0, 16), (2, 0)), ("socket", (0, 16), (2, 15))}
    assert allowed == {("socket", (0, 1)), ("socketpair", (0, 1)), *ip, *netlink}


def test_network_user_image_and_shm_options() -> None:
    """Network on drops ``NetworkMode``; user, per-task image and shm size are passed through."""
    sandbox = DockerSandbox(
        gpus=None,
        network=True,
        user="65534:65534",
        task_images={"toy": "my/image:1"},
        shm_size_mb=256,
        python="python3.11",
    )
    body = _request(sandbox, Job(code="", task="toy", name="n1"))
    host = body["HostConfig"]
    assert isinstance(host, dict)
    assert "NetworkMode" not in host
    assert body["NetworkDisabled"] is False
    assert body["User"] == "65534:65534"
    assert body["Image"] == "my/image:1"
    assert body["Cmd"] == [
        "/bin/sh",
        "-c",
        "ulimit -c 1 2>/dev/null; ulimit -f 2097152 && exec timeout -s KILL 615 python3.11 main.py",
    ]
    assert host["ShmSize"] == 256 * 2**20
    assert body["Labels"] == {"openmle.managed": "1", "openmle.task": "toy", "openmle.job": "n1"}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"memory_mb": -1}, "memory_mb"),
        ({"pids_limit": True}, "pids_limit"),
        ({"stop_grace_s": 0}, "stop_grace_s"),
        ({"shm_size_mb": 0}, "shm_size_mb"),
        ({"image": ""}, "image"),
        ({"gpus": "0,1"}, "gpus"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict[str, object], field: str) -> None:
    """Each invalid setting raises InvalidArgument naming it."""
    with pytest.raises(InvalidArgument, match=f"DockerSandbox.{field}"):
        DockerSandbox(**kwargs)  # type: ignore[arg-type]


def test_public_dir_overlapping_private_is_refused(tmp_path: Path) -> None:
    """A public directory that contains (or is inside) a private path would leak the answers."""
    (tmp_path / "public" / "private").mkdir(parents=True)
    with pytest.raises(TaskPackageError, match="overlaps"):
        _check_disjoint(tmp_path / "public", [tmp_path / "public" / "private"])
    with pytest.raises(TaskPackageError, match="overlaps"):
        _check_disjoint(tmp_path / "public" / "private", [tmp_path / "public"])
    _check_disjoint(tmp_path / "public", [tmp_path / "elsewhere"])


def test_seccomp_profile_is_requested_and_podman_profile_tightened(tmp_path: Path) -> None:
    """A profile path becomes ``seccomp=PATH``; Podman's copy loses unshare/setns/keyctl."""
    import json

    from openmle.backends import _docker

    body = DockerSandbox().container_request(
        Job(code="", task="toy"), task_name="toy", public_dir=PUB, workspace=WS,
        seccomp_profile="/etc/p.json",
    )  # fmt: skip
    host = body["HostConfig"]
    assert isinstance(host, dict)
    assert host["SecurityOpt"] == ["no-new-privileges", "seccomp=/etc/p.json"]
    if not _docker._PODMAN_SECCOMP.is_file():
        pytest.skip("Podman's default seccomp profile is not installed here")
    path = Path(_docker._tightened_podman_profile())
    try:
        profile = json.loads(path.read_text())
        allowed = {
            n for r in profile["syscalls"] if r["action"] == "SCMP_ACT_ALLOW" for n in r["names"]
        }
        assert not allowed & {"unshare", "setns", "keyctl", "add_key", "request_key"}
        assert {"clone", "read", "write"} <= allowed
        assert path.parent.stat().st_mode & 0o077 == 0
    finally:
        shutil.rmtree(path.parent)


@pytest.mark.needs("docker")
def test_preflight_names_a_dead_engine_before_any_step(tmp_path: Path) -> None:
    """A search on a sandbox whose engine is down stops at once with one clear error and
    writes no run directory (it used to spend ten steps on infrastructure errors).
    """
    import anyio

    from openmle.backends import OfflineModel
    from openmle.errors import SandboxError
    from openmle.search import Budget, SearchSpec, arun_search

    dead = f"unix://{tmp_path / 'no-engine.sock'}"
    sandbox = DockerSandbox(base_url=dead)

    async def main() -> None:
        with pytest.raises(SandboxError, match=r"no container engine answers at unix://.*base_url"):
            await sandbox.preflight()
        with pytest.raises(SandboxError, match="no container engine answers"):
            await arun_search(
                SearchSpec(
                    task="toy",
                    model=OfflineModel(),
                    sandbox=sandbox,
                    budget=Budget(steps=3),
                    higher_is_better=True,
                ),
                run_dir=tmp_path / "run",
            )
        await sandbox.aclose()

    anyio.run(main)
    assert not (tmp_path / "run").exists()
