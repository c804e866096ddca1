"""The job service's side of a bench: :func:`bench_task_sandbox` (``openmle serve --sandbox
openmle.bench:bench_task_sandbox``) runs the jobs of ``openmle bench run --sandbox service:URL``
(see :mod:`openmle.bench._engines`).

A bench directory is written by a client, so the benchmark its manifest names is not trusted:
the grader of an MLE-bench registry (``grade.py``) and a NatureBench case's evaluator run on
the service host, outside the sandbox, and the data directory holds the private test answers
a program is graded against. The operator says which benchmarks exist (the factory's
``registries`` and ``data_roots``, ``--sandbox-option NAME=DIR``); a bench naming anything
else (links followed, ``..`` resolved) is refused before anything is opened or run. Under a job
service with per-key task roots, a benchmark path inside another key's roots is refused too
(:func:`openmle.service.current_job_roots`): one team's bench cannot be graded against another
team's answers.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

import attrs
from attrs import frozen

from openmle.bench._engines import TaskDirResolver
from openmle.bench._runner import BenchConfig, BenchRun, _bench_of, _KeepingTask, _Resolver
from openmle.errors import InvalidArgument
from openmle.gym import cache_root

if TYPE_CHECKING:
    from openmle import Sandbox

__all__ = ["bench_task_sandbox"]

_HOW = "openmle serve --sandbox openmle.bench:bench_task_sandbox --sandbox-option {name}=DIR"

PathsLike = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def _roots(value: PathsLike, name: str) -> tuple[Path, ...]:
    """``value`` (one path or several) as resolved existing directories.

    Raises:
        InvalidArgument: a path that is not an existing directory, naming ``name``.
    """
    items = [value] if isinstance(value, str | os.PathLike) else list(value)
    out: list[Path] = []
    for item in items:
        p = Path(os.path.realpath(Path(item).expanduser()))
        if not p.is_dir():
            raise InvalidArgument(
                f"bench_task_sandbox: {name}={str(item)!r} is not a directory; name an existing "
                f"directory (CLI: --sandbox-option {name}=DIR)"
            )
        out.append(p)
    return tuple(out)


def _installed_mlebench() -> Path | None:
    """The folder holding the ``mlebench`` installed beside the service (a checkout's root, or
    site-packages), or None. Only that folder itself, or its ``mlebench``, counts as allowed:
    never a path below site-packages.
    """
    spec = importlib.util.find_spec("mlebench")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(os.path.realpath(next(iter(spec.submodule_search_locations)))).parent


@final
@frozen
class _Allowed:
    """The benchmarks the operator lets a bench's jobs open (resolved directories)."""

    registries: tuple[Path, ...]
    data_roots: tuple[Path, ...]

    def _inside(self, value: str, field: str, roots: tuple[Path, ...], name: str) -> Path:
        if not os.path.isabs(value):
            raise InvalidArgument(
                f"the bench's {field} {value!r} is not an absolute path; a job service opens "
                "only absolute paths (run `openmle bench run` with an absolute --data/--registry)"
            )
        real = Path(os.path.realpath(value))
        if any(real.is_relative_to(r) for r in roots):
            return real
        allowed = ", ".join(str(r) for r in roots) or "none"
        shown = repr(value) if str(real) == value else f"{value!r} (resolved: {str(real)!r})"
        raise InvalidArgument(
            f"the bench's {field} {shown} is not a benchmark this "
            f"job service grades (its {name}: {allowed}); nothing was run. Use one of those, or "
            f"ask the operator to start the service with `{_HOW.format(name=name)}`"
        )

    def registry_of(self, config: BenchConfig) -> str | None:
        """``config.registry`` resolved inside an allowed registry; None stays None (the
        installed ``mlebench``, or NatureBench's harness in its data checkout).

        Raises:
            InvalidArgument: a registry outside them, naming the field and the fix.
        """
        if config.registry is None:
            return None
        installed = _installed_mlebench()
        real = Path(os.path.realpath(config.registry))
        if installed is not None and real in (installed, installed / "mlebench"):
            return str(real)  # the operator's own, named explicitly
        return str(self._inside(config.registry, "registry", self.registries, "registries"))

    def data_of(self, config: BenchConfig) -> str:
        """``config.data_dir`` resolved inside an allowed data root.

        Raises:
            InvalidArgument: a data directory outside them, naming the field and the fix.
        """
        return str(self._inside(config.data_dir, "data_dir", self.data_roots, "data_roots"))


@final
@attrs.define(eq=False)
class _Confined:
    """A bench's task resolver whose benchmark paths are checked against the running job's
    API key at each call (:func:`openmle.service.current_job_roots`; None outside a service).
    """

    inner: _Resolver
    paths: dict[str, str]

    def __call__(self, ref: str) -> _KeepingTask:
        from openmle.service import current_job_roots

        roots = current_job_roots()
        for field, path in self.paths.items():
            if roots is not None and not roots.reaches(path):
                raise InvalidArgument(
                    f"the bench's {field} {path!r} lies inside another API key's task roots; "
                    "a job may use only benchmark data under its own key's task roots or the "
                    "operator's shared ones outside every key's roots; nothing was run"
                )
        return self.inner(ref)


def _open_allowed(allowed: _Allowed, derived: Path, path: Path) -> _Confined:
    """The task resolver of the bench directory at ``path`` with its benchmark checked first.

    The benchmark keeps what it derives (MLE-bench's validation views: the public data a
    program of the valid split reads, and the answers it is graded on) under ``derived``, the
    service's own directory, never in the client's bench directory, where a link placed in
    ``valid/`` would show a program any directory the service can read.

    Raises:
        InvalidArgument: not a bench directory, or a registry or data directory the operator
            did not allow (nothing is opened then).
    """
    run = BenchRun.open(path)
    registry, data = allowed.registry_of(run.config), allowed.data_of(run.config)
    config = attrs.evolve(run.config, registry=registry, data_dir=data)
    paths = {"data_dir": data, **({} if registry is None else {"registry": registry})}
    return _Confined(inner=_Resolver(bench=_bench_of(config, derived), run=run), paths=paths)


def bench_task_sandbox(
    inner: str = "local",
    *,
    workdir: Path | None = None,
    registries: PathsLike = (),
    data_roots: PathsLike = (),
    **options: Any,
) -> Sandbox:
    """The sandbox a job service runs a bench's jobs on.

    ``openmle serve --sandbox openmle.bench:bench_task_sandbox --sandbox-option
    data_roots=DIR [--sandbox-option registries=DIR]``: ``inner`` (``local`` or ``docker``,
    built by :func:`openmle.backends.build_sandbox` with ``options``) resolving each job's task,
    a bench task directory, to its competition (graded there, the test submission kept in the
    bench directory).

    The bench directory is the client's, so the benchmark it names is checked first (links
    followed, ``..`` resolved): its ``data_dir`` (MLE-bench's prepared data, or the NatureBench
    checkout whose evaluators run on this host) must lie in one of ``data_roots``, and its
    ``registry`` (an MLE-bench checkout whose ``grade.py`` runs on this host, or NatureBench's
    harness) in one of ``registries`` or be the ``mlebench`` installed here (a bench without
    ``--registry`` uses that one). The default allows no data: every bench job is refused until
    the operator names its benchmark data. Under a job service whose keys have task roots of
    their own, a benchmark path inside another key's roots is refused as well. A refused job
    fails (``INFRA_ERROR``) with a message naming the field and the option; nothing runs.
    What the benchmark derives (MLE-bench's validation views) is built and kept under
    ``workdir/bench`` (``$OPENMLE_CACHE/served-bench`` without one), not in the bench
    directory.

    Args:
        inner: the sandbox the programs run in.
        workdir: the service's work directory (passed on to ``inner``).
        registries: the MLE-bench checkouts (or NatureBench harness checkouts), or folders
            holding them, a bench may name.
        data_roots: the prepared MLE-bench data directories (or NatureBench checkouts), or
            folders holding them, a bench may name.
        **options: ``inner``'s keywords.

    Raises:
        InvalidArgument: ``inner`` names no sandbox taking a ``resolver``, or a ``registries``
            or ``data_roots`` entry is not an existing directory.
    """
    from openmle.backends import build_sandbox, sandbox_takes

    if not sandbox_takes(inner, "resolver"):
        raise InvalidArgument(f"bench_task_sandbox: inner={inner!r} takes no resolver")
    allowed = _Allowed(
        registries=_roots(registries, "registries"), data_roots=_roots(data_roots, "data_roots")
    )
    derived = (cache_root() / "served-bench") if workdir is None else Path(workdir) / "bench"
    resolver = TaskDirResolver(functools.partial(_open_allowed, allowed, derived))
    optional: dict[str, Any] = {} if workdir is None else {"workdir": workdir}
    return build_sandbox(inner, {**options, "resolver": resolver}, optional)
