"""The SYMPH_* address contract and `symphony.address`."""

import os
import socket
import time

import pytest

from symphony import AddressError, Experiment, Process, address, addresses
from symphony.addresses import ephemeral_ports, fixed_endpoints, local_endpoints, process_env

pytestmark = pytest.mark.timeout(30)


def _exp() -> Experiment:
    return (
        Experiment("e")
        .add(
            Process("replay-server", "x").binds("replay-0"),
            Process("learner", "y").connects("replay-0").binds("params"),
        )
        .validate()
    )


def test_env_names_are_upper_case_with_underscores():
    exp = _exp()
    env = process_env(
        exp, exp.process("learner"), {"replay-0": ("h1", 5000), "params": ("h2", 6000)}
    )
    assert env["SYMPH_REPLAY_0_HOST"] == "h1"
    assert env["SYMPH_REPLAY_0_PORT"] == "5000"
    assert env["SYMPH_REPLAY_0_ADDR"] == "h1:5000"
    assert env["SYMPH_PARAMS_ADDR"] == "h2:6000"
    assert address("replay-0", env).tcp == "tcp://h1:5000"
    assert address("params", env).bind_tcp == "tcp://*:6000"


def test_address_of_an_undeclared_service_fails_with_the_fix():
    exp = _exp()
    env = process_env(exp, exp.process("replay-server"), local_endpoints(exp))
    with pytest.raises(AddressError, match=r"add `.connects\('params'\)`"):
        address("params", env)
    with pytest.raises(AddressError, match="symphony launch"):
        address("params", {})


def test_local_endpoints_are_distinct_free_ports_bound_on_loopback():
    exp = _exp()
    endpoints = local_endpoints(exp)
    assert len({a.port for a in endpoints.values()}) == 2
    for addr in endpoints.values():
        assert addr.bind_tcp == f"tcp://127.0.0.1:{addr.port}"
        with socket.socket() as sock:
            sock.bind((addr.host, addr.port))  # free: binding works
        # outside the range the kernel takes outgoing connections' local ports from, so a busy
        # machine's clients cannot take the port before the service's process binds it
        assert addr.port < ephemeral_ports()[0]


def test_fixed_endpoints_use_the_host_of_each_binder():
    exp = _exp()
    endpoints = fixed_endpoints(exp, lambda service, proc: f"{proc}.svc", base_port=7000)
    assert endpoints["replay-0"].addr == "replay-server.svc:7000"
    assert endpoints["params"].addr == "learner.svc:7001"


def test_a_port_handed_out_is_not_handed_out_again_while_its_claim_lasts(monkeypatch, tmp_path):
    """Two runs planned at the same moment must not both get a port that neither has bound
    yet: `free_port` claims each port it hands out, machine-wide, for CLAIM_S seconds."""
    monkeypatch.setattr(addresses.tempfile, "gettempdir", lambda: str(tmp_path))
    low = addresses.ephemeral_ports()[0]
    monkeypatch.setattr(addresses, "SERVICE_PORT_SPAN", 1000)  # 1,000 ports: a small pool
    given = [addresses.free_port() for _ in range(300)]  # none is bound in between
    assert len(set(given)) == len(given)
    assert all(low - 1000 <= port < low for port in given)
    claimed = given[0]
    assert not addresses._claim(claimed)  # another launch asking now is refused it
    old = time.time() - addresses.CLAIM_S - 1
    os.utime(tmp_path / f"symphony-ports-{os.getuid()}" / str(claimed), (old, old))
    assert addresses._claim(claimed)  # a claim that has run out is taken over
