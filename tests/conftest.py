"""Shared fixtures and the ``needs`` marker.

Async tests use ``@pytest.mark.anyio`` on the asyncio backend. A test that needs a module of an
optional extra says so with ``@pytest.mark.needs("pandas", ...)`` (or, for a whole file,
``pytest.importorskip(module, reason=...)``): on a core-only install (``pip install openmle``)
it is skipped with the extra to install, so the core suite runs there.

``OPENMLE_HYPOTHESIS_MAX_EXAMPLES=N`` caps every property test at ``N`` examples (its own
count when lower): the core-only run of ``scripts/test.sh`` sets it, as the full run before it
has already tried every property at its own count with the same code.

Property tests have no per-example deadline and no "too slow" health check (the ``openmle``
hypothesis profile, loaded here): both measure the machine's speed (hypothesis's default
allows 200 ms per example), and a test never depends on wall-clock speed.

The suite runs in parallel workers (``pytest -n 3 --dist loadgroup``, pytest-xdist; see
``scripts/test.sh``); every worker is its own pytest session. Nothing a test writes is shared
between workers: temp dirs come from ``tmp_path``/``tmp_path_factory`` (per worker), and
``$OPENMLE_CACHE`` (bundled tasks, validation views, image builds) points at a per-worker
directory for the whole session (:func:`openmle_cache`), never at the user's
``~/.cache/openmle``. Tests that share one engine or cluster per session run in its serial
group (:data:`SERIAL_GROUPS`): all of them on the same worker, one at a time; the Docker group
and the Ray group run side by side. The Docker Engine fixtures are a plugin loaded here
(``tests/_docker_engine.py``), so every test folder shares one engine per session.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests._sockets import describe_sockets, peer_commands, socket_fds

#: The Docker Engine fixtures (``docker_engine``, ``managed_containers``): one definition for
#: every test folder (the backends' and the bench's integration tests), so one engine a session.
pytest_plugins = ["tests._docker_engine"]

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # pragma: no cover - an install without the test tools
    pass
else:
    settings.register_profile(
        "openmle", deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.load_profile("openmle")

#: The extra that installs each optional module the tests use (see pyproject.toml).
EXTRA_OF = {
    "datasets": "dev",
    "docker": "docker",
    "matplotlib": "data",
    "openai": "openai",
    "PIL": "data",
    "pandas": "data",
    "pyarrow": "data",
    "ray": "ray",
    "sklearn": "data",
    "starlette": "service",
    "tokenizers": "hf",
    "torch": "torch",
    "transformers": "hf",
    "trl": "dev",
    "uvicorn": "service",
}


def missing_reason(module: str) -> str | None:
    """Why a test needing ``module`` cannot run here (None when it imports)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        found = False
    if found:
        return None
    extra = EXTRA_OF.get(module.partition(".")[0], "all")
    return f"needs {module}: pip install 'openmle[{extra}]'"


def _torch_threads_per_worker() -> int | None:
    """In a parallel worker: this worker's share of the CPUs (the workers run side by side);
    None in a serial run."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers < 2:
        return None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cpus or 1) // workers)


_TORCH_THREADS = _torch_threads_per_worker()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test marked ``needs(...)`` whose modules are not installed, naming the extra.

    In a parallel worker, torch (once a test module imported it) uses the worker's share of the
    CPUs: by default each worker's torch would spin one thread per core beside the other
    worker's (tiny models gain nothing from them; see :func:`one_torch_thread`)."""
    torch = sys.modules.get("torch")
    if (
        _TORCH_THREADS is not None
        and torch is not None
        and torch.get_num_threads() > _TORCH_THREADS
    ):
        torch.set_num_threads(_TORCH_THREADS)
    for mark in item.iter_markers("needs"):
        for module in mark.args:
            reason = missing_reason(module)
            if reason is not None:
                pytest.skip(reason)


#: Session fixture -> the xdist group of every test that uses it. A Docker Engine API (one
#: ``podman system service`` per worker session, whose end-of-session check lists the containers
#: DockerSandbox left) and a local Ray cluster (``ray.init`` starts one per worker session) are
#: started once per worker: the tests of each run on one worker, in order, so one engine serves
#: them all and no other worker's containers are in flight when the engine checks what was left
#: behind. The two groups are independent (a Ray cluster makes no container; each worker's Ray
#: cluster is its own), so they run side by side on two workers.
SERIAL_GROUPS = {
    "docker_engine": "docker",
    "managed_containers": "docker",
    "ray_cluster": "ray",
}

#: A test that uses fixtures of several groups runs in the first of them listed here (a test of
#: RaySandbox with DockerSandbox inside needs the engine's group; its Ray cluster is then the
#: docker worker's own).
GROUP_ORDER = ("docker", "ray")


def pytest_configure(config: pytest.Config) -> None:
    """Start every program with SIGINT's default action, as from a terminal: a suite started
    with SIGINT ignored (a background job of a shell script, whose ``&`` ignores it) passed
    that on to every program it started, and the tests that interrupt one with Ctrl-C failed
    (the program was right to ignore it)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the tests of a shared engine or cluster in their serial group (:data:`SERIAL_GROUPS`);
    cap hypothesis tests at ``OPENMLE_HYPOTHESIS_MAX_EXAMPLES`` examples when it is set.

    It runs first: pytest-xdist's own hook (in each worker) reads the ``xdist_group`` marks
    added here to send a group's tests to one worker."""
    for item in items:
        groups = {SERIAL_GROUPS[f] for f in getattr(item, "fixturenames", ()) if f in SERIAL_GROUPS}
        unknown = groups - set(GROUP_ORDER)
        if unknown:
            raise pytest.UsageError(
                f"{item.nodeid} uses fixtures of the serial groups {sorted(unknown)} that "
                "GROUP_ORDER does not list: add them there"
            )
        if groups:
            group = next(g for g in GROUP_ORDER if g in groups)
            item.add_marker(pytest.mark.xdist_group(group))
    _cap_hypothesis(items)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """In a ``--dist loadgroup`` worker: fail unless pytest-xdist took every serial group (it
    marks a grouped test by suffixing its node id with ``@GROUP``; a pytest whose node ids
    xdist cannot change would silently spread a group over the workers)."""
    if not getattr(session.config.option, "loadgroup", False):  # set in xdist's workers only
        return
    for item in session.items:
        mark = item.get_closest_marker("xdist_group")
        if mark is not None and not item.nodeid.endswith(f"@{mark.args[0]}"):
            why = (
                f"pytest-xdist did not put {item.nodeid} in its serial group {mark.args[0]!r} "
                f"(pytest {pytest.__version__}): install the versions of constraints.txt"
            )
            print(f"\nERROR: {why}", file=sys.__stderr__, flush=True)  # a worker's errors
            raise pytest.UsageError(why)  # reach the terminal as "no active workers" only


def _cap_hypothesis(items: list[pytest.Item]) -> None:
    cap = os.environ.get("OPENMLE_HYPOTHESIS_MAX_EXAMPLES", "")
    if not cap:
        return
    if not cap.isdigit() or int(cap) < 1:
        raise pytest.UsageError(
            f"OPENMLE_HYPOTHESIS_MAX_EXAMPLES={cap!r}: expected a positive integer (or unset)"
        )
    from hypothesis import settings

    for item in items:
        test = getattr(item, "obj", None)
        test = getattr(test, "__func__", test)  # a method: its function holds the settings
        # Hypothesis reads this attribute of the @given wrapper when the test runs.
        current = getattr(test, "_hypothesis_internal_use_settings", None)
        if isinstance(current, settings) and current.max_examples > int(cap):
            test._hypothesis_internal_use_settings = settings(current, max_examples=int(cap))  # type: ignore[union-attr]


@pytest.fixture(scope="session", autouse=True)
def openmle_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point ``$OPENMLE_CACHE`` at a directory of this worker's session (and of every process
    its tests start): generated bundled tasks, validation views and image builds are made
    once per worker, never shared with another worker or the user's ``~/.cache/openmle``."""
    root = tmp_path_factory.mktemp("openmle-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENMLE_CACHE", str(root))
        yield root


@pytest.fixture
def deep_tmp_path(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path``, emptied after the test by openmle's tree remover whatever it holds: for
    tests whose programs may leave trees deeper than Python's recursion limit, which pytest's
    own removal of old temporary directories (``shutil.rmtree``) cannot delete."""
    from openmle._trees import remove_tree

    try:
        yield tmp_path
    finally:
        for entry in list(tmp_path.iterdir()):
            remove_tree(entry)


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Run the test with one torch thread (restored after). For tiny models trained beside
    sandboxed programs: their matrices gain nothing from a second thread, and two threads
    spinning while the programs run cost many times the CPU (measured on a loaded 2-core
    machine: 20 warm-start steps of the GSPO quality test's model took 12.6 s of CPU with
    two threads, 0.6 s with one)."""
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture
def anyio_backend() -> str:
    """Run anyio tests on asyncio (the backend every openmle deployment uses)."""
    return "asyncio"


#: Seconds a socket left open at a test's end may take to close before it counts as leaked.
LEAK_GRACE_S = 2.0


@pytest.fixture(autouse=True)
def no_leaked_sockets(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that leaves a socket open, naming it (where ``/proc/self/fd`` exists).

    A leaked socket is otherwise closed by the garbage collector at some later point, and its
    ``ResourceWarning`` (an error here) fails whichever test happens to be running then. Set up
    before, and torn down after, every other function-scoped fixture, so only what outlives
    the test counts; servers of module or session fixtures start before the first listing.
    Cheap: two listings of ``/proc/self/fd``. Only when a new socket is still open is the
    garbage collected (a dropped socket may wait for it) and up to :data:`LEAK_GRACE_S` given
    for the socket to close: a server in a thread of this process closes its end of a
    connection shortly after the client closed its own. A test whose sockets outlive it on
    purpose says so with ``@pytest.mark.leaves_sockets``; the users of the fixtures of
    :data:`SOCKETS_OUTLIVE_TESTS` are left unchecked too."""
    before = socket_fds()
    yield
    new = {fd: s for fd, s in socket_fds().items() if before.get(fd) != s}
    if not new or _may_leave_sockets(request):
        return
    gc.collect()
    deadline = time.monotonic() + LEAK_GRACE_S
    while True:
        new = {fd: s for fd, s in socket_fds().items() if before.get(fd) != s}
        if not new or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    if new and "ray" in sys.modules:
        new = _without_ray_connections(new)
    if new:
        pytest.fail(
            f"{request.node.nodeid} left {len(new)} socket(s) open: "
            + "; ".join(describe_sockets(new))
            + " (close them in the test, or mark it @pytest.mark.leaves_sockets)",
            pytrace=False,
        )


#: Session fixtures whose clients open connections lazily, during whichever test first needs
#: one, and keep them for the session: the tests using them skip :func:`no_leaked_sockets`.
#: (A Ray driver connects to the cluster's processes as tasks reach them.)
SOCKETS_OUTLIVE_TESTS = frozenset({"ray_cluster"})


def _without_ray_connections(new: dict[int, str]) -> dict[int, str]:
    """``new`` without the connections to a local Ray cluster's processes: a Ray driver that a
    session fixture started in this worker (:data:`SOCKETS_OUTLIVE_TESTS`) opens them from its
    own threads, during whichever later test is running (seen in a Docker test that ran after
    the Docker-in-Ray test on the same worker)."""
    ray = sys.modules["ray"]
    if not ray.is_initialized():
        return new
    peers = peer_commands(new)
    return {fd: s for fd, s in new.items() if not _RAY_PROCESS.search(peers.get(fd, ""))}


_RAY_PROCESS = re.compile(r"\bray::|/ray/|\braylet\b|\bgcs_server\b")
"""A Ray cluster process's command line (workers ``ray::...``, raylet, GCS, Ray's own
scripts under ``.../site-packages/ray/``)."""


def _may_leave_sockets(request: pytest.FixtureRequest) -> bool:
    if request.node.get_closest_marker("leaves_sockets") is not None:
        return True
    return not SOCKETS_OUTLIVE_TESTS.isdisjoint(request.fixturenames)
