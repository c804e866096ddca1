"""Process isolation for the local sandbox: bubblewrap, Landlock, cgroups, rlimits, tree kills.

Two isolation modes, chosen once per :class:`~openmle.backends.LocalSandbox`:

- ``"bwrap"`` (preferred): the program runs under bubblewrap in fresh PID, network, IPC and UTS
  namespaces with every capability dropped. Its filesystem is a tmpfs root holding only the
  Python runtime (read-only), the public data (read-only, at ``/data``), its program
  (read-only, at ``/program``) and its workspace (read-write, at ``/workspace``). Private answer
  paths are never mounted; if one lies inside a mounted runtime directory an empty tmpfs is
  mounted over it.
- ``"landlock"`` (the weaker fallback, used where bubblewrap is missing or cannot create
  namespaces): the program runs as a plain child in its own session, with no capabilities
  (the launcher empties the bounding set when it runs as root). A Landlock ruleset
  (Linux >= 5.13) allows reads only beneath the runtime, a copied, symlink-free view of the
  public data and the program, its own ``/proc/<pid>`` and a few system-wide ``/proc`` files
  (not other processes' environments), writes only beneath the workspace and a private temp
  dir, and (Landlock ABI >= 4) no TCP connect or bind; with ABI >= 6 the program also cannot
  signal processes outside its domain. A seccomp filter (x86-64 and arm64) lets ``socket()``
  create only TCP sockets (none below ABI 4): no Unix sockets (Landlock cannot stop a
  ``connect`` to a host service's socket), no UDP, netlink or packet sockets. It shares the
  host's PID namespace.

Every run starts from a small Python launcher (standard library only, :mod:`._launcher`)
started *ahead* of its run, when the previous run started: it joined the run's cgroups and set a
parent-death signal before the job came, and then waits for its run's configuration on stdin.
The run only hands it over: the launcher sets the rlimits itself (``setrlimit``), and in bwrap
mode reports on a status pipe and ``exec``s bubblewrap, which reports the sandbox's setup on
the same pipe and ``exec``s the program; in the Landlock mode it applies Landlock and seccomp
and ``exec``s the program. So a run pays no interpreter start and no ``sh``/``prlimit`` before
its program: one Python start-up per run, the program's own. Either way a launch failure is
an infrastructure error, never blamed on the program. The launcher runs with a fixed
environment (never ``job.env``, whose loader variables would run code on the host before any
isolation); the program's environment is applied inside (``bwrap --clearenv --setenv``, or the
launcher's ``execve``). In the Landlock mode, where it may (root), the launcher unshares its
mount namespace to mount a private, size-limited ``/dev/shm`` (else the program gets none);
bwrap mounts a sized tmpfs on ``/dev/shm``. The run's workspace, ``/tmp`` and program live on
a size- and inode-limited tmpfs mounted on the host (:func:`mount_quota_tmpfs`) where we may
mount.

Both modes load a seccomp filter (:func:`seccomp_program`): no new namespaces, mounts, kernel
keyrings, ``bpf``, ``perf_event_open``, ``userfaultfd`` or io_uring; the weak mode also limits
``socket()`` to TCP and, as root, turns file-metadata calls into no-ops. The bwrap mode also
mounts ``/proc/sys`` and its kin read-only: a program runs as uid 0 when we do, and sysctls
check the uid, not capabilities.

Limits: a per-run cgroup (v1 or v2, where this process may create one) caps processes and
memory (and, when asked, CPU share) and reports OOM kills; without one, ``RLIMIT_NPROC`` (not
enforced for root) and ``RLIMIT_DATA`` (private writable memory, per process) stand in.
``RLIMIT_CPU``, ``RLIMIT_FSIZE`` and ``RLIMIT_CORE`` are always set, each clamped to the
current hard limit (an unprivileged process cannot raise one).

The code lives in private modules, one per part, re-exported here: :mod:`._launcher` (the
launcher program, and the syscall and flag numbers everything else imports from it),
:mod:`._runtime` (the interpreter's directories, the host layout, rlimits), :mod:`._bwrap`,
:mod:`._landlock`, :mod:`._seccomp`, :mod:`._cgroup` and :mod:`._procs` (process trees, the
quota tmpfs, removal).

Peers: E2B's command timeout leaves the process running (E2B#500) and SWE-ReX/NeMo Gym kill the
client, not the process tree; here every way out of a run ends with the whole tree killed.
"""

from __future__ import annotations

from openmle.backends._bwrap import bwrap_argv, bwrap_problem
from openmle.backends._cgroup import Cgroup, _cgroup_mounts, _own_cgroups
from openmle.backends._landlock import landlock_abi, landlock_rules, symlink_free_copy
from openmle.backends._launcher import LL_ALL, LL_DEVICE, LL_EXECUTE, LL_READ_ONLY
from openmle.backends._procs import (
    descendants,
    kill_group,
    kill_pids,
    live_pids_in_mount_ns,
    live_pids_with_env,
    mount_quota_tmpfs,
    mounts_under,
    owned_marker,
    safe_rmtree,
    start_time,
    sweep_orphans,
    unmount,
)
from openmle.backends._runtime import (
    ETC_FILES,
    LAUNCHER,
    PROC_FILES,
    HostLayout,
    RuntimeInfo,
    clamp_rlimits,
    count_user_processes,
    hard_rlimits,
    host_layout,
    is_within,
    runtime_info,
)
from openmle.backends._seccomp import seccomp_bytes, seccomp_program

__all__ = [
    "ETC_FILES",
    "LAUNCHER",
    "LL_ALL",
    "LL_DEVICE",
    "LL_EXECUTE",
    "LL_READ_ONLY",
    "PROC_FILES",
    "Cgroup",
    "HostLayout",
    "RuntimeInfo",
    "_cgroup_mounts",
    "_own_cgroups",
    "bwrap_argv",
    "bwrap_problem",
    "clamp_rlimits",
    "count_user_processes",
    "descendants",
    "hard_rlimits",
    "host_layout",
    "is_within",
    "kill_group",
    "kill_pids",
    "landlock_abi",
    "landlock_rules",
    "live_pids_in_mount_ns",
    "live_pids_with_env",
    "mount_quota_tmpfs",
    "mounts_under",
    "owned_marker",
    "runtime_info",
    "safe_rmtree",
    "seccomp_bytes",
    "seccomp_program",
    "start_time",
    "sweep_orphans",
    "symlink_free_copy",
    "unmount",
]
