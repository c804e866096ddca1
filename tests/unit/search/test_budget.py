"""Budget caps, the ledger and price tables."""

from __future__ import annotations

import pytest

from openmle import Usage
from openmle.errors import InvalidArgument
from openmle.search import Budget, Consumption, Ledger, PriceTable


def test_budget_needs_a_cap() -> None:
    """A budget with no cap at all is refused with a hint."""
    with pytest.raises(InvalidArgument, match="at least one cap"):
        Budget()


@pytest.mark.parametrize(
    "kwargs",
    [{"steps": 0}, {"steps": -1}, {"sandbox_s": 0.0}, {"usd": -1.0}, {"tokens": 1.5}],
)
def test_budget_rejects_non_positive_caps(kwargs: dict[str, object]) -> None:
    """Zero, negative or non-integer caps are argument errors."""
    with pytest.raises(InvalidArgument):
        Budget(**kwargs)  # type: ignore[arg-type]


def test_budget_on_exhaust_choices() -> None:
    """on_exhaust accepts only 'finish' and 'cancel'."""
    with pytest.raises(InvalidArgument, match="on_exhaust"):
        Budget(steps=1, on_exhaust="stop")  # type: ignore[arg-type]


def test_budget_round_trips() -> None:
    """to_dict/from_dict round-trip, price table included."""
    b = Budget(steps=3, usd=1.5, prices=PriceTable(prices={"m": (1.0, 2.0)}), on_exhaust="cancel")
    assert Budget.from_dict(b.to_dict()) == b


def test_price_table_cost_and_wildcard() -> None:
    """Cost is per million tokens; '*' prices unknown models; no price gives None."""
    table = PriceTable(prices={"a": (1.0, 3.0), "*": (10.0, 10.0)})
    assert table.cost("a", Usage(prompt_tokens=1_000_000, completion_tokens=500_000)) == 2.5
    assert table.cost("b", Usage(prompt_tokens=100_000)) == 1.0
    assert PriceTable(prices={}).cost("a", Usage(prompt_tokens=1)) is None


def test_ledger_reports_first_cap_reached() -> None:
    """Each cap is reached when its total meets it; steps never counts as a hard stop."""
    ledger = Ledger(budget=Budget(steps=2, sandbox_s=10.0, tokens=100, usd=1.0))
    assert ledger.exhausted() is None
    ledger.charge(Consumption(sandbox_s=4.0, prompt_tokens=30, completion_tokens=20, cost_usd=0.1))
    assert ledger.exhausted() is None
    ledger.charge_step()
    ledger.charge_step()
    assert ledger.exhausted() == "steps"
    assert ledger.hard_exhausted() is None
    ledger.charge(Consumption(sandbox_s=6.0))
    assert ledger.hard_exhausted() == "sandbox_s"
    assert ledger.fractions()["tokens"] == pytest.approx(0.5)


def test_ledger_money_and_wall_time_across_sessions() -> None:
    """Money sums known costs (a node that used no tokens costs nothing); wall time adds
    earlier sessions' offset."""
    ledger = Ledger(budget=Budget(usd=1.0, wall_s=100.0))
    ledger.charge(Consumption(cost_usd=0.4))
    ledger.charge(Consumption(cost_usd=None))
    assert ledger.usd == pytest.approx(0.4)
    ledger.wall_offset_s = 60.0
    ledger.wall_now_s = 39.0
    assert ledger.exhausted() is None
    ledger.wall_now_s = 40.0
    assert ledger.exhausted() == "wall_s"


def test_a_money_cap_that_cannot_be_measured_is_refused() -> None:
    """Budget(usd=...) with tokens at an unknown cost (no reported cost, no price table) is an
    error naming Budget.prices, not a cap that silently never fires."""
    from openmle.errors import InvalidArgument

    ledger = Ledger(budget=Budget(usd=1.0))
    with pytest.raises(InvalidArgument, match=r"Budget\.prices"):
        ledger.charge(Consumption(prompt_tokens=30, completion_tokens=20))
    priced = Ledger(budget=Budget(usd=1.0, prices=PriceTable(prices={"m": (1.0, 2.0)})))
    priced.charge(Consumption(prompt_tokens=30, completion_tokens=20, cost_usd=0.2))
    assert priced.usd == pytest.approx(0.2)


@pytest.mark.parametrize(
    "prices", [{"m": (1.0,)}, {"m": "12"}, {"m": (True, 2)}, {"m": (1, "x")}, 5]
)
def test_a_price_that_is_not_two_numbers_is_named(prices: object) -> None:
    """``(1.0,)`` was an ``IndexError``; ``"12"`` was read as the prices 1 and 2."""
    with pytest.raises(InvalidArgument, match=r"PriceTable(\['m'\]|\.prices)="):
        PriceTable(prices=prices)  # type: ignore[arg-type]
