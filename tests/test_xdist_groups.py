"""tests/conftest.py under `make test`'s pytest-xdist workers: the slow training runs never overlap.

Every `slow` test shares one worker (the `heavy` group) unless it names its own group; tests of
one docker engine or Slurm cluster share a worker; the rest go by module.
"""

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

POLICY = (Path(__file__).parent / "conftest.py").read_text()
RECORD = """
import os
from pathlib import Path

def record(name):
    Path(os.environ["WHERE"], name).write_text(os.environ["PYTEST_XDIST_WORKER"])
"""


@pytest.mark.integration
def test_slow_tests_share_one_worker_and_own_groups_stay_apart(pytester, tmp_path, monkeypatch):
    where = tmp_path / "where"
    where.mkdir()
    monkeypatch.setenv("WHERE", str(where))
    pytester.makeconftest(POLICY)
    pytester.makepyfile(record=RECORD)
    for module in ("a", "b"):
        pytester.makepyfile(
            **{
                f"test_{module}": f"""
                import pytest
                from record import record

                @pytest.mark.slow
                def test_{module}_slow():
                    record("{module}_slow")

                @pytest.mark.slow
                @pytest.mark.xdist_group("readme")
                def test_{module}_own_group():
                    record("{module}_own")

                @pytest.mark.docker
                def test_{module}_docker():
                    record("{module}_docker")

                @pytest.mark.parametrize("i", range(3))
                def test_{module}_quick(i):
                    record(f"{module}_quick{{i}}")
                """
            }
        )
    pytester.makeini("[pytest]\nmarkers =\n    slow: x\n    docker: x\n")
    result = pytester.runpytest_subprocess(
        "-n", "3", "--dist", "loadgroup", "--no-loadscope-reorder", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=12)
    worker = {p.name: p.read_text() for p in where.iterdir()}
    assert len(set(worker.values())) > 1  # it did run in parallel
    assert worker["a_slow"] == worker["b_slow"]
    assert worker["a_own"] == worker["b_own"]
    assert worker["a_docker"] == worker["b_docker"]
    assert len({worker[f"a_quick{i}"] for i in range(3)}) == 1  # one module, one worker


def test_a_long_test_without_the_slow_marker_is_listed(pytester, monkeypatch):
    monkeypatch.setenv("SURREAL_TEST_SLOW_S", "0.2")
    pytester.makeconftest(POLICY)
    pytester.makepyfile(
        test_timing="""
        import time
        import pytest

        def busy(seconds):
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                pass

        def test_long_unmarked():
            busy(0.5)

        @pytest.mark.slow
        def test_long_marked():
            busy(0.5)

        def test_short():
            pass
        """
    )
    pytester.makeini("[pytest]\nmarkers =\n    slow: x\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*over 0 s without @pytest.mark.slow (1)*", "*test_long_unmarked"])
    assert "test_long_marked" not in result.stdout.str().split("without @pytest.mark.slow")[1]
