"""Prior records: one piece of advice with where it applies, its evidence and provenance."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs
from attrs import field, frozen

from openmle._validation import int_at_least
from openmle.errors import InvalidArgument

__all__ = ["ANY", "KINDS", "PRIOR_SCHEMA_VERSION", "Prior", "canonical_json"]

PRIOR_SCHEMA_VERSION: Final = 1
"""The schema version every record of a prior library carries (``schema_version`` field)."""

ANY: Final = "any"
"""The wildcard of a prior's applicability fields: applies to every task."""

KINDS: Final = ("method", "trick", "pitfall")
"""What a prior's advice can be."""

_MAX_TEXT = 2_000
_MAX_FIELD = 200


def _text(max_len: int) -> Any:
    def check(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        name = f"Prior.{attribute.name}"
        if not isinstance(value, str):
            raise InvalidArgument(f"{name} must be a string, got {type(value).__name__}")
        if not value.strip() and attribute.name in ("prior_id", "text", "source"):
            raise InvalidArgument(f"{name} must not be empty")
        if len(value) > max_len:
            raise InvalidArgument(f"{name} is {len(value)} characters; at most {max_len}")

    return check


def _label(value: object) -> str:
    # applicability labels are compared case-insensitively; store them normalised
    return value.strip().lower() if isinstance(value, str) else value  # type: ignore[return-value]


def _kind(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in KINDS:
        raise InvalidArgument(f"Prior.kind must be one of {', '.join(KINDS)}; got {value!r}")


def _effect(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgument(
            f"Prior.{attribute.name} must be a finite number or null; got {value!r}"
        )


def _source_ids(value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidArgument(f"Prior.source_ids must be a list of strings; got {value!r}")
    out = tuple(value)
    for v in out:
        if not isinstance(v, str) or not v.strip() or len(v) > _MAX_FIELD:
            raise InvalidArgument(f"Prior.source_ids holds {v!r}; each must be a short string")
    return out


@frozen(kw_only=True)
class Prior:
    """One piece of reusable advice, where it applies, and the evidence behind it.

    Advice:
        prior_id (unique within a library), kind (``method``, ``trick`` or ``pitfall``),
        text (the advice, at most 2000 characters).
    Where it applies (lower-case labels; ``"any"`` applies everywhere):
        task_type (``classification``, ``regression``, ...), modality (``tabular``, ``text``,
        ``image``, ...), metric_family (``auc``, ``rmse``, ``accuracy``, ...), size_band
        (``small``, ``medium``, ``large``), family (the method family it is about, see
        :func:`openmle.search.method_family`, or ``"any"``).
    Evidence:
        source (where it came from: a run directory, a write-up's name), effect (measured
        change in signed validation score, higher is better; None when not measured),
        n (how many observations the effect is averaged over; 0 when not measured).
    Provenance:
        provenance (``"run"`` or ``"artifact"``), source_ids (the ids, competition names and
        data hashes of every task the source is about: a benchmark refuses to evaluate on
        them), licence (of the source; ``"unknown"`` when not stated).

    Raises:
        InvalidArgument: a field of the wrong type, an unknown kind, a non-finite effect.
    """

    schema_version: int = PRIOR_SCHEMA_VERSION
    prior_id: str = field(validator=_text(_MAX_FIELD))
    kind: str = field(validator=_kind)
    text: str = field(validator=_text(_MAX_TEXT))
    task_type: str = field(default=ANY, converter=_label, validator=_text(_MAX_FIELD))
    modality: str = field(default=ANY, converter=_label, validator=_text(_MAX_FIELD))
    metric_family: str = field(default=ANY, converter=_label, validator=_text(_MAX_FIELD))
    size_band: str = field(default=ANY, converter=_label, validator=_text(_MAX_FIELD))
    family: str = field(default=ANY, converter=_label, validator=_text(_MAX_FIELD))
    source: str = field(validator=_text(_MAX_FIELD))
    effect: float | None = field(default=None, validator=_effect)
    n: int = field(default=0, validator=int_at_least(0, "Prior.n"))
    provenance: str = field(default="artifact", validator=_text(_MAX_FIELD))
    source_ids: tuple[str, ...] = field(default=(), converter=_source_ids)
    licence: str = field(default="unknown", validator=_text(_MAX_FIELD))

    def __attrs_post_init__(self) -> None:
        if self.schema_version != PRIOR_SCHEMA_VERSION:
            raise InvalidArgument(
                f"Prior.schema_version={self.schema_version!r} is not supported (this openmle "
                f"reads version {PRIOR_SCHEMA_VERSION}); upgrade openmle"
            )

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready values (``source_ids`` as a list)."""
        d = attrs.asdict(self, recurse=False)
        d["source_ids"] = list(self.source_ids)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Prior:
        """A prior from a JSON object.

        Raises:
            InvalidArgument: a missing or unknown field, or a field that does not validate.
        """
        if not isinstance(data, Mapping):
            raise InvalidArgument(f"a prior must be a JSON object, got {type(data).__name__}")
        names = {a.name for a in attrs.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise InvalidArgument(f"unknown field(s) {', '.join(map(repr, unknown))}")
        required = ("prior_id", "kind", "text", "source")
        missing = [k for k in required if k not in data]
        if missing:
            raise InvalidArgument(f"missing field(s) {', '.join(map(repr, missing))}")
        if "schema_version" not in data:
            raise InvalidArgument(
                f"missing field 'schema_version' (this openmle writes {PRIOR_SCHEMA_VERSION})"
            )
        return cls(**dict(data))


def canonical_json(prior: Prior) -> str:
    """``prior`` as canonical JSON (sorted keys): what a library file holds and hashes."""
    return json.dumps(prior.to_dict(), sort_keys=True, ensure_ascii=False, allow_nan=False)
