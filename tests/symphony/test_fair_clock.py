"""The tests' waits last their timeout on a quiet machine and longer on an overloaded one."""

from __future__ import annotations

import pytest

from symphony.testing import (
    SLOWDOWN_ENV,
    FairClock,
    machine_slowdown,
    measure_slowdown,
    scaled,
    wait_for,
)


class Machine:
    """A clock and a load average the test moves by hand (2 cores)."""

    def __init__(self, load: float):
        self.now, self.load = 1000.0, load

    def clock(self, timeout: float, **kwargs) -> FairClock:
        kwargs.setdefault("slowdown", 1.0)  # the reference machine's speed, whatever this one's
        return FairClock(timeout, now=lambda: self.now, load=lambda: self.load, cores=2, **kwargs)

    def run(self, clock: FairClock, seconds: float) -> float:
        """Advance a second at a time until the clock expires; the wall seconds it took."""
        start = self.now
        while self.now - start < seconds:
            self.now += 1.0
            if clock.expired():
                break
        return self.now - start


def test_a_quiet_machine_waits_the_timeout():
    machine = Machine(load=1.5)
    clock = machine.clock(120)
    assert machine.run(clock, 1000) == 121
    assert clock.describe() == "120 s"


def test_an_overloaded_machine_waits_in_proportion_to_its_load():
    machine = Machine(load=8.0)  # four runnable processes per core: a quarter of a fair second
    clock = machine.clock(120)
    assert machine.run(clock, 1000) == 481
    assert clock.describe() == "120 s of a fair share of the machine (481 s of wall time)"


def test_the_wait_is_capped_however_loaded():
    machine = Machine(load=1000.0)
    assert machine.run(machine.clock(10, cap=5.0), 1000) == 51


def test_wait_for_returns_the_value_or_names_what_it_waited_for():
    assert wait_for(lambda: 7, timeout=3) == 7
    with pytest.raises(AssertionError, match=r"timed out after 0\.2 s.* waiting for the moon"):
        wait_for(lambda: False, timeout=0.2, poll_s=0.05, what="the moon")


def test_a_slower_machine_waits_its_timeout_times_the_slowdown():
    machine = Machine(load=1.0)
    assert machine.run(machine.clock(120, slowdown=3.0), 1000) == 361
    assert machine.run(machine.clock(10, cap=5.0, slowdown=3.0), 1000) == 31  # quiet: not capped
    loaded = Machine(load=1000.0)
    assert loaded.run(loaded.clock(10, cap=5.0, slowdown=3.0), 1000) == 151  # the cap stretches too


def test_the_suite_measures_the_slowdown_once_and_every_wait_reads_it(monkeypatch):
    measured = measure_slowdown(rounds=2)
    assert 1.0 <= measured <= 4.0
    monkeypatch.setenv(SLOWDOWN_ENV, "2.5")
    assert machine_slowdown() == 2.5 and scaled(100) == 250
    assert FairClock(10).slowdown == 2.5
    monkeypatch.setenv(SLOWDOWN_ENV, "0.3")  # never shorter than the reference's timeouts
    assert machine_slowdown() == 1.0
    monkeypatch.setenv(SLOWDOWN_ENV, "fast")
    assert machine_slowdown() == 1.0
