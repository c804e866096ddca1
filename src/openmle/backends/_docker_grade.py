"""Grading a NatureBench case in a container of its own (optional; Docker Engine API).

:class:`ContainerGrader` runs a case's ``evaluation/evaluator.py`` in a fresh container made from
an image you name (the case's environment image, so the evaluator has what it imports):

- ``evaluation/`` (evaluator and ground truth) is bind-mounted **read-only** at
  ``/nb/evaluation`` in this container and nowhere else; the program's containers never see it;
- the program's submission is *copied* in (``put_archive``) as ``/nb/output/submission.csv``
  (or, given the sandbox's copy of its output directory, that tree as ``/nb/output/``), never
  mounted, so nothing of the program's workspace is reachable from here;
- no network, all capabilities dropped, ``no-new-privileges``, a memory and process limit, a
  wall-clock limit after which the container is killed; the container is removed in every case.

The evaluator's result is its return value, written by openmle's runner after the evaluator's
own printing (which goes to stderr). Use it as ``NatureBench(..., grader=ContainerGrader(...))``.
"""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
import time
from pathlib import Path
from typing import Any, final

from attrs import field, frozen

from openmle.errors import InvalidArgument

__all__ = ["ContainerGrader"]

_MARK = "@@OPENMLE_NB_RESULT@@"
_RUNNER = f"""
import importlib.util, json, os, sys
real = sys.stdout
sys.stdout = sys.stderr
path = "/nb/evaluation/evaluator.py"
sys.path.insert(0, os.path.dirname(path))

def num(v):
    try:
        return float(v)
    except Exception:
        return str(v)[:200]

try:
    spec = importlib.util.spec_from_file_location("naturebench_case_evaluator", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    entry = getattr(mod, "run_evaluation", None) or getattr(mod, "main", None)
    if not callable(entry):
        out = {{"error": "evaluator.py defines neither run_evaluation() nor main()"}}
    else:
        raw = entry()
        out = {{"raw": raw}} if isinstance(raw, dict) else {{
            "error": "the evaluator returned " + type(raw).__name__ + ", not a dict"}}
except MemoryError:
    out = {{"error": "the evaluator ran out of memory", "limit": "memory"}}
except BaseException as exc:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = (" at " + os.path.basename(tb.tb_frame.f_code.co_filename) + ":" +
             str(tb.tb_lineno)) if tb is not None else ""
    out = {{"error": "the evaluator raised " + type(exc).__name__ + where}}
real.write("\\n{_MARK}" + json.dumps(out, default=num) + "\\n")
real.flush()
"""


def _positive(_inst: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidArgument(f"Expected ContainerGrader.{attribute.name} > 0 but got {value!r}")


@final
@frozen(kw_only=True)
class ContainerGrader:
    """Runs a case's evaluator in its own container (see the module doc).

    Args:
        image: the image to run (the case's environment image); it needs ``python3``.
        base_url: the Docker Engine API (default: ``DOCKER_HOST`` or the local socket).
        memory_mb: the container's memory limit.
        pids: the container's process limit.
        python: the interpreter in the image.
    """

    image: str
    base_url: str | None = None
    memory_mb: int = field(default=16_384, validator=_positive)
    pids: int = field(default=512, validator=_positive)
    python: str = "python3"

    def __call__(self, evaluation: Path, submission: Path, timeout_s: float) -> dict[str, Any]:
        """``{"raw": dict}``, ``{"error": text}`` or ``{"error": ..., "limit": "time"}``."""
        import docker

        api = (
            docker.APIClient(base_url=self.base_url, version="auto", timeout=120)
            if self.base_url
            else docker.APIClient(version="auto", timeout=120)
        )
        try:
            return self._run(api, Path(evaluation), Path(submission), float(timeout_s))
        finally:
            api.close()

    def _run(
        self, api: Any, evaluation: Path, submission: Path, timeout_s: float
    ) -> dict[str, Any]:
        host = api.create_host_config(
            binds={str(evaluation.resolve()): {"bind": "/nb/evaluation", "mode": "ro"}},
            network_mode="none",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=f"{int(self.memory_mb)}m",
            pids_limit=int(self.pids),
        )
        created = api.create_container(
            self.image,
            command=[self.python, "-I", "-c", _RUNNER],
            environment={"OUTPUT_DIR": "/nb/output", "HOME": "/tmp"},
            working_dir="/tmp",
            host_config=host,
            labels={"openmle.grader": "naturebench"},
        )
        cid = created["Id"]
        try:
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:
                for name in ("nb", "nb/output"):
                    folder = tarfile.TarInfo(name)
                    folder.type, folder.mode = tarfile.DIRTYPE, 0o777
                    tar.addfile(folder)
                if submission.is_dir():  # a vetted copy of the program's output directory
                    for item in sorted(submission.iterdir()):
                        tar.add(item, arcname=f"nb/output/{item.name}", recursive=True)
                else:
                    data = submission.read_bytes()
                    info = tarfile.TarInfo("nb/output/submission.csv")
                    info.size, info.mode = len(data), 0o644
                    tar.addfile(info, io.BytesIO(data))
            api.put_archive(cid, "/", buf.getvalue())
            api.start(cid)
            deadline = time.monotonic() + timeout_s
            timed_out = True
            while time.monotonic() < deadline:
                if not api.inspect_container(cid)["State"]["Running"]:
                    timed_out = False
                    break
                time.sleep(0.2)
            if timed_out:
                why = f"the evaluator hit its time limit ({timeout_s:g} s)"
                return {"error": why, "limit": "time"}
            logs = api.logs(cid, stdout=True, stderr=False).decode("utf-8", "replace")
        finally:
            with contextlib.suppress(Exception):  # gone already is fine
                api.remove_container(cid, force=True)
        at = logs.rfind(_MARK)
        if at < 0:
            return {"error": "the evaluator container ended without a result"}
        try:
            found = json.loads(logs[at + len(_MARK) :].strip().splitlines()[0])
        except (ValueError, IndexError):
            return {"error": "the evaluator container wrote an unreadable result"}
        return found if isinstance(found, dict) else {"error": "unreadable result"}
