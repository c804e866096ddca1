"""``loads_untrusted``: every way a text from elsewhere is not JSON is one ValueError;
``object_in_answer``: the object in a model's answer, or None."""

from __future__ import annotations

import pytest

from openmle._readback import loads_untrusted, object_in_answer


@pytest.mark.parametrize(
    "text",
    ["", "not json", b"\xff\xfe", "[" * 100_000 + "]" * 100_000, '{"a": ' + "{" * 50_000],
    ids=["empty", "prose", "not-utf8", "nested", "nested-unclosed"],
)
def test_not_json_is_a_value_error(text: str | bytes) -> None:
    with pytest.raises(ValueError, match=r"Expecting|nested too deeply|decode|codec"):
        loads_untrusted(text)


def test_json_is_parsed() -> None:
    assert loads_untrusted(b'{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}
    assert loads_untrusted("[" * 500 + "]" * 500)  # deep but parsable


def test_the_object_in_an_answer() -> None:
    assert object_in_answer('Sure! {"a": {"b": 1}} Hope it helps.') == {"a": {"b": 1}}
    assert object_in_answer('```json\n{"a": 1}\n```') == {"a": 1}
    for text in ("no braces", "} {", "[1, 2]", '{"a": ' + "[" * 100_000, "{" * 2_000_000):
        assert object_in_answer(text) is None
