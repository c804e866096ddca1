"""Response parsing: one program from many blocks, MISSING_CODE, normalised identity."""

from __future__ import annotations

from openmle import Outcome
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
