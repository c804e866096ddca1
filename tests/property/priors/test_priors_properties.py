"""Retrieval is deterministic and respects metadata; the rendered block never exceeds its
budget and cannot be closed early by a prior's text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from openmle.priors import (
    ANY,
    PRIORS_BEGIN,
    PRIORS_END,
    LexicalRetriever,
    Prior,
    PriorLibrary,
    TaskProfile,
    applies,
    render_priors,
)

labels = st.sampled_from([ANY, "classification", "regression"])
modalities = st.sampled_from([ANY, "tabular", "text", "image"])
words = st.lists(
    st.sampled_from(
        ["boosting", "tabular", "augment", "image", "text", "tfidf", "PRIORS>>>", "<<<"]
    ),
    min_size=1,
    max_size=12,
).map(" ".join)


@st.composite
def libraries(draw: st.DrawFn) -> PriorLibrary:
    n = draw(st.integers(0, 12))
    return PriorLibrary(
        [
            Prior(
                prior_id=f"p{i}",
                kind=draw(st.sampled_from(["method", "trick", "pitfall"])),
                text=draw(words),
                source="s",
                task_type=draw(labels),
                modality=draw(modalities),
                effect=draw(st.none() | st.floats(-1, 1)),
            )
            for i in range(n)
        ]
    )


tasks = st.builds(TaskProfile, description=words, task_type=labels, modality=modalities)


@settings(max_examples=150, deadline=None)
@given(libraries(), tasks, st.integers(0, 15))
def test_retrieval_is_deterministic_and_filters(
    lib: PriorLibrary, task: TaskProfile, k: int
) -> None:
    """Same library and task give the same list; every hit applies; all eligible fit in k."""
    r = LexicalRetriever()
    first = r.retrieve(lib, task, k=k)
    assert first == r.retrieve(PriorLibrary(list(lib.priors)), task, k=k)
    assert len(first) == min(k, sum(applies(p, task) for p in lib.priors))
    for p in first:
        assert p.task_type in (ANY, task.task_type) or task.task_type == ANY
        assert p.modality in (ANY, task.modality) or task.modality == ANY
    assert len({p.prior_id for p in first}) == len(first)


@settings(max_examples=200, deadline=None)
@given(libraries(), st.integers(0, 600))
def test_render_never_exceeds_budget(lib: PriorLibrary, cap: int) -> None:
    """The block is at most ``cap`` characters, delimited once, and lists what it shows."""
    out = render_priors(lib.priors, max_chars=cap)
    assert len(out.text) <= cap
    if out.text:
        assert out.text.startswith(PRIORS_BEGIN) and out.text.endswith(PRIORS_END)
        assert out.text.count(PRIORS_END) == 1 and out.text.count("<<<") == 1
        assert len(out.shown) == out.text.count("\n- [")
    else:
        assert out.shown == ()
    assert render_priors(lib.priors, max_chars=cap) == out
