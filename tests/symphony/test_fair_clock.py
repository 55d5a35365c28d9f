"""The tests' waits last their timeout on a quiet machine and longer on an overloaded one."""

from __future__ import annotations

import pytest

from symphony.testing import FairClock, wait_for


class Machine:
    """A clock and a load average the test moves by hand (2 cores)."""

    def __init__(self, load: float):
        self.now, self.load = 1000.0, load

    def clock(self, timeout: float, **kwargs) -> FairClock:
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
