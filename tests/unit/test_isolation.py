"""The per-endpoint breaker (a pure state machine) and bulkhead (real threads, a real loop)."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from scaler.errors import CircuitOpen, NoData, SourceUnavailable
from scaler.serving import isolation

STEP = 30.0


def breaker() -> isolation.Breaker:
    lim = isolation.Limits.for_step(step=STEP, staleness=300.0, concurrency=4)
    return isolation.Breaker(lim.min_failures, lim.window, lim.cooldown, lim.max_cooldown)


def test_a_dead_endpoint_opens_the_breaker_once_its_failures_span_a_step() -> None:
    b = breaker()
    for t in (0.0, 1.0, 2.0):  # three quick failures, but within one step: not yet
        b.failure(t, "timeout")
    assert not b.is_open and b.refusal(2.0) is None
    b.failure(STEP, "timeout")
    assert b.is_open
    refusal = b.refusal(STEP + 1)
    assert refusal is not None and "failed 4 requests in a row" in refusal
    assert "until a probe succeeds" in refusal and b.last_error == "timeout"


def test_one_slow_query_among_healthy_ones_never_opens_the_breaker() -> None:
    b = breaker()
    for step in range(100):  # every step: healthy targets answer, one target times out
        t = step * STEP
        b.success()
        b.success()
        b.failure(t + 10, "timeout")
        assert b.refusal(t + STEP) is None
    assert not b.is_open


def test_an_open_breaker_lets_one_probe_through_after_its_cooldown_and_closes_on_success() -> None:
    b = breaker()
    for t in (0.0, STEP, 2 * STEP):
        b.failure(t, "timeout")
    opened_at = 2 * STEP
    assert b.refusal(opened_at + b.cooldown - 1) is not None
    assert b.refusal(opened_at + b.cooldown) is None  # the probe
    assert b.refusal(opened_at + b.cooldown) is not None  # only one at a time
    b.success()
    assert not b.is_open and b.refusal(opened_at + b.cooldown) is None


def test_failed_probes_double_the_cooldown_up_to_half_the_staleness() -> None:
    b = breaker()
    for t in (0.0, STEP, 2 * STEP):
        b.failure(t, "timeout")
    waits = []
    for _ in range(8):
        waits.append(b.open_until - t)
        t = b.open_until
        assert b.refusal(t) is None
        b.failure(t, "still down")
    assert waits[:3] == [STEP, 2 * STEP, 4 * STEP]
    assert max(waits) == b.max_cooldown == 150.0


def test_a_dead_endpoint_is_probed_at_the_longest_cooldown_however_long_it_stays_dead() -> None:
    """The 1,025th failed probe (two days at 150 s) raised OverflowError (2.0**1024) out of
    `failure`, before it set the next probe's time: the endpoint was probed every step from then
    on, each failure an internal error."""
    b = breaker()
    for t in (0.0, STEP, 2 * STEP):
        b.failure(t, "timeout")
    for _ in range(1100):
        t = b.open_until
        assert b.refusal(t) is None
        b.failure(t, "still down")
    assert b.open_until - t == b.max_cooldown
    assert b.refusal(t + STEP) is not None


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"min_failures": 0}, "min_failures"),
        ({"cooldown": 0.0}, "cooldown"),
        ({"max_cooldown": 1.0}, "max_cooldown"),
        ({"window": float("inf")}, "window"),
    ],
)
def test_breaker_settings_out_of_range_are_refused_by_name(
    fields: dict[str, float], says: str
) -> None:
    base: dict[str, float] = {"min_failures": 3, "window": 1, "cooldown": 2, "max_cooldown": 4}
    base.update(fields)
    with pytest.raises(ValueError, match=says):
        isolation.Breaker(
            int(base["min_failures"]), base["window"], base["cooldown"], base["max_cooldown"]
        )


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t


def limits(concurrency: int = 2) -> isolation.Limits:
    return isolation.Limits(
        concurrency=concurrency, min_failures=2, window=0.0, cooldown=60.0, max_cooldown=60.0
    )


def test_a_blocked_endpoint_holds_no_thread_of_another_endpoint() -> None:
    release = threading.Event()
    iso = isolation.Isolation(limits(), now=Clock().now)

    async def main() -> tuple[float, int]:
        stuck = [asyncio.create_task(iso.run("sick", release.wait)) for _ in range(10)]
        await asyncio.sleep(0.05)
        began = time.monotonic()
        answer = await asyncio.wait_for(iso.run("healthy", lambda: 42), timeout=5)
        took = time.monotonic() - began
        release.set()
        await asyncio.gather(*stuck)
        return took, answer

    took, answer = asyncio.run(main())
    assert answer == 42
    assert took < 1.0


def test_without_the_bulkhead_a_shared_pool_makes_the_healthy_call_wait_behind_blocked_ones() -> (
    None
):
    """The ablation of the test above: asyncio's shared thread pool, as the engine used before."""
    release = threading.Event()

    async def main() -> float:
        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(max_workers=2)
        stuck = [loop.run_in_executor(pool, release.wait) for _ in range(10)]
        await asyncio.sleep(0.05)
        began = time.monotonic()
        timer = threading.Timer(1.0, release.set)
        timer.start()
        await loop.run_in_executor(pool, lambda: 42)
        took = time.monotonic() - began
        await asyncio.gather(*stuck)
        pool.shutdown()
        return took

    assert asyncio.run(main()) >= 1.0


def test_requests_in_flight_per_endpoint_are_bounded_even_when_callers_give_up() -> None:
    release = threading.Event()
    running = []
    lock = threading.Lock()
    no_breaker = isolation.Limits(
        concurrency=3, min_failures=1000, window=0.0, cooldown=1.0, max_cooldown=1.0
    )
    iso = isolation.Isolation(no_breaker, now=Clock().now)

    def blocked() -> None:
        with lock:
            running.append(threading.current_thread().name)
        release.wait()

    async def main() -> None:
        for _ in range(10):  # each caller gives up after 10 ms; its thread runs on
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(iso.run("sick", blocked), timeout=0.01)
        await asyncio.sleep(0.1)

    asyncio.run(main())
    assert len(running) == 3
    release.set()


def test_a_breaker_refuses_in_microseconds_once_open_and_counts_only_transport_failures() -> None:
    clock = Clock()
    iso = isolation.Isolation(limits(), now=clock.now)

    def down() -> None:
        raise SourceUnavailable("http://x:9 refused")

    def empty() -> None:
        raise NoData("no series")

    async def main() -> None:
        for _ in range(5):  # an endpoint that answers "no data" is healthy
            with pytest.raises(NoData):
                await iso.run("e", empty)
        assert not iso.breaker("e").is_open
        for _ in range(2):
            with pytest.raises(SourceUnavailable):
                await iso.run("e", down)
        assert iso.open_endpoints() == ["e"]
        began = time.monotonic()
        with pytest.raises(CircuitOpen, match=r"source endpoint e is failing") as refused:
            await iso.run("e", lambda: 1)
        assert time.monotonic() - began < 0.01
        assert refused.value.problem == "http://x:9 refused"
        clock.t += 60.0  # the cooldown: one probe goes through, and its success closes it
        assert await iso.run("e", lambda: 1) == 1
        assert iso.open_endpoints() == []

    asyncio.run(main())


def test_a_caller_that_gives_up_counts_as_a_failure_of_the_endpoint() -> None:
    release = threading.Event()
    iso = isolation.Isolation(limits(), now=Clock().now)

    async def main() -> None:
        for _ in range(2):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(iso.run("silent", release.wait), timeout=0.01)
        with pytest.raises(CircuitOpen) as refused:
            await iso.run("silent", lambda: 1)
        assert isolation.DEADLINE in refused.value.problem

    asyncio.run(main())
    release.set()


def test_an_endpoint_reuses_its_threads_instead_of_starting_one_per_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[str] = []
    real_start = threading.Thread.start

    def counted(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", counted)
    limits = isolation.Limits.for_step(step=STEP, staleness=300.0, concurrency=4)
    bulkhead = isolation.Isolation(limits, now=time.monotonic)

    async def many() -> list[int]:
        calls = [bulkhead.run("e", functools.partial(int, i)) for i in range(200)]
        return list(await asyncio.gather(*calls))

    assert asyncio.run(many()) == list(range(200))
    assert 1 <= len(started) <= 4  # a thread per call would start 200
    bulkhead.forget(set())  # its threads end; a later call starts them again
    assert asyncio.run(many()) == list(range(200))
    assert len(started) <= 8


def test_an_endpoints_idle_threads_end_so_a_dropped_engine_leaves_none_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(isolation, "IDLE_SECONDS", 0.05)
    limits = isolation.Limits.for_step(step=STEP, staleness=300.0, concurrency=4)
    bulkhead = isolation.Isolation(limits, now=time.monotonic)

    async def some() -> list[int]:
        calls = [bulkhead.run("idle-e", functools.partial(int, i)) for i in range(20)]
        return list(await asyncio.gather(*calls))

    async def twice() -> None:
        assert await some() == list(range(20))
        deadline = time.monotonic() + 5
        while any(t.name.startswith("source idle-e") for t in threading.enumerate()):
            assert time.monotonic() < deadline, "idle source threads never ended"
            await asyncio.sleep(0.02)
        assert await some() == list(range(20))  # and new ones start when needed

    asyncio.run(twice())


def test_a_refusal_names_neither_the_target_nor_the_query_whose_failures_opened_the_breaker() -> (
    None
):
    iso = isolation.Isolation(limits(), now=Clock().now)
    theirs = (
        "Prometheus at http://prom:9090 answered HTTP 500 for team-b/secret-llm: "
        "query 'sum(rate(team_b_private_total[5m]))' failed; check serverAddress"
    )

    def down() -> None:
        raise SourceUnavailable(theirs)

    async def main() -> CircuitOpen:
        for _ in range(2):  # team-b's requests open the breaker of the shared endpoint
            with pytest.raises(SourceUnavailable):
                await iso.run("default", down)
        with pytest.raises(CircuitOpen) as refused:  # team-a's request is refused
            await iso.run("default", lambda: 1)
        return refused.value

    told = asyncio.run(main())

    assert "team-b" not in str(told) and "team_b_private_total" not in str(told)
    assert "source endpoint default is failing: it failed 2 requests in a row" in str(told)
    assert told.problem == theirs  # for the operator's log only
