"""Listing nodes with sinfo: node lines merged over partitions, GPU counts from Gres."""

import pytest
from slurm_stack_healthchecks.runner import CommandTimeout
from slurm_stack_healthchecks.sinfo import (
    SINFO_ARGV,
    GpuGres,
    SinfoError,
    list_nodes,
    parse_gpu_gres,
    parse_sinfo,
)

from tests.healthchecks.hc_helpers import FakeRunner, done, fixture


@pytest.mark.parametrize(
    ("gres", "expected"),
    [
        ("gpu:8", GpuGres(8, ())),
        ("gpu:h100:8", GpuGres(8, ("h100",))),
        ("gpu:h100:8(S:0-1)", GpuGres(8, ("h100",))),
        ("gpu:h100:8(S:0,1)", GpuGres(8, ("h100",))),
        ("gpu:h100:4,gpu:a100:2", GpuGres(6, ("h100", "a100"))),
        ("gpu:h100:8(S:0-1),shard:h100:64(S:0-1)", GpuGres(8, ("h100",))),
        ("mps:400", GpuGres(0, ())),
        ("(null)", GpuGres(0, ())),
        ("", GpuGres(0, ())),
    ],
)
def test_gpu_count_from_gres(gres: str, expected: GpuGres) -> None:
    assert parse_gpu_gres(gres) == expected


@pytest.mark.parametrize("gres", ["gpu:h100:eight", "gpu"])
def test_unparsable_gpu_gres(gres: str) -> None:
    with pytest.raises(ValueError, match="gpu"):
        parse_gpu_gres(gres)


def test_node_lines_merge_over_partitions_default_first() -> None:
    nodes = parse_sinfo(fixture("sinfo-nodes.txt"))
    assert [n.name for n in nodes][:3] == ["gpu-0", "gpu-1", "gpu-2"]
    assert len(nodes) == 12
    gpu0 = nodes[0]
    assert (gpu0.state, gpu0.partitions, gpu0.features, gpu0.gres) == (
        "idle",
        ("batch", "debug"),
        ("gpu", "ib"),
        "gpu:h100:8(S:0-1)",
    )
    assert gpu0.partition == "batch"
    other_order = parse_sinfo("n1|idle|debug|gpu|gpu:1\nn1|idle|batch*|gpu|gpu:1\n")
    assert other_order[0].partitions == ("batch", "debug")
    assert other_order[0].default_partition
    assert parse_sinfo("n2|idle|n/a|(null)|(null)\n")[0].partition is None
    assert parse_sinfo("n2|idle|n/a|(null)|(null)\n")[0].features == ()


def test_a_line_in_another_format_is_an_error() -> None:
    with pytest.raises(SinfoError, match="want 5 fields"):
        parse_sinfo("NODELIST   NODES PARTITION STATE\ngpu-0 1 batch* idle\n")


def test_list_nodes_runs_sinfo_and_reports_failures() -> None:
    runner = FakeRunner({("sinfo",): done(fixture("sinfo-nodes.txt"))})
    assert len(list_nodes(runner, 5)) == 12
    assert runner.argvs() == [SINFO_ARGV]
    assert SINFO_ARGV == ("sinfo", "--noheader", "--Node", "--all", "--format=%N|%T|%P|%f|%G")
    failing = FakeRunner(
        {
            ("sinfo",): done(
                stderr="slurm_load_partitions: Unable to contact slurm controller", returncode=1
            )
        }
    )
    with pytest.raises(SinfoError, match="sinfo exited 1: slurm_load_partitions"):
        list_nodes(failing, 5)
    with pytest.raises(SinfoError, match="timeout after 5s"):
        list_nodes(FakeRunner({("sinfo",): CommandTimeout(["sinfo"], 5)}), 5)
