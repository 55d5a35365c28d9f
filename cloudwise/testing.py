"""Test helpers: terraform offline (provider mirror), and an AWS API emulator (moto) on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterable, Iterator
from pathlib import Path

MIRROR_CANDIDATES = (
    "/opt/tf-plugins",
    "/usr/share/terraform/plugins",
    "~/.terraform.d/plugins",
    "~/.local/share/terraform/plugins",
)
AWS_PROVIDER = "registry.terraform.io/hashicorp/aws"
EMULATED_SERVICES = ("autoscaling", "ec2", "eks", "iam", "sts")
OVERRIDE_FILE = "cloudwise_emulator_override.tf"


def find_provider_mirror(provider: str = AWS_PROVIDER) -> Path | None:
    """The terraform filesystem mirror holding `provider` (env CLOUDWISE_TF_MIRROR first), or None."""
    candidates = [os.environ.get("CLOUDWISE_TF_MIRROR", ""), *MIRROR_CANDIDATES]
    for candidate in filter(None, candidates):
        root = Path(candidate).expanduser()
        if (root / provider).is_dir():
            return root
    return None


def write_mirror_cli_config(
    path: str | Path, mirror: str | Path, cache_dir: str | Path | None = None
) -> Path:
    """A terraform CLI config that installs hashicorp providers from `mirror` only (no network).

    With `cache_dir`, terraform copies the (large) provider there once and links it into every
    working directory after that, instead of copying it into each.
    """
    path = Path(path)
    cache = f'plugin_cache_dir = "{cache_dir}"\n' if cache_dir else ""
    path.write_text(
        cache + "provider_installation {\n"
        "  filesystem_mirror {\n"
        f'    path    = "{mirror}"\n'
        '    include = ["registry.terraform.io/hashicorp/*"]\n'
        "  }\n"
        "  direct {\n"
        '    exclude = ["registry.terraform.io/hashicorp/*"]\n'
        "  }\n"
        "}\n"
    )
    return path


def write_aws_emulator_override(
    directory: str | Path,
    endpoint: str,
    node_groups: Iterable[str] = (),
    without_addons: Iterable[str] = (),
    without: Iterable[str] = (),
    without_asg_tags: Iterable[str] = (),
) -> Path:
    """Point the rendered `provider "aws"` at an emulator, with fake credentials.

    Written as a terraform override file next to the rendered ones, so the rendered files stay
    exactly what users get; delete the file to talk to real AWS again. moto gives every node group
    an SSH key nobody asked for, which would force terraform to replace each group on the next
    apply; for the pools named in `node_groups` the override tells terraform to ignore that.
    moto serves no EKS add-on API: the `aws_eks_addon` resources named in `without_addons`
    (e.g. "vpc_cni") get `count = 0`, so an apply against moto leaves them out; so do the
    resources named `TYPE.NAME` in `without` (e.g. "aws_eks_pod_identity_association.x", an API
    moto lacks). moto's node groups name an Auto Scaling group that it never creates: for the pools
    in `without_asg_tags` the `aws_autoscaling_group_tag` resources are left out (`for_each = {}`).
    """
    endpoints = "\n".join(f'    {s} = "{endpoint}"' for s in EMULATED_SERVICES)
    text = (
        "# Written by cloudwise.testing: sends the aws provider to a local emulator.\n"
        'provider "aws" {\n'
        '  access_key                  = "testing"\n'
        '  secret_key                  = "testing"\n'
        "  skip_credentials_validation = true\n"
        "  skip_requesting_account_id  = true\n"
        "  skip_metadata_api_check     = true\n"
        "  skip_region_validation      = true\n"
        "  endpoints {\n"
        f"{endpoints}\n"
        "  }\n"
        "}\n"
    )
    for pool in node_groups:
        text += (
            f'\nresource "aws_eks_node_group" "{pool.replace("-", "_")}" {{\n'
            "  lifecycle {\n"
            "    ignore_changes = [remote_access, scaling_config[0].desired_size]\n"
            "  }\n"
            "}\n"
        )
    for addon in without_addons:
        text += f'\nresource "aws_eks_addon" "{addon}" {{\n  count = 0\n}}\n'
    for address in without:
        rtype, name = address.split(".")
        text += f'\nresource "{rtype}" "{name}" {{\n  count = 0\n}}\n'
    for pool in without_asg_tags:
        name = pool.replace("-", "_")
        text += f'\nresource "aws_autoscaling_group_tag" "{name}" {{\n  for_each = {{}}\n}}\n'
    path = Path(directory) / OVERRIDE_FILE
    path.write_text(text)
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """Run moto's AWS emulator on 127.0.0.1 in this process; yields its endpoint URL, stops after.

    Requests are answered on threads, as moto's own ThreadedMotoServer does, but one at a time:
    moto's backends are not thread-safe (its Auto Scaling `create_or_update_tags` reads a group's
    tag list, copies it and writes it back, so two tag requests at once lose one), and terraform
    sends up to 10 requests at once. Real AWS has no such race; the emulator must not invent one.
    """
    import logging
    import threading

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    # EKS roles attach AWS-managed policies; moto only knows them when asked to load them.
    os.environ.setdefault("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    app, lock = DomainDispatcherApplication(create_backend_app), threading.Lock()

    def one_at_a_time(environ, start_response):
        with lock:  # moto builds the whole response inside the call
            return app(environ, start_response)

    port = free_port()
    server = make_server(
        "127.0.0.1", port, one_at_a_time, threaded=True, request_handler=MotoRequestHandler
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        thread.join()
