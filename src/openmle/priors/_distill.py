"""Priors from public artifacts (write-ups, notebooks as text, papers), distilled by a model.

Every artifact is checked against the exclusions **before** the model sees it; a refused
artifact is recorded and never sent. The model answers one JSON object; each record is
validated against the :class:`~openmle.priors.Prior` schema, a malformed answer is sent back
with the validation error (a bounded number of times) and then reported, and a record that
cites an excluded task is refused. A timeout or a model error is reported, not raised.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

import anyio
from attrs import field, frozen

from openmle._protocols import OperatorModel
from openmle._types import Message
from openmle.errors import InvalidArgument, ModelError
from openmle.operators import JsonAnswer, ask_json, clip
from openmle.priors._decontam import Exclusions, Refusal, default_exclusions
from openmle.priors._library import PriorLibrary
from openmle.priors._record import KINDS, Prior

__all__ = ["DISTILL_SYSTEM", "Artifact", "DistillFailure", "DistillReport", "adistill", "distill"]

DISTILL_SYSTEM: Final = (
    "You read machine-learning competition write-ups, notebooks and papers and distil the "
    "advice in them that would help on OTHER tasks: modelling methods, practical tricks and "
    "pitfalls. You answer with JSON only."
)

_SCHEMA_HELP = (
    'Answer with one JSON object: {"priors": [ ... ]}, at most {k} records, each an object '
    "with exactly these keys:\n"
    f'- "kind": one of {", ".join(map(json.dumps, KINDS))}\n'
    '- "text": the advice in one or two sentences, general enough to reuse (at most 400 '
    "characters)\n"
    '- "task_type", "modality", "metric_family", "size_band", "family": lower-case labels '
    'of where it applies (e.g. "classification", "tabular", "auc", "small", "lightgbm"), '
    '"any" when it applies everywhere\n'
    '- "effect": the measured gain the source reports for it, as a number, or null\n'
    '- "cites": a list of the competition or task ids the advice comes from (may be empty)\n'
    'Return {"priors": []} when the text holds no reusable advice.'
)

_RECORD_KEYS: Final = frozenset(
    {
        "kind",
        "text",
        "task_type",
        "modality",
        "metric_family",
        "size_band",
        "family",
        "effect",
        "cites",
    }
)
_MAX_CITES = 20


def _strs(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise InvalidArgument("pass a list of strings, not one string")
    return tuple(str(v) for v in value)


@frozen(kw_only=True)
class Artifact:
    """A public artifact a user supplies as text.

    Args:
        name: its title (also checked against the exclusions).
        text: its content.
        source_id: the competition or task it is about, when known.
        related_ids: other task ids, names or URLs it is related to.
        data_hashes: hashes of the data it used, when known.
        licence: the artifact's licence (``"unknown"`` when not stated).
    """

    name: str
    text: str
    source_id: str = ""
    related_ids: tuple[str, ...] = field(default=(), converter=_strs)
    data_hashes: tuple[str, ...] = field(default=(), converter=_strs)
    licence: str = "unknown"

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> Artifact:
        """An artifact from a text file (name = the file name); other fields as keywords.

        Raises:
            InvalidArgument: the file cannot be read as UTF-8 text.
        """
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidArgument(f"cannot read artifact {str(p)!r}: {exc}") from exc
        return cls(name=kwargs.pop("name", p.name), text=text, **kwargs)


@frozen(kw_only=True)
class DistillFailure:
    """An artifact that gave no priors: the last error and how many calls were made."""

    source: str
    reason: str
    attempts: int


@frozen(kw_only=True)
class DistillReport:
    """The distilled library, the refusals (sources and records) and the failures."""

    library: PriorLibrary
    refusals: tuple[Refusal, ...]
    failures: tuple[DistillFailure, ...]


def _records(answer: Any, k: int) -> list[dict[str, Any]]:
    if not isinstance(answer, dict) or not isinstance(answer.get("priors"), list):
        raise ValueError('the answer must be a JSON object with a "priors" list')
    recs = answer["priors"]
    if len(recs) > k:
        raise ValueError(f'"priors" holds {len(recs)} records; at most {k}')
    for i, r in enumerate(recs):
        if not isinstance(r, dict):
            raise ValueError(f"priors[{i}] must be an object")
        extra = sorted(set(r) - _RECORD_KEYS)
        if extra:
            raise ValueError(f"priors[{i}] has unknown key(s) {', '.join(map(repr, extra))}")
        for key in ("kind", "text"):
            if key not in r:
                raise ValueError(f"priors[{i}] is missing {key!r}")
        cites = r.get("cites", [])
        if not isinstance(cites, list) or not all(isinstance(c, str) for c in cites):
            raise ValueError(f"priors[{i}].cites must be a list of strings")
        if len(cites) > _MAX_CITES:
            raise ValueError(f"priors[{i}].cites holds {len(cites)} ids; at most {_MAX_CITES}")
    return [dict(r) for r in recs]


def _build(rec: dict[str, Any], i: int, art: Artifact, tag: str) -> Prior:
    labels = {
        k: rec[k]
        for k in ("task_type", "modality", "metric_family", "size_band", "family")
        if k in rec
    }
    ids = [
        s
        for s in (art.source_id, *art.related_ids, *art.data_hashes, *rec.get("cites", []))
        if s.strip()
    ]
    try:
        return Prior(
            prior_id=f"art-{tag}-{i}",
            kind=rec["kind"],
            text=rec["text"],
            effect=rec.get("effect"),
            n=1 if rec.get("effect") is not None else 0,
            source=art.name[:200] or "artifact",
            provenance="artifact",
            source_ids=list(dict.fromkeys(s[:200] for s in ids)),
            licence=art.licence[:200] or "unknown",
            **labels,
        )
    except InvalidArgument as exc:
        raise ValueError(f"priors[{i}]: {exc}") from None


def _request(art: Artifact, k: int, max_chars: int) -> list[Message]:
    user = (
        f"## Source: {art.name}\n\n"
        + clip(art.text, max_chars, keep_head=0.7)
        + "\n\n## What to answer\n\n"
        + _SCHEMA_HELP.replace("{k}", str(k))
    )
    return [Message(role="system", content=DISTILL_SYSTEM), Message(role="user", content=user)]


async def adistill(
    model: OperatorModel,
    artifacts: Sequence[Artifact],
    *,
    exclusions: Exclusions | None = None,
    max_attempts: int = 3,
    timeout_s: float = 300.0,
    max_priors_per_source: int = 8,
    max_source_chars: int = 24_000,
) -> DistillReport:
    """Distil ``artifacts`` into priors with ``model`` (one artifact at a time).

    Args:
        model: any operator model.
        artifacts: the sources.
        exclusions: what must not become a prior (default :func:`default_exclusions`).
        max_attempts: calls per artifact, the first included; each retry sends the answer
            back with its validation error.
        timeout_s: limit of one call.
        max_priors_per_source: records one answer may hold.
        max_source_chars: the artifact text is clipped to this many characters.

    Returns:
        A :class:`DistillReport`; refused artifacts are never sent to the model.
    """
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise InvalidArgument(f"max_attempts must be an integer >= 1, got {max_attempts!r}")
    if not timeout_s > 0:
        raise InvalidArgument(f"timeout_s must be > 0, got {timeout_s!r}")
    excl = default_exclusions() if exclusions is None else exclusions
    priors: list[Prior] = []
    refusals: list[Refusal] = []
    failures: list[DistillFailure] = []
    seen: set[str] = set()
    for art in artifacts:
        if not isinstance(art, Artifact):
            raise InvalidArgument(f"artifacts holds {type(art).__name__}; pass Artifact values")
        why = excl.match(
            source_id=art.source_id,
            name=art.name,
            text=art.text,
            data_hashes=art.data_hashes,
            related_ids=art.related_ids,
        )
        if why is not None:
            refusals.append(Refusal(source=art.name, reason=f"excluded ({excl.suite}): {why}"))
            continue
        tag = hashlib.sha256(f"{art.name}\n{art.text}".encode()).hexdigest()[:10]
        if tag in seen:
            failures.append(
                DistillFailure(
                    source=art.name, reason="same name and text as an earlier artifact", attempts=0
                )
            )
            continue
        seen.add(tag)
        asked = await ask_json(
            model,
            _request(art, max_priors_per_source, max_source_chars),
            partial(_parsed, art=art, tag=tag, k=max_priors_per_source),
            metadata={"purpose": "distill_priors"},
            max_attempts=max_attempts,
            timeout_s=timeout_s,
            on_model_error="stop",
            model_errors=(ModelError,),
            echo_chars=4_000,
            retry_note=(
                "That answer is invalid: {error}. Answer again with only the JSON object "
                "described above."
            ),
        )
        if asked.value is None:
            failures.append(_failure(art.name, asked, timeout_s))
            continue
        for rec, prior in asked.value:
            why = excl.match(
                name=" ".join(rec.get("cites", [])),
                text=prior.text,
                related_ids=rec.get("cites", []),
            )
            if why is not None:
                refusals.append(
                    Refusal(
                        source=f"{art.name} / {prior.prior_id}",
                        reason=f"record cites an excluded task ({excl.suite}): {why}",
                    )
                )
            else:
                priors.append(prior)
    return DistillReport(
        library=PriorLibrary(priors), refusals=tuple(refusals), failures=tuple(failures)
    )


def _parsed(obj: Any, art: Artifact, tag: str, k: int) -> list[tuple[dict[str, Any], Prior]]:
    """The answer's records, each with the prior it makes (``ValueError`` names what is
    wrong).
    """
    recs = _records(obj, k)
    return list(zip(recs, [_build(r, i, art, tag) for i, r in enumerate(recs)], strict=True))


def _failure(source: str, asked: JsonAnswer[Any], timeout_s: float) -> DistillFailure:
    """Why no answer about ``source`` was accepted (the last attempt's error)."""
    last = asked.attempts[-1]
    if last.kind == "timeout":
        reason = f"the model timed out after {timeout_s:g} s"
    elif last.kind == "model_error":
        reason = f"model error: {last.error}"
    else:
        reason = f"invalid answer: {last.error[:300]}"
    return DistillFailure(source=source, reason=reason, attempts=len(asked.attempts))


def distill(model: OperatorModel, artifacts: Sequence[Artifact], **kwargs: Any) -> DistillReport:
    """Blocking :func:`adistill` (same arguments)."""

    async def go() -> DistillReport:
        return await adistill(model, artifacts, **kwargs)

    return anyio.run(go)
