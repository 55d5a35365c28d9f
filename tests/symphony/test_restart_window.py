"""Restart limits count within a time window: occasional crashes over a long run keep coming back,
a crash loop still ends."""

import pytest

from symphony import Experiment, Process, RestartPolicy
from symphony.errors import SpecError
from symphony.resources import ending, outside_kill, restart_mark
from symphony.spec import Experiment as SpecExperiment

pytestmark = pytest.mark.timeout(120)


def test_only_restarts_inside_the_window_count():
    policy = RestartPolicy("on-failure", max_restarts=2, window_s=10.0)
    times = [0.0, 5.0, 12.0]
    assert policy.counted(times, now=14.0) == 2 and times == [5.0, 12.0]
    assert policy.counted(times, now=30.0) == 0
    lifetime = RestartPolicy("on-failure", max_restarts=2)
    assert lifetime.counted([0.0, 5.0, 12.0], now=1e9) == 3
    with pytest.raises(SpecError, match="window_s"):
        RestartPolicy("on-failure", window_s=0)


def test_window_survives_the_yaml_round_trip():
    exp = Experiment("w").add(
        Process("p", ["true"], restart=RestartPolicy("on-failure", 3, 0.5, 5.0, window_s=60.0))
    )
    again = SpecExperiment.from_yaml(exp.to_yaml())
    assert again.process("p").restart.window_s == 60.0


def _crasher(tmp_path, tries: int, gap_s: float) -> list[str]:
    """A process that runs `gap_s` seconds and fails, `tries` times, then exits 0."""
    count = tmp_path / "count"
    script = (
        f"n=$(cat {count} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {count}; "
        f"sleep {gap_s}; [ $n -gt {tries} ] && exit 0; exit 1"
    )
    return ["sh", "-c", script]


@pytest.mark.integration
def test_spread_out_crashes_keep_restarting_past_the_lifetime_limit(records, tmp_path):
    import symphony

    # 5 crashes, each after 0.4 s of running; at most 1 restart per 0.3 s window counts
    policy = RestartPolicy("on-failure", max_restarts=1, backoff_s=0.01, window_s=0.3)
    exp = Experiment("window").add(Process("w", _crasher(tmp_path, 5, 0.4), restart=policy))
    handle = symphony.launch(exp, "local", records=records)
    status = handle.wait(timeout=90)
    proc = status.process("w")
    assert (proc.state, proc.exit_code, proc.restarts) == ("exited", 0, 5)
    handle.delete()


def test_a_crash_loop_still_ends_at_the_limit_within_the_window(records, tmp_path):
    import symphony

    policy = RestartPolicy("on-failure", max_restarts=2, backoff_s=0.01, window_s=600.0)
    exp = Experiment("loop").add(Process("w", _crasher(tmp_path, 100, 0.0), restart=policy))
    handle = symphony.launch(exp, "local", records=records)
    status = handle.wait(timeout=90)
    assert (status.process("w").state, status.process("w").restarts) == ("failed", 2)
    handle.delete()


def _killed(tmp_path, tries: int, sig: str) -> list[str]:
    """A process that dies of `sig` (as if killed from outside), `tries` times, then exits 0."""
    count = tmp_path / "count"
    script = (
        f"n=$(cat {count} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {count}; "
        f"[ $n -gt {tries} ] && exit 0; kill -{sig} $$"
    )
    return ["sh", "-c", script]


def test_kills_from_outside_never_use_up_the_limit_and_describe_shows_the_last_end(
    records, tmp_path
):
    import symphony
    from symphony.testing import cli

    assert not RestartPolicy.counts(-9) and not RestartPolicy.counts(-15)
    assert RestartPolicy.counts(1) and RestartPolicy.counts(-11)  # SIGSEGV: its own fault
    policy = RestartPolicy("on-failure", max_restarts=1, backoff_s=0.01, window_s=600.0)
    exp = Experiment("kills").add(Process("w", _killed(tmp_path, 4, "KILL"), restart=policy))
    handle = symphony.launch(exp, "local", records=records)
    proc = handle.wait(timeout=90).process("w")
    assert (proc.state, proc.exit_code, proc.restarts) == ("exited", 0, 4)
    assert proc.last_end == "exited with 0"
    log = handle.logs("w")
    assert log.count("killed by SIGKILL; restarting in") == 4 and "restart 4 (0/1 crashes" in log
    handle.delete()
    # a process that dies of its own signal is a crash: the loop ends at the limit
    (tmp_path / "count").unlink()
    exp = Experiment("segv").add(Process("w", _killed(tmp_path, 100, "SEGV"), restart=policy))
    handle = symphony.launch(exp, "local", records=records)
    proc = handle.wait(timeout=90).process("w")
    assert (proc.state, proc.restarts, proc.last_end) == ("failed", 1, "killed by SIGSEGV")
    shown = cli("describe", "segv").stdout  # SYMPHONY_HOME: the fixture's
    assert "LAST END" in shown and "killed by SIGSEGV" in shown, shown
    handle.delete()


def test_an_exit_with_128_plus_an_outside_signal_is_a_stop_not_a_crash():
    """A process that handles SIGTERM and exits 143 (as surreal's do) was stopped from outside,
    as one killed by it (-15) was: never counted against its restarts, and said so."""
    assert [outside_kill(c) for c in (143, 130, 137, 129, -15)] == [15, 2, 9, 1, 15]
    assert [outside_kill(c) for c in (None, 0, 1, 73, 75, 139, 128, -11)] == [None] * 8
    assert not RestartPolicy.counts(143) and not RestartPolicy.counts(130)
    assert RestartPolicy.counts(139)  # 128 + SIGSEGV: its own fault
    assert RestartPolicy("on-failure").should_restart(143, 0)  # a stop before its end: again
    assert not RestartPolicy("on-failure", final_codes=(75,)).should_restart(75, 0)
    assert ending(143) == "stopped by SIGTERM, exit code 143"
    assert ending(1) == "exited with 1" and ending(-9) == "killed by SIGKILL"
    assert restart_mark(143, 2) == "--- restarted after exit code 143 (SIGTERM) (attempt 2) ---"
    assert restart_mark(3, 2) == "--- restarted after exit code 3 (attempt 2) ---"
