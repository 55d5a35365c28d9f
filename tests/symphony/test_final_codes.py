"""RestartPolicy.final_codes: exit codes after which a process is never restarted (it ended for
a reason a restart cannot fix, e.g. surreal's learner whose checkpoint a full disk refused)."""

from __future__ import annotations

import pytest

from symphony import Experiment, Process, RestartPolicy
from symphony.errors import SpecError


def test_a_final_exit_code_is_never_restarted_while_other_failures_and_kills_are():
    policy = RestartPolicy("on-failure", max_restarts=3, final_codes=(73,))
    assert not policy.should_restart(73, 0)
    assert policy.should_restart(1, 0) and policy.should_restart(-9, 0)
    assert not RestartPolicy("always", final_codes=[73]).should_restart(73, 0)
    with pytest.raises(SpecError, match="final_codes"):
        RestartPolicy("on-failure", final_codes=("73",))


def test_final_codes_survive_the_spec_round_trip_and_specs_without_them_read_as_before():
    policy = RestartPolicy("on-failure", final_codes=(73,))
    exp = Experiment("x").add(Process("a", ["true"], restart=policy), Process("b", ["true"]))
    data = exp.to_dict()
    again = Experiment.from_dict(data)
    assert again.process("a").restart.final_codes == (73,)
    assert again.process("b").restart.final_codes == ()
    assert "final_codes" not in str(Process("b", ["true"]).to_dict())
