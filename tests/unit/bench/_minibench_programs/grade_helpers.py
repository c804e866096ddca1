"""``mlebench/grade_helpers.py`` of the miniature registry."""


class InvalidSubmissionError(Exception):
    """A submission that cannot be graded."""
