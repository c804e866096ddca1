"""Settings of the job service, and where API keys come from."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, final

from attrs import field, frozen

from openmle._validation import check_positive, fail
from openmle.errors import InvalidArgument

__all__ = ["API_KEYS_ENV", "ServiceConfig", "load_api_keys"]

API_KEYS_ENV = "OPENMLE_SERVICE_API_KEYS"
"""Environment variable holding accepted API keys, comma-separated."""


def load_api_keys(
    *, env: str | None = API_KEYS_ENV, file: str | Path | None = None
) -> tuple[str, ...]:
    """Accepted API keys from an environment variable (comma-separated) and/or a file.

    The file holds one key per line; blank lines and lines starting with ``#`` are skipped.

    Raises:
        InvalidArgument: the file cannot be read.
    """
    keys: list[str] = []
    if env is not None:
        keys += [k.strip() for k in os.environ.get(env, "").split(",") if k.strip()]
    if file is not None:
        try:
            text = Path(file).read_text()
        except OSError as exc:
            raise InvalidArgument(f"cannot read the API key file {str(file)!r}: {exc}") from None
        keys += [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    return tuple(dict.fromkeys(keys))


def _paths(value: Iterable[str | os.PathLike[str]]) -> tuple[Path, ...]:
    if isinstance(value, str | os.PathLike):
        value = [value]
    return tuple(Path(v).expanduser().absolute() for v in value)


def _keys(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    return tuple(value)


def _count(name: str, minimum: int) -> Callable[[Any, Any, int], None]:
    def check(instance: Any, attribute: Any, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise fail(f"an integer >= {minimum}", f"ServiceConfig.{name}", value)

    return check


@final
@frozen(kw_only=True)
class ServiceConfig:
    """How an ``openmle serve`` job service runs.

    Args:
        db_path: the SQLite file holding jobs and results (created if missing). One service per
            file: a second one refuses to start.
        task_roots: directories under which ``data_dir`` / ``task`` references are resolved;
            nothing outside them can be named.
        sandbox: ``"local"`` (``openmle.backends.LocalSandbox()``) or ``"module:callable"``,
            a factory called with no arguments that returns a :class:`~openmle.Sandbox`.
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
    """

    db_path: Path = field(converter=Path)
    task_roots: tuple[Path, ...] = field(default=(), converter=_paths)
    sandbox: str = "local"
    api_keys: tuple[str, ...] = field(default=(), converter=_keys, repr=False)
    allow_no_auth: bool = False
    cpu_slots: int = field(default=4, validator=_count("cpu_slots", 0))
    gpu_slots: int = field(default=0, validator=_count("gpu_slots", 0))
    max_queued: int = field(default=10_000, validator=_count("max_queued", 1))
    default_timeout_s: float = 7200.0
    max_job_timeout_s: float = 86_400.0
    grace_s: float = 60.0
    max_wait_s: float = 60.0
    max_attempts: int = field(default=2, validator=_count("max_attempts", 1))
    max_code_bytes: int = field(default=1_000_000, validator=_count("max_code_bytes", 1))
    retry_after_s: int = field(default=2, validator=_count("retry_after_s", 0))
    durable: bool = False
    retain_s: float | None = 7 * 86_400.0

    def __attrs_post_init__(self) -> None:
        for name in ("default_timeout_s", "max_job_timeout_s", "max_wait_s"):
            check_positive(getattr(self, name), f"ServiceConfig.{name}")
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
                    f"ServiceConfig.task_roots holds {str(root)!r}, which is not a directory"
                )
