"""Error signatures group the same failure across runs."""

from __future__ import annotations

from openmle import error_signature

TB = """Traceback (most recent call last):
  File "/tmp/ws-{n}/main.py", line {line}, in <module>
    df = pd.read_csv(path)
FileNotFoundError: [Errno 2] No such file or directory: '/data/run{n}/train.csv'
"""


def test_same_failure_same_signature() -> None:
    """Paths, numbers and quoted values are stripped so repeats collide."""
    a = error_signature(TB.format(n=1, line=3))
    b = error_signature(TB.format(n=77, line=12))
    assert a == b
    assert a is not None and a.startswith("FileNotFoundError: ")
    assert "/data" not in a and "77" not in a


def test_last_exception_wins_and_fallback() -> None:
    """The last traceback's exception is used; no traceback gives the fallback."""
    logs = (
        TB.format(n=1, line=1) + "\nDuring handling...\nTraceback (most recent call last):\n"
        "  File \"x.py\", line 2\nKeyError: 'target'\n"
    )
    assert error_signature(logs) == "KeyError: '<str>'"
    assert error_signature("all good\n") is None
    assert error_signature("killed", fallback="timeout") == "timeout"


def test_dotted_exception_type_and_bare_type() -> None:
    """Module-qualified exception names keep only the class name; bare types work."""
    logs = "Traceback (most recent call last):\n  ...\nnumpy.linalg.LinAlgError: Singular matrix\n"
    assert error_signature(logs) == "LinAlgError: Singular matrix"
    assert (
        error_signature("Traceback (most recent call last):\nKeyboardInterrupt\n")
        == "KeyboardInterrupt"
    )
