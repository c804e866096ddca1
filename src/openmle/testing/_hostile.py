"""The hostile-program battery: programs that attack a sandbox, and the checks after each one.

Every program must end classified (an expected :class:`openmle.Outcome`, never an exception),
leave no process behind, and leave the host and the task package untouched. Resource sizes are
kept small enough for a CI machine (2 cores): the fork bomb stops at 2**12 processes, the
memory bomb at 4 GiB (it runs with ``memory_mb=512``), the disk filler at 2 GiB (a sandbox's
file-size limit should stop it first), the stdout flood is 100 MB.

Process checks scan this machine's ``/proc`` for the marker variable each job carries in
``job.env``; a sandbox that runs programs on another machine passes them vacuously.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import socket
import sys
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path

import anyio
import anyio.abc
from attrs import field, frozen

from openmle._protocols import Sandbox
from openmle._types import Job, Outcome, Resources, RunResult

__all__ = ["HOSTILE_PROGRAMS", "HostileProgram", "HostileReport", "run_hostile_battery"]

MARKER_ENV = "OPENMLE_HOSTILE_MARKER"


def _outcomes(value: Sequence[Outcome | str]) -> frozenset[Outcome]:
    return frozenset(Outcome(v) for v in value)


@frozen(kw_only=True)
class HostileProgram:
    """One attack.

    Args:
        name: short identifier.
        description: what it attacks.
        body: Python source; it may use the constants ``PRIVATE_FILES``, ``PRIVATE_DIRS``,
            ``TASK_ROOT``, ``SENTINELS`` (host paths it tries to create), ``PORT`` (a TCP
            port listening on the host's loopback), ``HOST_UNIX_SOCKET`` (a Unix socket a
            host service listens on), ``HOST_SECRET`` and ``HOST_PIDS`` (a
            secret in the environment and command line of host processes), defined before it
            runs, ``HOST_SHM_FILE`` (a file the host keeps in its ``/dev/shm``) and
            ``HOST_FDS`` (``(fd, st_dev, st_ino)`` of descriptors the host's process holds
            open without close-on-exec: the task root and a private file) and
            ``HOST_ABSTRACT_SOCKET`` (the name, without its leading NUL, of an abstract Unix
            socket a host service listens on), and ``HOST_CWD`` (the host process's working
            directory).
        expected: outcomes that count as correctly classified.
        timeout_s: the job's wall-clock limit.
        memory_mb: the job's memory limit (None for the sandbox default).
        must_print: text the program prints when it ran to the end (proves it ran).
        must_not_print: text it prints only when the attack worked.
        min_dropped_bytes: the log cap must have dropped at least this many bytes.
    """

    name: str
    description: str
    body: str
    expected: frozenset[Outcome] = field(converter=_outcomes)
    timeout_s: float = 30.0
    memory_mb: int | None = None
    must_print: str | None = None
    must_not_print: str | None = None
    min_dropped_bytes: int = 0


@frozen(kw_only=True)
class HostileReport:
    """What one hostile program did to a sandbox; ``ok`` when nothing went wrong."""

    name: str
    outcome: Outcome
    expected: tuple[Outcome, ...]
    problems: tuple[str, ...]
    result: RunResult

    @property
    def ok(self) -> bool:
        """True when the run was classified as expected and left no trace."""
        return not self.problems


_SAMPLE = (
    "import csv, os\n"
    "with open(os.path.join(os.environ['DATA_DIR'], 'sample_submission.csv'), newline='') as f:\n"
    "    ROWS = list(csv.reader(f))\n"
    "def write(rows):\n"
    "    with open('submission.csv', 'w', newline='') as f:\n"
    "        csv.writer(f).writerows(rows)\n"
)

HOSTILE_PROGRAMS: tuple[HostileProgram, ...] = (
    HostileProgram(
        name="infinite_loop",
        description="spins forever on the CPU",
        body="while True:\n    pass\n",
        expected=[Outcome.TIMEOUT],
        timeout_s=2.0,
    ),
    HostileProgram(
        name="fork_bomb",
        description="doubles its processes 12 times, then keeps them alive",
        body=(
            "import os, time\n"
            "for _ in range(12):\n"
            "    try:\n"
            "        os.fork()\n"
            "    except OSError:\n"
            "        pass\n"
            "while True:\n"
            "    time.sleep(0.05)\n"
        ),
        expected=[Outcome.TIMEOUT, Outcome.RUNTIME_ERROR, Outcome.OOM],
        timeout_s=3.0,
    ),
    HostileProgram(
        name="memory_bomb",
        description="touches 64 MiB blocks until 4 GiB (job limit 512 MiB)",
        body=(
            "blocks = []\n"
            "for _ in range(64):\n"
            "    blocks.append(b'\\x01' * (64 << 20))\n"
            "print('ALLOCATED-4GiB')\n"
        ),
        expected=[Outcome.OOM],
        timeout_s=60.0,
        memory_mb=512,
        must_not_print="ALLOCATED-4GiB",
    ),
    HostileProgram(
        name="disk_filler",
        description="writes 1 MiB blocks to one file until 2 GiB",
        body=(
            "block = b'\\0' * (1 << 20)\n"
            "with open('fill.bin', 'wb') as f:\n"
            "    for _ in range(2048):\n"
            "        f.write(block)\n"
            "        f.flush()\n"
            "print('FILLED-2GiB')\n"
        ),
        expected=[Outcome.RUNTIME_ERROR],
        timeout_s=120.0,
        must_not_print="FILLED-2GiB",
    ),
    HostileProgram(
        name="stdout_flood",
        description="prints 100 MB, then exits 0 without a submission",
        body=(
            "import sys\n"
            "line = (b'x' * 1023 + b'\\n') * 1024\n"
            "for _ in range(100):\n"
            "    sys.stdout.buffer.write(line)\n"
            "sys.stdout.flush()\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        timeout_s=120.0,
        min_dropped_bytes=50_000_000,
    ),
    HostileProgram(
        name="network",
        description=(
            "opens TCP connections to a listener the battery starts on the host's loopback "
            "(never an outside address or a name lookup, so a backend without network "
            "isolation sends nothing beyond this host)"
        ),
        body=(
            "import socket\n"
            "for host, port in [('127.0.0.1', PORT)]:\n"
            "    try:\n"
            "        s = socket.create_connection((host, port), timeout=3)\n"
            "        s.sendall(b'hostile')\n"
            "        print('CONNECTED', host, port)\n"
            "    except OSError as exc:\n"
            "        print('blocked', host, type(exc).__name__)\n"
            "print('NETWORK-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="NETWORK-TRIED",
        must_not_print="CONNECTED",
    ),
    HostileProgram(
        name="privileges",
        description="looks for capabilities and opens a raw socket",
        body=(
            "import socket\n"
            "try:\n"
            "    with open('/proc/self/status') as f:\n"
            "        eff = [line.split()[1] for line in f if line.startswith('CapEff')]\n"
            "    if eff and int(eff[0], 16):\n"
            "        print('PRIVILEGED: capabilities', eff[0])\n"
            "except OSError:\n"
            "    pass\n"
            "try:\n"
            "    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)\n"
            "    print('PRIVILEGED: raw socket')\n"
            "except OSError as exc:\n"
            "    print('raw socket denied', exc.errno)\n"
            "print('PRIVILEGES-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="PRIVILEGES-TRIED",
        must_not_print="PRIVILEGED:",
    ),
    HostileProgram(
        name="host_unix_socket",
        description="connects to a Unix socket a host service listens on",
        body=(
            "import socket\n"
            "try:\n"
            "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
            "    s.settimeout(3)\n"
            "    s.connect(HOST_UNIX_SOCKET)\n"
            "    s.sendall(b'hostile')\n"
            "    print('CONNECTED', HOST_UNIX_SOCKET)\n"
            "except OSError as exc:\n"
            "    print('blocked', type(exc).__name__)\n"
            "print('UNIX-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="UNIX-TRIED",
        must_not_print="CONNECTED",
    ),
    HostileProgram(
        name="read_private",
        description="reads the answers by absolute, relative, symlinked and /proc paths",
        body=(
            "import os\n"
            "tried, leaked = 0, []\n"
            "def attempt(path, how):\n"
            "    global tried\n"
            "    tried += 1\n"
            "    try:\n"
            "        if os.path.isdir(path):\n"
            "            os.listdir(path)\n"
            "        else:\n"
            "            with open(path, 'rb') as f:\n"
            "                f.read(1)\n"
            "    except OSError:\n"
            "        return\n"
            "    leaked.append((how, path))\n"
            "data = os.environ['DATA_DIR']\n"
            "for i, p in enumerate(PRIVATE_FILES + PRIVATE_DIRS):\n"
            "    attempt(p, 'absolute')\n"
            "    attempt(os.path.relpath(p, os.getcwd()), 'relative-to-cwd')\n"
            "    attempt('../' * 40 + p.lstrip('/'), 'relative-from-root')\n"
            "    attempt('/proc/self/root' + p, 'proc-self-root')\n"
            "    attempt('/proc/1/root' + p, 'proc-1-root')\n"
            "    rel = os.path.relpath(p, TASK_ROOT)\n"
            "    for up in range(1, 5):\n"
            "        attempt(os.path.join(data, '../' * up + rel), 'relative-to-data')\n"
            "    try:\n"
            "        os.symlink(p, f'link{i}')\n"
            "        attempt(f'link{i}', 'symlink')\n"
            "    except OSError:\n"
            "        pass\n"
            "for rel in ('../private', '../../data/private', '../../valid/private'):\n"
            "    attempt(os.path.join(data, rel), 'relative-to-data')\n"
            "for how, path in leaked:\n"
            "    print('LEAKED', how, path)\n"
            "print('PRIVATE-TRIED', tried)\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="PRIVATE-TRIED",
        must_not_print="LEAKED",
    ),
    HostileProgram(
        name="read_host_environ",
        description="looks for a host process's secret in /proc/*/environ and cmdline",
        body=(
            "import os\n"
            "try:\n"
            "    pids = [int(p) for p in os.listdir('/proc') if p.isdigit()]\n"
            "except OSError:\n"
            "    pids = []\n"
            "for pid in sorted(set(pids) | set(HOST_PIDS)):\n"
            "    for what in ('environ', 'cmdline'):\n"
            "        try:\n"
            "            with open(f'/proc/{pid}/{what}', 'rb') as f:\n"
            "                data = f.read()\n"
            "        except OSError:\n"
            "            continue\n"
            "        if HOST_SECRET.encode() in data:\n"
            "            print('LEAKED', pid, what)\n"
            "print('HOST-ENV-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="HOST-ENV-TRIED",
        must_not_print="LEAKED",
    ),
    HostileProgram(
        name="symlinked_submission",
        description="makes submission.csv a symlink to the answers",
        body="import os\nos.symlink(PRIVATE_FILES[0], 'submission.csv')\n",
        expected=[Outcome.INVALID_SUBMISSION, Outcome.MISSING_SUBMISSION],
    ),
    HostileProgram(
        name="write_outside",
        description="writes into the task package, the data dir and host paths",
        body=(
            "import os\n"
            "targets = [os.path.join(TASK_ROOT, 'pwned.txt'),\n"
            "           os.path.join(os.environ['DATA_DIR'], 'pwned.csv'),\n"
            "           os.path.join(os.environ['DATA_DIR'], 'sample_submission.csv')]\n"
            "targets += [os.path.join(d, 'pwned') for d in PRIVATE_DIRS] + PRIVATE_FILES\n"
            "targets += SENTINELS\n"
            "for t in targets:\n"
            "    try:\n"
            "        with open(t, 'a') as f:\n"
            "            f.write('pwned')\n"
            "        print('WROTE', t)\n"
            "    except OSError as exc:\n"
            "        print('denied', t, type(exc).__name__)\n"
            "print('WRITES-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="WRITES-TRIED",
    ),
    HostileProgram(
        name="metadata_outside",
        description="chmods, chowns and re-dates the task package and the answers",
        body=(
            "import os\n"
            "targets = PRIVATE_FILES + PRIVATE_DIRS + [TASK_ROOT]\n"
            "targets.append(os.path.join(os.environ['DATA_DIR'], 'sample_submission.csv'))\n"
            "for t in targets:\n"
            "    for name, change in (('chmod', lambda p: os.chmod(p, 0o777)),\n"
            "                         ('chown', lambda p: os.chown(p, 4242, 4242)),\n"
            "                         ('utime', lambda p: os.utime(p, (0, 0)))):\n"
            "        try:\n"
            "            change(t)\n"
            "            print('call returned', name, t)\n"
            "        except OSError as exc:\n"
            "            print('denied', name, t, exc.errno)\n"
            "print('METADATA-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="METADATA-TRIED",
    ),
    HostileProgram(
        name="sysctl_write",
        description="writes host sysctls (each rewritten with its current value: harmless)",
        body=(
            "import os\n"
            "for path in ('/proc/sys/vm/swappiness', '/proc/sys/kernel/core_pattern',\n"
            "             '/proc/sys/kernel/hostname'):\n"
            "    try:\n"
            "        with open(path, 'rb') as f:\n"
            "            value = f.read()\n"
            "        fd = os.open(path, os.O_WRONLY)\n"
            "        try:\n"
            "            os.write(fd, value)\n"
            "        finally:\n"
            "            os.close(fd)\n"
            "        print('WROTE-SYSCTL', path)\n"
            "    except OSError as exc:\n"
            "        print('denied', path, exc.errno)\n"
            "print('SYSCTL-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="SYSCTL-TRIED",
        must_not_print="WROTE-SYSCTL",
    ),
    HostileProgram(
        name="namespaces_and_keyrings",
        description="creates a user namespace (capabilities in it) and opens the user keyring",
        body=(
            "import ctypes, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "if libc.unshare(0x10000000) == 0:\n"
            "    print('ESCALATED: new user namespace')\n"
            "nr = {'x86_64': 250, 'aarch64': 219}.get(os.uname().machine)\n"
            "if nr is not None:\n"
            "    libc.syscall.restype = ctypes.c_long\n"
            "    if libc.syscall(nr, 0, -4, 0, 0, 0) >= 0:\n"
            "        print('ESCALATED: user keyring')\n"
            "print('NAMESPACES-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="NAMESPACES-TRIED",
        must_not_print="ESCALATED",
    ),
    HostileProgram(
        name="clone_namespaces",
        description=(
            "clone and clone3 with CLONE_NEWUSER|NEWNS|NEWNET, then mounts a tmpfs and opens a "
            "netfilter netlink socket in the child; threads and subprocesses must still work"
        ),
        body=(
            "import ctypes, os, socket, subprocess, sys, threading\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "libc.syscall.restype = ctypes.c_long\n"
            "FLAGS = 0x10000000 | 0x00020000 | 0x40000000  # NEWUSER | NEWNS | NEWNET\n"
            "SIGCHLD = 17\n"
            "def child():\n"
            "    if libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == 0:\n"
            "        print('ESCAPED: mounted a tmpfs in a new namespace', flush=True)\n"
            "    try:\n"
            "        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12).close()\n"
            "        print('ESCAPED: netfilter netlink socket', flush=True)\n"
            "    except OSError:\n"
            "        pass\n"
            "    os._exit(0)\n"
            "def tried(name, pid):\n"
            "    if pid == 0:\n"
            "        child()\n"
            "    if pid > 0:\n"
            "        os.waitpid(pid, 0)\n"
            "    print(name, 'refused' if pid < 0 else 'allowed', ctypes.get_errno(), flush=True)\n"
            "nr = {'x86_64': 56, 'aarch64': 220}.get(os.uname().machine)\n"
            "if nr is not None:\n"
            "    tried('clone', libc.syscall(nr, FLAGS | SIGCHLD, 0, 0, 0, 0))\n"
            "    args = (ctypes.c_uint64 * 11)(FLAGS, 0, 0, 0, SIGCHLD, 0, 0, 0, 0, 0, 0)\n"
            "    tried('clone3', libc.syscall(435, ctypes.byref(args), ctypes.sizeof(args)))\n"
            "done = []\n"
            "t = threading.Thread(target=done.append, args=('thread',))\n"
            "t.start()\n"
            "t.join()\n"
            "out = subprocess.run([sys.executable, '-c', 'print(42)'], capture_output=True)\n"
            "if done and out.stdout.strip() == b'42':\n"
            "    print('CLONE-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="CLONE-TRIED",
        must_not_print="ESCAPED",
    ),
    HostileProgram(
        name="ignore_sigterm",
        description="ignores SIGTERM and sleeps forever",
        body=(
            "import signal, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ignoring TERM', flush=True)\n"
            "while True:\n"
            "    time.sleep(1)\n"
        ),
        expected=[Outcome.TIMEOUT],
        timeout_s=2.0,
    ),
    HostileProgram(
        name="orphans",
        description="leaves a new-session child and a double-forked daemon, then succeeds",
        body=(
            "import os, shutil, subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],\n"
            "                 start_new_session=True)\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        time.sleep(600)\n"
            "    os._exit(0)\n"
            "shutil.copyfile(os.path.join(os.environ['DATA_DIR'], 'sample_submission.csv'),\n"
            "                'submission.csv')\n"
            "print('PARENT-DONE')\n"
        ),
        expected=[Outcome.SUCCESS],
        timeout_s=30.0,
        must_print="PARENT-DONE",
    ),
    HostileProgram(
        name="exit_zero_no_submission",
        description="exits 0 without writing submission.csv",
        body="print('done, no file')\n",
        expected=[Outcome.MISSING_SUBMISSION],
    ),
    HostileProgram(
        name="wrong_columns",
        description="a submission with renamed columns",
        body=_SAMPLE + "write([[f'wrong_{i}' for i in range(len(ROWS[0]))]] + ROWS[1:])\n",
        expected=[Outcome.INVALID_SUBMISSION],
    ),
    HostileProgram(
        name="nan_predictions",
        description="a submission whose predictions are all NaN",
        body=_SAMPLE + "write([ROWS[0]] + [[r[0]] + ['nan'] * (len(r) - 1) for r in ROWS[1:]])\n",
        expected=[Outcome.INVALID_SUBMISSION],
    ),
    HostileProgram(
        name="wrong_row_count",
        description="a submission missing its last row",
        body=_SAMPLE + "write(ROWS[:-1])\n",
        expected=[Outcome.INVALID_SUBMISSION],
    ),
)

# Programs added with the sandbox hardening of issue 12 (loader, io_uring, disk, shared memory,
# /dev/shm, deep trees, odd names, huge artifact lists).
_IO_URING = (
    "import ctypes, mmap, os, socket, struct\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.syscall.restype = ctypes.c_long\n"
    "def uring_socket(domain, kind):\n"
    "    params = ctypes.create_string_buffer(120)\n"
    "    fd = libc.syscall(425, 4, params)\n"
    "    if fd < 0:\n"
    "        return None, 'io_uring_setup: errno %d' % ctypes.get_errno()\n"
    "    sq_entries, cq_entries, _, _, _, features = struct.unpack_from('6I', params, 0)\n"
    "    sq_off = struct.unpack_from('7I', params, 40)\n"
    "    cq_off = struct.unpack_from('6I', params, 80)\n"
    "    sq_size = sq_off[6] + sq_entries * 4\n"
    "    cq_size = cq_off[5] + cq_entries * 16\n"
    "    size = max(sq_size, cq_size)\n"
    "    prot = mmap.PROT_READ | mmap.PROT_WRITE\n"
    "    shared = mmap.MAP_SHARED | getattr(mmap, 'MAP_POPULATE', 0)\n"
    "    ring = mmap.mmap(fd, size, shared, prot, offset=0)\n"
    "    cq = ring if features & 1 else mmap.mmap(fd, cq_size, shared, prot, offset=0x8000000)\n"
    "    sqes = mmap.mmap(fd, sq_entries * 64, mmap.MAP_SHARED, prot, offset=0x10000000)\n"
    "    sqe = bytearray(64)\n"
    "    struct.pack_into('BBHiQ', sqe, 0, 45, 0, 0, domain, kind)  # IORING_OP_SOCKET\n"
    "    struct.pack_into('Q', sqe, 32, 7)\n"
    "    sqes[0:64] = bytes(sqe)\n"
    "    tail = struct.unpack_from('I', ring, sq_off[1])[0]\n"
    "    mask = struct.unpack_from('I', ring, sq_off[2])[0]\n"
    "    struct.pack_into('I', ring, sq_off[6] + 4 * (tail & mask), 0)\n"
    "    struct.pack_into('I', ring, sq_off[1], tail + 1)\n"
    "    n = libc.syscall(426, fd, 1, 1, 1, None, 0)\n"
    "    if n < 0:\n"
    "        return None, 'io_uring_enter: errno %d' % ctypes.get_errno()\n"
    "    head = struct.unpack_from('I', cq, cq_off[0])[0]\n"
    "    cmask = struct.unpack_from('I', cq, cq_off[2])[0]\n"
    "    _, res, _ = struct.unpack_from('QiI', cq, cq_off[5] + 16 * (head & cmask))\n"
    "    if res < 0:\n"
    "        return None, 'IORING_OP_SOCKET: errno %d' % -res\n"
    "    return res, 'ok'\n"
    "fd, why = uring_socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
    "if fd is None:\n"
    "    print('blocked', why)\n"
    "else:\n"
    "    s = socket.socket(fileno=fd)\n"
    "    s.settimeout(3)\n"
    "    try:\n"
    "        s.connect(HOST_UNIX_SOCKET)\n"
    "        s.sendall(b'hostile')\n"
    "        print('CONNECTED', HOST_UNIX_SOCKET)\n"
    "    except OSError as exc:\n"
    "        print('connect blocked', type(exc).__name__, exc)\n"
    "print('IO-URING-TRIED')\n"
)

HOSTILE_PROGRAMS += (
    HostileProgram(
        name="io_uring_socket",
        description="creates a Unix socket with io_uring (IORING_OP_SOCKET), connects to a host",
        body=_IO_URING,
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="IO-URING-TRIED",
        must_not_print="CONNECTED",
    ),
    HostileProgram(
        name="mountinfo_host_paths",
        description="looks for the host path of its run directory in /proc/self/mountinfo",
        body=(
            "import os\n"
            "cwd = os.getcwd()\n"
            "try:\n"
            "    with open('/proc/self/mountinfo') as f:\n"
            "        lines = f.read().splitlines()\n"
            "except OSError:\n"
            "    lines = []\n"
            "for line in lines:\n"
            "    # A program may know its own working directory; any other run path leaks.\n"
            "    if 'openmle-run-' in line and 'openmle-run-' not in cwd:\n"
            "        print('LEAKED', line)\n"
            "print('MOUNTINFO-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="MOUNTINFO-TRIED",
        must_not_print="LEAKED",
    ),
    HostileProgram(
        name="deep_directories",
        description="nests 1,500 directories (deeper than Python's recursion limit), exits 0",
        body=(
            "import os\n"
            "for _ in range(1500):\n"
            "    os.mkdir('d')\n"
            "    os.chdir('d')\n"
            "with open('deep.txt', 'w') as f:\n"
            "    f.write('deep')\n"
            "print('DEEP-DONE')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="DEEP-DONE",
    ),
    HostileProgram(
        name="odd_names",
        description="leaves non-UTF-8, newline and 255-byte names and locked directories",
        body=(
            "import os\n"
            "for name in (b'bad-\\xff\\xfe', b'new\\nline', b'x' * 255, b'-rf', b'--'):\n"
            "    with open(name, 'wb') as f:\n"
            "        f.write(b'odd')\n"
            "os.makedirs('locked/inner/deeper')\n"
            "open('locked/inner/file', 'w').close()\n"
            "os.chmod('locked/inner/deeper', 0)\n"
            "os.chmod('locked/inner', 0)\n"
            "os.chmod('locked', 0o500)\n"
            "print('ODD-DONE')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="ODD-DONE",
    ),
    HostileProgram(
        name="long_artifact_list",
        description="leaves 10,000 files with ~4 KB paths (a 40 MB artifact list)",
        body=(
            "import os\n"
            "path = os.path.join(*['p' * 250] * 15)\n"
            "os.makedirs(path)\n"
            "os.chdir(path)\n"
            "for i in range(10_000):\n"
            "    open(f'{i:05d}' + 'f' * 200, 'w').close()\n"
            "print('ARTIFACTS-DONE')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION, Outcome.RUNTIME_ERROR],
        timeout_s=60.0,
    ),
    HostileProgram(
        name="lone_surrogate_code",
        description="a program whose source holds a lone surrogate (not encodable as UTF-8)",
        body="print('\ud800')\n",
        expected=[Outcome.RUNTIME_ERROR],
    ),
    HostileProgram(
        name="fallocate_3gb",
        description="reserves 3 GiB at once with fallocate(KEEP_SIZE), past RLIMIT_FSIZE",
        body=(
            "import ctypes, os, time\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]\n"
            "fd = os.open('reserved.bin', os.O_CREAT | os.O_WRONLY)\n"
            "if libc.fallocate(fd, 1, 0, 3 << 30) != 0:\n"
            "    raise OSError(ctypes.get_errno(), 'fallocate refused')\n"
            "time.sleep(3)  # a watchdog quota has had time to act\n"
            "print('FALLOCATED-3GiB')\n"
        ),
        expected=[Outcome.RUNTIME_ERROR],
        timeout_s=60.0,
        must_not_print="FALLOCATED-3GiB",
    ),
    HostileProgram(
        name="many_files",
        description="creates 200,000 empty files (the host's inodes)",
        body=(
            "import os, time\n"
            "os.mkdir('many')\n"
            "for i in range(200_000):\n"
            "    open(f'many/{i}', 'w').close()\n"
            "time.sleep(3)  # a watchdog quota has had time to act\n"
            "print('CREATED-200000')\n"
        ),
        expected=[Outcome.RUNTIME_ERROR],
        timeout_s=120.0,
        must_not_print="CREATED-200000",
    ),
    HostileProgram(
        name="shared_memory_mmap",
        description="touches 2 GiB of shared anonymous memory (RLIMIT_DATA misses it)",
        body=(
            "import mmap\n"
            "m = mmap.mmap(-1, 2 << 30, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)\n"
            "for off in range(0, 2 << 30, 4096):\n"
            "    m[off] = 1\n"
            "print('TOUCHED-2GiB')\n"
        ),
        expected=[Outcome.OOM, Outcome.RUNTIME_ERROR],
        timeout_s=120.0,
        memory_mb=512,
        must_not_print="TOUCHED-2GiB",
    ),
    HostileProgram(
        name="dev_shm_fill",
        description="writes 2 GiB into /dev/shm in 32 MiB files (memory outside RLIMIT_DATA)",
        body=(
            "import os\n"
            "block = b'\\1' * (32 << 20)\n"
            f"tag = os.environ.get('{MARKER_ENV}', '')\n"
            "for i in range(64):\n"
            "    with open(f'/dev/shm/openmle-hostile-fill-{tag}-{i}', 'wb') as f:\n"
            "        f.write(block)\n"
            "print('FILLED-SHM-2GiB')\n"
        ),
        expected=[Outcome.OOM, Outcome.RUNTIME_ERROR],
        timeout_s=120.0,
        memory_mb=512,
        must_not_print="FILLED-SHM-2GiB",
    ),
    HostileProgram(
        name="dev_shm_host_files",
        description="looks for a host file in /dev/shm (a channel between jobs and the host)",
        body=(
            "import os\n"
            "try:\n"
            "    names = os.listdir('/dev/shm')\n"
            "except OSError:\n"
            "    names = []\n"
            "if os.path.basename(HOST_SHM_FILE) in names or os.path.exists(HOST_SHM_FILE):\n"
            "    print('LEAKED', HOST_SHM_FILE)\n"
            "print('SHM-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="SHM-TRIED",
        must_not_print="LEAKED",
    ),
)

# Programs added by the red-team pass of the sandbox (inherited descriptors, ...).
HOSTILE_PROGRAMS += (
    HostileProgram(
        name="inherited_fds",
        description=(
            "looks for descriptors the host's process holds without close-on-exec (a directory "
            "fd reaches the host's whole filesystem past every mount; a file fd its content)"
        ),
        body=(
            "import os\n"
            "for name in os.listdir('/proc/self/fd'):\n"
            "    try:\n"
            "        st = os.fstat(int(name))\n"
            "    except OSError:\n"
            "        continue\n"
            "    for host_fd, dev, ino in HOST_FDS:\n"
            "        if (st.st_dev, st.st_ino) == (dev, ino):\n"
            "            print('LEAKED fd', name, 'is the host fd', host_fd)\n"
            "print('FDS-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="FDS-TRIED",
        must_not_print="LEAKED",
    ),
    HostileProgram(
        name="orphan_cleared_env",
        description=(
            "leaves a double-forked, new-session daemon that ignores SIGTERM and runs with an "
            "empty environment (no run marker to find it by), then succeeds"
        ),
        body=(
            "import os, shutil, sys, time\n"
            f"tag = '{MARKER_ENV}=' + os.environ['{MARKER_ENV}']\n"
            "daemon = 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "time.sleep(600)'\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        # The battery finds it by the marker in its command line.\n"
            "        os.execve(sys.executable, [sys.executable, '-c', daemon, tag], {})\n"
            "    os._exit(0)\n"
            "time.sleep(1)\n"
            "shutil.copyfile(os.path.join(os.environ['DATA_DIR'], 'sample_submission.csv'),\n"
            "                'submission.csv')\n"
            "print('PARENT-DONE')\n"
        ),
        expected=[Outcome.SUCCESS],
        must_print="PARENT-DONE",
    ),
    HostileProgram(
        name="signal_host",
        description=(
            "signals host processes (signal 0: a permission check only); Landlock scopes "
            "signals from ABI 6 only, so below it this probe alone may report"
        ),
        body=(
            "import os\n"
            "for pid in HOST_PIDS:\n"
            "    try:\n"
            "        os.kill(pid, 0)\n"
            "        print('REACHED: may signal', pid)\n"
            "    except OSError as exc:\n"
            "        print('signal refused', pid, exc.errno)\n"
            "print('SIGNALS-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="SIGNALS-TRIED",
        must_not_print="REACHED",
    ),
    HostileProgram(
        name="trace_and_limit_host",
        description=(
            "seizes with ptrace (no stop), opens the memory of and sets the limits (prlimit, "
            "to their current value) of host processes"
        ),
        body=(
            "import ctypes, resource\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long] + [ctypes.c_void_p] * 2\n"
            "for pid in HOST_PIDS:\n"
            "    if libc.ptrace(0x4206, pid, None, None) == 0:  # PTRACE_SEIZE\n"
            "        libc.ptrace(17, pid, None, None)  # PTRACE_DETACH\n"
            "        print('REACHED: seized', pid)\n"
            "    try:\n"
            "        with open(f'/proc/{pid}/mem', 'rb'):\n"
            "            print('REACHED: opened the memory of', pid)\n"
            "    except OSError:\n"
            "        pass\n"
            "    try:  # the uid is prlimit's only check: rewrite a host limit with its value\n"
            "        limit = resource.prlimit(pid, resource.RLIMIT_NOFILE)\n"
            "        resource.prlimit(pid, resource.RLIMIT_NOFILE, limit)\n"
            "        print('REACHED: set the limits of', pid)\n"
            "    except (OSError, ValueError) as exc:\n"
            "        print('prlimit refused', pid, exc)\n"
            "print('TRACE-LIMITS-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="TRACE-LIMITS-TRIED",
        must_not_print="REACHED",
    ),
    HostileProgram(
        name="clock_cgroup_abstract_socket",
        description=(
            "sets the clock (to its current value), moves itself to the root cgroups and "
            "connects to an abstract Unix socket a host service listens on"
        ),
        body=(
            "import ctypes, glob, os, socket, time\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "class Ts(ctypes.Structure):\n"
            "    _fields_ = [('sec', ctypes.c_long), ('nsec', ctypes.c_long)]\n"
            "now = Ts()\n"
            "libc.clock_gettime(0, ctypes.byref(now))\n"
            "if libc.clock_settime(0, ctypes.byref(now)) == 0:\n"
            "    print('ESCAPED: set the clock')\n"
            "for procs in glob.glob('/sys/fs/cgroup/cgroup.procs') + "
            "glob.glob('/sys/fs/cgroup/*/cgroup.procs'):\n"
            "    try:\n"
            "        with open(procs, 'w') as f:\n"
            "            f.write(str(os.getpid()))\n"
            "        print('ESCAPED: joined', procs)\n"
            "    except OSError as exc:\n"
            "        print('cgroup refused', procs, exc.errno)\n"
            "try:\n"
            "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
            "    s.settimeout(3)\n"
            "    s.connect('\\0' + HOST_ABSTRACT_SOCKET)\n"
            "    print('ESCAPED: connected to the abstract socket')\n"
            "except OSError as exc:\n"
            "    print('abstract socket refused', exc.errno)\n"
            "print('CLOCK-CGROUP-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="CLOCK-CGROUP-TRIED",
        must_not_print="ESCAPED",
    ),
    HostileProgram(
        name="tcp_without_connect",
        description=(
            "reaches the host's loopback listener with TCP Fast Open (sendto MSG_FASTOPEN and "
            "TCP_FASTOPEN_CONNECT: no connect() call) and with MPTCP and SCTP stream sockets "
            "(Landlock's rules cover TCP only), and listens on an unbound socket (bound to an "
            "ephemeral port on every interface, with no bind() call)"
        ),
        body=(
            "import socket\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
            "try:\n"
            "    s.sendto(b'hostile', socket.MSG_FASTOPEN, ('127.0.0.1', PORT))\n"
            "    print('REACHED: TCP Fast Open sent to the host')\n"
            "except OSError as exc:\n"
            "    print('fast open refused', exc.errno)\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
            "try:\n"
            "    s.setsockopt(socket.IPPROTO_TCP, 30, 1)  # TCP_FASTOPEN_CONNECT\n"
            "    s.connect(('127.0.0.1', PORT))\n"
            "    s.sendall(b'hostile')\n"
            "    print('REACHED: TCP_FASTOPEN_CONNECT sent to the host')\n"
            "except OSError as exc:\n"
            "    print('fast open connect refused', exc.errno)\n"
            "for proto, name in ((262, 'MPTCP'), (132, 'SCTP')):  # stream sockets, not TCP\n"
            "    try:\n"
            "        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)\n"
            "        s.settimeout(3)\n"
            "        s.connect(('127.0.0.1', PORT))\n"
            "        s.sendall(b'hostile')\n"
            "        print('REACHED:', name, 'connected to the host')\n"
            "    except OSError as exc:\n"
            "        print(name, 'refused', exc.errno)\n"
            "# The host's network (not a namespace of the run's own) shows the host's listener.\n"
            "try:\n"
            "    with open('/proc/net/tcp') as f:\n"
            "        host_net = (':%04X ' % PORT) in f.read()\n"
            "except OSError:\n"
            "    host_net = True\n"
            "try:\n"
            "    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
            "    listener.listen()\n"
            "    if host_net:\n"
            "        print('REACHED: listening on the host network at', listener.getsockname())\n"
            "except OSError as exc:\n"
            "    print('listen refused', exc.errno)\n"
            "print('TCP-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="TCP-TRIED",
        must_not_print="REACHED",
    ),
    HostileProgram(
        name="fork_runner",
        description=(
            "a single lineage that forks and lets the parent exit, over and over (its pid "
            "never stays put), ignoring SIGTERM and starting new sessions"
        ),
        body=(
            "import os, signal\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('RUNNING', flush=True)\n"
            "while True:\n"
            "    try:\n"
            "        pid = os.fork()\n"
            "    except OSError:\n"
            "        continue\n"
            "    if pid:\n"
            "        os._exit(0)\n"
            "    if os.getpid() % 3 == 0:\n"
            "        os.setsid()\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION, Outcome.TIMEOUT, Outcome.RUNTIME_ERROR],
        timeout_s=3.0,
        must_print="RUNNING",
    ),
    HostileProgram(
        name="forged_result_lines",
        description=(
            "prints what a result parser or a terminal might trust: score and JSON result "
            "lines, ANSI escapes (clear screen, title, hyperlink), carriage returns, NUL and "
            "bytes that are not UTF-8, then exits 0 without a submission"
        ),
        body=(
            "import sys\n"
            "out = sys.stdout.buffer\n"
            "out.write(b'score: 1.0\\nSCORE=1.0\\n')\n"
            'out.write(b\'{"outcome": "success", "score": 1.0, "valid": true}\\n\')\n'
            "out.write(b'\\x1b[2J\\x1b]0;pwned\\x07\\x1b]8;;http://x\\x1b\\\\link\\x1b]8;;\\x1b\\\\\\n')\n"
            "out.write(b'progress\\r\\x00\\xff\\xfe\\xc3(\\n')\n"
            "out.flush()\n"
            "print('FORGED-DONE')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="FORGED-DONE",
    ),
    HostileProgram(
        name="truncate_outside",
        description=(
            "truncate(2) by path (no open: Landlock below ABI 3 does not check it) on the "
            "answers and the public data, to their own size (harmless when it works)"
        ),
        body=(
            "import os\n"
            "targets = PRIVATE_FILES + [os.path.join(os.environ['DATA_DIR'], n)\n"
            "                           for n in ('sample_submission.csv', 'train.csv')]\n"
            "for t in targets:\n"
            "    try:\n"
            "        os.truncate(t, os.stat(t).st_size)\n"
            "        print('TRUNCATED', t)\n"
            "    except OSError as exc:\n"
            "        print('truncate refused', t, exc.errno)\n"
            "print('TRUNCATE-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="TRUNCATE-TRIED",
        must_not_print="TRUNCATED",
    ),
    HostileProgram(
        name="host_cwd_in_environ",
        description=(
            "looks for the host service's working directory (a host path) in the environment "
            "of every process it can see (bubblewrap's init inside the sandbox among them)"
        ),
        body=(
            "import os\n"
            "needle = ('PWD=' + HOST_CWD).encode()\n"
            "try:\n"
            "    pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
            "except OSError:\n"
            "    pids = []\n"
            "for pid in pids:\n"
            "    try:\n"
            "        with open(f'/proc/{pid}/environ', 'rb') as f:\n"
            "            env = f.read().split(b'\\0')\n"
            "    except OSError:\n"
            "        continue\n"
            "    if HOST_CWD != '/' and needle in env:\n"
            "        print('LEAKED', pid, needle)\n"
            "print('CWD-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="CWD-TRIED",
        must_not_print="LEAKED",
    ),
    HostileProgram(
        name="file_attributes_outside",
        description=(
            "sets the inode flags (FS_IOC_SETFLAGS, through a read-only descriptor: ownership "
            "is the only check) of the public data and the interpreter, to their current value "
            "(harmless when it works)"
        ),
        body=(
            "import array, fcntl, os, sys\n"
            "targets = [os.path.join(os.environ['DATA_DIR'], 'train.csv'),\n"
            "           os.path.realpath(sys.executable)]\n"
            "for t in targets:\n"
            "    try:\n"
            "        fd = os.open(t, os.O_RDONLY)\n"
            "    except OSError as exc:\n"
            "        print('open refused', t, exc.errno)\n"
            "        continue\n"
            "    flags = array.array('l', [0])\n"
            "    try:\n"
            "        fcntl.ioctl(fd, 0x80086601, flags)  # FS_IOC_GETFLAGS\n"
            "        fcntl.ioctl(fd, 0x40086602, flags)  # FS_IOC_SETFLAGS, unchanged\n"
            "        print('CHANGED the attributes of', t)\n"
            "    except OSError as exc:\n"
            "        print('attributes refused', t, exc.errno)\n"
            "    os.close(fd)\n"
            "print('ATTRIBUTES-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="ATTRIBUTES-TRIED",
        must_not_print="CHANGED",
    ),
    HostileProgram(
        name="kernel_log",
        description=(
            "reads the host's kernel log with syslog(2) (not namespaced; open to anyone where "
            "kernel.dmesg_restrict is 0)"
        ),
        body=(
            "import ctypes\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "buf = ctypes.create_string_buffer(1 << 16)\n"
            "n = libc.klogctl(3, buf, len(buf))  # SYSLOG_ACTION_READ_ALL\n"
            "print('LEAKED the kernel log' if n > 0 else f'syslog refused {ctypes.get_errno()}')\n"
            "print('KLOG-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="KLOG-TRIED",
        must_not_print="LEAKED",
    ),
    HostileProgram(
        name="sysv_ipc",
        description=(
            "creates System V shared memory, a message queue and a semaphore set (they live "
            "in an IPC namespace, not a filesystem: in the host's they outlive the run)"
        ),
        body=(
            "import ctypes, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            f"key = int(os.environ['{MARKER_ENV}'][:7], 16)\n"
            "for name, call in (('shm', lambda: libc.shmget(key, 1 << 20, 0o1600)),\n"
            "                   ('msg', lambda: libc.msgget(key, 0o1600)),\n"
            "                   ('sem', lambda: libc.semget(key, 1, 0o1600))):\n"
            "    made = call()\n"
            "    print(name, 'made' if made >= 0 else 'refused', ctypes.get_errno())\n"
            "print('SYSV-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="SYSV-TRIED",
    ),
    HostileProgram(
        name="module_autoload",
        description=(
            "asks for socket families and protocols, and a terminal line discipline, whose "
            "modules a kernel loads on demand (modprobe run as root on the host: TIPC, RDS, "
            "AF_ALG, SCTP, DCCP, netlink crypto_user, n_hdlc); only a refusal (EPERM) before "
            "the kernel looks for them counts"
        ),
        body=(
            "import errno, fcntl, os, socket, struct\n"
            "def tried(name, make):\n"
            "    try:\n"
            "        make()\n"
            "        code = 'made'\n"
            "    except OSError as exc:\n"
            "        code = errno.errorcode.get(exc.errno, str(exc.errno))\n"
            "    print(name, code if code == 'EPERM' else f'REACHED the kernel ({code})')\n"
            "tried('tipc', lambda: socket.socket(30, socket.SOCK_SEQPACKET).close())\n"
            "tried('rds', lambda: socket.socket(21, socket.SOCK_SEQPACKET).close())\n"
            "tried('alg', lambda: socket.socket(38, socket.SOCK_SEQPACKET).close())\n"
            "tried('sctp', lambda: socket.socket(2, socket.SOCK_STREAM, 132).close())\n"
            "tried('dccp', lambda: socket.socket(2, 6, 33).close())\n"
            "tried('crypto_user', lambda: socket.socket(16, socket.SOCK_RAW, 21).close())\n"
            "tried('socketpair_tipc', lambda: [s.close() for s in socket.socketpair(30, 5)])\n"
            "tried('ldisc', lambda: fcntl.ioctl(0, 0x5423, struct.pack('i', 13)))  # TIOCSETD\n"
            "print('AUTOLOAD-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="AUTOLOAD-TRIED",
        must_not_print="REACHED",
    ),
    HostileProgram(
        name="core_dump_helper",
        description=(
            "lowers its core limit to 0 and crashes a child: where kernel.core_pattern pipes "
            "to a helper (systemd-coredump, apport), the kernel runs it as root on the host "
            "for each crash unless the limit is exactly 1 byte"
        ),
        body=(
            "import os, resource\n"
            "limit = resource.getrlimit(resource.RLIMIT_CORE)\n"
            "print('core limit', limit)\n"
            "try:\n"
            "    resource.setrlimit(resource.RLIMIT_CORE, (0, limit[1]))\n"
            "    print('LOWERED the core limit')\n"
            "except (OSError, ValueError) as exc:\n"
            "    print('core limit kept', exc)\n"
            "now = resource.getrlimit(resource.RLIMIT_CORE)\n"
            "if now[0] != 1:\n"
            "    print('a crash would RUN the host helper', now)\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os.abort()\n"
            "print('child dumped', os.WCOREDUMP(os.waitpid(pid, 0)[1]))\n"
            "print('CORE-TRIED')\n"
        ),
        expected=[Outcome.MISSING_SUBMISSION],
        must_print="CORE-TRIED",
        must_not_print="RUN the host helper",
    ),
)


def tree_digest(root: Path) -> str:
    """SHA-256 over every path, mode, owner, mtime, symlink target and content under ``root``."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            meta = f"{st.st_mode:o}:{st.st_uid}:{st.st_gid}:{st.st_mtime_ns}"
            h.update(f"{os.path.relpath(full, root)}\0{meta}\0".encode())
            if os.path.islink(full):
                h.update(os.readlink(full).encode())
            elif os.path.isfile(full):
                with open(full, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
    return h.hexdigest()


def _marked_pids(value: str) -> set[int]:
    """Live processes carrying ``MARKER_ENV=value`` in their environment or as an argument
    (a program that cleared its environment keeps it there: ``orphan_cleared_env``).
    """
    needle = f"{MARKER_ENV}={value}".encode()
    out: set[int] = set()
    if not os.path.isdir("/proc"):
        return out
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry.name}/environ").read_bytes()
            args = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (needle in env.split(b"\0") or needle in args.split(b"\0")):
            out.add(int(entry.name))
    return out


def _private_layout(
    private_paths: Sequence[Path], task_root: Path
) -> tuple[list[str], list[str], str]:
    """(private files, private dirs, task root) as absolute path strings."""
    files: list[str] = []
    dirs: list[str] = []
    for p in map(Path, private_paths):
        p = p.absolute()
        if p.is_dir():
            dirs.append(str(p))
            for dirpath, _, filenames in os.walk(p):
                files.extend(os.path.join(dirpath, n) for n in filenames)
        else:
            files.append(str(p))
    root = Path(task_root).absolute()
    if not files:
        files.append(str(root / "no-private-file"))
    return files, dirs, str(root)


MAX_RESULT_BYTES = 2 * 1024 * 1024
"""A result's JSON must stay below this (it is stored and sent on every request)."""


def _result_problems(result: RunResult) -> list[str]:
    """A result must be storable: JSON-encodable as UTF-8 and not huge."""
    try:
        size = len(json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8"))
    except (TypeError, ValueError) as exc:
        return [f"the result cannot be stored as UTF-8 JSON: {type(exc).__name__}: {exc}"[:300]]
    if size > MAX_RESULT_BYTES:
        return [f"the result is {size} bytes of JSON (artifacts: {len(result.artifacts)})"]
    return []


def _shm_leftovers(marker: str) -> list[str]:
    """Files the run marked ``marker`` left in the host's /dev/shm (removed here). Only names
    carrying the run's marker count: another battery running beside this one (a parallel test
    worker, another user's run) keeps its own probe file there, which is not this run's.
    """
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return []
    found = []
    for name in names:
        if name.startswith("openmle-hostile-") and marker in name:
            path = os.path.join("/dev/shm", name)
            found.append(path)
            with contextlib.suppress(OSError):
                os.unlink(path)
    return found


_IPC_RMID = 0


def sysv_key(marker: str) -> int:
    """The System V IPC key a run marked ``marker`` uses (the ``sysv_ipc`` probe)."""
    return int(marker[:7], 16)


def _sysv_leftovers(key: int) -> list[str]:
    """System V objects with ``key`` in this host's IPC namespace (removed here)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    found = []
    for kind in ("shm", "msg", "sem"):
        table = ""
        with contextlib.suppress(OSError):
            table = Path(f"/proc/sysvipc/{kind}").read_text()
        rows = [line.split() for line in table.splitlines()[1:]]
        for fields in rows:
            if len(fields) > 1 and fields[0].lstrip("-").isdigit() and int(fields[0]) == key:
                found.append(f"{kind} {fields[1]}")
                ident = int(fields[1])
                if kind == "sem":
                    libc.semctl(ident, 0, _IPC_RMID)
                else:
                    getattr(libc, f"{kind}ctl")(ident, _IPC_RMID, None)
    return found


def _remove_existing(paths: Sequence[str]) -> list[str]:
    """Delete whichever of ``paths`` exist; return those."""
    found = [p for p in paths if os.path.lexists(p)]
    for p in found:
        os.unlink(p)
    return found


async def _leftovers(value: str) -> set[int]:
    """Marked processes still alive after up to 10 s of settling (kills are asynchronous)."""
    left: set[int] = set()
    for _ in range(100):
        left = await anyio.to_thread.run_sync(_marked_pids, value)
        if not left:
            return left
        await anyio.sleep(0.1)
    return left


@frozen
class _Host:
    """What a hostile program is told of the host (its header's constants)."""

    files: list[str]
    dirs: list[str]
    root: str
    port: int
    secret: str
    host_pids: list[int]
    sock_path: str
    shm_file: str
    fds: list[tuple[int, int, int]]
    abstract: str

    def header(self, sentinels: list[str]) -> str:
        """The program's header: Python assignments of the host's facts and its sentinels."""
        return (
            f"PRIVATE_FILES = {self.files!r}\nPRIVATE_DIRS = {self.dirs!r}\n"
            f"TASK_ROOT = {self.root!r}\n"
            f"SENTINELS = {sentinels!r}\nPORT = {self.port!r}\n"
            f"HOST_SECRET = {self.secret!r}\nHOST_PIDS = {self.host_pids!r}\n"
            f"HOST_UNIX_SOCKET = {self.sock_path!r}\nHOST_SHM_FILE = {self.shm_file!r}\n"
            f"HOST_FDS = {self.fds!r}\nHOST_ABSTRACT_SOCKET = {self.abstract!r}\n"
            f"HOST_CWD = {os.getcwd()!r}\n"
        )


def _open_inheritable(paths: Sequence[str]) -> list[int]:
    """Descriptors on ``paths`` (those that exist) without close-on-exec, numbered from 100 (a
    host process may hold such descriptors: none must reach a program).
    """
    fds: list[int] = []
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fds.append(fcntl.fcntl(fd, fcntl.F_DUPFD, 100))  # F_DUPFD: no close-on-exec
        finally:
            os.close(fd)
    return fds


def _sentinels(marker: str) -> list[str]:
    """Host paths a run marked ``marker`` must not be able to create."""
    tmp = Path(tempfile.gettempdir())
    return [
        str(tmp / f"openmle-hostile-{marker}"),
        f"/openmle-hostile-{marker}",
        str(Path.home() / f"openmle-hostile-{marker}"),
        f"/dev/shm/openmle-hostile-{marker}",
    ]


async def _run_job(
    sandbox: Sandbox, job: Job, program: HostileProgram, problems: list[str]
) -> RunResult:
    """``sandbox.run(job)``; a hang or an exception is a problem and an infrastructure error."""
    try:
        with anyio.fail_after(program.timeout_s + 300):
            return await sandbox.run(job)
    except TimeoutError:
        problems.append("run() did not return within timeout_s + 300 s")
        return RunResult.infra_error("run() hung", split=job.split)
    except Exception as exc:
        problems.append(f"run() raised {type(exc).__name__}: {exc}")
        return RunResult.infra_error(f"{type(exc).__name__}: {exc}", split=job.split)


def _output_problems(program: HostileProgram, result: RunResult) -> list[str]:
    """The success token printed, the attack token not, and the result storable."""
    problems: list[str] = []
    if program.must_print and program.must_print not in result.logs:
        problems.append(f"{program.must_print!r} missing: the attack did not run")
    if program.must_not_print and program.must_not_print in result.logs:
        lines = [line for line in result.logs.splitlines() if program.must_not_print in line]
        problems.append(f"the attack worked: {lines[:5]}")
    return problems + _result_problems(result)


async def _run_program(
    sandbox: Sandbox,
    program: HostileProgram,
    task: str,
    task_root: Path,
    host: _Host,
    connections: list[str],
) -> HostileReport:
    """Run one hostile program and check what it left behind (see :func:`run_hostile_battery`)."""
    marker = uuid.uuid4().hex
    sentinels = _sentinels(marker)
    before = await anyio.to_thread.run_sync(tree_digest, Path(task_root))
    n_conn = len(connections)
    job = Job(
        code=host.header(sentinels) + program.body,
        task=task,
        timeout_s=program.timeout_s,
        resources=Resources(memory_mb=program.memory_mb),
        env={MARKER_ENV: marker},
        name=f"hostile-{program.name}",
    )
    problems: list[str] = []
    result = await _run_job(sandbox, job, program, problems)
    if result.outcome not in program.expected:
        problems.append(
            f"outcome {result.outcome.value!r} not in "
            f"{sorted(o.value for o in program.expected)} ({result.detail})"
        )
    left = await _leftovers(marker)
    if left:
        problems.append(f"processes left behind: {sorted(left)[:10]}")
    after = await anyio.to_thread.run_sync(tree_digest, Path(task_root))
    if after != before:
        problems.append("the task package changed")
    problems += [f"the program created {s} on the host" for s in _remove_existing(sentinels)]
    if len(connections) != n_conn:
        problems.append("the program reached a host service (TCP loopback or Unix)")
    problems += _output_problems(program, result)
    shm_left = await anyio.to_thread.run_sync(_shm_leftovers, marker)
    if shm_left:
        problems.append(
            f"the program left {len(shm_left)} files in the host's /dev/shm: {shm_left[:3]}"
        )
    sysv_left = await anyio.to_thread.run_sync(_sysv_leftovers, sysv_key(marker))
    if sysv_left:
        problems.append(f"the program left System V IPC objects on the host: {sysv_left}")
    if result.logs_dropped_bytes < program.min_dropped_bytes:
        problems.append(f"only {result.logs_dropped_bytes} bytes dropped; output is not capped")
    return HostileReport(
        name=program.name,
        outcome=result.outcome,
        expected=tuple(sorted(program.expected)),
        problems=tuple(problems),
        result=result,
    )


async def run_hostile_battery(
    sandbox: Sandbox,
    *,
    task: str,
    private_paths: Sequence[Path],
    task_root: Path,
    programs: Sequence[HostileProgram] = HOSTILE_PROGRAMS,
) -> list[HostileReport]:
    """Run each hostile program on ``sandbox`` and check what it left behind.

    After each run: the outcome is one of the program's expected outcomes; no process carrying
    the run's marker is alive; the task tree under ``task_root`` is byte-for-byte unchanged;
    no host sentinel file exists; the program's success token is printed and its attack token
    is not; the log cap dropped what it should.

    Args:
        sandbox: the sandbox under test (not closed here).
        task: a task reference it resolves; its sample submission must be valid.
        private_paths: host paths of the task's hidden answers.
        task_root: the task package's root directory (checksummed before and after).
        programs: the battery (default :data:`HOSTILE_PROGRAMS`).

    Returns:
        One :class:`HostileReport` per program, in order; assert ``all(r.ok for r in
        reports)`` to require a clean pass.
    """
    files, dirs, root = _private_layout(private_paths, task_root)
    reports: list[HostileReport] = []
    connections: list[str] = []
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)

    async def record(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            connections.append("connection")

    secret = uuid.uuid4().hex
    sock_dir = tempfile.mkdtemp(prefix="openmle-hostile-")
    sock_path = os.path.join(sock_dir, "host.sock")
    unix_listener = await anyio.create_unix_listener(sock_path)
    holder = await anyio.open_process(
        [sys.executable, "-c", "import time; time.sleep(3600)", secret],
        env={**os.environ, "OPENMLE_HOSTILE_SECRET": secret},
    )
    host_pids = [os.getpid(), holder.pid]
    shm_file = f"/dev/shm/openmle-hostile-host-{secret}"
    with contextlib.suppress(OSError):
        await anyio.Path(shm_file).write_text(secret)
    # Opened before the runs below, so every launch chain started after this holds them if a
    # sandbox lets descriptors through (one started earlier, at ``prepare``, cannot).
    host_fds = _open_inheritable([root, *files])
    fd_ids = [(fd, os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in host_fds]
    # A listening abstract socket accepts connections into its backlog: connect() succeeding
    # is the proof (nothing needs to accept them).
    abstract = f"openmle-hostile-{secret}"
    abstract_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract_sock.bind("\0" + abstract)
    abstract_sock.listen(64)
    async with holder, listener, unix_listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, record)
        tg.start_soon(unix_listener.serve, record)
        host = _Host(
            files=files,
            dirs=dirs,
            root=root,
            port=port,
            secret=secret,
            host_pids=host_pids,
            sock_path=sock_path,
            shm_file=shm_file,
            fds=fd_ids,
            abstract=abstract,
        )
        try:
            for program in programs:
                report = await _run_program(sandbox, program, task, task_root, host, connections)
                reports.append(report)
        finally:
            tg.cancel_scope.cancel()
            holder.kill()
            shutil.rmtree(sock_dir, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.unlink(shm_file)
            for fd in host_fds:
                os.close(fd)
            abstract_sock.close()
    return reports
