"""Response parsing: one program from many blocks, MISSING_CODE, normalised identity."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from openmle import Outcome
from openmle.errors import InvalidArgument
from openmle.operators import parse_response, program_fingerprint, same_program

PROGRAM = "import pandas as pd\n\ndf = pd.read_csv('train.csv')\nprint(df.shape)\n"


def test_single_block_and_plan() -> None:
    """The prose before the block is the plan; the block is the program."""
    p = parse_response(f"I will load the data.\n\n```python\n{PROGRAM}```\n")
    assert p.plan == "I will load the data."
    assert p.code == PROGRAM and p.outcome is None and p.n_blocks == 1


def test_snippet_then_program_picks_the_program() -> None:
    """A short snippet shown first does not win over the full program."""
    text = f"Change:\n```python\nlr = 0.05\n```\nFull program:\n```python\n{PROGRAM}```\nDone."
    p = parse_response(text)
    assert p.code == PROGRAM and p.n_blocks == 2
    assert p.plan.startswith("Change:") and "Full program:" in p.plan


def test_parsing_block_beats_longer_broken_block() -> None:
    """A block that parses wins over a longer one that does not."""
    broken = "def f(:\n" + "    pass\n" * 30
    p = parse_response(f"```python\n{broken}```\n```python\n{PROGRAM}```")
    assert p.code == PROGRAM


def test_tagged_beats_untagged_and_shell() -> None:
    """Python-tagged blocks are preferred; bash blocks are never the program."""
    text = (
        "```bash\npip install lightgbm && python main.py --long-flag\n```\n"
        f"```\nx = 1\n```\n```py\n{PROGRAM}```"
    )
    assert parse_response(text).code == PROGRAM
    untagged = parse_response("```bash\nls\n```\n```\nx = 1\n```")
    assert untagged.code == "x = 1\n"


def test_no_code_is_missing_code() -> None:
    """An answer without a block is MISSING_CODE, keeping the prose as the plan."""
    p = parse_response("I think we should use LightGBM.")
    assert p.code is None and p.outcome is Outcome.MISSING_CODE
    assert p.plan == "I think we should use LightGBM."
    assert parse_response("```bash\nls\n```").outcome is Outcome.MISSING_CODE


def test_unterminated_fence_counts() -> None:
    """A response cut mid-program still yields the program text."""
    p = parse_response("Plan.\n```python\nimport numpy as np\nx = np.zeros(3)\n")
    assert p.code == "import numpy as np\nx = np.zeros(3)\n"


def test_deterministic_tie_break() -> None:
    """Equal-length parsing blocks: the later one wins."""
    p = parse_response("```python\na = 1\n```\n```python\nb = 2\n```")
    assert p.code == "b = 2\n"


def test_same_program_ignores_layout_comments_docstrings() -> None:
    """Reformatting, comments and docstrings do not change identity; code changes do."""
    a = 'def f(x):\n    """Doc."""\n    return x+1  # add\n'
    b = "def f( x ):\n\n    return (x + 1)\n"
    c = "def f(x):\n    return x + 2\n"
    assert same_program(a, b)
    assert not same_program(a, c)
    assert program_fingerprint(a) == program_fingerprint(b) != program_fingerprint(c)
    assert same_program("def f(:\n  pass", "def  f(:\n pass")


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of each source ``ast.parse`` is given during the test."""
    seen: list[int] = []
    real = ast.parse

    def counting(source: str, *a: Any, **kw: Any) -> Any:
        seen.append(len(source))
        return real(source, *a, **kw)

    monkeypatch.setattr(ast, "parse", counting)
    return seen


def test_oversized_block_is_not_analysed(calls: list[int]) -> None:
    """A block over ``max_code_chars`` never reaches ``ast.parse``: MISSING_CODE with a reason.

    (A 20 MB block drove ``ast.parse`` into an 8 GB memory limit and aborted the search.)
    """
    huge = "x = 1\n" * 50_000  # 300,000 characters, over the 256 Ki default
    p = parse_response(f"Plan.\n```python\n{huge}```\n")
    assert p.code is None and p.outcome is Outcome.MISSING_CODE and p.n_blocks == 1
    assert "max_code_chars=262144" in p.detail and "299999 characters" in p.detail
    assert p.plan == "Plan." and calls == []
    # A small program next to the huge one is still found; the huge one is never parsed.
    p = parse_response(f"```python\n{huge}```\n```python\n{PROGRAM}```", max_code_chars=1000)
    assert p.code == PROGRAM and calls == [len(PROGRAM.rstrip("\n"))]


def test_many_blocks_bound_the_parsing_work(calls: list[int]) -> None:
    """Many broken blocks under the limit: at most 4 * max_code_chars characters are parsed."""
    broken = "def f(:\n" + "    pass\n" * 100  # 908 characters, does not parse
    p = parse_response("".join(f"```python\n{broken}```\n" for _ in range(50)), max_code_chars=1000)
    assert p.code == broken and sum(calls) <= 4000 and len(calls) == 4


def test_bad_code_limit_names_the_argument() -> None:
    """``max_code_chars`` must be a positive integer."""
    with pytest.raises(InvalidArgument, match="max_code_chars"):
        parse_response("x", max_code_chars=0)


def test_lone_surrogates_are_replaced() -> None:
    """A lone surrogate (valid in JSON, unencodable in a file or request) becomes U+FFFD."""
    p = parse_response("Plan \ud800.\n```python\nprint('\udc80')\n```")
    assert p.code == "print('\ufffd')\n" and p.plan == "Plan \ufffd."
    assert p.code.encode() and p.plan.encode()


def test_huge_programs_compare_by_text() -> None:
    """``same_program`` on programs over the limit compares text instead of parsing them."""
    huge = "x = 1\n" * 50_000
    assert same_program(huge, huge + "\n") and not same_program(huge, huge + "y = 2\n")
    assert program_fingerprint(huge) == program_fingerprint(huge.replace("\n", "\n\n"))
