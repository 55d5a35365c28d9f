"""The suite's skip policy: a test skipped for a missing tool fails instead.

`make test` installs every tool the tests drive (`make system-deps`), so a skip can only mean
something is missing, and CI must not pass over it quietly. Every skip (a `pytest.skip` in a test or
fixture, a `skipif`, a module-level `pytest.importorskip`) is reported as a failure that keeps the
skip's reason. The one exception is a test marked `@pytest.mark.gpu`: it may skip on a machine
without a GPU, and the run's summary lists each such test.
"""

from __future__ import annotations

import pytest

GPU_MARK = "gpu"
_gpu_skipped: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{GPU_MARK}: needs a GPU; the only tests allowed to skip (they are listed)"
    )


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
    if item.get_closest_marker(GPU_MARK) is not None:
        _gpu_skipped.append(f"{item.nodeid}: {_reason(report).removeprefix('Skipped: ')}")
        return
    _as_failure(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    outcome = yield
    report: pytest.CollectReport = outcome.get_result()
    if report.skipped:  # a module-level importorskip or pytest.skip(allow_module_level=True)
        _as_failure(report)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if _gpu_skipped:
        terminalreporter.section(f"GPU-only tests skipped ({len(_gpu_skipped)}): no GPU here")
        for line in _gpu_skipped:
            terminalreporter.line(line)
