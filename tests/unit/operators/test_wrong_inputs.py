"""Wrong inputs to openmle.operators are one OpenMLEError naming the argument (new-user trial).

``parse_response(None)`` raised ``re``'s "expected string or bytes-like object",
``same_program``/``program_fingerprint``/``clip`` a ``len()`` TypeError, ``format_duration(nan)``
"cannot convert float NaN to integer", and ``TaskBrief(description=5)`` attrs' tuple-shaped
``TypeError``.
"""

from __future__ import annotations

from tests._errors import Case, X, one_error_test

from openmle.errors import InvalidArgument, InvalidArgumentType
from openmle.operators import (
    TaskBrief,
    clip,
    extract_code_blocks,
    extract_json,
    format_duration,
    parse_response,
    program_fingerprint,
    same_program,
)

IT = InvalidArgumentType
CASES: list[Case] = [
    ("parse None", lambda: parse_response(X(None)), IT, "text=None"),
    ("blocks int", lambda: extract_code_blocks(X(5)), IT, "text=5"),
    ("json None", lambda: extract_json(X(None)), IT, "text=None"),
    ("fingerprint", lambda: program_fingerprint(X(None)), IT, "code=None"),
    ("same a", lambda: same_program(X(None), "x"), IT, "a=None"),
    ("same b", lambda: same_program("x", X(b"x")), IT, "b=b'x'"),
    ("clip text", lambda: clip(X(5), 3), IT, "text=5"),
    ("clip size", lambda: clip("abc", X(2.5)), IT, "max_chars=2.5"),
    ("duration nan", lambda: format_duration(float("nan")), InvalidArgument, "seconds=nan"),
    ("duration str", lambda: format_duration(X("5")), IT, "seconds='5'"),
    ("brief", lambda: TaskBrief(description=X(5)), IT, "TaskBrief.description"),
    ("brief data", lambda: TaskBrief(description="d", data_description=X(None)), IT, "data_"),
]


test_one_error_naming_the_argument = one_error_test(CASES)


def test_right_inputs_are_unchanged() -> None:
    assert format_duration(7500) == "2 hours 5 minutes" and format_duration(-3.0) == "0 seconds"
    assert clip("abcdef", 0) == "" and same_program("x = 1", "x=1  # same")
    assert parse_response("plan\n```python\nprint(1)\n```").code == "print(1)\n"
