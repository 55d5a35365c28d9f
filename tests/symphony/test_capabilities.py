"""Each backend declares what its processes share with the launching machine and how it is
driven (`symphony.backends.base.Capabilities`): programs above symphony ask these instead of
comparing backend names, so what they say must be true of the backend."""

from __future__ import annotations

import dataclasses

import pytest

from symphony.backends import INTERNAL, backend_class, backend_names, capabilities
from symphony.backends.base import Backend, Capabilities
from symphony.errors import BackendError
from symphony.kube.naming import SECRETS_ROOT
from symphony.records import Records

EXPECTED = {
    "local": Capabilities(
        single_machine=True, shares_launch_disk=True, fork_preload=True, stop_grace_option="grace_s"
    ),
    "tmux": Capabilities(single_machine=True, shares_launch_disk=True, stop_grace_option="grace_s"),
    "test": Capabilities(single_machine=True, shares_launch_disk=True),
    "slurm": Capabilities(shares_launch_disk=True, plan_is_submission=True),
    "compose": Capabilities(
        runs_in_image=True,
        env_file_option="env_file",
        stop_grace_option="stop_grace_s",
        plan_is_submission=True,
        logs_on_launch_disk=False,
    ),
    "kube": Capabilities(
        runs_in_image=True,
        secret_mount_root=SECRETS_ROOT,
        run_volume_option="volume_path",
        stays_attached=False,
        plan_is_submission=True,
        logs_on_launch_disk=False,
    ),
}


@pytest.mark.parametrize("name", backend_names())
def test_every_backend_declares_its_own_capabilities(name):
    cls = backend_class(name)
    assert "capabilities" in vars(cls), f"{cls.__name__} inherits Backend's defaults"
    assert capabilities(name) is cls.capabilities
    assert capabilities(name) == EXPECTED[name]


@pytest.mark.parametrize("name", backend_names())
def test_what_the_capabilities_say_holds_together(name):
    caps = capabilities(name)
    if caps.single_machine:  # every process here: they see this machine's files
        assert caps.shares_launch_disk and not caps.runs_in_image
    if caps.runs_in_image:  # a container sees the image's files, not this machine's
        assert not caps.shares_launch_disk and not caps.single_machine
    assert caps.fork_preload <= caps.single_machine
    # the processes' output is kept here exactly where they share this machine's disk
    assert caps.logs_on_launch_disk == caps.shares_launch_disk
    assert (caps.secret_mount_root or "/").startswith("/")


@pytest.mark.parametrize("name", backend_names())
def test_every_option_a_capability_names_is_one_the_backend_takes(name, tmp_path):
    caps = capabilities(name)
    values = {
        caps.stop_grace_option: 7,
        caps.env_file_option: str(tmp_path / "private.env"),
        caps.run_volume_option: "/runs",
    }
    options = {key: value for key, value in values.items() if key}
    if caps.secret_mount_root:
        options["secret_files"] = {"keys": str(tmp_path)}
    backend = backend_class(name)(records=Records(tmp_path / "home"), **options)
    assert isinstance(backend, Backend)
    with pytest.raises(BackendError, match="unknown"):  # and refuses one it does not
        backend_class(name)(records=Records(tmp_path / "home"), no_such_option=1)


def test_a_cluster_spec_is_only_the_kube_backends_and_only_when_given(tmp_path):
    records = Records(tmp_path / "home")
    spec = str(tmp_path / "cloudwise.yaml")
    assert backend_class("kube")(records=records, cluster_spec=spec).cluster_spec() == spec
    assert backend_class("kube")(records=records).cluster_spec() is None
    assert backend_class("local")(records=records).cluster_spec() is None


def test_the_base_defaults_assume_nothing_is_shared_and_the_test_backend_is_not_offered():
    assert Backend.capabilities == Capabilities()
    assert not any(
        getattr(Capabilities(), f.name)
        for f in dataclasses.fields(Capabilities)
        if f.name not in ("stays_attached", "logs_on_launch_disk")
    )
    assert INTERNAL == ("test",) and "test" in backend_names()
    assert backend_names(internal=False) == [n for n in backend_names() if n != "test"]
