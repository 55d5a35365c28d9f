"""caraml's receive path costs about what raw pyzmq costs: CPU per 16 MiB array, same process."""

from __future__ import annotations

import statistics

import pytest

from caraml.testing import receive_cost

pytestmark = pytest.mark.timeout(300)


@pytest.mark.integration
def test_receiving_a_16_mib_array_costs_at_most_1_5x_the_cpu_of_raw_pyzmq():
    cost = receive_cost(16 << 20, count=4, rounds=7)
    # per round: caraml Puller.pull against recv(copy=False) + np.frombuffer, both timed with
    # time.process_time in this process; the median of the paired ratios
    ratios = [c / r for c, r in zip(cost["caraml"]["cpu"], cost["raw"]["cpu"], strict=True)]
    assert len(ratios) == 7
    assert statistics.median(ratios) <= 1.5, cost
