"""Isolation helpers: rlimit clamping, symlink-free views, runtime discovery, bwrap layout."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
from tests._files import deep_tree, locked_tree

from openmle._trees import walk
from openmle.backends import _isolation as iso
from openmle.backends._seccomp import core_limit_program


def test_clamp_rlimits_never_exceeds_hard_limit() -> None:
    """Wanted limits above the hard limit become the hard limit; None is dropped."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    got = dict(
        (n, (s, h))
        for n, s, h in iso.clamp_rlimits(
            [("RLIMIT_NOFILE", 10**9), ("RLIMIT_CORE", 0), ("RLIMIT_CPU", None)]
        )
    )
    want_nofile = 10**9 if hard == resource.RLIM_INFINITY else hard
    assert got["RLIMIT_NOFILE"] == (want_nofile, want_nofile)
    assert got["RLIMIT_CORE"] == (0, 0)
    assert "RLIMIT_CPU" not in got


def test_symlink_free_copy_drops_escaping_links(tmp_path: Path) -> None:
    """Links inside the tree are copied as files; links out of it (to answers) are dropped."""
    pub, priv = tmp_path / "public", tmp_path / "private"
    pub.mkdir()
    priv.mkdir()
    (pub / "train.csv").write_text("a\n")
    (priv / "answers.csv").write_text("secret\n")
    (pub / "alias.csv").symlink_to(pub / "train.csv")
    (pub / "leak.csv").symlink_to(priv / "answers.csv")
    (pub / "leakdir").symlink_to(priv)
    (pub / "rel.csv").symlink_to("../private/answers.csv")
    out = tmp_path / "view"
    iso.symlink_free_copy(pub, out, deny=[priv])
    assert sorted(p.name for p in out.iterdir()) == ["alias.csv", "train.csv"]
    assert not (out / "alias.csv").is_symlink()
    assert (out / "alias.csv").read_text() == "a\n"
    assert not os.access(out / "train.csv", os.W_OK) or os.geteuid() == 0
    iso.safe_rmtree(out)
    assert not out.exists()


def test_symlink_free_copy_checks_links_inside_linked_directories(tmp_path: Path) -> None:
    """A link to the answers inside a directory reached through an in-tree link was followed
    (``shutil.copytree``): the answers stood in the Landlock program's copy of the public
    data."""
    pub, priv = tmp_path / "public", tmp_path / "private"
    (pub / "images").mkdir(parents=True)
    priv.mkdir()
    (priv / "answers.csv").write_text("secret\n")
    (pub / "images" / "1.png").write_text("png")
    (pub / "images" / "answers.csv").symlink_to("../../private/answers.csv")
    (pub / "train_images").symlink_to("images")
    out = tmp_path / "view"
    iso.symlink_free_copy(pub, out, deny=[priv])
    copied = sorted(os.path.relpath(os.path.join(d, f), out) for d, _, fs in walk(out) for f in fs)
    assert copied == ["images/1.png", "train_images/1.png"]
    assert not any(os.path.islink(out / f) for f in copied)
    iso.safe_rmtree(out)


def test_symlink_free_copy_survives_link_cycles_and_deep_trees(deep_tmp_path: Path) -> None:
    """A link to a directory above it and a tree deeper than Python's recursion limit made the
    copy raise ``RecursionError``: the cycle is cut, the deep tree copied."""
    pub = deep_tmp_path / "public"
    (pub / "images").mkdir(parents=True)
    (pub / "images" / "1.png").write_text("png")
    (pub / "images" / "up").symlink_to("..")
    (pub / "train_images").symlink_to("images")
    deep_tree(pub, sys.getrecursionlimit() + 200)
    out = deep_tmp_path / "view"
    iso.symlink_free_copy(pub, out, deny=[])
    assert (out / "train_images" / "1.png").read_text() == "png"
    assert not (out / "images" / "up").exists()  # a link to a directory it is being copied in
    assert sum(1 for _ in walk(out)) > sys.getrecursionlimit()
    iso.safe_rmtree(out)


def test_runtime_info_covers_this_interpreter() -> None:
    """The runtime roots include this interpreter's prefix and site-packages."""
    info = iso.runtime_info(sys.executable)
    assert any(
        iso.is_within(sys.base_prefix, r) or sys.base_prefix.startswith("/usr") for r in info.roots
    )
    assert os.path.exists(info.executable)


def _bwrap_argv(
    tmp_path: Path,
    info: iso.RuntimeInfo,
    private_paths: list[Path],
    *,
    info_fd: int | None,
    command: list[str],
) -> list[str]:
    """``bwrap_argv`` with data, workspace and program all in ``tmp_path``, a 1 KiB /tmp, no
    extra read-only paths and no GPU."""
    return iso.bwrap_argv(
        bwrap="bwrap",
        info=info,
        data_dir=tmp_path,
        workspace=tmp_path,
        program_dir=tmp_path,
        tmp_bytes=1024,
        private_paths=private_paths,
        extra_ro=[],
        gpu=False,
        info_fd=info_fd,
        command=command,
    )


def test_bwrap_argv_hides_private_paths_inside_mounts(tmp_path: Path) -> None:
    """A private dir under a mounted runtime root gets a tmpfs over it; the command is last."""
    root = tmp_path / "rt"
    (root / "task" / "private").mkdir(parents=True)
    info = iso.RuntimeInfo(executable=sys.executable, roots=(str(root),), bin_dir="/x")
    argv = _bwrap_argv(tmp_path, info, [root / "task" / "private"], info_fd=None, command=["p"])
    private = str((root / "task" / "private").resolve())
    i = argv.index(private)
    assert argv[i - 1] == "--tmpfs"
    # A runtime under /tmp (a venv made there) is bound after the private /tmp, not hidden.
    assert argv.index("/tmp") < argv.index(str(root))
    for flag in ("--unshare-net", "--unshare-pid", "--die-with-parent"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert argv[-2:] == ["--", "p"]


def test_descendants_and_env_scan() -> None:
    """A child process is found as a descendant and by its environment marker."""
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"],
        env={**os.environ, "OPENMLE_TEST_MARK": "m1"},
    )
    try:
        assert proc.pid in iso.descendants(os.getpid())
        assert iso.live_pids_with_env("OPENMLE_TEST_MARK", "m1") == {proc.pid}
    finally:
        proc.kill()
        proc.wait()
    assert iso.live_pids_with_env("OPENMLE_TEST_MARK", "m1") == set()


def test_bwrap_argv_runs_the_command_itself(tmp_path: Path) -> None:
    """bwrap runs the program itself, reporting on the info fd; cgroups are joined outside."""
    info = iso.RuntimeInfo(executable=sys.executable, roots=(), bin_dir="/x")
    argv = _bwrap_argv(tmp_path, info, [], info_fd=7, command=["python", "/program/main.py"])
    assert argv[-3:] == ["--", "python", "/program/main.py"]
    assert argv[argv.index("--info-fd") + 1] == "7"
    assert not any("cgroup.procs" in a for a in argv)  # joined outside the sandbox instead


def test_landlock_rules_are_an_allow_list(tmp_path: Path) -> None:
    """Weak-mode rules: read-only runtime and data, read-write workspace, no blanket /proc."""
    info = iso.RuntimeInfo(executable=sys.executable, roots=("/opt/py",), bin_dir="/opt/py/bin")
    rules = dict(
        iso.landlock_rules(
            info=info,
            data_dir=tmp_path / "data",
            program_dir=tmp_path / "prog",
            workspace=tmp_path / "ws",
            tmp_dir=tmp_path / "tmp",
            extra_ro=[],
            gpu=False,
        )
    )
    assert rules["/opt/py"] == iso.LL_READ_ONLY
    assert rules[str(tmp_path / "data")] == iso.LL_READ_ONLY
    assert rules[str(tmp_path / "ws")] == iso.LL_ALL
    assert rules["/proc/self"] == iso.LL_READ_ONLY
    assert "/proc" not in rules and "/" not in rules and "/etc" not in rules
    assert not any(p.startswith(str(tmp_path)) and p.endswith("private") for p in rules)


def _bpf(prog: list[tuple[int, int, int, int]], nr: int, arch: int, args: tuple[int, ...]) -> int:
    """A tiny classic-BPF interpreter over seccomp_data (nr, arch, ip, args)."""
    import struct

    data = struct.pack("<iIQ6Q", nr, arch, 0, *(args + (0,) * (6 - len(args))))
    a, pc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        pc += 1
        if code == 0x20:
            a = struct.unpack_from("<I", data, k)[0]
        elif code == 0x54:
            a &= k
        elif code in (0x15, 0x45):
            hit = a == k if code == 0x15 else bool(a & k)
            pc += jt if hit else jf
        else:
            assert code == 0x06
            return k


@pytest.mark.parametrize("sockets", ["tcp", "ip", "none", "any"])
@pytest.mark.parametrize("root", [True, False])
def test_seccomp_program_semantics(
    sockets: Literal["tcp", "ip", "none", "any"], root: bool
) -> None:
    """Only TCP sockets (when allowed; "ip": the built-in families and protocols); Unix, UDP,
    netlink refused; socketpair Unix only; metadata calls no-ops as root;
    namespaces, mounts, keyrings, System V IPC (unless asked for) and foreign-ABI syscalls
    refused; with TCP only, listen and MSG_FASTOPEN sends refused; everything else allowed."""
    import errno
    import socket

    prog = iso.seccomp_program("x86_64", sockets=sockets, noop_metadata=root)
    assert prog is not None
    x86 = 0xC000003E
    allow = 0x7FFF0000

    def sock(family: int, kind: int) -> int:
        assert prog is not None
        return _bpf(prog, 41, x86, (family, kind))

    eperm, enosys = 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
    tcp = {"tcp": allow, "ip": allow, "none": eperm, "any": allow}[sockets]
    other = allow if sockets == "any" else eperm
    built_in = allow if sockets in ("ip", "any") else eperm  # what every kernel has built in
    assert sock(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) == tcp
    assert sock(socket.AF_INET6, socket.SOCK_STREAM) == tcp
    assert _bpf(prog, 41, x86, (socket.AF_INET, socket.SOCK_STREAM, 6)) == tcp  # IPPROTO_TCP
    assert _bpf(prog, 41, x86, (socket.AF_INET, socket.SOCK_STREAM, 262)) == other  # MPTCP
    assert _bpf(prog, 41, x86, (socket.AF_INET6, socket.SOCK_STREAM, 132)) == other  # SCTP
    assert _bpf(prog, 41, x86, (socket.AF_INET, 6, 33)) == other  # SOCK_DCCP, DCCP
    assert _bpf(prog, 41, x86, (socket.AF_INET, socket.SOCK_SEQPACKET, 0)) == other
    assert sock(socket.AF_INET, socket.SOCK_DGRAM) == built_in
    assert _bpf(prog, 41, x86, (socket.AF_INET6, socket.SOCK_DGRAM, 58)) == built_in  # ping
    assert sock(socket.AF_UNIX, socket.SOCK_STREAM) == built_in
    assert sock(socket.AF_NETLINK, socket.SOCK_RAW) == built_in  # NETLINK_ROUTE
    assert _bpf(prog, 41, x86, (socket.AF_NETLINK, socket.SOCK_RAW, 21)) == other  # crypto_user
    for family in (30, 21, 38, 40, 17):  # TIPC, RDS, ALG, VSOCK, PACKET: modules, raw frames
        assert sock(family, socket.SOCK_SEQPACKET) == other
    # socketpair: Unix only (another family would load its module as socket() would)
    assert _bpf(prog, 53, x86, (socket.AF_UNIX, socket.SOCK_STREAM)) == allow
    assert _bpf(prog, 53, x86, (30, socket.SOCK_SEQPACKET)) == other  # TIPC
    assert _bpf(prog, 268, x86, ()) == (0x00050000 if root else allow)  # fchmodat
    assert _bpf(prog, 0, x86, ()) == allow  # read
    assert _bpf(prog, 56, x86, (0x01200011,)) == allow  # clone as fork() calls it
    assert _bpf(prog, 56, x86, (0x10000000,)) == eperm  # clone(CLONE_NEWUSER)
    assert _bpf(prog, 435, x86, ()) == enosys  # clone3
    for nr in (272, 308, 165, 250, 321, 103):  # unshare, setns, mount, keyctl, bpf, syslog
        assert _bpf(prog, nr, x86, ()) == eperm
    for nr in (425, 426, 427):  # io_uring_setup, _enter, _register (IORING_OP_SOCKET)
        assert _bpf(prog, nr, x86, ()) == eperm
    fastopen = 0x20000000  # MSG_FASTOPEN: sending connects
    tcp_only = eperm if sockets == "tcp" else allow
    assert _bpf(prog, 50, x86, ()) == tcp_only  # listen (binds an unbound socket)
    assert _bpf(prog, 44, x86, (3, 0, 0, fastopen)) == tcp_only  # sendto
    assert _bpf(prog, 307, x86, (3, 0, 0, fastopen)) == tcp_only  # sendmmsg
    assert _bpf(prog, 46, x86, (3, 0, fastopen)) == tcp_only  # sendmsg
    assert _bpf(prog, 44, x86, (3, 0, 0, 0x40)) == allow  # sendto(MSG_DONTWAIT)
    assert _bpf(prog, 46, x86, (3, 0, 0x4000)) == allow  # sendmsg(MSG_NOSIGNAL)
    for nr in (29, 30, 31, 64, 65, 66, 68, 69, 70, 71, 220):  # System V shm, sem, msg
        assert _bpf(prog, nr, x86, ()) == eperm
    private_ipc = iso.seccomp_program("x86_64", sockets=sockets, noop_metadata=root, sysv_ipc=True)
    assert private_ipc is not None
    assert _bpf(private_ipc, 29, x86, ()) == allow  # shmget in a private IPC namespace
    assert _bpf(prog, 76, x86, ()) == allow  # truncate: Landlock checks it from ABI 3
    assert _bpf(prog, 302, x86, (0, 7)) == allow  # prlimit64 on itself (setrlimit)
    assert _bpf(prog, 302, x86, (1, 7)) == eperm  # prlimit64 on init
    others = iso.seccomp_program("x86_64", sockets=sockets, noop_metadata=root, prlimit_others=True)
    assert others is not None
    assert _bpf(others, 302, x86, (1, 7)) == allow
    # RLIMIT_CORE (4) stays at 1 byte: setting it is refused, reading it is not
    ptr = 0x7FFD_0000_1000
    for p in (prog, others):
        assert _bpf(p, 160, x86, (4, ptr)) == eperm  # setrlimit(RLIMIT_CORE)
        assert _bpf(p, 160, x86, (7, ptr)) == allow  # setrlimit(RLIMIT_NOFILE)
        assert _bpf(p, 302, x86, (0, 4, ptr)) == eperm  # prlimit64 setting it
        assert _bpf(p, 302, x86, (0, 4, 1 << 40)) == eperm  # a pointer above 4 GiB
        assert _bpf(p, 302, x86, (0, 4, 0, ptr)) == allow  # prlimit64 reading it
    assert _bpf(prog, 302, x86, (1, 4, 0, ptr)) == eperm  # still not another process's
    loose = iso.seccomp_program(
        "x86_64", sockets=sockets, noop_metadata=root, prlimit_others=True, core_limit=False
    )
    assert loose is not None and _bpf(loose, 302, x86, (0, 4, ptr)) == allow
    assert _bpf(loose, 160, x86, (4, ptr)) == allow
    core = core_limit_program("x86_64")  # stacked by the bwrap mode's launcher
    assert core is not None
    assert _bpf(core, 160, x86, (4, ptr)) == eperm and _bpf(core, 302, x86, (0, 4, ptr)) == eperm
    assert _bpf(core, 302, x86, (1, 4, 0, ptr)) == allow and _bpf(core, 0, x86, ()) == allow
    assert _bpf(core, 160, 0x40000003, (4, ptr)) == allow  # a foreign ABI: bwrap's filter
    arm_core = core_limit_program("aarch64")
    assert arm_core is not None and _bpf(arm_core, 164, 0xC00000B7, (4, ptr)) == eperm
    assert _bpf(arm_core, 261, 0xC00000B7, (0, 4, ptr)) == eperm
    assert core_limit_program("ppc64le") is None
    set_flags = eperm if root else allow  # ioctl(FS_IOC_SETFLAGS) on any readable file
    assert _bpf(prog, 16, x86, (3, 0x40086602)) == set_flags
    assert _bpf(prog, 16, x86, (3, 0x401C5820)) == set_flags  # FS_IOC_FSSETXATTR
    assert _bpf(prog, 16, x86, (3, 0x80086601)) == allow  # FS_IOC_GETFLAGS
    assert _bpf(prog, 16, x86, (1, 0x5401)) == allow  # TCGETS
    assert _bpf(prog, 16, x86, (3, 0x5423)) == eperm  # TIOCSETD: a line discipline's module
    # another process's scheduling: the caller's own only, unless the run has its own PID
    # namespace (prlimit_others: bwrap)
    assert _bpf(prog, 203, x86, (0, 8, ptr)) == allow  # sched_setaffinity(0)
    assert _bpf(prog, 141, x86, (0, 0, 5)) == allow  # setpriority(PRIO_PROCESS, 0)
    assert _bpf(prog, 141, x86, (1, 0, 5)) == allow  # setpriority(PRIO_PGRP, 0)
    assert _bpf(prog, 251, x86, (1, 0, 7)) == allow  # ioprio_set(IOPRIO_WHO_PROCESS, 0)
    for nr, args in (
        (203, (1, 8, ptr)),  # sched_setaffinity(init)
        (144, (1, 5, ptr)),  # sched_setscheduler(init, SCHED_IDLE)
        (142, (1, ptr)),  # sched_setparam
        (314, (1, ptr, 0)),  # sched_setattr
        (141, (2, 0, 19)),  # setpriority(PRIO_USER, 0): every process of the user
        (141, (0, 1, 19)),  # setpriority(PRIO_PROCESS, init)
        (251, (3, 0, 7)),  # ioprio_set(IOPRIO_WHO_USER)
        (251, (1, 1, 7)),  # ioprio_set(IOPRIO_WHO_PROCESS, init)
    ):
        assert _bpf(prog, nr, x86, args) == eperm, (nr, args)
        assert _bpf(others, nr, x86, args) == allow, (nr, args)
    no_truncate = iso.seccomp_program("x86_64", sockets=sockets, noop_metadata=root, truncate=False)
    assert no_truncate is not None
    assert _bpf(no_truncate, 76, x86, ()) == eperm
    assert _bpf(no_truncate, 77, x86, ()) == allow  # ftruncate
    assert _bpf(prog, 41 | 0x40000000, x86, ()) == eperm  # x32 socket
    assert _bpf(prog, 41, 0x40000003, ()) == eperm  # i386 ABI
    assert iso.seccomp_program("ppc64le", sockets="tcp", noop_metadata=False) is None
    arm = iso.seccomp_program("aarch64", sockets="tcp", noop_metadata=True)
    assert arm is not None
    assert _bpf(arm, 198, 0xC00000B7, (socket.AF_UNIX, 1)) == eperm
    assert _bpf(arm, 53, 0xC00000B7, ()) == 0x00050000  # fchmodat on arm64
    assert _bpf(arm, 97, 0xC00000B7, ()) == eperm  # unshare on arm64
    assert _bpf(arm, 194, 0xC00000B7, ()) == eperm  # shmget on arm64
    assert _bpf(arm, 425, 0xC00000B7, ()) == eperm  # io_uring_setup on arm64
    assert _bpf(arm, 140, 0xC00000B7, (2, 0, 19)) == eperm  # setpriority on arm64
    assert _bpf(arm, 122, 0xC00000B7, (1, 8, ptr)) == eperm  # sched_setaffinity on arm64
    assert len(iso.seccomp_bytes(prog)) == 8 * len(prog)


def test_safe_rmtree_removes_locked_trees(tmp_path: Path) -> None:
    """Read-only files, unsearchable dirs and outward symlinks are removed, never followed."""
    root, outside = locked_tree(tmp_path)
    iso.safe_rmtree(root)
    assert not root.exists()
    assert outside.read_text() == "keep"


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_safe_rmtree_detaches_a_quota_mount_left_behind(tmp_path: Path) -> None:
    """A run directory whose quota tmpfs is still mounted (its service was killed) goes too."""
    run = tmp_path / "openmle-run-x"
    box = run / "box"
    box.mkdir(parents=True)
    assert iso.mount_quota_tmpfs(box, max_bytes=1 << 20, max_files=100)
    (box / "workspace").mkdir()
    (box / "workspace" / "f").write_text("x")
    assert iso.mounts_under(run) == [str(box)]
    with pytest.raises(OSError, match="No space left"):  # 2 MiB do not fit in 1 MiB
        (box / "big").write_bytes(b"x" * (2 << 20))
    iso.safe_rmtree(run)
    assert not run.exists()
    assert iso.mounts_under(tmp_path) == []


def test_cgroup_limits_are_raised_and_lowered_and_not_rewritten() -> None:
    """A spare's cgroup is made with the defaults: a run may raise its memory limit (v1 keeps
    memsw >= limit: memsw first) or lower it; an unchanged value is not written again."""
    cg = iso.Cgroup.create(pids_max=16, memory_bytes=256 << 20, cpus=None)
    if cg is None:
        pytest.skip("no writable cgroups here")
    try:
        ctrl, name = ("memory", "memory.limit_in_bytes") if cg.version == 1 else ("", "memory.max")
        limit = cg.dirs[ctrl] / name
        for want in (1 << 30, 128 << 20, 2 << 30):
            cg.set_limits(pids_max=16, memory_bytes=want, cpus=None)
            assert int(limit.read_text()) == want
        pids = cg.dirs["pids" if cg.version == 1 else ""] / "pids.max"
        pids.write_text("20")  # behind its back: the same value is not written again
        cg.set_limits(pids_max=16, memory_bytes=None, cpus=None)
        assert pids.read_text().strip() == "20"
        cg.set_limits(pids_max=17, memory_bytes=None, cpus=None)
        assert pids.read_text().strip() == "17"
    finally:
        cg.remove()


def test_cgroup_join_files_by_version() -> None:
    """v1 joins through each controller's ``tasks`` (the writing thread moves, without the
    global lock's RCU grace period); v2 through ``cgroup.procs``."""
    v1 = iso.Cgroup(dirs={"pids": Path("/cg/pids/r"), "memory": Path("/cg/memory/r")}, version=1)
    assert v1.procs_files == ["/cg/pids/r/tasks", "/cg/memory/r/tasks"]
    v2 = iso.Cgroup(dirs={"": Path("/cg/r")}, version=2)
    assert v2.procs_files == ["/cg/r/cgroup.procs"]


def _shell_in(cg: iso.Cgroup, script: str) -> subprocess.Popen[str]:
    """A ``/bin/sh`` that joins ``cg`` as the spare's shell does (``0`` to every join file),
    then runs ``script``; its stdout is a text pipe."""
    joins = "; ".join(f"echo 0 > {f}" for f in cg.procs_files)
    return subprocess.Popen(
        ["/bin/sh", "-c", f"{joins} || exit 3; {script}"], stdout=subprocess.PIPE, text=True
    )


def test_cgroup_remove_kills_a_process_left_in_it_and_removes_every_directory() -> None:
    """A process still in the cgroup when it is removed (one forked as :meth:`kill` ran, or
    still exiting) keeps it busy: ``remove`` SIGKILLs what is left and retries, so no cgroup
    directory outlives the run (it was left behind under load in CI)."""
    cg = iso.Cgroup.create(pids_max=16, memory_bytes=256 << 20, cpus=None)
    if cg is None:
        pytest.skip("no writable cgroups here")
    with _shell_in(cg, "echo joined; exec sleep 60") as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "joined"
            cg.remove()  # no kill() first: the sleeping process is a straggler
            assert proc.wait(timeout=30) == -signal.SIGKILL
            assert [d for d in cg.dirs.values() if d.exists()] == []
        finally:
            proc.kill()


def test_a_single_threaded_joiner_and_its_children_are_in_the_cgroup() -> None:
    """What the spare's ``/bin/sh`` does: write ``0`` to every join file, then fork; the shell
    and its child are members of the cgroup in every controller (its process count and
    memory are the run's)."""
    cg = iso.Cgroup.create(pids_max=16, memory_bytes=256 << 20, cpus=None)
    if cg is None:
        pytest.skip("no writable cgroups here")
    try:
        with _shell_in(cg, "sleep 30 & echo $$ $!; wait") as proc:
            try:
                assert proc.stdout is not None
                shell, child = map(int, proc.stdout.readline().split())
                for d in cg.dirs.values():
                    members = {int(p) for p in (d / "cgroup.procs").read_text().split()}
                    assert {shell, child} <= members, d
                assert {shell, child} <= cg.pids()
            finally:
                cg.kill()
                proc.wait(timeout=30)
    finally:
        cg.remove()
