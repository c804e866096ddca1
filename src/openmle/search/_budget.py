"""Budgets and the ledger that enforces them across workers.

A :class:`Budget` caps five quantities: steps (nodes proposed), sandbox seconds (program run time,
queue wait excluded), wall seconds (model plus sandbox time as the user waits for it, summed over
sessions of a resumed run), tokens, and money (from a :class:`PriceTable`, or from the model's
own ``cost_usd``). A :class:`Ledger` sums what every committed node consumed and says when a cap
is reached; the search then stops proposing and either lets running work finish or cancels it
(``Budget.on_exhaust``).

Usage reported by a model service is not trusted: :func:`check_usage` accepts only integer
token counts in ``[0, MAX_STEP_TOKENS]`` and :func:`check_cost` only a finite, non-negative cost;
the driver replaces anything else by an estimate (characters / 4) or "unknown" and records a
warning on the node, so a negative count cannot disable the ``tokens`` cap and a huge one cannot
crash the search. The price table prices the model the user asked for, not the id the service
reports (a different reported id cannot escape the table); a replay of recorded answers names
itself by the recorded model, so it is priced as the recording was.

Departures from the released system: there, the sandbox-time budget counts only successful
validation runs and the model-plus-sandbox budget is a wall clock that restarts on resume
(reference 5.10); here every run counts (a failed program used the machine too) and wall time
carries over across resumes, so a resumed run cannot exceed its budget by restarting.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, final

from attrs import define, field, frozen

from openmle._types import Usage
from openmle._validation import check_choice, check_positive, fail
from openmle.errors import InvalidArgument

__all__ = ["Budget", "Consumption", "Ledger", "PriceTable"]

MAX_STEP_TOKENS = 10**9
"""The most prompt (or completion) tokens one step may report; more is treated as invalid."""


def check_usage(usage: object) -> str | None:
    """Why ``usage`` cannot be trusted (a short reason), or None when it is valid: a
    :class:`Usage` whose counts are integers in ``[0, MAX_STEP_TOKENS]``.
    """
    if not isinstance(usage, Usage):
        return f"usage is a {type(usage).__name__}, not Usage"
    for name in ("prompt_tokens", "completion_tokens"):
        value = getattr(usage, name)
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{name}={str(value)[:40]!r} is not an integer"
        if not 0 <= value <= MAX_STEP_TOKENS:
            return f"{name}={value if abs(value) < 10**18 else 'huge'} is out of [0, 1e9]"
    return None


def check_cost(cost: object) -> str | None:
    """Why a reported ``cost_usd`` cannot be trusted, or None when it is None or a finite,
    non-negative number.
    """
    if cost is None:
        return None
    if isinstance(cost, bool) or not isinstance(cost, int | float):
        return f"cost_usd={str(cost)[:40]!r} is not a number"
    try:
        ok = math.isfinite(cost) and cost >= 0
    except OverflowError:
        ok = False
    return None if ok else f"cost_usd={str(cost)[:40]} is not finite and >= 0"


def _opt_positive(name: str) -> Any:
    def check(instance: object, attribute: object, value: object) -> None:
        if value is None:
            return
        check_positive(value, f"Budget.{name}")  # type: ignore[arg-type]

    return check


def _opt_int(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise fail("an integer > 0 or None", "Budget.steps/tokens", value)
    return value


def _price_pair(value: object) -> tuple[float, float] | None:
    """``(prompt, completion)`` as floats, or None when ``value`` is not two numbers."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or len(value) != 2:
        return None
    a, b = value
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b)):
        return None
    return float(a), float(b)


def _price_map(value: Mapping[str, Any]) -> Mapping[str, tuple[float, float]]:
    if not isinstance(value, Mapping):
        raise fail("a mapping {model_id: (prompt, completion)}", "PriceTable.prices", value)
    out: dict[str, tuple[float, float]] = {}
    for k, v in value.items():
        pair = _price_pair(v)
        if pair is None or not all(math.isfinite(x) and x >= 0 for x in pair):
            raise fail("two finite prices >= 0 (USD per million tokens)", f"PriceTable[{k!r}]", v)
        out[str(k)] = pair
    return MappingProxyType(out)


@final
@frozen(kw_only=True)
class PriceTable:
    """USD per million tokens, per model id (``"*"`` matches any model).

    Args:
        prices: ``{model_id: (prompt_usd_per_mtok, completion_usd_per_mtok)}``.
    """

    prices: Mapping[str, tuple[float, float]] = field(converter=_price_map)

    def cost(self, model: str, usage: Usage) -> float | None:
        """The cost of ``usage`` on ``model`` in USD, or None when the model has no price or
        the usage is invalid (see :func:`check_usage`).
        """
        key = model if isinstance(model, str) else ""
        price = self.prices.get(key, self.prices.get("*"))
        if price is None or check_usage(usage) is not None:
            return None
        return (usage.prompt_tokens * price[0] + usage.completion_tokens * price[1]) / 1e6

    def to_dict(self) -> dict[str, list[float]]:
        """A JSON-ready dict."""
        return {k: list(v) for k, v in self.prices.items()}


@final
@frozen(kw_only=True)
class Budget:
    """Hard caps on a search; None means uncapped.

    Args:
        steps: nodes to propose (each Draft/Improve/Debug/Crossover attempt is one step).
        sandbox_s: program run seconds summed over all runs (queue wait excluded).
        wall_s: wall seconds the search may run (model and sandbox time as experienced,
            summed over the sessions of a resumed run).
        tokens: prompt plus completion tokens.
        usd: money, from ``prices`` or the model's reported ``cost_usd``.
        gpu_s: GPU-seconds: program run seconds times the GPUs each job leases
            (``Resources.gpus``), summed over all runs. With ``sandbox_s`` it is the fixed
            compute that more workers spend in parallel.
        prices: a price table for models that do not report their cost.
        on_exhaust: ``"finish"`` lets running work complete (and be recorded) after a cap is
            reached; ``"cancel"`` cancels it (the cancelled steps are journalled, not re-run).

    Raises:
        InvalidArgument: a non-positive cap, or no cap at all.
    """

    steps: int | None = field(default=None, converter=_opt_int)
    sandbox_s: float | None = field(default=None, validator=_opt_positive("sandbox_s"))
    wall_s: float | None = field(default=None, validator=_opt_positive("wall_s"))
    tokens: int | None = field(default=None, converter=_opt_int)
    usd: float | None = field(default=None, validator=_opt_positive("usd"))
    gpu_s: float | None = field(default=None, validator=_opt_positive("gpu_s"))
    prices: PriceTable | None = None
    on_exhaust: Literal["finish", "cancel"] = "finish"

    def __attrs_post_init__(self) -> None:
        check_choice(self.on_exhaust, ("finish", "cancel"), "Budget.on_exhaust")
        caps = (self.steps, self.sandbox_s, self.wall_s, self.tokens, self.usd, self.gpu_s)
        if all(v is None for v in caps):
            raise fail(
                "at least one cap",
                "Budget",
                "no caps",
                "set steps=, sandbox_s=, wall_s=, tokens=, usd= or gpu_s= so the search can end",
            )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for the manifest)."""
        return {
            "steps": self.steps,
            "sandbox_s": self.sandbox_s,
            "wall_s": self.wall_s,
            "tokens": self.tokens,
            "usd": self.usd,
            "prices": None if self.prices is None else self.prices.to_dict(),
            "on_exhaust": self.on_exhaust,
        } | ({"gpu_s": self.gpu_s} if self.gpu_s is not None else {})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Budget:
        """Inverse of :meth:`to_dict`."""
        d = dict(data)
        if d.get("prices") is not None:
            d["prices"] = PriceTable(prices=d["prices"])
        return cls(**d)


@final
@frozen(kw_only=True)
class Consumption:
    """What one node consumed.

    Args:
        sandbox_s: program run seconds (queue wait excluded), summed over retries.
        queue_s: seconds the job waited for a sandbox slot.
        model_s: wall seconds of the model call(s).
        wall_s: wall seconds of the whole expansion (model plus sandbox plus waits).
        prompt_tokens, completion_tokens: token usage of the model call(s).
        cost_usd: money spent, or None when unknown.
        gpu_s: GPU-seconds (``sandbox_s`` times the GPUs the job leased; in the JSON only
            when > 0).
    """

    sandbox_s: float = 0.0
    queue_s: float = 0.0
    model_s: float = 0.0
    wall_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    gpu_s: float = 0.0

    def __attrs_post_init__(self) -> None:
        for name in ("sandbox_s", "queue_s", "model_s", "wall_s", "gpu_s"):
            check_positive(getattr(self, name), f"Consumption.{name}", allow_zero=True)
        for name in ("prompt_tokens", "completion_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise fail("an integer >= 0", f"Consumption.{name}", value)
        if self.cost_usd is not None and check_cost(self.cost_usd) is not None:
            raise fail("None or a finite number >= 0", "Consumption.cost_usd", self.cost_usd)

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "sandbox_s": self.sandbox_s,
            "queue_s": self.queue_s,
            "model_s": self.model_s,
            "wall_s": self.wall_s,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
        } | ({"gpu_s": self.gpu_s} if self.gpu_s else {})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Consumption:
        """Inverse of :meth:`to_dict`."""
        return cls(**dict(data))


@final
@define(eq=False)
class Ledger:
    """Running totals against a :class:`Budget`; shared by every worker of one search.

    The ledger is plain state (no locks): the search core is single-threaded on the event loop,
    so every charge happens between two awaits.
    """

    budget: Budget
    steps: int = 0
    sandbox_s: float = 0.0
    model_s: float = 0.0
    tokens: int = 0
    usd: float = 0.0
    gpu_s: float = 0.0
    wall_offset_s: float = 0.0
    """Wall seconds spent by earlier sessions of a resumed run."""
    wall_now_s: float = field(default=0.0)
    """Wall seconds of this session so far (set by the driver's clock)."""

    @property
    def wall_s(self) -> float:
        """Wall seconds across all sessions."""
        return self.wall_offset_s + self.wall_now_s

    def charge_step(self) -> None:
        """Count one proposed step."""
        self.steps += 1

    def charge(self, used: Consumption) -> None:
        """Add one node's consumption.

        Raises:
            InvalidArgument: the budget has a ``usd`` cap but this node used tokens at an
                unknown cost (the model reported no ``cost_usd`` and ``Budget.prices`` does not
                price it): a money cap that cannot be measured is refused, never silently
                ignored. A node that used no tokens costs nothing.
        """
        if self.budget.usd is not None and used.cost_usd is None and used.tokens > 0:
            raise InvalidArgument(
                "Budget.usd is set but a step's cost is unknown: the model reported no cost "
                "and Budget.prices has no price for it. Pass "
                "Budget(prices=PriceTable({model_id: (usd_per_mtok_in, usd_per_mtok_out)})) "
                "(CLI: --prices FILE) or drop the usd cap."
            )
        self.sandbox_s += used.sandbox_s
        self.gpu_s += used.gpu_s
        self.model_s += used.model_s
        self.tokens += used.tokens
        if used.cost_usd is not None and math.isfinite(used.cost_usd):
            self.usd += used.cost_usd

    def _caps(self) -> tuple[tuple[str, float | None, float], ...]:
        """``(name, cap, spent)`` of every capped quantity, the step cap first."""
        b = self.budget
        return (
            ("steps", b.steps, self.steps),
            ("sandbox_s", b.sandbox_s, self.sandbox_s),
            ("wall_s", b.wall_s, self.wall_s),
            ("tokens", b.tokens, self.tokens),
            ("usd", b.usd, self.usd),
            ("gpu_s", b.gpu_s, self.gpu_s),
        )

    def exhausted(self) -> str | None:
        """The name of the first cap reached (``"steps"``, ``"sandbox_s"``, ...), or None."""
        return _first_reached(self._caps())

    def hard_exhausted(self) -> str | None:
        """Like :meth:`exhausted` but ignoring the step cap (which never cancels running work)."""
        reason = self.exhausted()
        if reason == "steps":
            return _first_reached(self._caps()[1:])
        return reason

    def fractions(self) -> dict[str, float]:
        """Share of each capped quantity used, in [0, inf) (1.0 = cap reached)."""
        return {name: spent / cap for name, cap, spent in self._caps() if cap is not None}

    def to_dict(self) -> dict[str, float]:
        """The totals, JSON-ready."""
        return {
            "steps": self.steps,
            "sandbox_s": self.sandbox_s,
            "model_s": self.model_s,
            "wall_s": self.wall_s,
            "tokens": self.tokens,
            "usd": self.usd,
        } | ({"gpu_s": self.gpu_s} if self.gpu_s or self.budget.gpu_s is not None else {})


def _first_reached(caps: Sequence[tuple[str, float | None, float]]) -> str | None:
    """The name of the first ``(name, cap, spent)`` whose cap is set and reached, or None."""
    return next((name for name, cap, spent in caps if cap is not None and spent >= cap), None)
