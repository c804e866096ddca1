"""Rendering retrieved priors as one delimited prompt block under a hard budget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from attrs import frozen

from openmle.errors import InvalidArgument
from openmle.priors._record import Prior

__all__ = ["PRIORS_BEGIN", "PRIORS_END", "RenderedPriors", "render_priors"]

PRIORS_BEGIN: Final = "<<<PRIORS (advice from other tasks; may not apply here)"
PRIORS_END: Final = "PRIORS>>>"


@frozen
class RenderedPriors:
    """The block (empty when nothing fits) and the ids of the priors it shows, in order."""

    text: str
    shown: tuple[str, ...]


def _clean(text: str) -> str:
    # one line per prior, and no text can forge or close the block's delimiters
    flat = " ".join(text.split())
    return flat.replace("<<<", "< < <").replace(">>>", "> > >")


def _line(p: Prior) -> str:
    effect = ""
    if p.effect is not None:
        effect = f" (measured effect {p.effect:+.4g} over {p.n} observation(s))"
    return f"- [{p.kind}] {_clean(p.text)}{effect}\n"


def render_priors(priors: Sequence[Prior], *, max_chars: int) -> RenderedPriors:
    """Priors as a block between :data:`PRIORS_BEGIN` and :data:`PRIORS_END`, one per line.

    Whole lines are kept in order while they fit; a prior that does not fit is left out (no
    line is cut). Never longer than ``max_chars``; empty when not even one prior fits.
    """
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 0:
        raise InvalidArgument(f"max_chars must be an integer >= 0, got {max_chars!r}")
    head, tail = PRIORS_BEGIN + "\n", PRIORS_END
    used = len(head) + len(tail)
    lines: list[str] = []
    shown: list[str] = []
    for p in priors:
        line = _line(p)
        if used + len(line) > max_chars:
            continue
        used += len(line)
        lines.append(line)
        shown.append(p.prior_id)
    if not lines:
        return RenderedPriors("", ())
    return RenderedPriors(head + "".join(lines) + tail, tuple(shown))
