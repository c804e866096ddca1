"""Helpers for the wrong-input tests: a deliberately mistyped value, and the check that a call
raises exactly one OpenMLEError of the expected class whose one-line message names the field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from openmle.errors import OpenMLEError

__all__ = ["X", "assert_one_error"]


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
