"""In-memory fakes for every protocol, each driven by a plain function or list."""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar, final

import anyio
import numpy as np
from attrs import define, field

from openmle._protocols import OperatorModel, Sandbox, Selector, Trainer
from openmle._types import (
    Candidate,
    Job,
    ModelRequest,
    ModelResponse,
    RunResult,
    Selection,
    Usage,
)
from openmle.errors import InvalidArgument, InvalidArgumentType, SandboxError

__all__ = ["FunctionSandbox", "FunctionSelector", "RecordingTrainer", "ScriptedModel"]

BatchT = TypeVar("BatchT")

SandboxHandler = Callable[[Job], RunResult | Awaitable[RunResult]]


@final
@define(eq=False)
class FunctionSandbox(Sandbox):
    """A sandbox whose results come from ``handler(job)`` (sync or async).

    It records every job in ``jobs``. ``delay_s`` makes each run sleep first (cancellable), for
    testing concurrency and cancellation.
    """

    handler: SandboxHandler
    delay_s: float = 0.0
    jobs: list[Job] = field(factory=list, init=False)
    closed: bool = field(default=False, init=False)

    async def run(self, job: Job) -> RunResult:
        """Record ``job`` and return the handler's result."""
        if self.closed:
            raise SandboxError("FunctionSandbox.run called after aclose()")
        self.jobs.append(job)
        if self.delay_s:
            await anyio.sleep(self.delay_s)
        result = self.handler(job)
        if inspect.isawaitable(result):
            result = await result
        if not isinstance(result, RunResult):
            raise InvalidArgumentType(
                f"FunctionSandbox.handler returned {result!r:.80} "
                f"(type={type(result).__name__}) for job {job.name or job.task!r}; "
                "return a RunResult (RunResult(outcome=..., score=...) or RunResult.infra_error)"
            )
        return result

    async def aclose(self) -> None:
        """Mark the sandbox closed."""
        self.closed = True


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


ModelScript = Sequence[str | ModelResponse] | Callable[[ModelRequest], str | ModelResponse]


def _check_script(script: object) -> None:
    """A script is a function of the request, or a list of str / ModelResponse answers."""
    if callable(script):
        return
    if (
        isinstance(script, str | bytes)
        or not isinstance(script, Sequence)
        or any(not isinstance(a, str | ModelResponse) for a in script)
    ):
        raise InvalidArgumentType(
            f"Expected a list of str or ModelResponse answers, or a function of the request, "
            f"but got ScriptedModel.script={script!r:.80} (type={type(script).__name__})"
        )


@final
@define(eq=False)
class ScriptedModel(OperatorModel):
    """An operator model that answers from a list (in order) or a function of the request.

    Token usage is estimated as characters / 4 when the script gives plain strings. Requests
    are recorded in ``requests``. A list that runs out raises ``InvalidArgument``.
    """

    script: ModelScript = field(validator=lambda _, __, v: _check_script(v))
    model: str = "scripted"
    requests: list[ModelRequest] = field(factory=list, init=False)
    _next: int = field(default=0, init=False)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer with the next scripted response."""
        self.requests.append(request)
        if callable(self.script):
            answer = self.script(request)
        else:
            if self._next >= len(self.script):
                raise InvalidArgument(
                    f"ScriptedModel ran out of responses after {len(self.script)} calls; "
                    "give more responses or a function"
                )
            answer = self.script[self._next]
            self._next += 1
        if isinstance(answer, ModelResponse):
            return answer
        if not isinstance(answer, str):
            raise InvalidArgumentType(
                f"ScriptedModel's script gave {answer!r:.80} (type={type(answer).__name__}) "
                "for a request; give a str or a ModelResponse"
            )
        prompt = "".join(m.content for m in request.messages)
        return ModelResponse(
            text=answer,
            usage=Usage(
                prompt_tokens=_estimate_tokens(prompt), completion_tokens=_estimate_tokens(answer)
            ),
            model=self.model,
            finish_reason="stop",
        )


@final
@define(eq=False)
class FunctionSelector(Selector):
    """Selects with probability proportional to ``weight(candidate)`` (non-negative).

    All-zero weights fall back to uniform. Draws are without replacement.
    """

    weight: Callable[[Candidate], float]

    def select(
        self, candidates: Sequence[Candidate], rng: np.random.Generator, *, k: int = 1
    ) -> Selection:
        """Draw ``min(k, len(candidates))`` distinct candidates."""
        if not candidates:
            raise InvalidArgument("FunctionSelector.select needs at least one candidate")
        w = np.array([float(self.weight(c)) for c in candidates], dtype=np.float64)
        if np.any(~np.isfinite(w)) or np.any(w < 0):
            raise InvalidArgument("FunctionSelector weights must be finite and >= 0")
        p = w / w.sum() if w.sum() > 0 else np.full(len(w), 1.0 / len(w))
        n = min(k, len(candidates))
        idx = rng.choice(len(candidates), size=n, replace=False, p=p)
        ids = tuple(c.node_id for c in candidates)
        return Selection(
            chosen=tuple(ids[i] for i in idx),
            node_ids=ids,
            probabilities=tuple(float(x) for x in p),
            utilities=tuple(float(x) for x in w),
        )


@final
@define(eq=False)
class RecordingTrainer(Trainer[BatchT], Generic[BatchT]):
    """A trainer whose metrics come from ``metrics(batch, step)``; it records the batches.

    Its whole state is the step counter and the recorded batch count, saved as JSON, so
    ``save``/``load`` round-trips exactly.
    """

    metrics: Callable[[BatchT, int], Mapping[str, float]] = field(
        default=lambda batch, step: {"loss": 1.0 / (1 + step)}
    )
    batches: list[BatchT] = field(factory=list, init=False)
    step_count: int = field(default=0, init=False)

    def step(self, batch: BatchT) -> Mapping[str, float]:
        """Record ``batch`` and return the metrics for this step."""
        self.batches.append(batch)
        out = dict(self.metrics(batch, self.step_count))
        self.step_count += 1
        return out

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write ``state.json`` under ``path``."""
        p = Path(path)
        p.mkdir(parents=True, exist_ok=True)
        (p / "state.json").write_text(json.dumps({"step_count": self.step_count}))

    def load(self, path: str | os.PathLike[str]) -> None:
        """Read ``state.json`` under ``path``."""
        state: dict[str, Any] = json.loads((Path(path) / "state.json").read_text())
        self.step_count = int(state["step_count"])
