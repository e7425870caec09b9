"""An empty metadata value is refused for every key whose default could lift a guardrail or
change a decision: a Helm value that renders empty (`mode: ""`, `maxReplicas: ""`) used to be
read as the default, so a shadow trigger went active and a cap was lifted, silently. The
optional string keys the repo's own manifests leave empty (`holidays: ""`) stay unset."""

from __future__ import annotations

import dataclasses

import pytest

from scaler.decision import metakeys
from scaler.decision import spec as specs
from scaler.errors import SpecError

BASE = {"query": "sum(rate(requests_total[2m]))", "threshold": "50"}
REFUSED = [
    "mode",
    "minReplicas",
    "maxReplicas",
    "maxPrewarmReplicas",
    "prewarmBudget",
    "prewarmBudgetWindow",
    "costPerReplicaHour",
    "currency",
    "monthlyBudget",
    "activationThreshold",
    "leadTime",
    "horizon",
    "quantile",
    "model",
    "levelInsurance",
    "prometheusUnsafeSsl",
]


@pytest.mark.parametrize("key", REFUSED)
@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_guardrail_is_refused_naming_the_key_not_read_as_the_default(
    key: str, empty: str
) -> None:
    with pytest.raises(SpecError) as refused:
        specs.parse("gpu", "llm", {**BASE, key: empty})
    assert refused.value.key == key
    assert str(refused.value).startswith(
        f"scalerMetadata key {key!r} = {empty!r}: empty; remove the key for the default, or "
        "give a value ("
    )


def test_the_optional_string_keys_the_manifests_leave_empty_are_unset() -> None:
    # As deploy/overlays/active writes them, and a serverAddress of the default Prometheus.
    empty = dict.fromkeys(metakeys.EMPTY_IS_UNSET, "")
    parsed = specs.parse("gpu", "llm", {**BASE, **empty})
    unnamed = dataclasses.replace(parsed, metric_name="")
    assert unnamed == dataclasses.replace(specs.parse("gpu", "llm", BASE), metric_name="")
    assert (parsed.holidays, parsed.auth_modes, parsed.custom_headers) == (None, (), ())
    assert (parsed.query_namespace, parsed.server_address, parsed.pod_selector) == (None,) * 3
    assert parsed.metric_name.startswith("predictive-llm-")


def test_every_key_is_either_refused_empty_or_unset_when_empty() -> None:
    required = {"query", "threshold"}
    assert set(REFUSED) | metakeys.EMPTY_IS_UNSET | required == metakeys.KNOWN_KEYS
