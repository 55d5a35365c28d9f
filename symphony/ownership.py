"""Who owns an experiment, and the rules that keep one user's launch off another user's run.

The owner is the login name of the process's real uid (`pwd.getpwuid(os.getuid())`), never
`$USER`/`$LOGNAME` alone (those are plain environment variables); the uid is recorded beside it.
`SYMPHONY_OWNER` overrides the name, for service accounts and for tests that play two users
on one machine. Ownership here guards against accidents (a teammate's `delete` of the wrong
run, a relaunch under a taken name); the access control that holds against a determined user is
the backend's own: file permissions of a shared state directory, Kubernetes RBAC, Slurm's
refusal to cancel another uid's jobs.

The rules every backend follows:

- a launch never modifies or deletes anything it did not create: a name that is taken on the
  backend (a namespace, a compose project, live Slurm jobs) refuses the launch with
  `LaunchRefused`, and the launcher then removes only its own fresh record;
- `delete` and `exec` of another owner's experiment are refused unless `--force`;
- experiment names that are Kubernetes system namespaces (or otherwise reserved) are refused.
"""

from __future__ import annotations

import os
import pwd
import re

from symphony.errors import NotOwner, SpecError

OWNER_ENV = "SYMPHONY_OWNER"

#: Names that are never experiment names: Kubernetes' own namespaces (an experiment is a
#: namespace on kube), symphony's secrets namespace, and names that read as something else.
RESERVED_NAMES = frozenset(
    {
        "default",
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "symphony-secrets",
        "symphony-system",
        "all",
        "none",
    }
)


def current_uid() -> int:
    """The real uid of this process."""
    return os.getuid()


def login_name(uid: int | None = None) -> str:
    """The passwd login name of `uid` (default: this process's), or the number if it has none."""
    uid = current_uid() if uid is None else uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # no passwd entry (some containers)
        return str(uid)


def current_owner() -> str:
    """The owner recorded for what this process launches: $SYMPHONY_OWNER, else the login name."""
    return os.environ.get(OWNER_ENV, "").strip() or login_name()


def same_owner(a: str | None, b: str | None) -> bool:
    """True when two owner names denote one user (labels may have lost characters)."""
    if not a or not b:
        return False
    norm = lambda s: re.sub(r"[^A-Za-z0-9_.-]+", "-", s).strip("-_.")[:63]  # noqa: E731
    return norm(a) == norm(b)


def check_owner(owner: str | None, action: str, experiment: str, force: bool = False) -> None:
    """NotOwner unless the current user owns `experiment` (or `force` is given)."""
    if force or same_owner(owner, current_owner()):
        return
    raise NotOwner(
        f"experiment {experiment!r} belongs to {owner or 'an unknown owner'}, not to "
        f"{current_owner()}; refusing to {action} it (add --force to {action} it anyway)"
    )


def check_experiment_name(name: str) -> str:
    """`name` unless it is reserved (a Kubernetes system namespace and the like)."""
    if name in RESERVED_NAMES or name.startswith("kube-"):
        raise SpecError(
            f"{name!r} is a reserved name (Kubernetes system namespaces, `kube-*`, "
            f"{', '.join(sorted(RESERVED_NAMES))}); give the experiment another name (--name)"
        )
    return name
