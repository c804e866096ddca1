"""The fence finders of model answers capture exactly what their regular expressions did,
in linear time (the expressions backtracked quadratically and cubically on crafted answers:
80,000 characters of ```` ```{ ```` took 9.5 s, 4,000 spaces in a judge's fence 40 s)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from openmle.operators._ask import _fenced_object
from openmle.search._runs.sft_judge import _unfenced

_PIECES = ["```", "`", "json", "{", "}", " ", "\n", "\t", "a", '"', "\u2003"]
answers = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)

_OLD_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)
_OLD_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


@given(answers)
def test_fenced_object_is_the_old_expression(text: str) -> None:
    old = _OLD_FENCED.search(text)
    assert _fenced_object(text) == (old.group(1) if old else None)


@given(answers)
def test_unfenced_is_the_old_expression(text: str) -> None:
    raw = text.strip()
    old = _OLD_FENCE.match(raw)
    assert _unfenced(raw) == (old.group(1) if old else raw)


def test_crafted_answers_are_read_in_one_pass() -> None:
    """The inputs that took minutes: answered at once, with the old results."""
    assert _fenced_object("```{" * 500_000) is None
    assert _unfenced("```" + " " * 1_000_000 + "x") == "```" + " " * 1_000_000 + "x"
    assert _unfenced("```json\n" + " " * 1_000_000 + '{"keep": true}  ```') == '{"keep": true}'
