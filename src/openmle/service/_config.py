"""Settings of the job service, and where API keys come from."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, final

from attrs import field, frozen

from openmle._validation import check_positive, fail, int_at_least
from openmle.errors import InvalidArgument

__all__ = [
    "API_KEYS_ENV",
    "KeyLimits",
    "ServiceConfig",
    "key_id",
    "load_api_keys",
    "load_key_limits",
    "shared_roots",
]

API_KEYS_ENV = "OPENMLE_SERVICE_API_KEYS"
"""Environment variable holding accepted API keys, comma-separated."""


def key_id(key: str) -> str:
    """The id a job's owner is stored under: a digest of the API key, never the key itself."""
    return hashlib.sha256(b"openmle-service-key\0" + key.encode()).hexdigest()[:32]


def _paths(value: Iterable[str | os.PathLike[str]]) -> tuple[Path, ...]:
    if isinstance(value, str | os.PathLike):
        value = [value]
    return tuple(Path(v).expanduser().absolute() for v in value)


def _opt_paths(value: Iterable[str | os.PathLike[str]] | None) -> tuple[Path, ...] | None:
    return None if value is None else _paths(value)


@frozen(kw_only=True)
class KeyLimits:
    """Limits of one API key (``None``: the service-wide default).

    Args:
        max_queued: jobs this key may have waiting at once (429 beyond).
        top_priority: the most urgent priority this key may ask for (1 or 2; 2 keeps the key's
            jobs behind priority-1 work).
        task_roots: the directories this key's jobs may name (``task`` and ``data_dir``), in
            place of the service-wide ``task_roots``: with them the key reaches nothing under
            the service-wide roots or another key's roots (absolute paths outside its own,
            ``..`` and symbolic links that lead out are refused with 400 ``bad_path``, as for
            the service-wide roots); ``()`` allows bundled tasks only. ``None`` (the default):
            the service-wide roots, shared with every other key without roots of its own.
            Bundled tasks stay open to every key. Relative paths are made absolute.
    """

    max_queued: int | None = None
    top_priority: int | None = None
    task_roots: tuple[Path, ...] | None = field(default=None, converter=_opt_paths)

    def __attrs_post_init__(self) -> None:
        if self.max_queued is not None:
            int_at_least(1, "KeyLimits.max_queued")(self, None, self.max_queued)
        if self.top_priority is not None and self.top_priority not in (1, 2):
            raise fail("1 or 2", "KeyLimits.top_priority", self.top_priority)


def _key_lines(file: str | Path) -> list[tuple[int, list[str]]]:
    """The key lines of ``file``: (line number in the file, words)."""
    try:
        text = Path(file).read_text()
    except OSError as exc:
        raise InvalidArgument(f"cannot read the API key file {str(file)!r}: {exc}") from None
    return [
        (n, ln.split())
        for n, ln in enumerate(text.splitlines(), start=1)
        if ln.strip() and not ln.startswith("#")
    ]


def load_api_keys(
    *, env: str | None = API_KEYS_ENV, file: str | Path | None = None
) -> tuple[str, ...]:
    """Accepted API keys from an environment variable (comma-separated) and/or a file.

    The file holds one key per line, optionally followed by that key's limits
    (``max_queued=N``, ``top_priority=1|2``, ``task_root=/abs/dir``; see
    :func:`load_key_limits`); blank lines and lines starting with ``#`` are skipped.

    Raises:
        InvalidArgument: the file cannot be read.
    """
    keys: list[str] = []
    if env is not None:
        keys += [k.strip() for k in os.environ.get(env, "").split(",") if k.strip()]
    if file is not None:
        keys += [words[0] for _, words in _key_lines(file)]
    return tuple(dict.fromkeys(keys))


def load_key_limits(file: str | Path | None) -> dict[str, KeyLimits]:
    """Per-key limits and task roots from an API key file: ``KEY max_queued=50 task_root=DIR``.

    A line is ``KEY max_queued=50 top_priority=2 task_root=/srv/tasks/team-a``.

    ``task_root=`` (repeatable) gives the key task roots of its own (see
    :attr:`KeyLimits.task_roots`): an absolute path of an existing directory.

    Raises:
        InvalidArgument: the file cannot be read, a limit is malformed, or a ``task_root`` is
            relative or not an existing directory (names the file line, never the key).
    """
    out: dict[str, KeyLimits] = {}
    if file is None:
        return out
    for n, words in _key_lines(file):
        if len(words) == 1:
            continue
        opts: dict[str, int] = {}
        roots: list[Path] = []
        for word in words[1:]:
            name, sep, value = word.partition("=")
            if sep and name == "task_root":
                roots.append(_key_root(file, n, value))
                continue
            if not sep or name not in ("max_queued", "top_priority") or not value.isdigit():
                raise InvalidArgument(
                    f"API key file {str(file)!r}, line {n}: expected max_queued=N, "
                    f"top_priority=1|2 or task_root=/abs/dir after the key, got {word!r}"
                )
            opts[name] = int(value)
        out[words[0]] = KeyLimits(**opts, task_roots=tuple(roots) if roots else None)
    return out


def _key_root(file: str | Path, n: int, value: str) -> Path:
    """``task_root=value`` of line ``n``: an absolute path of an existing directory."""
    where = f"API key file {str(file)!r}, line {n}: task_root={value!r}"
    if not os.path.isabs(value):
        raise InvalidArgument(f"{where} is not an absolute path; write the directory as /abs/dir")
    if not os.path.isdir(value):
        raise InvalidArgument(
            f"{where} is not an existing directory; create it or fix the path on that line"
        )
    return Path(value)


def _opt_path(value: str | os.PathLike[str] | None) -> Path | None:
    return None if value is None else Path(value).expanduser().absolute()


def _sandbox_options(value: Mapping[str, Any]) -> dict[str, Any]:
    """``ServiceConfig.sandbox_options`` checked: keyword names, never the two the service
    passes itself (``workdir``; ``resolver`` belongs to the factory).
    """
    if not isinstance(value, Mapping):
        raise fail("a mapping of keyword names to values", "ServiceConfig.sandbox_options", value)
    out: dict[str, Any] = {}
    for name, v in value.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise InvalidArgument(
                f"Expected ServiceConfig.sandbox_options names to be keyword names but got "
                f"{name!r} (CLI: --sandbox-option NAME=VALUE)"
            )
        if name in _RESERVED_OPTIONS:
            raise InvalidArgument(
                f"ServiceConfig.sandbox_options cannot set {name!r}: the service passes it "
                "itself (use --work-dir for the work directory)"
            )
        out[name] = v
    return out


_RESERVED_OPTIONS = frozenset({"workdir"})


def _keys(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    return tuple(value)


@final
@frozen(kw_only=True)
class ServiceConfig:
    """How an ``openmle serve`` job service runs.

    Args:
        db_path: the SQLite file holding jobs and results (created if missing). One service per
            file: a second one refuses to start.
        task_roots: directories under which ``data_dir`` / ``task`` references are resolved;
            nothing outside them can be named. Shared by every key without ``task_roots`` of
            its own in ``key_limits`` (a key with them names only those).
        sandbox: a spec for :func:`openmle.backends.make_sandbox`: ``"local"``
            (``openmle.backends.LocalSandbox()``), ``"module:callable"`` (a factory called with
            no arguments, or with ``workdir=`` when it takes one, that returns a
            :class:`~openmle.Sandbox`), or another built-in or registered name.
        sandbox_options: keywords the sandbox factory is called with (``--sandbox-option
            NAME=VALUE``, repeatable: a name given more than once becomes a tuple of its
            values), e.g. the benchmarks the bench's sandbox may grade
            (:func:`openmle.bench.bench_task_sandbox`'s ``registries`` and ``data_roots``); a
            factory that does not take one refuses the start, naming it.
        api_keys: accepted ``X-API-Key`` values (see :func:`load_api_keys`).
        allow_no_auth: start without keys (every request is accepted). Off by default.
        cpu_slots, gpu_slots: jobs run at once in the CPU and GPU pools.
        max_queued: queued jobs beyond which submissions get 429 with ``Retry-After``.
        default_timeout_s: job timeout when a request gives none.
        max_job_timeout_s: longer timeouts are refused with 422 (never silently clamped).
        grace_s: seconds past a job's timeout after which a sandbox that has not returned is
            abandoned and the job fails with ``INFRA_ERROR``.
        max_wait_s: cap on a long-poll's ``?wait=`` seconds.
        max_attempts: how many times a job may be started. A job found running after a crash
            is re-queued while it has been started fewer than ``max_attempts`` times, else it
            fails with ``INFRA_ERROR`` (default 2: one re-run after a crash).
        max_code_bytes: largest accepted program.
        retry_after_s: the ``Retry-After`` sent with 429 answers.
        durable: SQLite ``synchronous=FULL`` (survives power loss, slower) instead of
            ``NORMAL`` (survives ``kill -9``).
        retain_s: finished jobs (and their idempotency keys) are deleted this many seconds
            after they end (default 7 days); None keeps them forever.
        max_queued_per_key: jobs one API key may have waiting at once (429 beyond), so one
            client cannot fill the queue for everyone (default 1,000).
        top_priority: the most urgent priority a key may ask for unless ``key_limits`` says
            otherwise (1: any; 2: only keys given ``top_priority=1`` may jump the queue).
        key_limits: per-key overrides, keyed by the API key (see :func:`load_key_limits`); a
            key given ``task_roots`` of its own names tasks only under them, every other key
            under ``task_roots`` (shared: see :func:`shared_roots`).
        priority_age_s: a queued job's priority improves by one level for every this many
            seconds it waits, so low priorities never starve (default 600 s).
        max_cpus, max_memory_mb, max_gpus: the largest ``resources`` a job may ask for
            (422 naming the field above them).
        max_result_artifacts: artifact paths kept in a stored result (the rest are dropped,
            and the result's ``detail`` says how many); longer paths are cut to 1,024 chars.
        max_result_log_bytes: program output kept in a stored result (head and tail).
        work_dir: where the ``local`` sandbox makes run directories and data views (default:
            ``<db_path>.work``). The service marks it as its own and, at start, deletes what a
            killed predecessor left there; a non-empty directory without the mark is refused.
    """

    db_path: Path = field(converter=Path)
    task_roots: tuple[Path, ...] = field(default=(), converter=_paths)
    sandbox: str = "local"
    sandbox_options: Mapping[str, Any] = field(factory=dict, converter=_sandbox_options)
    api_keys: tuple[str, ...] = field(default=(), converter=_keys, repr=False)
    allow_no_auth: bool = False
    cpu_slots: int = field(default=4, validator=int_at_least(0, "ServiceConfig.cpu_slots"))
    gpu_slots: int = field(default=0, validator=int_at_least(0, "ServiceConfig.gpu_slots"))
    max_queued: int = field(default=10_000, validator=int_at_least(1, "ServiceConfig.max_queued"))
    default_timeout_s: float = 7200.0
    max_job_timeout_s: float = 86_400.0
    grace_s: float = 60.0
    max_wait_s: float = 60.0
    max_attempts: int = field(default=2, validator=int_at_least(1, "ServiceConfig.max_attempts"))
    max_code_bytes: int = field(
        default=1_000_000, validator=int_at_least(1, "ServiceConfig.max_code_bytes")
    )
    retry_after_s: int = field(default=2, validator=int_at_least(0, "ServiceConfig.retry_after_s"))
    durable: bool = False
    retain_s: float | None = 7 * 86_400.0
    max_queued_per_key: int = field(
        default=1_000, validator=int_at_least(1, "ServiceConfig.max_queued_per_key")
    )
    top_priority: int = 1
    key_limits: Mapping[str, KeyLimits] = field(factory=dict, repr=False)
    priority_age_s: float = 600.0
    max_cpus: float = 64.0
    max_memory_mb: int = field(
        default=262_144, validator=int_at_least(1, "ServiceConfig.max_memory_mb")
    )
    max_gpus: int = field(default=8, validator=int_at_least(0, "ServiceConfig.max_gpus"))
    max_result_artifacts: int = field(
        default=1_000, validator=int_at_least(0, "ServiceConfig.max_result_artifacts")
    )
    max_result_log_bytes: int = field(
        default=256 * 1024, validator=int_at_least(1024, "ServiceConfig.max_result_log_bytes")
    )
    work_dir: Path | None = field(default=None, converter=_opt_path)

    @property
    def run_dir(self) -> Path:
        """The service's own work directory (``work_dir`` or ``<db_path>.work``)."""
        return self.work_dir if self.work_dir is not None else Path(f"{self.db_path}.work")

    def limits_for(self, key: str | None) -> KeyLimits:
        """The effective limits of ``key`` (None: no-auth mode): its own, else the
        service-wide ones (``task_roots`` included).
        """
        own = self.key_limits.get(key, KeyLimits()) if key is not None else KeyLimits()
        return KeyLimits(
            max_queued=own.max_queued if own.max_queued is not None else self.max_queued_per_key,
            top_priority=own.top_priority if own.top_priority is not None else self.top_priority,
            task_roots=own.task_roots if own.task_roots is not None else self.task_roots,
        )

    def __attrs_post_init__(self) -> None:
        for name in ("default_timeout_s", "max_job_timeout_s", "max_wait_s", "priority_age_s"):
            check_positive(getattr(self, name), f"ServiceConfig.{name}")
        check_positive(self.max_cpus, "ServiceConfig.max_cpus")
        if self.top_priority not in (1, 2):
            raise fail("1 or 2", "ServiceConfig.top_priority", self.top_priority)
        unknown = [k for k in self.key_limits if k not in self.api_keys]
        if unknown or not all(isinstance(v, KeyLimits) for v in self.key_limits.values()):
            raise InvalidArgument(
                "ServiceConfig.key_limits must map accepted API keys to KeyLimits values"
            )
        check_positive(self.grace_s, "ServiceConfig.grace_s", allow_zero=True)
        if self.retain_s is not None:
            check_positive(self.retain_s, "ServiceConfig.retain_s")
        if self.default_timeout_s > self.max_job_timeout_s:
            raise InvalidArgument(
                f"ServiceConfig.default_timeout_s={self.default_timeout_s} is above "
                f"max_job_timeout_s={self.max_job_timeout_s}; lower one or raise the other"
            )
        if self.cpu_slots + self.gpu_slots < 1:
            raise InvalidArgument("ServiceConfig needs cpu_slots or gpu_slots >= 1")
        for k in self.api_keys:
            if not isinstance(k, str) or len(k) < 8:
                raise InvalidArgument(
                    "ServiceConfig.api_keys must be strings of at least 8 characters"
                )
        if not self.api_keys and not self.allow_no_auth:
            raise InvalidArgument(
                f"ServiceConfig has no API keys; set ${API_KEYS_ENV}, pass --api-key-file, or "
                "opt out with allow_no_auth=True (--no-auth) on a trusted loopback host"
            )
        for root in self.task_roots:
            if not root.is_dir():
                raise InvalidArgument(
                    f"ServiceConfig.task_roots holds {str(root)!r}, which is not a directory; "
                    "name an existing directory of task packages"
                )
        self._check_key_roots()

    def _check_key_roots(self) -> None:
        """Every key's own task root is an existing directory (the error names the key's
        place in ``api_keys``, never the key).
        """
        for i, key in enumerate(self.api_keys):
            own = self.key_limits.get(key)
            for root in () if own is None or own.task_roots is None else own.task_roots:
                if not root.is_dir():
                    raise InvalidArgument(
                        f"ServiceConfig.key_limits: the task_roots of api_keys[{i}] hold "
                        f"{str(root)!r}, which is not a directory; name an existing directory "
                        "of that key's task packages"
                    )


def shared_roots(config: ServiceConfig) -> list[str]:
    """One sentence per group of API keys whose task roots meet (the same directory, or one
    inside another), saying how many keys share which directories (never a key).

    Keys in one group can name each other's tasks: each can run jobs on them and, with a
    sandbox that keeps what it grades (the bench's), overwrite what the others kept. The
    service logs these sentences as warnings at start; give each team's key ``task_root=`` of
    its own to separate them.
    """
    by_roots: dict[tuple[Path, ...], int] = {}
    for key in config.api_keys:
        roots = config.limits_for(key).task_roots or ()
        real = tuple(sorted({Path(os.path.realpath(r)) for r in roots}))
        if real:
            by_roots[real] = by_roots.get(real, 0) + 1
    sets = list(by_roots)
    group = list(range(len(sets)))  # union-find over the distinct root sets

    def top(i: int) -> int:
        while group[i] != i:
            i = group[i]
        return i

    for i, a in enumerate(sets):
        for j in range(i + 1, len(sets)):
            if _meet(a, sets[j]):
                group[top(j)] = top(i)
    members: dict[int, list[int]] = {}
    for i in range(len(sets)):
        members.setdefault(top(i), []).append(i)
    out = []
    for idx in members.values():
        n = sum(by_roots[sets[i]] for i in idx)
        if n < 2:
            continue
        dirs = sorted({str(r) for i in idx for r in sets[i]})
        shown = ", ".join(dirs[:5]) + (f" and {len(dirs) - 5} more" if len(dirs) > 5 else "")
        out.append(
            f"{n} API keys share task roots ({shown}): each can run jobs on the others' tasks "
            "there; give each team's key its own task_root=DIR in --api-key-file to separate "
            "them"
        )
    return out


def _meet(a: Sequence[Path], b: Sequence[Path]) -> bool:
    """Whether a root of ``a`` is a root of ``b``, or lies inside one, or holds one."""
    return any(x.is_relative_to(y) or y.is_relative_to(x) for x in a for y in b)
