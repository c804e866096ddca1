"""Every rule ``check_sandbox`` enforces is written down: in its docstring and in the how-to."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from openmle.errors import InvalidArgument
from openmle.testing import SANDBOX_PROFILES, SANDBOX_RULES, FunctionSandbox, check_sandbox

HOWTO = Path(__file__).resolve().parents[3] / "docs" / "how-to" / "custom-sandbox.md"


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_every_rule_is_listed_in_the_docstring_and_the_how_to() -> None:
    """Each rule's name and words appear in check_sandbox's docstring and in the how-to (the
    submission.csv artifact and the 1 MiB log cap, marker included, were in neither)."""
    doc = _flat(check_sandbox.__doc__ or "")
    page = _flat(HOWTO.read_text())
    for name, rule in SANDBOX_RULES.items():
        assert f"- {name}: {rule}" in doc, name
        assert f"- `{name}`: {rule}" in page, name
    assert "submission.csv" in SANDBOX_RULES["artifacts"]
    assert "marker line included" in SANDBOX_RULES["log-cap"]


@pytest.mark.anyio
async def test_unknown_profile_and_an_undeclared_trusted_sandbox_are_refused() -> None:
    """profile= is checked; the trusted profile needs a sandbox that says ``trusted = True``
    (so every run on it is marked in its manifest)."""
    assert SANDBOX_PROFILES == ("strict", "trusted")
    sandbox = FunctionSandbox(lambda job: None)  # type: ignore[arg-type, return-value]
    with pytest.raises(InvalidArgument, match="profile"):
        await check_sandbox(sandbox, task="toy", profile="lenient")
    with pytest.raises(AssertionError, match="must declare trusted = True"):
        await check_sandbox(sandbox, task="toy", profile="trusted")
