"""Every cloudwise command: --help without side effects, and its real effect on cloudwise.yaml."""

import pytest
from click.testing import CliRunner

from cloudwise import ClusterSpec
from cloudwise.cli import main

pytestmark = pytest.mark.timeout(60)

COMMANDS = [
    [],
    ["init"],
    ["machine-type"],
    ["render"],
    ["plan"],
    ["apply"],
    ["destroy"],
    ["output"],
    ["pool"],
    ["pool", "add"],
    ["pool", "remove"],
    ["pool", "edit"],
    ["pool", "list"],
]


def cw(*args, input=None, ok=True):
    result = CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "cloudwise")
def test_help_of_every_command_has_no_side_effects(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cw(*command, "--help")
    assert "Usage:" in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def aws_dir(tmp_path):
    cw(
        "-C",
        str(tmp_path),
        "init",
        "--provider",
        "aws",
        "--region",
        "us-west-2",
        "--name",
        "c1",
        "--preset",
        "minimal",
        "--no-input",
    )
    return tmp_path


def test_init_with_flags_writes_spec_terraform_and_next_steps(tmp_path):
    result = cw(
        "-C",
        str(tmp_path),
        "init",
        "--provider",
        "gcp",
        "--project",
        "proj",
        "--region",
        "us-central1",
        "--zone",
        "regional",
        "--name",
        "rl",
        "--preset",
        "surreal",
        "--pool",
        "name=eval,cpu=4,gpu_type=t4,gpu=1,max_nodes=2,label.team=rl",
        "--no-input",
    )
    spec = ClusterSpec.load(tmp_path)
    assert (spec.provider, spec.project, spec.region, spec.zone, spec.name) == (
        "gcp",
        "proj",
        "us-central1",
        None,
        "rl",
    )
    assert [p.name for p in spec.pools][-1] == "eval" and spec.pool("eval").labels == {"team": "rl"}
    assert {"versions.tf", "main.tf", "pools.tf", "outputs.tf"} <= {
        p.name for p in tmp_path.iterdir()
    }
    assert "cloudwise" in result.output and "apply" in result.output
    assert (
        "gcloud container clusters get-credentials rl --region us-central1 --project proj"
        in result.output
    )


def test_init_refuses_to_overwrite_and_rejects_bad_specs_before_writing(aws_dir, tmp_path_factory):
    result = cw(
        "-C",
        str(aws_dir),
        "init",
        "--provider",
        "aws",
        "--preset",
        "minimal",
        "--no-input",
        ok=False,
    )
    assert result.exit_code == 2 and "--force" in result.output
    empty = tmp_path_factory.mktemp("bad")
    result = cw(
        "-C",
        str(empty),
        "init",
        "--provider",
        "aws",
        "--region",
        "sa-east-1",
        "--preset",
        "custom",
        "--pool",
        "name=g,gpu_type=v100,gpu=1",
        "--no-input",
        ok=False,
    )
    assert result.exit_code == 2 and "region sa-east-1 offers no v100" in result.output
    assert list(empty.iterdir()) == []
    result = cw("init", "--provider", "gcp", "--no-input", ok=False)
    assert result.exit_code == 2 and "--project is required" in result.output


def test_pool_add_edit_remove_change_spec_and_terraform(aws_dir):
    cw(
        "-C",
        str(aws_dir),
        "pool",
        "add",
        "learner",
        "--cpu",
        "8",
        "--gpu-type",
        "V100",
        "--gpu",
        "1",
        "--max-nodes",
        "3",
        "--label",
        "team=rl",
        "--taint",
        "dedicated=learner:NoSchedule",
    )
    pool = ClusterSpec.load(aws_dir).pool("learner")
    assert (pool.gpu_type, pool.gpu, pool.max_nodes, pool.labels) == ("v100", 1, 3, {"team": "rl"})
    pools_tf = (aws_dir / "pools.tf").read_text()
    assert '"p3.2xlarge"' in pools_tf and '"dedicated"' in pools_tf

    cw("-C", str(aws_dir), "pool", "edit", "learner", "--gpu-type", "t4", "--spot")
    pool = ClusterSpec.load(aws_dir).pool("learner")
    assert (pool.gpu_type, pool.spot, pool.cpu) == ("t4", True, 8)
    assert '"g4dn.2xlarge"' in (aws_dir / "pools.tf").read_text()

    listing = cw("-C", str(aws_dir), "pool", "list").output
    assert "learner" in listing and "g4dn.2xlarge" in listing and "1xt4" in listing

    cw("-C", str(aws_dir), "pool", "remove", "learner")
    assert [p.name for p in ClusterSpec.load(aws_dir).pools] == ["default"]
    assert "learner" not in (aws_dir / "pools.tf").read_text()


def test_pool_changes_that_break_the_spec_leave_it_untouched(aws_dir):
    before = (aws_dir / "cloudwise.yaml").read_text(), (aws_dir / "pools.tf").read_text()
    for args, message in [
        (["add", "default", "--cpu", "2"], "exists"),
        (
            ["add", "x", "--cpu", "2", "--min-nodes", "5", "--max-nodes", "2"],
            "min_nodes (5) > max_nodes (2)",
        ),
        (["add", "x", "--gpu-type", "p100", "--gpu", "1"], "aws has no p100"),
        (["add", "x", "--gpu-type", "k80", "--gpu", "1"], "K80 GPUs are retired"),
        (["add", "x", "--cpu", "1000"], "closest"),
        (["edit", "default", "--machine-type", "m5.huge"], "unknown aws machine type"),
        (["edit", "nope", "--cpu", "2"], "no pool named 'nope'"),
        (["remove", "default"], "only pool"),
    ]:
        result = cw("-C", str(aws_dir), "pool", *args, ok=False)
        assert result.exit_code != 0 and message in result.output, (args, result.output)
    assert ((aws_dir / "cloudwise.yaml").read_text(), (aws_dir / "pools.tf").read_text()) == before


def test_dry_runs_check_and_show_but_write_nothing(aws_dir, tmp_path_factory):
    before = {p.name: p.read_text() for p in aws_dir.rglob("*") if p.is_file()}
    out = cw(
        "-C", str(aws_dir), "pool", "add", "gpu", "--gpu-type", "t4", "--gpu", "1", "--dry-run"
    ).output
    assert "(dry run, nothing written) Added pool 'gpu'. Nodes: g4dn.xlarge" in out
    out = cw("-C", str(aws_dir), "pool", "edit", "default", "--cpu", "16", "--dry-run").output
    assert "Nodes: c5.4xlarge" in out
    result = cw("-C", str(aws_dir), "pool", "remove", "default", "--dry-run", ok=False)
    assert "only pool" in result.output
    assert {p.name: p.read_text() for p in aws_dir.rglob("*") if p.is_file()} == before
    empty = tmp_path_factory.mktemp("dry")
    out = cw(
        "-C",
        str(empty),
        "init",
        "--provider",
        "aws",
        "--preset",
        "surreal",
        "--no-input",
        "--dry-run",
    ).output
    assert out.startswith("Would write") and "p3.8xlarge" in out
    assert list(empty.iterdir()) == []


def test_machine_type_prints_the_choice_and_why():
    out = cw(
        "machine-type", "--provider", "aws", "--cpu", "8", "--gpu-type", "v100", "--gpu", "1"
    ).output
    assert out.startswith("p3.2xlarge (8 vCPU, 61 GB, 1 x v100")
    assert "why: the cheapest of" in out and "next cheapest: p3.8xlarge" in out
    out = cw(
        "machine-type", "--provider", "gcp", "--cpu", "8", "--memory-gb", "30", "--gpu-type", "v100"
    ).output
    assert out.startswith("n1-standard-8 + 1 x v100")
    result = cw("machine-type", "--provider", "aws", "--cpu", "1000", ok=False)
    assert result.exit_code == 2 and "closest: c5.24xlarge" in result.output


def test_render_check_detects_hand_edits(aws_dir):
    assert "up to date" in cw("-C", str(aws_dir), "render", "--check").output
    (aws_dir / "pools.tf").write_text("# edited\n")
    result = cw("-C", str(aws_dir), "render", "--check", ok=False)
    assert result.exit_code == 1 and "pools.tf" in result.output
    cw("-C", str(aws_dir), "render")
    assert "up to date" in cw("-C", str(aws_dir), "render", "--check").output


def test_apply_and_destroy_ask_first(aws_dir):
    for verb in ("apply", "destroy"):
        result = cw("-C", str(aws_dir), verb, input="n\n", ok=False)
        assert result.exit_code == 1 and "Aborted" in result.output
    assert not (aws_dir / ".terraform").exists()


def test_commands_without_a_spec_say_how_to_start(tmp_path):
    result = cw("-C", str(tmp_path), "pool", "list", ok=False)
    assert result.exit_code == 2 and "cloudwise init" in result.output


def test_plugin_dir_is_documented_and_checked(tmp_path):
    text = " ".join(cw("--help").output.split())
    assert "--plugin-dir" in text and "CLOUDWISE_PLUGIN_DIR" in text
    assert "registry.terraform.io/hashicorp/aws" in text
    result = cw("--plugin-dir", str(tmp_path / "nope"), "render", ok=False)
    assert result.exit_code == 2 and "is not a folder" in result.output


def test_machine_type_says_when_the_machine_is_larger_than_asked_and_prices_the_region():
    out = cw("machine-type", "--provider", "aws", "--gpu-type", "a100", "--gpu", "1").output
    assert out.startswith("p4d.24xlarge (96 vCPU, 1152 GB, 8 x a100")
    assert "note: p4d.24xlarge is larger than the request (8 GPUs, asked for 1)" in out
    out = cw("machine-type", "--provider", "aws", "--region", "eu-central-1", "--cpu", "2").output
    assert "c5.large (2 vCPU, 4 GB, $0.10/h)" in out  # 0.085 x 1.198
    assert "eu-central-1 list prices estimated as 1.198 x the base region's" in out


def test_init_without_a_folder_writes_into_a_new_folder_named_after_the_cluster(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    flags = ["--provider", "aws", "--region", "us-west-2", "--preset", "minimal", "--no-input"]
    out = cw("init", "--name", "c2", *flags).output
    assert [p.name for p in tmp_path.iterdir()] == ["cloudwise-c2"]  # nothing in the cwd itself
    folder = tmp_path / "cloudwise-c2"
    assert ClusterSpec.load(folder).name == "c2" and (folder / "main.tf").is_file()
    assert (
        out.startswith("Wrote cloudwise-c2/cloudwise.yaml")
        and "cloudwise -C cloudwise-c2 plan" in out
    )
    out = cw("init", "--name", "c3", "--dir", str(tmp_path / "mine"), *flags).output
    assert ClusterSpec.load(tmp_path / "mine").name == "c3"
    assert f"Wrote {tmp_path / 'mine' / 'cloudwise.yaml'}" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cloudwise-c2", "mine"]
    added = cw("-C", "cloudwise-c2", "pool", "add", "eval", "--cpu", "4").output
    assert "`cloudwise -C cloudwise-c2 plan`" in added
