"""Budget properties: clipping and section fitting never exceed the cap and are deterministic."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from openmle.operators import Section, clip, fit_sections

texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=3000)


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(0, 4000), st.floats(0.0, 1.0))
def test_clip_respects_cap(text: str, cap: int, head: float) -> None:
    """clip() is never longer than the cap, keeps short texts whole, and keeps the head."""
    out = clip(text, cap, keep_head=head)
    assert len(out) <= cap
    if len(text) <= cap:
        assert out == text
    assert clip(text, cap, keep_head=head) == out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.builds(
            Section,
            title=st.sampled_from(["", "A", "Memory"]),
            body=texts,
            priority=st.integers(-1, 5),
        ),
        max_size=8,
    ),
    st.integers(0, 6000),
)
def test_fit_sections_respects_cap(sections: list[Section], cap: int) -> None:
    """The joined prompt never exceeds the cap; fitting is deterministic."""
    out = fit_sections(sections, cap)
    assert len(out) <= cap
    assert fit_sections(sections, cap) == out
