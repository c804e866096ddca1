"""Hard character budgets with deterministic truncation."""

from __future__ import annotations

from collections.abc import Sequence

from attrs import frozen

from openmle._validation import check_type

__all__ = ["Section", "clip", "fit_sections"]

_MARK = "\n[... {n} characters omitted ...]\n"


def clip(text: str, max_chars: int, *, keep_head: float = 0.5) -> str:
    """``text`` cut to at most ``max_chars`` characters, keeping its head and tail.

    The cut is marked with ``[... N characters omitted ...]``. ``keep_head`` is the share of
    the kept characters taken from the start. Deterministic; never longer than ``max_chars``
    (a ``max_chars`` <= 0 gives ``""``).

    Raises:
        InvalidArgumentType: ``text`` is not a str or ``max_chars`` not an int.
    """
    check_type(text, str, "text")
    check_type(max_chars, int, "max_chars")
    if max_chars <= 0:
        return ""
    if len(text) <= max_chars:
        return text
    mark = _MARK.format(n=len(text))
    room = max_chars - len(mark)
    if room <= 0:
        return text[:max_chars]
    while True:
        head = int(room * keep_head)
        tail = room - head
        omitted = len(text) - head - tail
        mark = _MARK.format(n=omitted)
        if len(mark) + head + tail <= max_chars:
            break
        room -= 1
    return text[:head] + mark + (text[len(text) - tail :] if tail else "")


@frozen(kw_only=True)
class Section:
    """One titled part of a prompt.

    Args:
        title: the heading (rendered as ``## title``); empty for no heading.
        body: the text.
        priority: lower numbers are cut first when the prompt is over budget; sections with
            ``priority < 0`` are never cut by :func:`fit_sections` (only by the final hard cap).
        keep_head: share of a cut body taken from its start (0.5 keeps both ends).
    """

    title: str
    body: str
    priority: int = 0
    keep_head: float = 0.5

    def render(self) -> str:
        """``## title`` + blank line + body (or the body alone)."""
        return (
            f"## {self.title}\n\n{self.body.strip()}\n" if self.title else self.body.strip() + "\n"
        )


def _total(sections: Sequence[Section]) -> int:
    live = [s for s in sections if s.body.strip()]
    return sum(len(s.render()) for s in live) + max(0, len(live) - 1)


def fit_sections(sections: Sequence[Section], max_chars: int) -> str:
    """Join sections (blank line between), cutting bodies until the text fits ``max_chars``.

    Bodies are cut in priority order (lowest first, then later sections first), each down to
    what the remaining budget allows (possibly empty, in which case the section is dropped).
    The result is never longer than ``max_chars``: if the uncuttable sections alone exceed it,
    the joined text is clipped as a whole.
    """
    secs = [s for s in sections if s.body.strip()]
    order = sorted(
        (i for i, s in enumerate(secs) if s.priority >= 0),
        key=lambda i: (secs[i].priority, -i),
    )
    for i in order:
        over = _total(secs) - max_chars
        if over <= 0:
            break
        s = secs[i]
        body = s.body.strip()
        new_len = len(body) - over
        secs[i] = Section(
            title=s.title,
            body=clip(body, max(new_len, 0), keep_head=s.keep_head) if new_len > 40 else "",
            priority=s.priority,
            keep_head=s.keep_head,
        )
    text = "\n".join(s.render() for s in secs if s.body.strip())
    return clip(text, max_chars, keep_head=0.8)
