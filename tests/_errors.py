"""Helpers for the wrong-input tests: a deliberately mistyped value, and the check that a call
raises exactly one OpenMLEError of the expected class whose one-line message names the field."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from openmle.errors import OpenMLEError

__all__ = ["Case", "X", "assert_one_error", "one_error_test"]

Case = tuple[str, Callable[[], Any], type[OpenMLEError], str]
"""A wrong-input case: label (the test id), call, error class, text the message names."""


def X(value: object) -> Any:
    """``value``, typed ``Any``: a wrong input passed on purpose."""
    return value


def assert_one_error(call: Callable[[], Any], error: type[OpenMLEError], names: str) -> None:
    """``call()`` raises ``error`` (never a group, never a bare builtin error) on one line
    naming ``names``."""
    with pytest.raises(error) as info:
        call()
    assert names in str(info.value)
    assert "\n" not in str(info.value)


def one_error_test(cases: Sequence[Case]) -> Callable[..., None]:
    """A test over ``cases``, each checked with :func:`assert_one_error`; bind it to a
    ``test_...`` name in the test module, where pytest collects it under that name."""

    def test(call: Callable[[], Any], error: type[OpenMLEError], names: str) -> None:
        assert_one_error(call, error, names)

    params = [pytest.param(c, e, n, id=label) for label, c, e, n in cases]
    marked: Callable[..., None] = pytest.mark.parametrize(("call", "error", "names"), params)(test)
    return marked
