"""tests/conftest.py: a skipped test fails the run, unless it is marked GPU-only (then it is listed)."""

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

POLICY = (Path(__file__).parent / "conftest.py").read_text()


@pytest.mark.integration
def test_skips_for_missing_tools_fail_and_gpu_skips_are_listed(pytester):
    pytester.makeconftest(POLICY)
    pytester.makepyfile(
        test_tools="""
        import shutil
        import pytest

        @pytest.fixture
        def tool():
            pytest.skip("frobnicate is not on PATH")

        def test_fixture_skip(tool):
            pass

        @pytest.mark.skipif(True, reason="no terraform mirror")
        def test_skipif():
            pass

        def test_body_skip():
            pytest.skip("tmux is not installed")

        @pytest.mark.gpu
        def test_on_gpu():
            pytest.skip("no CUDA device")

        @pytest.mark.xfail(reason="known bug")
        def test_expected_failure():
            assert False

        def test_passes():
            pass
        """,
        test_missing_module="""
        import pytest
        pytest.importorskip("a_module_nobody_installed")
        """,
    )
    check_outcomes(pytester.runpytest_subprocess("--continue-on-collection-errors", "-rA"))
    # `make test` runs on pytest-xdist workers: the same verdicts, and the GPU skip still listed.
    check_outcomes(
        pytester.runpytest_subprocess(
            "--continue-on-collection-errors", "-rA", "-n", "2", "--dist", "loadgroup"
        )
    )


def check_outcomes(result) -> None:
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped") == 1  # the GPU-only test, and nothing else
    assert outcomes.get("passed") == 1 and outcomes.get("xfailed") == 1
    assert outcomes.get("failed") == 1  # the skip inside the test body
    assert outcomes.get("errors") == 3  # the fixture skip and skipif (setup), the importorskip
    text = result.stdout.str()
    assert "frobnicate is not on PATH" in text and "no terraform mirror" in text
    assert "tmux is not installed" in text
    assert "a_module_nobody_installed" in text
    assert "GPU-only tests skipped (1)" in text
    assert "test_tools.py::test_on_gpu: no CUDA device" in text
    assert result.ret != 0
