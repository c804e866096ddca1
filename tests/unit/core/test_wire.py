"""``openmle._wire``: the job service's wire format, shared by client and service (sans-I/O)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openmle import Job, Outcome, Resources, RunResult, Split, TaskMeta
from openmle._wire import (
    OWNED_ENV,
    SubmitBody,
    WireError,
    check_job_id,
    check_score,
    decode_json,
    decode_submit,
    encode_job_view,
    encode_submit,
    parse_job_view,
    parse_run_result,
    retry_after_seconds,
    submit_body,
    view_result,
)


@pytest.mark.parametrize(
    "result",
    [
        RunResult(outcome=Outcome.SUCCESS, score=0.25, logs="ok", runtime_s=1.5, queue_s=0.1),
        RunResult(
            outcome=Outcome.RUNTIME_ERROR,
            split=Split.TEST,
            logs="Traceback",
            error_signature="ZeroDivisionError",
            exit_code=1,
            artifacts=("model.pkl",),
            printed_score=0.9,
            logs_dropped_bytes=10,
        ),
        RunResult.infra_error("worker lost"),
    ],
)
def test_round_trip(result: RunResult) -> None:
    """Every ``RunResult.to_dict()`` reads back equal."""
    assert parse_run_result(result.to_dict(), split=result.split) == result


def _rr(**kw: Any) -> dict[str, Any]:
    d = RunResult(outcome=Outcome.SUCCESS, score=0.5).to_dict()
    d.update(kw)
    return d


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ("x", "not an object"),
        (_rr(outcome=None), "outcome"),
        (_rr(split="test"), "split"),
        (_rr(score=10**400), "too large"),
        (_rr(score=float("inf")), "finite"),
        (_rr(score=True), "not a number"),
        (_rr(score=2e100), "beyond any metric"),
        (_rr(logs=3), "logs"),
        (_rr(exit_code=2**70), "exit_code"),
        (_rr(logs_dropped_bytes=-1), "logs_dropped_bytes"),
        (_rr(queue_s=float("nan")), "queue_s"),
        (_rr(artifacts=[1]), "artifacts"),
    ],
)
def test_bad_fields_raise_wire_error(data: Any, said: str) -> None:
    """Each bad field raises ``WireError`` naming it."""
    with pytest.raises(WireError, match=said):
        parse_run_result(data, split=Split.VALID)


def test_metric_range_and_job_ids() -> None:
    """Scores are held to the task's theoretical range; job ids are URL-safe tokens."""
    meta = TaskMeta(theoretical_min=0.0, theoretical_max=1.0)
    check_score(1.0, "score", meta)
    check_score(5.0, "score", None)
    with pytest.raises(WireError, match=r"metric range \[0.0, 1.0\]"):
        check_score(1.0000001, "score", meta)
    with pytest.raises(WireError, match="metric range"):
        parse_run_result(_rr(score=-0.5), split=Split.VALID, meta=meta)
    assert check_job_id("a1b2-c3_d.e:f") == "a1b2-c3_d.e:f" and check_job_id(42) == "42"
    for bad in ("..", "../x", "a/b", "", "x" * 129, None, 1.5, True):
        with pytest.raises(WireError, match="job_id"):
            check_job_id(bad)


def test_job_view_binding() -> None:
    """A view about another job, or with a bad envelope, is refused; a view without a job id
    (released routers) is accepted."""
    assert parse_job_view({"status": "running"}, job_id="j1")["status"] == "running"
    with pytest.raises(WireError, match="not job 'j1'"):
        parse_job_view({"job_id": "j2"}, job_id="j1")
    for bad, said in [
        ([], "not a JSON object"),
        ({"status": ["x"]}, "status"),
        ({"detail": 3}, "detail"),
        ({"eval_split": "train"}, "eval_split"),
        ({"result": "done"}, "result"),
    ]:
        with pytest.raises(WireError, match=said):
            parse_job_view(bad, job_id="j1")


# -- one schema for both ends: requests ---------------------------------------------------------

_TEXT = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    max_size=40,
)
_ENV_KEY = st.from_regex(r"[A-Z][A-Z0-9_]{0,15}", fullmatch=True).filter(
    lambda k: not k.startswith(("LD_", "PYTHON")) and k not in OWNED_ENV
)
_RESOURCES = st.builds(
    Resources,
    cpus=st.floats(min_value=0.1, max_value=64, allow_nan=False),
    gpus=st.integers(0, 8),
    gpu_ids=st.none() | st.lists(st.integers(0, 7), max_size=4, unique=True).map(tuple),
    memory_mb=st.none() | st.integers(1, 1 << 20),
)
_KEY = st.none() | st.text(alphabet="abcdef0123456789-", min_size=1, max_size=64)


@st.composite
def _bodies(draw: st.DrawFn) -> SubmitBody:
    is_path = draw(st.booleans())
    task = draw(
        st.from_regex(r"(\./)?[a-z0-9_-]{1,12}(/[a-z0-9_-]{1,12}){0,3}", fullmatch=True)
        if is_path
        else st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,30}", fullmatch=True)
    )
    return SubmitBody(
        code=draw(_TEXT.filter(str.strip)),
        task=task,
        task_is_path=is_path,
        timeout_s=draw(st.none() | st.floats(min_value=1e-3, max_value=1e6)),
        resource_type=draw(st.sampled_from(["cpu", "gpu"])),
        priority=draw(st.sampled_from([1, 2])),
        environment=draw(st.dictionaries(_ENV_KEY, _TEXT, max_size=5)),
        split=draw(st.sampled_from(list(Split))),
        resources=draw(_RESOURCES),
        idempotency_key=draw(_KEY),
        name=draw(st.none() | _TEXT.filter(bool)),
    )


def _over_json(data: Any) -> Any:
    return json.loads(json.dumps(data))


@given(body=_bodies())
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_submit_round_trip(body: SubmitBody) -> None:
    """What the client encodes, the service decodes to the same value (through JSON)."""
    assert decode_submit(_over_json(encode_submit(body))) == body


# A value of a type ``encode_submit`` never writes for that field, and the field it is blamed on.
_NEVER_ENCODED = [
    ("code", 3, "code"),
    ("code", "   ", "code"),
    ("code", "print(1)\x00", "code"),
    ("code", "\ud800", "code"),
    ("timeout", "60", "timeout"),
    ("timeout", True, "timeout"),
    ("timeout", None, "timeout"),
    ("timeout", -1, "timeout"),
    ("timeout", float("inf"), "timeout"),
    ("resource_type", "tpu", "resource_type"),
    ("resource_type", 1, "resource_type"),
    ("priority", 3, "priority"),
    ("priority", True, "priority"),
    ("priority", "1", "priority"),
    ("environment", ["A=1"], "environment"),
    ("environment", {"A": 1}, "environment.A"),
    ("environment", {"": "x"}, "environment."),
    ("environment", {"A=B": "x"}, "environment.A=B"),
    ("environment", {"LD_PRELOAD": "/x.so"}, "environment.LD_PRELOAD"),
    ("environment", {"PYTHONPATH": "/x"}, "environment.PYTHONPATH"),
    ("environment", {"A": "x\x00y"}, "environment.A"),
    ("environment", {f"K{i}": "v" for i in range(300)}, "environment"),
    ("environment", {"A": "x" * (200 * 1024)}, "environment"),
    ("eval_split", "train", "eval_split"),
    ("eval_split", 0, "eval_split"),
    ("resources", [1], "resources"),
    ("resources", {"cpus": -1}, "resources"),
    ("resources", {"cpu": 1}, "resources"),
    ("idempotency_key", "", "idempotency_key"),
    ("idempotency_key", "k" * 257, "idempotency_key"),
    ("idempotency_key", 7, "idempotency_key"),
    ("name", "n" * 1025, "name"),
    ("name", "\udc00", "name"),
]


@pytest.mark.parametrize(("key", "value", "blamed"), _NEVER_ENCODED)
@given(body=_bodies())
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_decode_refuses_what_encode_never_writes(
    body: SubmitBody, key: str, value: object, blamed: str
) -> None:
    """Any one field replaced by a value the encoder never writes is refused, naming it."""
    data = encode_submit(body)
    data[key] = value
    with pytest.raises(WireError) as info:
        decode_submit(data)
    assert info.value.field == blamed and info.value.detail


@pytest.mark.parametrize(
    ("data", "blamed"),
    [
        ([], "body"),
        ("code", "body"),
        ({"code": "x=1"}, "data_dir"),
        ({"code": "x=1", "data_dir": ""}, "data_dir"),
        ({"code": "x=1", "data_dir": 5}, "data_dir"),
        ({"code": "x=1", "task": ["t"]}, "task"),
        ({"code": "x=1", "task": "\ud800"}, "task"),
        ({"code": "x=1", "task": "t", "split": "train"}, "split"),
        ({"code": "x=1", "task": "t", "timeout_s": "soon"}, "timeout"),
    ],
)
def test_decode_refuses_malformed_bodies(data: object, blamed: str) -> None:
    """Bodies no encoder writes (no object, no task, wrong types) are refused, naming the field."""
    with pytest.raises(WireError) as info:
        decode_submit(data)
    assert info.value.field == blamed


def test_decode_reads_the_released_clients_aliases_into_the_same_value() -> None:
    """Released clients' spellings decode to what ours encode; owned variables are dropped."""
    ours = SubmitBody(code="x=1", task="t", task_is_path=False, timeout_s=60.0)
    for alias in (
        {"timeout_s": 60, "split": "validation"},
        {"timeout": 60, "eval_split": "VAL", "environment": {"DATA_DIR": "/elsewhere"}},
        {"timeout": 60.0, "environment": {"EVAL_SPLIT": "valid", "EXECUTION_MODE": "x"}},
    ):
        assert decode_submit({"code": "x=1", "task": "t", **alias}) == ours
    gpu = decode_submit({"code": "x=1", "task": "t", "resource_type": "GPU"})
    assert gpu.resource_type == "gpu" and gpu.resources.gpus == 1 and gpu.timeout_s is None
    header = decode_submit({"code": "x=1", "task": "t"}, header_key="k1")
    assert header.idempotency_key == "k1"
    with pytest.raises(WireError, match="Idempotency-Key"):
        decode_submit({"code": "x=1", "task": "t"}, header_key="")


@pytest.mark.parametrize(
    ("job", "rtype", "sent"),
    [
        (Job(code="x=1", task="tabular-binary"), None, {"task": "tabular-binary", "rt": "cpu"}),
        (Job(code="x=1", task="./pkg"), None, {"data_dir": "./pkg", "rt": "cpu"}),
        (Job(code="x=1", task="/abs/pkg"), "gpu", {"data_dir": "/abs/pkg", "rt": "gpu"}),
        (
            Job(code="x=1", task="t", resources=Resources(gpus=2), name="n", split=Split.TEST),
            None,
            {"task": "t", "rt": "gpu"},
        ),
    ],
)
def test_the_clients_job_encoding_is_what_the_service_reads(
    job: Job, rtype: str | None, sent: dict[str, str]
) -> None:
    """``submit_body`` maps a job onto the wire; the service's decoder gets the job back."""
    body = submit_body(job, resource_type=rtype, priority=2, idempotency_key="abc")
    data = _over_json(encode_submit(body))
    rt = sent.pop("rt")
    assert {k: data[k] for k in sent} == sent and data["resource_type"] == rt
    back = decode_submit(data)
    assert back == body
    assert (back.code, back.task, back.split, back.timeout_s) == (
        job.code,
        job.task,
        job.split,
        job.timeout_s,
    )
    assert back.resources == job.resources and back.name == (job.name or job.task)
    assert back.priority == 2 and back.idempotency_key == "abc"


# -- one schema for both ends: answers ----------------------------------------------------------

_FINITE = st.floats(min_value=-1e100, max_value=1e100, allow_nan=False)


@st.composite
def _results(draw: st.DrawFn) -> RunResult:
    outcome = draw(st.sampled_from(list(Outcome)))
    return RunResult(
        outcome=outcome,
        score=draw(_FINITE) if outcome is Outcome.SUCCESS else None,
        split=draw(st.sampled_from(list(Split))),
        logs=draw(_TEXT),
        logs_dropped_bytes=draw(st.integers(0, 1 << 40)),
        error_signature=draw(st.none() | _TEXT),
        detail=draw(_TEXT),
        exit_code=draw(st.none() | st.integers(-255, 255)),
        runtime_s=draw(st.floats(min_value=0, max_value=1e6)),
        queue_s=draw(st.floats(min_value=0, max_value=1e6)),
        printed_score=draw(st.none() | _FINITE),
        artifacts=tuple(draw(st.lists(_TEXT, max_size=3))),
    )


@given(result=_results(), job_id=st.from_regex(r"[a-f0-9]{32}", fullmatch=True))
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_job_view_round_trip(result: RunResult, job_id: str) -> None:
    """What the service writes for a finished job, the client reads back as the same result."""
    view = encode_job_view(
        job_id=job_id,
        status="completed",
        split=result.split.value,
        run_result=result.to_dict(),
        created_at=1.0,
    )
    data = parse_job_view(_over_json(view), job_id=job_id)
    assert view_result(data, split=result.split, meta=None) == result
    assert data["created_at"] == "1970-01-01T00:00:01.000000Z"


def test_job_view_carries_the_released_score_fields() -> None:
    """Released clients read ``score``/``valid_score``/``test_score`` and ``run_log``."""
    r = RunResult(outcome=Outcome.SUCCESS, score=0.5, split=Split.TEST, logs="done")
    view = encode_job_view(job_id="j", status="completed", split="test", run_result=r.to_dict())
    res = view["result"]
    assert (res["score"], res["test_score"], res["valid_score"]) == (0.5, 0.5, None)
    assert res["result"] == "success" and res["run_log"] == "done"
    # A released router's answer (no run_result) reads the same score.
    foreign = {k: v for k, v in res.items() if k != "run_result"}
    back = view_result({"status": "completed", "result": foreign}, split=Split.TEST, meta=None)
    assert (back.outcome, back.score, back.logs) == (Outcome.SUCCESS, 0.5, "done")
    pending = encode_job_view(job_id="j", status="queued", split="valid", run_result=None)
    assert pending["result"] is None and parse_job_view(pending, job_id="j") is pending


@pytest.mark.parametrize(
    ("status", "outcome"),
    [("cancelled", Outcome.INFRA_ERROR), ("failed", Outcome.INFRA_ERROR)],
)
def test_a_job_the_service_ended_is_an_infra_error(status: str, outcome: Outcome) -> None:
    """A cancelled job, or a failed one whose result claims a program outcome, is infra."""
    r = RunResult(outcome=Outcome.SUCCESS, score=0.5)
    view = encode_job_view(job_id="j", status=status, split="valid", run_result=r.to_dict())
    assert view_result(view, split=Split.VALID, meta=None).outcome is outcome


def test_decode_json_refuses_non_json() -> None:
    """A body that is not JSON is a WireError showing its start."""
    assert decode_json(b'{"a": 1}') == {"a": 1}
    with pytest.raises(WireError, match="not JSON"):
        decode_json(b"<html>")
    with pytest.raises(WireError, match="not JSON"):
        decode_json(b"[" * 100_000)


# -- Retry-After (the job service's client and OpenAIModel share one reader) --------------------


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after": "0.3"}, 0.3),
        ({"RETRY-AFTER": "7"}, 7.0),
        ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),
        ({"retry-after-ms": "soon", "Retry-After": "9"}, 9.0),
        ({"retry-after-ms": "inf", "Retry-After": "9"}, 9.0),
        ({"Retry-After": "-3"}, 0.0),
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": "nan"}, None),
        ({"Retry-After": "inf"}, None),
        ({"Retry-After": "-inf"}, None),
        ({"Retry-After": ""}, None),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"}, 10.0),
        ({"Retry-After": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),
        ({"Retry-After": "Wed, 99 Foo 2015 07:28:10 GMT"}, None),
        ({}, None),
    ],
)
def test_retry_after_parsing(headers: dict[str, str], seconds: float | None) -> None:
    """Seconds, milliseconds and HTTP dates are understood, in any header case; garbage,
    non-finite numbers and absence give None; a wait is never negative."""
    assert retry_after_seconds(headers, now=1445412480.0) == seconds


def test_retry_after_reads_httpx_headers() -> None:
    """Both clients pass ``httpx.Headers`` (case-insensitive, possibly repeated)."""
    httpx = pytest.importorskip("httpx")
    assert retry_after_seconds(httpx.Headers({"Retry-After": "4"})) == 4.0
