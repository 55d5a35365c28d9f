"""Requests map to the cheapest machine that fits; impossible ones name the closest types."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudwise.catalog import Catalog, fits_request, oversize_note
from cloudwise.errors import NoMachineFits, SpecError
from cloudwise.spec import NodePoolSpec

pytestmark = pytest.mark.timeout(30)


def pool(**kw) -> NodePoolSpec:
    return NodePoolSpec("p", **kw)


# (provider, region, zone, request, machine type, attached GPUs)
TABLE = [
    ("aws", "us-west-2", None, dict(cpu=2), "c5.large", 0),
    ("aws", "us-west-2", None, dict(cpu=8), "c5.2xlarge", 0),
    ("aws", "us-west-2", None, dict(cpu=8, memory_gb=30), "m5.2xlarge", 0),
    ("aws", "us-west-2", None, dict(cpu=4, memory_gb=32), "r5.xlarge", 0),
    ("aws", "us-west-2", None, dict(cpu=40), "c5.12xlarge", 0),
    ("aws", "us-west-2", None, dict(cpu=8, gpu_type="v100", gpu=1), "p3.2xlarge", 0),
    ("aws", "us-west-2", None, dict(cpu=32, gpu_type="v100", gpu=4), "p3.8xlarge", 0),
    ("aws", "us-west-2", None, dict(gpu_type="v100", gpu=2), "p3.8xlarge", 0),
    ("aws", "us-west-2", None, dict(cpu=8, gpu_type="t4", gpu=1), "g4dn.2xlarge", 0),
    ("aws", "us-west-2", None, dict(cpu=48, gpu_type="t4", gpu=4), "g4dn.12xlarge", 0),
    ("aws", "us-west-2", None, dict(cpu=4, gpu_type="a10g", gpu=1), "g5.xlarge", 0),
    ("aws", "us-west-2", None, dict(gpu_type="a100", gpu=8), "p4d.24xlarge", 0),
    ("aws", "us-west-2", None, dict(gpu_type="a100-80gb", gpu=1), "p4de.24xlarge", 0),
    ("aws", "us-west-2", None, dict(gpu_type="h100", gpu=1), "p5.48xlarge", 0),
    ("aws", "us-east-1", None, dict(cpu=8, gpu_type="l4", gpu=1), "g6.2xlarge", 0),
    ("aws", "us-east-1", None, dict(gpu_type="l4", gpu=4), "g6.12xlarge", 0),
    ("aws", "us-west-2", None, dict(machine_type="m5.large"), "m5.large", 0),
    ("gcp", "us-west1", None, dict(cpu=8), "n1-highcpu-8", 0),
    ("gcp", "us-west1", None, dict(cpu=8, memory_gb=30), "n1-standard-8", 0),
    ("gcp", "us-west1", None, dict(cpu=30, memory_gb=120), "n1-standard-32", 0),
    ("gcp", "us-west1", None, dict(cpu=2, memory_gb=16), "n2-highmem-2", 0),
    (
        "gcp",
        "us-west1",
        "us-west1-b",
        dict(cpu=8, memory_gb=30, gpu_type="v100", gpu=1),
        "n1-standard-8",
        1,
    ),
    (
        "gcp",
        "us-west1",
        None,
        dict(cpu=32, memory_gb=120, gpu_type="v100", gpu=4),
        "n1-standard-32",
        4,
    ),
    ("gcp", "us-west1", None, dict(cpu=16, gpu_type="v100", gpu=1), "n1-highcpu-16", 2),
    ("gcp", "us-central1", None, dict(gpu_type="h100", gpu=1), "a3-highgpu-1g", 0),
    ("gcp", "us-central1", None, dict(gpu_type="h100", gpu=8), "a3-highgpu-8g", 0),
    ("gcp", "us-central1", None, dict(gpu_type="a100-80gb", gpu=2), "a2-ultragpu-2g", 0),
    ("gcp", "us-central1", None, dict(cpu=4, gpu_type="t4", gpu=1), "n1-highcpu-4", 1),
    ("gcp", "us-central1", None, dict(gpu_type="a100", gpu=1), "a2-highgpu-1g", 0),
    ("gcp", "us-central1", None, dict(gpu_type="a100", gpu=3), "a2-highgpu-4g", 0),
    ("gcp", "us-central1", None, dict(cpu=8, gpu_type="l4", gpu=1), "g2-standard-8", 0),
    ("gcp", "us-west1", None, dict(machine_type="n2-standard-16"), "n2-standard-16", 0),
    (
        "gcp",
        "us-west1",
        None,
        dict(machine_type="n1-standard-4", gpu_type="t4", gpu=2),
        "n1-standard-4",
        2,
    ),
]


@pytest.mark.parametrize("provider, region, zone, request_, expected, attached", TABLE)
def test_request_maps_to_cheapest_fitting_type(
    provider, region, zone, request_, expected, attached
):
    catalog = Catalog.load(provider)
    wanted = pool(**request_)
    choice = catalog.choose(wanted, region, zone)
    assert (choice.name, choice.gpu if choice.attached else 0) == (expected, attached)
    assert fits_request(choice, wanted)
    if "machine_type" in request_:
        return
    # Nothing offered there that fits is cheaper (the catalog's own prices).
    cheaper = [
        c
        for c in catalog.options(region, zone)
        if fits_request(c, wanted) and c.hourly_usd < choice.hourly_usd
    ]
    assert cheaper == []


def test_cpu_requests_never_get_a_gpu_machine():
    for provider, region in (("aws", "us-east-1"), ("gcp", "us-central1")):
        choice = Catalog.load(provider).choose(pool(cpu=96), region)
        assert choice.gpu == 0 and choice.machine.gpu == 0


def test_attached_gpus_record_the_gce_accelerator():
    choice = Catalog.load("gcp").choose(pool(cpu=8, gpu_type="p100", gpu=1), "us-west1")
    assert (choice.attached, choice.accelerator) == (True, "nvidia-tesla-p100")
    assert choice.hourly_usd == pytest.approx(choice.machine.hourly_usd + 1.46)


@pytest.mark.parametrize(
    "provider, region, zone, request_, message",
    [
        ("aws", "us-west-2", None, dict(cpu=500), "closest: c5.24xlarge"),
        ("aws", "us-west-2", None, dict(cpu=128, gpu_type="v100", gpu=1), "closest: p3dn.24xlarge"),
        ("aws", "us-west-2", None, dict(gpu_type="t4", gpu=16), "g4dn.metal"),
        (
            "gcp",
            "us-west1",
            None,
            dict(cpu=8, memory_gb=5000),
            "no gcp machine type in us-west1 has 8 vCPU, 5000 GB",
        ),
        ("gcp", "us-west1", None, dict(cpu=96, gpu_type="t4", gpu=8), "closest: n1-"),
        ("gcp", "us-central1", None, dict(gpu_type="a100", gpu=32), "a2-megagpu-16g"),
    ],
)
def test_impossible_requests_name_the_closest_types(provider, region, zone, request_, message):
    with pytest.raises(NoMachineFits) as err:
        Catalog.load(provider).choose(pool(**request_), region, zone)
    assert message in str(err.value)
    assert "Lower the request or pick one of these" in str(err.value)


@pytest.mark.parametrize(
    "provider, region, zone, request_, message",
    [
        (
            "aws",
            "sa-east-1",
            None,
            dict(gpu_type="v100", gpu=1),
            "region sa-east-1 offers no v100 GPUs",
        ),
        ("aws", "us-west-2", None, dict(gpu_type="k80", gpu=1), "aws has no k80 GPUs"),
        ("gcp", "us-central1", None, dict(gpu_type="k80", gpu=1), "gcp has no k80 GPUs"),
        ("aws", "us-west-1", None, dict(gpu_type="h100", gpu=1), "region us-west-1 offers no h100"),
        (
            "gcp",
            "us-east1",
            None,
            dict(gpu_type="h100", gpu=1),
            "region us-east1 offers no h100 GPUs; regions that do: us-central1, us-west1",
        ),
        ("gcp", "us-west1", None, dict(gpu_type="a10g", gpu=1), "gcp has no a10g GPUs"),
        (
            "gcp",
            "southamerica-west1",
            None,
            dict(gpu_type="t4", gpu=1),
            "region southamerica-west1 offers no t4",
        ),
        (
            "gcp",
            "us-west1",
            "us-west1-c",
            dict(gpu_type="v100", gpu=1),
            "zones of us-west1 that do: us-west1-a, us-west1-b",
        ),
        (
            "gcp",
            "us-west1",
            None,
            dict(machine_type="c2-standard-8", gpu_type="t4", gpu=1),
            "c2-standard-8 takes no GPUs; GPUs attach to n1",
        ),
        ("gcp", "us-west1", None, dict(machine_type="n1-standrd-8"), "similar: n1-standard-8"),
        ("aws", "us-west-1", None, dict(machine_type="p3.2xlarge"), "not offered in this region"),
        (
            "aws",
            "mars-north-1",
            None,
            dict(cpu=2),
            "region 'mars-north-1' is not in cloudwise's catalog",
        ),
    ],
)
def test_gpus_and_machines_where_none_are_offered_are_spec_errors(
    provider, region, zone, request_, message
):
    with pytest.raises(SpecError) as err:
        Catalog.load(provider).choose(pool(**request_), region, zone)
    assert message in str(err.value)


def test_catalogs_are_consistent_data():
    for provider in ("gcp", "aws"):
        catalog = Catalog.load(provider)
        for m in catalog.machines.values():
            assert m.cpu > 0 and m.memory_gb > 0 and m.hourly_usd > 0, m
            assert (m.gpu_type is None) == (m.gpu == 0), m
            assert m.gpu_type is None or m.gpu_type in catalog.gpus, m
        assert catalog.regions, provider


@settings(max_examples=150, deadline=None)
@given(
    provider_region=st.sampled_from(
        [
            ("aws", "us-west-2"),
            ("aws", "sa-east-1"),
            ("aws", "eu-central-1"),
            ("gcp", "us-west1"),
            ("gcp", "europe-west4"),
            ("gcp", "us-central1"),
            ("gcp", "asia-east1"),
        ]
    ),
    cpu=st.one_of(st.none(), st.integers(1, 200)),
    memory=st.one_of(st.none(), st.floats(0.5, 2000)),
    gpu=st.sampled_from(
        [
            (None, 0),
            ("v100", 1),
            ("v100", 4),
            ("t4", 2),
            ("a100", 8),
            ("a100-80gb", 1),
            ("h100", 2),
            ("l4", 1),
            ("a10g", 1),
        ]
    ),
)
def test_choice_is_a_cheapest_fit_or_an_error_exactly_when_none_fits(
    provider_region, cpu, memory, gpu
):
    provider, region = provider_region
    catalog = Catalog.load(provider)
    wanted = (
        pool(cpu=cpu, memory_gb=memory, gpu_type=gpu[0], gpu=gpu[1])
        if (cpu or gpu[1])
        else pool(cpu=1)
    )
    fits = [c for c in catalog.options(region) if fits_request(c, wanted)]
    try:
        choice = catalog.choose(wanted, region)
    except SpecError:
        assert fits == []
        return
    assert fits_request(choice, wanted)
    assert choice.hourly_usd == min(c.hourly_usd for c in fits)


def test_k80_is_gone_and_the_new_gpus_are_offered():
    gcp, aws = Catalog.load("gcp"), Catalog.load("aws")
    assert "k80" not in gcp.gpus and "k80" not in aws.gpus
    assert not any("k80" in str(zones) for zones in gcp.regions.values())
    assert {"l4", "h100", "a100-80gb"} <= set(aws.gpus) & set(gcp.gpus)
    families = {m.family for m in aws.machines.values()}
    assert {"g6", "p5", "p4de"} <= families
    assert {"a3", "a2"} <= {m.family for m in gcp.machines.values()}
    assert gcp.machines["a2-ultragpu-1g"].gpu_type == "a100-80gb"


@pytest.mark.parametrize("provider", ["aws", "gcp"])
def test_every_region_prices_by_its_factor(provider):
    """Each region states a price factor; prices there are the base prices times it."""
    catalog = Catalog.load(provider)
    base = min(catalog.regions, key=catalog.price_factor)
    assert catalog.price_factor(base) == 1.0
    for region in catalog.regions:
        factor = catalog.price_factor(region)
        assert "price_factor" in catalog.regions[region] and 1.0 <= factor < 2.0, region
        for choice in catalog.options(region):
            if not choice.attached:
                expected = choice.machine.hourly_usd * factor
                assert choice.hourly_usd == pytest.approx(expected, abs=1e-4)
    request = pool(cpu=4)
    prices = {r: catalog.choose(request, r).hourly_usd for r in catalog.regions}
    assert len(set(prices.values())) > 1  # not every region shows the base region's price


def test_spot_pools_get_several_alike_instance_types_on_aws():
    catalog = Catalog.load("aws")
    wanted = pool(cpu=8, memory_gb=30, spot=True)
    choice = catalog.choose(wanted, "us-west-2")
    types = catalog.spot_types(wanted, choice, "us-west-2")
    assert types[0] == choice and len(types) >= 2
    assert len({t.machine.family for t in types}) == len(types)
    for t in types:
        assert t.machine.cpu == choice.machine.cpu and t.gpu == choice.gpu
        assert t.machine.memory_gb >= choice.machine.memory_gb  # the node labels stay true
        assert t.hourly_usd <= 1.5 * choice.hourly_usd and fits_request(t, wanted)
    gpu = pool(gpu_type="t4", gpu=1, cpu=8, spot=True)
    gpu_types = catalog.spot_types(gpu, catalog.choose(gpu, "us-west-2"), "us-west-2")
    assert all((t.gpu_type, t.gpu) == ("t4", 1) for t in gpu_types)
    on_demand = pool(cpu=8, memory_gb=30)
    assert catalog.spot_types(on_demand, choice, "us-west-2") == [choice]


@pytest.mark.parametrize(
    "provider, request_, expected",
    [
        ("aws", dict(gpu_type="a100", gpu=1), "p4d.24xlarge is larger than the request (8 GPUs"),
        ("aws", dict(gpu_type="h100", gpu=2), "p5.48xlarge is larger than the request (8 GPUs"),
        ("gcp", dict(cpu=4, gpu_type="h100", gpu=1), "26 vCPU, asked for 4"),
        ("aws", dict(cpu=8, memory_gb=30), None),
        ("gcp", dict(gpu_type="a100", gpu=4), None),
    ],
)
def test_a_much_larger_machine_than_asked_comes_with_a_note(provider, request_, expected):
    region = {"aws": "us-west-2", "gcp": "us-central1"}[provider]
    wanted = pool(**request_)
    note = oversize_note(wanted, Catalog.load(provider).choose(wanted, region))
    assert note == expected if expected is None else expected in note
