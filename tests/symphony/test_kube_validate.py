"""Every object the kube backend generates for the examples passes strict kubernetes-validate
(unknown fields are errors) against the OpenAPI schemas of Kubernetes 1.29 through 1.33."""

import importlib.util
from pathlib import Path

import pytest
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate")

from symphony.kube.backend import KubeBackend  # noqa: E402
from symphony.kube.secrets import secret_objects  # noqa: E402

pytestmark = pytest.mark.timeout(120)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "03_kube"
VERSIONS = ["1.29", "1.30", "1.31", "1.32", "1.33"]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"kube_validate_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generated_objects(tmp_path: Path) -> list[dict]:
    """What the user reviews (the dry-run YAML files, read back) plus the Secrets launch creates."""
    objects = []
    secret = tmp_path / "key.json"
    secret.write_text('{"type": "service_account"}')
    for name in ("echo", "ppo_gpu"):
        module = _load(name)
        out = tmp_path / name
        backend = KubeBackend(
            cluster_spec=str(EXAMPLES / "cloudwise.yaml"),
            secrets=getattr(module, "SECRETS", {}),
            output=str(out),
            secret_files={"gcs-credentials": str(secret)},
        )
        exp = module.make_experiment()
        backend.plan(exp)
        objects += [yaml.safe_load(p.read_text()) for p in sorted(out.iterdir())]
        options = backend.render_options()
        objects += secret_objects(None, backend.config, exp, options.namespace or exp.name, options)
    objects += KubeBackend(image="busybox", shm_gb=2.5, secrets={"once": ["licence"]}).manifests(
        every_field()
    )
    return objects


def every_field():
    """The fields the examples leave out: cwd, a shell command, `never`, 0-digit names, CPU millis."""
    from symphony import Experiment, Process, ProcessGroup, Resources, RestartPolicy

    once = Process(
        "once",
        "echo $SYMPH_0DATA_ADDR > /tmp/x",
        cwd="/work",
        resources=Resources(cpu=0.25, memory_gb=0.5),
        restart=RestartPolicy("never"),
    )
    return Experiment("every-field").add(
        ProcessGroup(
            "pair", [once.connects("0data"), Process("server", ["sleep", "inf"]).binds("0data")]
        )
    )


def test_examples_cover_every_kind_the_backend_creates(tmp_path):
    kinds = {o["kind"] for o in generated_objects(tmp_path)}
    assert kinds == {"Namespace", "NetworkPolicy", "Service", "Deployment", "Job", "Secret"}


@pytest.mark.parametrize("version", VERSIONS)
def test_every_generated_object_validates_strictly(tmp_path, version):
    objects = generated_objects(tmp_path)
    assert len(objects) > 10
    for obj in objects:
        try:
            checked = kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            where = ".".join(str(p) for p in err.path)
            pytest.fail(
                f"{obj['kind']}/{obj['metadata']['name']} fails {version} at {where}: {err.message}"
            )
        assert checked == version  # validated against that exact version's schema


def test_strict_validation_rejects_an_unknown_field(tmp_path):
    """The check can fail: a misspelt field in a generated Deployment is an error."""
    deployment = next(o for o in generated_objects(tmp_path) if o["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, VERSIONS[0], strict=True)
