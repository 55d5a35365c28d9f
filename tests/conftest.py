"""The suite's skip policy: a test skipped for a missing tool fails instead.

`make test` installs every tool the tests drive (`make system-deps`), so a skip can only mean
something is missing, and CI must not pass over it quietly. Every skip (a `pytest.skip` in a test or
fixture, a `skipif`, a module-level `pytest.importorskip`) is reported as a failure that keeps the
skip's reason. The one exception is a test marked `@pytest.mark.gpu`: it may skip on a machine
without a GPU, and the run's summary lists each such test.

Parallel runs (`make test` uses pytest-xdist: `-n 4 --dist loadgroup --no-loadscope-reorder`): every
test gets an `xdist_group`, and a group runs on one worker, in order. The groups:
- `heavy`: the `slow` tests (real training runs that keep both cores busy, and the ones that check
  "the global step grows in every 20 s window"): one at a time, never two such runs at once;
- a slow test that mostly waits sets its own group (`readme`: the README's commands; `eks`:
  terraform against moto, polling on 10 s timers) and runs beside the heavy ones;
- `docker`, `slurm`: the tests that share the session's docker engine or start Slurm clusters;
- otherwise the test's module, so module-scoped fixtures start once.
The long groups go first (FIRST_GROUPS), then the modules in order. A test that sets its own
`@pytest.mark.xdist_group` keeps it. Without xdist the marks do nothing.
"""

from __future__ import annotations

import os
import signal

import pytest

from symphony.testing import SLOWDOWN_ENV, machine_slowdown, measure_slowdown

# The tests that press Ctrl-C (SIGINT to an attached launcher) need SIGINT to reach it. A shell
# script that starts the suite in the background (`bash .ci/run &`) hands every process SIGINT
# *ignored*, the launchers inherit that, and those tests hang. A handler here (not SIG_IGN) is
# reset to the default in every process the tests start, as a terminal's user would have it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

GPU_MARK = "gpu"
_gpu_skipped: list[str] = []
# A test that runs longer than this belongs in the `heavy` group by its `slow` marker (the
# summary lists any that are not), so no long test lands beside the others by accident.
SLOW_S = float(os.environ.get("SURREAL_TEST_SLOW_S", "120"))
_unmarked_slow: list[tuple[float, str]] = []
# Seconds each xdist group and each worker spent in its tests (setup, call, teardown): where the
# suite's wall time goes, and what to shorten when CI runs long (printed at the end under xdist).
_group_s: dict[str, float] = {}
_worker_s: dict[str, float] = {}
# Resource groups in the order they start (see the module docstring); the rest go by module.
FIRST_GROUPS = ("heavy", "readme", "eks", "docker", "slurm")


def pytest_configure(config: pytest.Config) -> None:
    # How much slower than the reference machine this one runs, measured once by the controller
    # before the workers start (they inherit it): every wait (symphony.testing.FairClock) and
    # every test's timeout mark stretches by it. Set SYMPHONY_TEST_SLOWDOWN to choose it.
    if not hasattr(config, "workerinput") and SLOWDOWN_ENV not in os.environ:
        os.environ[SLOWDOWN_ENV] = str(measure_slowdown())
    config.addinivalue_line(
        "markers", f"{GPU_MARK}: needs a GPU; the only tests allowed to skip (they are listed)"
    )
    config.addinivalue_line("markers", "xdist_group(name): run with the other tests of NAME")


def pytest_report_header(config: pytest.Config) -> str:
    return (
        f"machine slowdown {machine_slowdown():g} against the reference machine: timeouts and "
        f"waits are that many times longer ({SLOWDOWN_ENV}; symphony.testing.measure_slowdown)"
    )


def _scale_timeout(item: pytest.Item, config: pytest.Config) -> None:
    """The test's pytest-timeout (its mark, else the ini's) times the machine's slowdown."""
    slowdown = machine_slowdown()
    if slowdown == 1.0:
        return
    mark = item.get_closest_marker("timeout")
    kwargs = dict(mark.kwargs) if mark is not None else {}
    if mark is not None and mark.args:
        seconds = mark.args[0]
    elif "timeout" in kwargs:
        seconds = kwargs.pop("timeout")
    else:
        seconds = getattr(config, "_env_timeout", None) or config.getini("timeout")
    if seconds in (None, ""):
        return
    if float(seconds) > 0:  # 0: no timeout
        item.add_marker(pytest.mark.timeout(float(seconds) * slowdown, **kwargs), append=False)


def _group(item: pytest.Item) -> str:
    if item.get_closest_marker("slow") is not None and item.get_closest_marker("docker") is None:
        return "heavy"
    for group in ("docker", "slurm"):
        if item.get_closest_marker(group) is not None:
            return group
    return item.nodeid.split("::")[0]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test its xdist group and put the long groups first (stable otherwise).

    xdist's scheduler sends the tests whose id ends in the same "@GROUP" to one worker. Its own
    hook adds that suffix in a way pytest 9 ignores, so it is added here, to ids that lack it.
    """
    loadgroup = bool(config.getoption("loadgroup", default=False))
    ranked = []
    for item in items:
        _scale_timeout(item, config)
        mark = item.get_closest_marker("xdist_group")
        if mark is None:
            group = _group(item)
            item.add_marker(pytest.mark.xdist_group(group))
        else:
            group = str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        nodeid = item.nodeid
        if loadgroup and not nodeid.rfind("@") > nodeid.rfind("]"):
            # pytest 9 keeps the id in `_id` (xdist 3.8 still sets `_nodeid`, a no-op there)
            setattr(item, "_id" if hasattr(item, "_id") else "_nodeid", f"{nodeid}@{group}")
        ranked.append((FIRST_GROUPS.index(group) if group in FIRST_GROUPS else 99, item))
    items[:] = [item for _, item in sorted(ranked, key=lambda pair: pair[0])]


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _as_failure(report: pytest.TestReport | pytest.CollectReport) -> None:
    reason = _reason(report).removeprefix("Skipped: ")
    report.outcome = "failed"
    report.longrepr = (
        f"skipped, which this suite treats as a failure: {reason}\n"
        "Install what the tests need with `make system-deps` (see tests/conftest.py); only tests "
        f"marked @pytest.mark.{GPU_MARK} may skip."
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    if item.get_closest_marker(GPU_MARK) is None:
        _as_failure(report)


def _plain_id(nodeid: str) -> str:
    """The test's id without the "@GROUP" xdist's loadgroup appends (after any "[params]")."""
    return nodeid.rpartition("@")[0] if nodeid.rfind("@") > nodeid.rfind("]") else nodeid


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect, where the summary is written (under xdist: the controller), the GPU-only skips
    and the tests that ran over SLOW_S without the `slow` marker."""
    if report.skipped and GPU_MARK in report.keywords and not hasattr(report, "wasxfail"):
        reason = _reason(report).removeprefix("Skipped: ")
        _gpu_skipped.append(f"{_plain_id(report.nodeid)}: {reason}")
    if report.when == "call" and report.duration > SLOW_S and "slow" not in report.keywords:
        _unmarked_slow.append((report.duration, _plain_id(report.nodeid)))
    if report.nodeid.rfind("@") > report.nodeid.rfind("]"):  # under xdist's loadgroup
        group = report.nodeid.rpartition("@")[2]
        _group_s[group] = _group_s.get(group, 0.0) + report.duration
        worker = getattr(report, "worker_id", "?")  # set by xdist on the controller's copy
        _worker_s[worker] = _worker_s.get(worker, 0.0) + report.duration


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    outcome = yield
    report: pytest.CollectReport = outcome.get_result()
    if report.skipped:  # a module-level importorskip or pytest.skip(allow_module_level=True)
        _as_failure(report)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    terminalreporter.write_line(pytest_report_header(config))
    if _unmarked_slow:
        terminalreporter.section(
            f"over {SLOW_S:.0f} s without @pytest.mark.slow ({len(_unmarked_slow)}): mark them "
            "(they then run in the heavy group, one at a time) or make them shorter"
        )
        for duration, nodeid in sorted(_unmarked_slow, reverse=True):
            terminalreporter.line(f"{duration:7.1f} s  {nodeid}")
    if _group_s:
        terminalreporter.section("test seconds per worker, and the 10 longest groups")
        for name, seconds in sorted(_worker_s.items()):
            terminalreporter.line(f"{seconds:7.1f} s  worker {name}")
        for name, seconds in sorted(_group_s.items(), key=lambda kv: -kv[1])[:10]:
            terminalreporter.line(f"{seconds:7.1f} s  {name}")
    if _gpu_skipped:
        terminalreporter.section(f"GPU-only tests skipped ({len(_gpu_skipped)}): no GPU here")
        for line in _gpu_skipped:
            terminalreporter.line(line)
