"""A NatureBench case on the real engine (Podman's Docker API).

- :class:`~openmle.bench.ContainerGrader` grades a case in a container of its own: the answers
  are mounted read-only there only, the submission is copied in, and the result is the same
  ``g`` as the local grading process gives; a stuck evaluator is stopped at its limit.
- The grading container never outlives its grader (issue 25, item 5): it carries the managed
  labels, and when the grading process is SIGKILLed mid-grade the container is removed at its
  deadline by the host-side watchdog (it kept running with no deadline and no label before).
- ``ContainerGrader()`` without ``base_url`` honours ``DOCKER_HOST``.
- Through the bench's task wrapper, :class:`~openmle.backends.DockerSandbox` builds a case's
  image and grades its program, a lone submission or an output directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests._docker_engine import (
    Engine,
    driving,
    find_containers,
    kill_outlived,
    wait_for_containers,
)
from tests._files import open_up
from tests.unit.bench._mininb import add_multi_output_case, bench_run, build

from openmle import Split
from openmle.backends import DockerSandbox
from openmle.bench import BenchRun, ContainerGrader, NatureBench
from openmle.gym import GradeLimits

pytestmark = [pytest.mark.integration, pytest.mark.docker]


def _perfect(nb: NatureBench, cid: str, tmp: Path) -> Path:
    answers = nb.tasks_dir / cid / "evaluation" / "ground_truth" / "answers.csv"
    sub = tmp / "submission.csv"
    sub.write_text(answers.read_text())
    return sub


def _bench_sandbox(
    engine: Engine, tmp_path: Path, root: Path, cid: str, **options: Any
) -> tuple[BenchRun, DockerSandbox]:
    """A one-case NatureBench run (offline model, seed 0) in ``tmp_path/bench`` and a
    DockerSandbox that resolves its tasks through the bench's task wrapper; everything under
    ``tmp_path`` is made readable to the container's user first."""
    open_up(tmp_path)
    run, resolver = bench_run(NatureBench(root), tmp_path / "bench", [cid])
    box = DockerSandbox(
        image=engine.image,
        base_url=engine.base_url,
        resolver=resolver,
        gpus=None,
        stop_grace_s=1.0,
        memory_mb=512,
        **options,
    )
    return run, box


def test_container_grade_matches_local_and_answers_stay_read_only(
    docker_engine: Engine, tmp_path: Path
) -> None:
    root = build(tmp_path / "nb")
    local = NatureBench(root)
    grader = ContainerGrader(image=docker_engine.image, base_url=docker_engine.base_url)
    boxed = NatureBench(root, grader=grader)
    sub = _perfect(local, "nb-gpu-chem", tmp_path)
    want = local.task("nb-gpu-chem").grade(sub, Split.VALID).score
    got = boxed.task("nb-gpu-chem").grade(sub, Split.VALID)
    assert got.valid and want is not None and got.score == pytest.approx(want)

    # The evaluator cannot change its own answers: the mount is read-only.
    evaluator = root / "tasks" / "nb-cpu-bio" / "evaluation" / "evaluator.py"
    evaluator.write_text(
        "import os\n"
        "def run_evaluation():\n"
        "    here = os.path.dirname(os.path.abspath(__file__))\n"
        "    try:\n"
        "        open(os.path.join(here, 'ground_truth', 'answers.csv'), 'a').write('x')\n"
        "        wrote = 1.0\n"
        "    except OSError:\n"
        "        wrote = 0.05\n"
        "    sub = open(os.path.join(os.environ['OUTPUT_DIR'], 'submission.csv')).read()\n"
        "    return {'main': {'ErrorRate': wrote if sub.startswith('id,label') else 9.0}}\n"
    )
    rec = boxed.task("nb-cpu-bio").evaluate(sub)
    assert rec["status"] == "scored" and rec["g"] == pytest.approx(0.0), rec

    broken = boxed.task("nb-broken-bio").evaluate(sub)
    assert broken["status"] == "evaluator_error" and "RuntimeError" in broken["message"]

    # A stuck evaluator is stopped at the wall-clock limit, and no grading container is left.
    evaluator.write_text("def run_evaluation():\n    while True:\n        pass\n")
    slow = NatureBench(root, grader=grader, grade_limits=GradeLimits(timeout_s=3.0))
    rec = slow.task("nb-cpu-bio").evaluate(sub)
    assert rec["status"] == "evaluator_error" and "time limit" in rec["message"]
    import docker

    api = docker.APIClient(base_url=docker_engine.base_url, version="auto")
    try:
        left = api.containers(all=True, filters={"label": "openmle.grader=naturebench"})
    finally:
        api.close()
    assert left == []


def test_container_grade_of_an_output_directory(docker_engine: Engine, tmp_path: Path) -> None:
    """The sandbox's copy of a program's output directory is copied into the grading container
    as OUTPUT_DIR, file for file: the same g as the local grading process gives."""
    root = build(tmp_path / "nb")
    cid = add_multi_output_case(root)
    truth = root / "tasks" / cid / "evaluation" / "ground_truth"
    out = tmp_path / "graded" / "output"
    (out / "inst1").mkdir(parents=True)
    (out / "inst1" / "pred.csv").write_text((truth / "inst1.csv").read_text())
    grader = ContainerGrader(image=docker_engine.image, base_url=docker_engine.base_url)
    got = NatureBench(root, grader=grader).task(cid).grade(out, Split.VALID)
    want = NatureBench(root).task(cid).grade(out, Split.VALID)
    # inst1 all right (g = 0.25), inst2 missing (-1)
    assert got.valid and got.score == pytest.approx((0.25 - 1.0) / 2) == want.score


GRADE = """
import sys
from pathlib import Path
from openmle import Split
from openmle.bench import ContainerGrader, NatureBench
from openmle.gym import GradeLimits
root, image, base_url, sub = sys.argv[1:5]
grader = ContainerGrader(image=image, base_url=base_url)
nb = NatureBench(Path(root), grader=grader, grade_limits=GradeLimits(timeout_s=6.0))
nb.task("nb-cpu-bio").evaluate(Path(sub))
"""


def test_a_grading_container_is_labelled_and_removed_after_its_grader_is_killed(
    docker_engine: Engine, tmp_path: Path
) -> None:
    root = build(tmp_path / "nb")
    evaluator = root / "tasks" / "nb-cpu-bio" / "evaluation" / "evaluator.py"
    evaluator.write_text("def run_evaluation():\n    while True:\n        pass\n")
    sub = tmp_path / "submission.csv"
    sub.write_text("id,label\n")
    args = (str(root), docker_engine.image, docker_engine.base_url, str(sub))
    with driving(docker_engine, "openmle.grader", GRADE, *args) as driver:
        assert wait_for_containers(docker_engine, "openmle.grader", present=True, within_s=120)
        (found,) = find_containers(docker_engine, "openmle.grader")
        labels = found.get("Labels") or {}
        assert labels.get("openmle.managed") == "1" and labels.get("openmle.owner")
        # Removed by the watchdog at 6 s + 10 s slack (it kept running before).
        why = "the grading container outlived its killed grader"
        kill_outlived(docker_engine, driver, "openmle.grader", 60, why)


def test_container_grader_honours_docker_host(
    docker_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = build(tmp_path / "nb")
    answers = root / "tasks" / "nb-gpu-chem" / "evaluation" / "ground_truth" / "answers.csv"
    sub = tmp_path / "submission.csv"
    sub.write_text(answers.read_text())
    monkeypatch.setenv("DOCKER_HOST", docker_engine.base_url)
    got = NatureBench(root, grader=ContainerGrader(image=docker_engine.image))
    report = got.task("nb-gpu-chem").grade(sub, Split.VALID)
    assert report.valid, report.reason
    assert report.score == NatureBench(root).task("nb-gpu-chem").grade(sub, Split.VALID).score


SOLVES = """\
import csv, os, pathlib
assert pathlib.Path('/opt/nb_env.txt').read_text().strip() == '42'  # from Dockerfile.v3
rows = list(csv.DictReader(open(os.path.join(os.environ['DATA_DIR'], 'test.csv'))))
with open('submission.csv', 'w') as fh:
    fh.write('id,label\\n')
    for r in rows:
        fh.write(f"{r['id']},{int(float(r['x']) > 0)}\\n")
"""


@pytest.mark.anyio
async def test_case_dockerfile_is_built_and_its_program_graded(
    docker_engine: Engine, tmp_path: Path
) -> None:
    """Through the bench's task wrapper, DockerSandbox builds the case's Dockerfile.v3, runs the
    program in it with problem/data only, and the case's evaluator scores g (ErrorRate 0
    against SOTA 0.05, lower is better: g = 1)."""
    import uuid

    import docker

    from openmle import Job, Outcome

    root = build(tmp_path / "nb")
    env = root / "tasks" / "nb-cpu-bio" / "environment" / "Dockerfile.v3"
    env.write_text(
        f'FROM {docker_engine.image}\nLABEL nonce="{uuid.uuid4().hex}"\n'
        "RUN echo 42 > /opt/nb_env.txt\n"
    )
    run, box = _bench_sandbox(
        docker_engine,
        tmp_path,
        root,
        "nb-cpu-bio",
        build_log_dir=tmp_path / "builds",
        build_network_check=docker_engine.kind != "podman",
    )
    tag = ""
    try:
        async with box:
            tag = await box.task_image("nb-cpu-bio@seed-0")
            assert box.builds == 1
            result = await box.run(
                Job(code=SOLVES, task="nb-cpu-bio@seed-0", split=Split.TEST, timeout_s=120.0)
            )
            assert result.outcome is Outcome.SUCCESS, result.detail + result.logs
            assert result.score == pytest.approx(1.0)
        rec = run.submission_path("nb-cpu-bio", 0).with_name("naturebench_grade.json")
        assert '"status": "scored"' in rec.read_text()
    finally:
        if tag:
            api = docker.APIClient(base_url=docker_engine.base_url, version="auto", timeout=60)
            try:
                api.remove_image(tag, force=True)
            finally:
                api.close()


WRITES_OUTPUTS = """\
import csv, os
out = os.environ.get('OUTPUT_DIR', 'output')
for inst in ('inst1', 'inst2'):
    rows = list(csv.DictReader(open(os.path.join(os.environ['DATA_DIR'], inst + '.csv'))))
    os.makedirs(os.path.join(out, inst), exist_ok=True)
    with open(os.path.join(out, inst, 'pred.csv'), 'w') as fh:
        fh.write('id,label\\n')
        for r in rows:
            fh.write(f"{r['id']},{int(float(r['x']) > 0)}\\n")
"""


@pytest.mark.anyio
async def test_docker_sandbox_grades_an_output_directory(
    docker_engine: Engine, tmp_path: Path
) -> None:
    """Through the bench's task wrapper, DockerSandbox hands ./output/ of a case to its
    evaluator (both instances right: g = (1 - 0.8) / 0.8); a link inside it is refused."""

    from openmle import Job, Outcome

    root = build(tmp_path / "nb")
    cid = add_multi_output_case(root)
    run, box = _bench_sandbox(docker_engine, tmp_path, root, cid)
    ref = f"{cid}@seed-0"
    async with box:
        ok = await box.run(Job(code=WRITES_OUTPUTS, task=ref, split=Split.TEST, timeout_s=120.0))
        assert ok.outcome is Outcome.SUCCESS, ok.detail + ok.logs
        assert ok.score == pytest.approx(0.25)
        kept = run.submission_path(cid, 0).parent
        assert (kept / "output" / "inst2" / "pred.csv").is_file()
        assert '"status": "scored"' in (kept / "naturebench_grade.json").read_text()
        link = "import os; os.makedirs('output'); os.symlink('/etc/passwd', 'output/inst1')"
        bad = await box.run(Job(code=link, task=ref, timeout_s=120.0))
        assert bad.outcome is Outcome.INVALID_SUBMISSION and "symbolic link" in bad.detail
