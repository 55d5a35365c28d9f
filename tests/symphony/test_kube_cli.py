"""`symphony` commands on the kube backend, end to end through the CLI against a test endpoint."""

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

pytest.importorskip("kmock")

from symphony.cli import main  # noqa: E402
from symphony.kube.testing_kube import KubeEndpoint  # noqa: E402

pytestmark = pytest.mark.timeout(60)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "03_kube"


def run(*args: str):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result


def test_dry_run_writes_the_manifests_and_touches_no_cluster(symphony_home, tmp_path, monkeypatch):
    out = tmp_path / "manifests"
    config = tmp_path / "config.yaml"
    # a host nobody listens on: any API call would fail the command
    config.write_text(
        yaml.safe_dump(
            {"backend_options": {"kube": {"output": str(out), "host": "http://127.0.0.1:9"}}}
        )
    )
    monkeypatch.setenv("SYMPHONY_CONFIG", str(config))
    result = run("launch", str(EXAMPLES / "echo.py"), "--backend", "kube", "--dry-run")
    assert result.exit_code == 0, result.output
    printed = list(yaml.safe_load_all(result.output))
    files = sorted(out.iterdir())
    assert [f.name for f in files][:2] == [
        "00-namespace-echo.yaml",
        "01-networkpolicy-symphony-experiment-only.yaml",
    ]
    assert [yaml.safe_load(f.read_text()) for f in files] == printed
    assert {o["kind"] for o in printed} >= {
        "Namespace",
        "Service",
        "Deployment",
        "Job",
        "NetworkPolicy",
    }
    assert not (symphony_home / "experiments").exists()  # no record either


def test_launch_list_describe_logs_delete_through_the_cli(symphony_home, monkeypatch):
    with KubeEndpoint() as endpoint:
        monkeypatch.setenv("SYMPHONY_KUBE_HOST", endpoint.url)
        monkeypatch.setenv("SYMPHONY_OWNER", "alice")
        result = run("launch", str(EXAMPLES / "echo.py"), "-b", "kube", "--detach")
        assert result.exit_code == 0, result.output
        assert "echo" in endpoint.namespaces

        endpoint.add_pod(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "server-5d8",
                    "namespace": "echo",
                    "labels": {
                        "symphony.io/experiment": "echo",
                        "symphony.io/group": "server",
                        "app.kubernetes.io/managed-by": "symphony",
                    },
                },
                "spec": {"nodeName": "gke-cpu-1", "containers": [{"name": "server", "image": "i"}]},
                "status": {
                    "phase": "Running",
                    "containerStatuses": [
                        {
                            "name": "server",
                            "ready": True,
                            "restartCount": 1,
                            "image": "i",
                            "imageID": "",
                            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                        }
                    ],
                },
            }
        )
        endpoint.write_log("echo", "server-5d8", "server", "echo server on 7000\n")

        listed = run("list", "--backend", "kube")
        assert listed.exit_code == 0 and "echo" in listed.output and "alice" in listed.output
        described = run("describe", "echo")
        assert described.exit_code == 0, described.output
        assert "server-5d8 on gke-cpu-1" in described.output and "running" in described.output
        logs = run("logs", "echo", "server")
        assert logs.exit_code == 0 and logs.output == "echo server on 7000\n"
        deleted = run("delete", "echo")
        assert deleted.exit_code == 0, deleted.output
        assert "echo" not in endpoint.namespaces
        assert not (symphony_home / "experiments" / "echo").exists()


def test_kube_options_are_checked(symphony_home, tmp_path):
    result = CliRunner().invoke(
        main, ["launch", str(EXAMPLES / "echo.py"), "-b", "kube", "--detach", "-o", "imagee=x"]
    )
    assert result.exit_code != 0
    assert "imagee" in result.output and "image" in result.output
