"""`prewarmBudget`: replica-hours (or money) per window, or a share of the window's reactive
replica-hours such as "10%"; anything else is refused naming the key and both forms."""

from __future__ import annotations

import pytest

from scaler.decision import budget
from scaler.decision import spec as specs
from scaler.errors import SpecError

BASE = {"query": "sum(rate(http_requests_total[2m]))", "threshold": "50"}


def parse(value: str) -> specs.TargetSpec:
    return specs.parse("gpu", "llm-serve", {**BASE, "prewarmBudget": value})


@pytest.mark.parametrize(
    ("text", "amount", "share"),
    [
        ("24", 24.0, None),
        ("6.5", 6.5, None),
        ("0", 0.0, None),
        ("10%", 0.0, 0.1),
        ("0.5%", 0.0, 0.005),
        ("100%", 0.0, 1.0),
        (" 12.5% ", 0.0, 0.125),
    ],
)
def test_a_budget_is_an_amount_or_a_share(text: str, amount: float, share: float | None) -> None:
    spec = parse(text)
    assert spec.prewarm_budget == amount
    assert spec.prewarm_budget_share == pytest.approx(share)


def test_an_unset_budget_is_the_documented_default() -> None:
    spec = specs.parse("gpu", "llm-serve", BASE)
    amount, share = budget.parse_budget(budget.DEFAULT_BUDGET)
    assert (spec.prewarm_budget, spec.prewarm_budget_share) == (amount, share)


@pytest.mark.parametrize(
    "text",
    [
        *("0%", "-5%", "150%", "100.5%", "10 %", "%", "10%%", "1e1%", "nan%", "10,5%"),
        *("inf", "-3", "+5", "1e3", "0x10", "ten", "2000000000", "١٠%", "１０%"),
    ],
)
def test_anything_but_a_plain_decimal_or_a_share_up_to_100_percent_is_refused(
    text: str,
) -> None:
    with pytest.raises(SpecError) as err:
        parse(text)
    assert err.value.key == "prewarmBudget"
    message = str(err.value)
    assert "'prewarmBudget'" in message and text.strip() in message
    assert "%" in message  # says what a share looks like


def test_a_budget_is_shown_as_it_was_written() -> None:
    assert budget.describe(*budget.parse_budget("10%")) == "10%"
    assert budget.describe(*budget.parse_budget("24")) == "24"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("10 %", "no space before the '%': write '10%'"),
        ("2.5\t%", "write '2.5%'"),
        ("-5", "an amount cannot be negative"),
        ("-5%", "a share must be above 0 %"),
    ],
)
def test_the_common_slips_are_named_with_their_fix(text: str, says: str) -> None:
    with pytest.raises(SpecError) as err:
        parse(text)
    assert says in err.value.fix


def test_a_currency_without_a_price_is_refused_as_monthly_budget_is() -> None:
    # It priced nothing and said nothing: a user reading `currency: EUR` expects euros.
    with pytest.raises(SpecError) as refused:
        specs.parse("gpu", "llm", {**BASE, "currency": "EUR"})
    assert str(refused.value) == (
        "scalerMetadata key 'currency' = 'EUR': is the unit of costPerReplicaHour, which is not "
        "set, so nothing is priced: set costPerReplicaHour too, or remove currency"
    )
    priced = specs.parse("gpu", "llm", {**BASE, "currency": "EUR", "costPerReplicaHour": "2"})
    assert (priced.currency, priced.cost_per_replica_hour) == ("EUR", 2.0)
