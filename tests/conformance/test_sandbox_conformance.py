"""The sandbox conformance suite passes on LocalSandbox and catches a sandbox that leaks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from attrs import define

from openmle import Job, RunResult
from openmle.backends import LocalSandbox, LogCap, classify_run
from openmle.errors import InvalidArgument
from openmle.testing import SANDBOX_RULES, ToyTask, check_sandbox

pytestmark = [pytest.mark.conformance, pytest.mark.integration, pytest.mark.anyio]


async def test_local_sandbox_conforms(local_sandbox: LocalSandbox, toy: ToyTask) -> None:
    """LocalSandbox keeps the Sandbox contract in both isolation modes."""
    await check_sandbox(local_sandbox, task="toy", private_paths=toy.private_paths)


@define(eq=False)
class NaiveSandbox:
    """Runs programs as plain subprocesses with no isolation: classifies well, protects nothing."""

    task: ToyTask
    capped: bool = True

    async def run(self, job: Job) -> RunResult:
        """Run with subprocess.run in a thread (timeouts kill the child only)."""
        with tempfile.TemporaryDirectory() as work:

            def go() -> tuple[int | None, bool, bytes]:
                try:
                    p = subprocess.run(
                        [sys.executable, "-c", job.code],
                        cwd=work,
                        env={
                            **os.environ,
                            **job.env,
                            "DATA_DIR": str(self.task.public_dir(job.split)),
                        },
                        capture_output=True,
                        timeout=job.timeout_s,
                        check=False,
                    )
                except subprocess.TimeoutExpired as exc:
                    return None, True, exc.stdout or b""
                return p.returncode, False, p.stdout + p.stderr

            code, timed_out, out = await anyio.to_thread.run_sync(go, abandon_on_cancel=True)
            cap = LogCap() if self.capped else LogCap(head=len(out), tail=0)
            cap.feed(out)
            sub = Path(work) / "submission.csv"
            grade = self.task.grade(sub, job.split) if sub.exists() else None
            return classify_run(
                split=job.split,
                exit_code=code,
                timed_out=timed_out,
                oom=False,
                submission=sub if sub.exists() else None,
                grade=grade,
                logs=cap.text(),
                logs_dropped_bytes=cap.dropped,
                artifacts=tuple(sorted(os.listdir(work))),
            )

    async def aclose(self) -> None:
        """Nothing to release."""


async def test_suite_catches_a_leaking_sandbox(toy: ToyTask) -> None:
    """An unisolated sandbox fails the private-path check, naming the leaked path."""
    with pytest.raises(AssertionError, match="could read private paths"):
        await check_sandbox(NaiveSandbox(toy), task="toy", private_paths=toy.private_paths)


async def test_private_paths_none_of_which_exists_prove_nothing(
    toy: ToyTask, tmp_path: Path
) -> None:
    """Secrecy over paths that do not exist (a typo) passed vacuously; once the task has run,
    a list none of whose paths exists is refused, naming ``private_paths``."""
    with pytest.raises(InvalidArgument, match=r"none of private_paths=.*proves nothing"):
        await check_sandbox(NaiveSandbox(toy), task="toy", private_paths=[tmp_path / "no"])


async def test_suite_catches_a_sandbox_without_a_log_cap(toy: ToyTask) -> None:
    """A sandbox that keeps all of a program's output fails the log-cap check."""
    with pytest.raises(AssertionError, match="cap them"):
        await check_sandbox(NaiveSandbox(toy, capped=False), task="toy")


@pytest.mark.slow
async def test_local_sandbox_conforms_on_a_bundled_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the default resolver (openmle.gym), a bundled task passes the suite and the
    battery's attacks on the task's files (the programs that read its layout: private files and
    directories, the task root). The rest of the battery does not depend on the task: it runs
    in full on this sandbox in both modes in ``test_hostile_battery.py``."""
    from openmle.gym import resolve_task
    from openmle.testing import HOSTILE_PROGRAMS, run_hostile_battery

    monkeypatch.setenv("OPENMLE_CACHE", str(tmp_path / "cache"))
    task = resolve_task("tabular-binary")
    async with LocalSandbox(max_file_mb=64, memory_mb=1024, kill_grace_s=1.0) as sandbox:
        await check_sandbox(sandbox, task="tabular-binary", private_paths=task.private_paths)
        reports = await run_hostile_battery(
            sandbox,
            task="tabular-binary",
            private_paths=task.private_paths,
            task_root=task.root,
            programs=[p for p in HOSTILE_PROGRAMS if _reads_the_task(p.body)],
        )
    assert {r.name for r in reports} >= {"read_private", "write_outside", "metadata_outside"}
    assert all(r.ok for r in reports), [(r.name, r.problems) for r in reports if not r.ok]


def _reads_the_task(body: str) -> bool:
    """Whether a hostile program uses the task's layout (its header's constants for it)."""
    return any(name in body for name in ("PRIVATE_FILES", "PRIVATE_DIRS", "TASK_ROOT"))


_HOWTO = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "custom-sandbox.md"


def _docs_subprocess_sandbox() -> Any:
    """``SubprocessSandbox`` as the custom-sandbox how-to writes it (its python block, run)."""
    text = _HOWTO.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    (code,) = [b for b in blocks if "class SubprocessSandbox" in b]
    namespace: dict[str, Any] = {"__name__": "docs_custom_sandbox"}
    exec(compile(code, str(_HOWTO), "exec"), namespace)
    return namespace["SubprocessSandbox"]


async def test_the_how_tos_subprocess_sandbox_passes_the_trusted_profile(toy: ToyTask) -> None:
    """The how-to's plain-subprocess sandbox keeps every rule but secrecy (it says it is
    trusted), the how-to shows exactly what the check returns, and strict catches it."""
    sandbox = _docs_subprocess_sandbox()(ToyTask.resolver({"toy": toy}))
    checked = await check_sandbox(sandbox, task="toy", profile="trusted")
    assert checked == tuple(n for n in SANDBOX_RULES if n != "secrecy")
    assert f"{len(checked)} rules kept: {', '.join(checked)}" in _HOWTO.read_text()
    with pytest.raises(AssertionError, match="could read private paths"):
        await check_sandbox(sandbox, task="toy", private_paths=toy.private_paths)


@pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/usr/bin/python3").is_file(),
    reason="starting programs as another uid needs root and a system python3",
)
async def test_the_how_tos_other_uid_recipe_passes_the_strict_profile(toy: ToyTask) -> None:
    """The same sandbox with user="nobody" keeps the answers unreadable: strict passes."""
    sandbox = _docs_subprocess_sandbox()(
        ToyTask.resolver({"toy": toy}), user="nobody", python="/usr/bin/python3"
    )
    assert sandbox.trusted is False
    checked = await check_sandbox(sandbox, task="toy", private_paths=toy.private_paths)
    assert "secrecy" in checked and "trusted" not in checked


async def test_strict_without_private_paths_does_not_claim_secrecy(toy: ToyTask) -> None:
    """With no answer path to read, ``secrecy`` was still listed among the rules checked."""
    sandbox = _docs_subprocess_sandbox()(ToyTask.resolver({"toy": toy}))
    checked = await check_sandbox(sandbox, task="toy")
    assert "secrecy" not in checked and "trusted" not in checked
