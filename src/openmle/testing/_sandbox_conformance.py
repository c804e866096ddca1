"""The sandbox conformance suite: ``check_sandbox`` runs a fixed set of jobs on any sandbox.

It relies only on the task-package conventions every sandbox shares: the program reads the
public data through ``$DATA_DIR``, that directory holds ``sample_submission.csv``, and the
program writes ``./submission.csv``. So it works for any :class:`openmle.Sandbox` (local,
Docker, Ray, a remote job service) and any task whose sample submission is valid.

:data:`SANDBOX_RULES` names every rule the suite enforces; the ``trusted`` profile checks all of
them but secrecy, for a sandbox on a machine its user controls, which must say so
(``trusted = True``, recorded in a run's manifest).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import anyio

from openmle._protocols import Sandbox
from openmle._types import Job, Outcome, RunResult, Split
from openmle._validation import check_choice
from openmle.errors import InvalidArgument, InvalidArgumentType

__all__ = ["SANDBOX_PROFILES", "SANDBOX_RULES", "SandboxProfile", "check_sandbox"]

SandboxProfile = Literal["strict", "trusted"]
SANDBOX_PROFILES: tuple[str, ...] = ("strict", "trusted")
"""``strict`` (every rule) and ``trusted`` (every rule but ``secrecy``, plus ``trusted``)."""

SANDBOX_RULES: Mapping[str, str] = {
    "result": (
        "every run returns a RunResult that round-trips through to_dict and from_dict, with "
        "runtime_s and queue_s >= 0; a success has no error signature, a failure has one and "
        "no score"
    ),
    "liveness": "every run returns within 300 s plus its timeout_s",
    "success": (
        "copying $DATA_DIR/sample_submission.csv to ./submission.csv gives SUCCESS with a "
        "finite score on both splits, and the result's split is the job's"
    ),
    "stdout": "the program's stdout is captured in RunResult.logs",
    "env": "job.env reaches the program",
    "artifacts": "RunResult.artifacts lists submission.csv, a file the program left",
    "concurrent": "two jobs at once both succeed",
    "runtime-error": (
        "a raise gives RUNTIME_ERROR with the exception type in the error signature and the "
        "output printed before it in the logs"
    ),
    "timeout": "a sleep past timeout_s gives TIMEOUT",
    "missing": "exiting 0 without ./submission.csv gives MISSING_SUBMISSION",
    "invalid": "a garbage submission.csv gives INVALID_SUBMISSION",
    "log-cap": (
        "printing 8 MiB keeps at most 1 MiB (1,048,576 bytes) of logs, marker line included, "
        "with the head and the tail, and logs_dropped_bytes counts at least the other 7 MiB"
    ),
    "secrecy": (
        "no path of private_paths, nor any file or directory beneath them, can be read, on "
        "both splits (strict profile only)"
    ),
    "trusted": (
        "the sandbox declares trusted = True, which a run records in its manifest "
        "(trusted profile only)"
    ),
    "cancel": "cancelling a running run returns within 60 s, and the next run still works",
}
"""Every rule :func:`check_sandbox` enforces, by name, in the order it checks them."""

_LIVENESS_S = 300.0
"""Upper bound on any single check; exceeding it means the sandbox hangs (not that it is slow)."""

_COPY_SAMPLE = """
import os, shutil
shutil.copyfile(os.path.join(os.environ["DATA_DIR"], "sample_submission.csv"), "submission.csv")
print("CONFORMANCE-STDOUT", os.environ.get("OPENMLE_CONFORMANCE_ENV", "<unset>"))
"""

_RAISE = """
print("about to fail")
raise ValueError("conformance failure 12345")
"""

_SLEEP = """
import time
print("sleeping", flush=True)
time.sleep(3600)
"""

_NO_SUBMISSION = """
print("no submission written")
"""

_GARBAGE = """
with open("submission.csv", "w") as f:
    f.write("this is,not a\\nvalid,submission,at,all\\n???\\n")
"""

_FLOOD_BYTES = 8 * 1024 * 1024
_KEPT_LOG_LIMIT = 1024 * 1024
"""A sandbox keeps at most this much of a run's output (the shipped ones keep 128 KiB)."""

_FLOOD = """
import sys
print("FLOOD-START", flush=True)
line = b"x" * 1023 + b"\\n"
for _ in range(8 * 1024):
    sys.stdout.buffer.write(line)
sys.stdout.flush()
print("FLOOD-END", flush=True)
"""

_READ_PRIVATE = """
import os
leaked = []
for path in TARGETS:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as f:
                f.read(1)
    except OSError:
        continue
    leaked.append(path)
for path in leaked:
    print("LEAKED", path)
print("PRIVATE-CHECKED", len(TARGETS))
"""


def _private_targets(private_paths: Sequence[Path]) -> list[str]:
    out: list[str] = []
    for p in private_paths:
        p = Path(p).absolute()
        out.append(str(p))
        if p.is_dir():
            for dirpath, dirnames, filenames in os.walk(p):
                out.extend(os.path.join(dirpath, n) for n in (*dirnames, *filenames))
    return out


def _expect(r: object, outcome: Outcome, what: str) -> RunResult:
    if not isinstance(r, RunResult):
        raise AssertionError(f"{what}: run() returned {type(r).__name__}, not RunResult")
    if r.outcome is not outcome:
        raise AssertionError(
            f"{what}: expected outcome {outcome.value!r} but got {r.outcome.value!r} "
            f"(detail={r.detail!r}, signature={r.error_signature!r}, logs tail={r.logs[-500:]!r})"
        )
    if not (r.runtime_s >= 0 and r.queue_s >= 0):
        raise AssertionError(f"{what}: negative runtime or queue time")
    again = RunResult.from_dict(r.to_dict())
    if again != r:
        raise AssertionError(f"{what}: RunResult does not round-trip through to_dict/from_dict")
    if outcome is Outcome.SUCCESS:
        if r.error_signature is not None:
            raise AssertionError(f"{what}: a success carries no error signature")
    else:
        if r.score is not None:
            raise AssertionError(f"{what}: a {outcome.value} run must have no score")
        if not (r.error_signature):
            raise AssertionError(f"{what}: a {outcome.value} run needs an error signature")
    return r


async def _run(sandbox: Sandbox, job: Job, what: str) -> RunResult:
    try:
        with anyio.fail_after(_LIVENESS_S + job.timeout_s):
            return await sandbox.run(job)
    except TimeoutError:
        raise AssertionError(
            f"{what}: run() did not return within {_LIVENESS_S + job.timeout_s:.0f} s"
        ) from None


async def _check_success(sandbox: Sandbox, task: str) -> None:
    """Copying the sample submission succeeds on both splits, with output, env, artifacts."""
    env = {"OPENMLE_CONFORMANCE_ENV": "env-reaches-program"}
    for split in Split:
        what = f"copying the sample submission (split={split.value})"
        r = _expect(
            await _run(sandbox, Job(code=_COPY_SAMPLE, task=task, split=split, env=env), what),
            Outcome.SUCCESS,
            what,
        )
        if not (r.score is not None and math.isfinite(r.score)):
            raise AssertionError(f"{what}: score {r.score!r}")
        if r.split is not split:
            raise AssertionError(f"{what}: result split {r.split} != job split {split}")
        if "CONFORMANCE-STDOUT" not in r.logs:
            raise AssertionError(f"{what}: stdout not captured: {r.logs!r}")
        if "env-reaches-program" not in r.logs:
            raise AssertionError(f"{what}: job.env did not reach the program")
        if "submission.csv" not in r.artifacts:
            raise AssertionError(f"{what}: artifacts {r.artifacts} lack it")


async def _check_concurrent(sandbox: Sandbox, task: str) -> None:
    """Two jobs at once both succeed."""
    results: list[RunResult] = []

    async def one() -> None:
        results.append(await _run(sandbox, Job(code=_COPY_SAMPLE, task=task), "concurrent"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(one)
        tg.start_soon(one)
    for r in results:
        _expect(r, Outcome.SUCCESS, "two jobs at once")


async def _check_failures(sandbox: Sandbox, task: str) -> None:
    """A raise, a sleep past the timeout, no submission and a garbage CSV each get their outcome."""
    r = _expect(
        await _run(sandbox, Job(code=_RAISE, task=task), "raise"), Outcome.RUNTIME_ERROR, "raise"
    )
    if not (r.error_signature is not None and r.error_signature.startswith("ValueError")):
        raise AssertionError(
            f"raise: error signature {r.error_signature!r} should name the ValueError"
        )
    if "about to fail" not in r.logs:
        raise AssertionError("raise: output before the exception was lost")

    r = _expect(
        await _run(sandbox, Job(code=_SLEEP, task=task, timeout_s=2.0), "timeout"),
        Outcome.TIMEOUT,
        "sleeping past timeout_s",
    )

    _expect(
        await _run(sandbox, Job(code=_NO_SUBMISSION, task=task), "missing"),
        Outcome.MISSING_SUBMISSION,
        "exit 0 without submission.csv",
    )
    _expect(
        await _run(sandbox, Job(code=_GARBAGE, task=task), "garbage"),
        Outcome.INVALID_SUBMISSION,
        "a garbage submission",
    )


async def _check_log_cap(sandbox: Sandbox, task: str) -> None:
    """Printing 8 MiB keeps at most 1 MiB of logs (head and tail) and counts the rest."""
    r = _expect(
        await _run(sandbox, Job(code=_FLOOD, task=task), "flood"),
        Outcome.MISSING_SUBMISSION,
        "printing 8 MiB",
    )
    kept = len(r.logs.encode("utf-8", errors="replace"))
    if kept > _KEPT_LOG_LIMIT:
        raise AssertionError(
            f"printing 8 MiB: the sandbox kept {kept} bytes of logs; cap them (at most "
            f"{_KEPT_LOG_LIMIT} bytes, marker line included, e.g. with "
            "openmle.backends.LogCap(head=512 * 1024, tail=512 * 1024))"
        )
    if r.logs_dropped_bytes < _FLOOD_BYTES - _KEPT_LOG_LIMIT:
        raise AssertionError(
            f"printing 8 MiB: logs_dropped_bytes={r.logs_dropped_bytes} does not count what the "
            "cap dropped"
        )
    if "FLOOD-START" not in r.logs or "FLOOD-END" not in r.logs:
        raise AssertionError("printing 8 MiB: the capped logs must keep the head and the tail")


async def _check_private(sandbox: Sandbox, task: str, private_paths: Sequence[Path]) -> None:
    """Reading any of ``private_paths`` (and every file beneath them) fails."""
    targets = _private_targets(private_paths)
    if targets:
        code = f"TARGETS = {targets!r}\n" + _READ_PRIVATE
        for split in Split:
            r = await _run(sandbox, Job(code=code, task=task, split=split), "private")
            if "PRIVATE-CHECKED" not in r.logs:
                raise AssertionError(
                    f"reading private paths: the probe did not run to the end ({r.outcome.value}: "
                    f"{r.logs[-500:]!r})"
                )
            leaked = [line for line in r.logs.splitlines() if line.startswith("LEAKED")]
            if leaked:
                raise AssertionError(f"the program could read private paths: {leaked}")


async def check_sandbox(
    sandbox: Sandbox,
    *,
    task: str,
    private_paths: Sequence[Path] = (),
    profile: SandboxProfile | str = "strict",
) -> tuple[str, ...]:
    """Check that ``sandbox`` keeps the :class:`openmle.Sandbox` contract on ``task``.

    The rules (:data:`SANDBOX_RULES`), in order:

    - result: every run returns a RunResult that round-trips through to_dict and from_dict,
      with runtime_s and queue_s >= 0; a success has no error signature, a failure has one
      and no score.
    - liveness: every run returns within 300 s plus its timeout_s.
    - success: copying $DATA_DIR/sample_submission.csv to ./submission.csv gives SUCCESS with
      a finite score on both splits, and the result's split is the job's.
    - stdout: the program's stdout is captured in RunResult.logs.
    - env: job.env reaches the program.
    - artifacts: RunResult.artifacts lists submission.csv, a file the program left.
    - concurrent: two jobs at once both succeed.
    - runtime-error: a raise gives RUNTIME_ERROR with the exception type in the error
      signature and the output printed before it in the logs.
    - timeout: a sleep past timeout_s gives TIMEOUT.
    - missing: exiting 0 without ./submission.csv gives MISSING_SUBMISSION.
    - invalid: a garbage submission.csv gives INVALID_SUBMISSION.
    - log-cap: printing 8 MiB keeps at most 1 MiB (1,048,576 bytes) of logs, marker line
      included, with the head and the tail, and logs_dropped_bytes counts at least the other
      7 MiB (:class:`openmle.backends.LogCap` with ``head + tail <= 1 MiB`` keeps it).
    - secrecy: no path of private_paths, nor any file or directory beneath them, can be read,
      on both splits (strict profile only).
    - trusted: the sandbox declares trusted = True, which a run records in its manifest
      (trusted profile only).
    - cancel: cancelling a running run returns within 60 s, and the next run still works.

    Args:
        sandbox: the sandbox under test (not closed by this function).
        task: a task reference the sandbox resolves (its sample submission must be valid).
        private_paths: host paths of the task's hidden answers (``strict`` reads each; each
            one at least must exist once the task has run: a task may make them then).
            Without any, nothing is read: ``secrecy`` is then not checked and not among the
            returned names.
        profile: ``"strict"`` (every rule but ``trusted``) or ``"trusted"``: every rule but
            ``secrecy``, for a sandbox on a machine its user controls, whose programs could
            read the answers; such a sandbox must declare ``trusted = True``.

    Returns:
        The names of the rules checked, in order.

    Raises:
        AssertionError: the first violated rule, with the result that broke it.
        InvalidArgument: an unknown ``profile``, or private paths none of which exists after
            the task's first runs.
        InvalidArgumentType: ``private_paths`` is a string rather than a sequence of paths.
    """
    check_choice(profile, SANDBOX_PROFILES, "profile")
    _check_private_paths(private_paths)
    if profile == "trusted" and getattr(sandbox, "trusted", False) is not True:
        raise AssertionError(
            f"trusted profile: {type(sandbox).__name__} must declare trusted = True (a run "
            "records it in its manifest: programs on it can read the answers)"
        )
    await _check_success(sandbox, task)
    await _check_concurrent(sandbox, task)
    await _check_failures(sandbox, task)
    await _check_log_cap(sandbox, task)
    if profile == "strict" and private_paths:
        # after the runs above: a task may make its files when first run (a bundled task's cache)
        _check_private_paths_exist(private_paths)
        await _check_private(sandbox, task, private_paths)
    await _check_cancel(sandbox, task)
    skipped = {"trusted"} if profile == "strict" else {"secrecy"}
    if not private_paths:
        skipped.add("secrecy")  # nothing to read: the rule was not checked
    return tuple(name for name in SANDBOX_RULES if name not in skipped)


def _check_private_paths(private_paths: Sequence[Path]) -> None:
    """Refuse a string (a path where a sequence of paths belongs)."""
    if isinstance(private_paths, str | bytes | os.PathLike):
        raise InvalidArgumentType(
            f"Expected a sequence of paths but got private_paths={private_paths!r:.80}; "
            "pass a list, e.g. private_paths=task.private_paths"
        )


def _check_private_paths_exist(private_paths: Sequence[Path]) -> None:
    """Refuse a list none of whose paths exists once the task has run (reading them proves
    nothing). A task may list a path that its layout does not have (a bundled task's
    ``data/valid/private``): one that exists is enough.
    """
    if not any(os.path.lexists(p) for p in private_paths):
        raise InvalidArgument(
            f"none of private_paths={[str(p) for p in private_paths]!r:.200} exists after the "
            "task's runs, so reading them proves nothing; pass the paths of the task's hidden "
            "answers (e.g. task.private_paths)"
        )


async def _check_cancel(sandbox: Sandbox, task: str) -> None:
    """Cancelling a running ``run`` returns promptly, and the sandbox still works afterwards."""
    try:
        with anyio.fail_after(60):
            with anyio.move_on_after(2.0):
                await sandbox.run(Job(code=_SLEEP, task=task, timeout_s=600))
    except TimeoutError:
        raise AssertionError("cancelling run() did not return within 60 s") from None
    _expect(
        await _run(sandbox, Job(code=_NO_SUBMISSION, task=task), "after cancel"),
        Outcome.MISSING_SUBMISSION,
        "a run after a cancelled run",
    )
