"""``openmle serve``: run the sandbox job service (needs the ``service`` extra)."""

from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path
from typing import Any

from openmle._cli._common import APP_DIR_HELP
from openmle.errors import InvalidArgument

__all__ = ["register"]

# ServiceConfig's fields as the flags that set them: _serve fills each from its flag, and the
# config's errors name what the user typed.
_FLAGS = {
    "db_path": "--db",
    "task_roots": "--task-root",
    "cpu_slots": "--cpu-slots",
    "gpu_slots": "--gpu-slots",
    "max_queued_per_key": "--max-queued-per-key",
    "max_queued": "--max-queued",
    "default_timeout_s": "--default-timeout",
    "max_job_timeout_s": "--max-job-timeout",
    "grace_s": "--grace",
    "max_wait_s": "--max-wait",
    "max_attempts": "--max-attempts",
    "retain_s": "--retain-days",  # _days keeps its seconds finite: never refused there
    "top_priority": "--top-priority",
    "priority_age_s": "--priority-age",
    "max_cpus": "--max-cpus",
    "max_memory_mb": "--max-memory-mb",
    "max_gpus": "--max-gpus",
    "max_result_artifacts": "--max-result-artifacts",
    "max_result_log_bytes": "--max-result-log-bytes",
    "work_dir": "--work-dir",
    "sandbox_options": "--sandbox-option",
}
_FIELD = re.compile(r"(?:\bServiceConfig\.)?\b(" + "|".join(_FLAGS) + r")\b")


def _port(text: str) -> int:
    """The ``--port`` type: an integer 1-65535 (argparse says the error)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 1 <= port <= 65_535:
        raise argparse.ArgumentTypeError(f"--port must be a TCP port 1-65535; got {text!r}")
    return port


def _days(text: str) -> float:
    """The ``--retain-days`` type: a finite number of days >= 0 (0: keep forever) whose
    seconds are finite too (argparse says the error, in days).
    """
    try:
        days = float(text)
    except ValueError:
        days = math.nan
    if not (days >= 0 and math.isfinite(days * 86_400)):
        raise argparse.ArgumentTypeError(
            f"--retain-days must be a finite number of days >= 0 (0: keep forever); got {text!r}"
        )
    return days


def _sandbox_options(pairs: list[str]) -> dict[str, str | tuple[str, ...]]:
    """``--sandbox-option NAME=VALUE`` (repeatable) as the factory's keywords: a name given
    once is a string, a name given more than once a tuple of its values in order.

    Raises:
        InvalidArgument: an item without ``=`` or with an empty name.
    """
    out: dict[str, str | tuple[str, ...]] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise InvalidArgument(
                f"--sandbox-option {pair!r}: expected NAME=VALUE, e.g. --sandbox-option "
                "registries=/opt/mle-bench"
            )
        name = name.strip()
        old = out.get(name)
        out[name] = value if old is None else (*((old,) if isinstance(old, str) else old), value)
    return out


def _flag_names(exc: InvalidArgument) -> InvalidArgument:
    """``exc`` from ServiceConfig with its field names said as ``openmle serve`` flags."""
    text = _FIELD.sub(lambda m: _FLAGS[m[1]], str(exc))
    return InvalidArgument(text.replace("ServiceConfig ", "the service "))


def _add_sandbox_flags(p: argparse.ArgumentParser) -> None:
    """``--sandbox``, ``--sandbox-option`` and ``--app-dir``."""
    p.add_argument(
        "--sandbox",
        default="local",
        help="the sandbox jobs run on: local (default), docker, ray, service:URL, "
        "module:callable or a name registered in entry-point group openmle.sandboxes",
    )
    p.add_argument(
        "--sandbox-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a keyword the --sandbox factory is called with (repeatable; a NAME given again "
        "makes a list), e.g. registries=DIR and data_roots=DIR for "
        "openmle.bench:bench_task_sandbox",
    )
    p.add_argument("--app-dir", metavar="DIR", help=APP_DIR_HELP)


def register(subparsers: Any) -> None:
    """Add the ``serve`` command."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="run the sandbox job service (/api/v1/jobs) over HTTP",
        description=(
            "Run the job service: clients (openmle.backends.JobServiceSandbox or the released "
            "OpenMLE clients) submit programs, the service runs them on a sandbox and keeps "
            "jobs and results in SQLite. API keys come from $OPENMLE_SERVICE_API_KEYS "
            "(comma-separated) and/or --api-key-file."
        ),
    )
    p.add_argument("--db", required=True, help="SQLite file for jobs and results")
    p.add_argument(
        "--task-root",
        action="append",
        default=[],
        metavar="DIR",
        help="directory of task packages clients may name (repeatable); a key with "
        "task_root= in --api-key-file names only its own roots instead",
    )
    _add_sandbox_flags(p)
    p.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="TCP port (default 8000)")
    p.add_argument(
        "--cpu-slots", type=int, default=os.cpu_count() or 1, help="CPU jobs run at once"
    )
    p.add_argument("--gpu-slots", type=int, default=0, help="GPU jobs run at once (default 0)")
    p.add_argument("--max-queued", type=int, default=10_000, help="queue bound (429 beyond)")
    p.add_argument("--default-timeout", type=float, default=7200.0, help="job seconds if unset")
    p.add_argument("--max-job-timeout", type=float, default=86_400.0, help="refuse above this")
    p.add_argument(
        "--grace", type=float, default=60.0, help="seconds past a job's timeout before it fails"
    )
    p.add_argument("--max-wait", type=float, default=60.0, help="cap on a long-poll's wait")
    p.add_argument(
        "--max-attempts",
        type=int,
        default=2,
        help="starts allowed per job; a job running at a crash is re-queued below this",
    )
    p.add_argument(
        "--api-key-file",
        default=None,
        help="file with one accepted key per line, each optionally followed by max_queued=N, "
        "top_priority=1|2 and task_root=/abs/dir (repeatable: that key's own task roots)",
    )
    p.add_argument(
        "--no-auth", action="store_true", help="accept requests without a key (loopback only!)"
    )
    p.add_argument("--durable", action="store_true", help="SQLite synchronous=FULL")
    p.add_argument(
        "--retain-days",
        type=_days,
        default=7.0,
        help="delete finished jobs this many days after they end (0: keep forever)",
    )
    p.add_argument(
        "--max-queued-per-key",
        type=int,
        default=1_000,
        help="jobs one API key may have waiting (429 beyond; per-key max_queued= in the key file)",
    )
    p.add_argument(
        "--top-priority",
        type=int,
        choices=(1, 2),
        default=1,
        help="most urgent priority a key may use (per-key top_priority= in the key file)",
    )
    p.add_argument(
        "--priority-age",
        type=float,
        default=600.0,
        help="seconds of waiting that raise a queued job's priority one level (default 600)",
    )
    p.add_argument("--max-cpus", type=float, default=64.0, help="largest resources.cpus")
    p.add_argument("--max-memory-mb", type=int, default=262_144, help="largest resources.memory_mb")
    p.add_argument("--max-gpus", type=int, default=8, help="largest resources.gpus")
    p.add_argument(
        "--max-result-artifacts", type=int, default=1_000, help="artifact paths kept per result"
    )
    p.add_argument(
        "--max-result-log-bytes", type=int, default=256 * 1024, help="log bytes kept per result"
    )
    p.add_argument(
        "--work-dir",
        default=None,
        help="the service's own directory for run directories (default: <db>.work); swept at start",
    )
    p.add_argument("--log-level", default="info", help="uvicorn log level")
    p.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    from openmle.service import ServiceConfig, load_api_keys, load_key_limits, serve

    parent = Path(args.db).absolute().parent
    if not parent.is_dir():
        raise InvalidArgument(
            f"--db {args.db}: the folder {parent} does not exist; create it first or name a "
            "file in an existing folder"
        )
    # The key file's own syntax (max_queued=N, task_root=DIR), said as written there: read
    # before the flag renaming below, which would turn max_queued= into --max-queued=.
    api_keys = load_api_keys(file=args.api_key_file)
    key_limits = load_key_limits(args.api_key_file)
    # every field that has a flag, from the flag's value (argparse's dest: --max-wait -> max_wait)
    fields = {name: getattr(args, flag[2:].replace("-", "_")) for name, flag in _FLAGS.items()}
    fields["retain_s"] = args.retain_days * 86_400 if args.retain_days > 0 else None
    fields["sandbox_options"] = _sandbox_options(args.sandbox_option)  # NAME=VALUE, parsed
    try:
        config = ServiceConfig(
            sandbox=args.sandbox,
            api_keys=api_keys,
            allow_no_auth=args.no_auth,
            durable=args.durable,
            key_limits=key_limits,
            **fields,
        )
    except InvalidArgument as exc:
        raise _flag_names(exc) from None
    serve(config, host=args.host, port=args.port, log_level=args.log_level)
    return 0
