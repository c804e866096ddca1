"""Wrong inputs to the core values are one OpenMLEError naming the field (new-user trial).

``Job(code=5)`` and ``Message(role="bot")`` raised attrs' bare ``TypeError``/``ValueError`` (a
tuple holding the attribute's whole repr), and ``RunResult.from_dict`` of an incomplete or
misspelt record raised Python's ``TypeError`` about ``__init__`` keywords.
"""

from __future__ import annotations

from tests._errors import Case, X, one_error_test

from openmle import Job, Message, Resources, RunResult
from openmle.errors import InvalidArgument, InvalidArgumentType

IT = InvalidArgumentType
IA = InvalidArgument
CASES: list[Case] = [
    ("job code", lambda: Job(code=X(5), task="t"), IT, "Job.code"),
    ("job task", lambda: Job(code="x", task=X(None)), IT, "Job.task"),
    ("message role", lambda: Message(role="bot", content="x"), IA, "Message.role"),
    ("message content", lambda: Message(role="user", content=X(3)), IT, "Message.content"),
    ("result empty", lambda: RunResult.from_dict({}), IA, "['outcome']"),
    ("result typo", lambda: RunResult.from_dict({"outcome": "success", "scor": 1}), IA, "scor"),
    ("result list", lambda: RunResult.from_dict(X([1])), IT, "mapping"),
    ("job missing", lambda: Job.from_dict({"task": "t"}), IA, "['code']"),
    ("job typo", lambda: Job.from_dict({"code": "x", "task": "t", "timeout": 1}), IA, "timeout"),
    ("resources typo", lambda: Resources.from_dict({"gpu": 1}), IA, "gpu"),
]


test_one_error_naming_the_field = one_error_test(CASES)


def test_round_trips_are_unchanged() -> None:
    job = Job(code="print(1)", task="t", resources=Resources(cpus=2.0))
    assert Job.from_dict(job.to_dict()) == job
    result = RunResult(outcome="success", score=0.5, artifacts=("submission.csv",))
    assert RunResult.from_dict(result.to_dict()) == result
