"""topo -m, nvidia-smi -L, --query-compute-apps, and which GPU runs which pipeline stage."""

from __future__ import annotations

from types import SimpleNamespace

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.errors import ParseError, ToolkitError
from toolkit.load.gpu.trace import gpu_roles, load_compute_apps, load_gpu_list, load_topology

DATA = TEST_DATA / "gpu"


def _link(topo, src: str, dst: str) -> dict:
    return topo.links.filter((pl.col("src") == src) & (pl.col("dst") == dst)).row(0, named=True)


# ---------------------------------------------------------------------- topology
def test_nvswitch_host_with_nics_and_legend() -> None:
    topo = load_topology(DATA / "topo-8xa100-nvlink.txt")
    assert topo.interconnect == "nvlink"
    assert topo.gpus == [f"GPU{i}" for i in range(8)]
    assert _link(topo, "GPU3", "GPU5") == {
        "src": "GPU3",
        "dst": "GPU5",
        "link": "NV12",
        "nvlinks": 12,
        "rank": 1,
    }
    assert _link(topo, "GPU0", "NIC0")["link"] == "PXB"
    assert _link(topo, "NIC3", "NIC3")["link"] == "X"  # the last row ends in "X "
    nic = topo.devices.filter(pl.col("device") == "NIC2").row(0, named=True)
    assert nic["kind"] == "nic" and nic["nic_name"] == "mlx5_2" and nic["cpu_affinity"] is None
    gpu = topo.devices.filter(pl.col("device") == "GPU5").row(0, named=True)
    assert gpu["cpu_affinity"] == "64-127,192-255" and gpu["numa_affinity"] == "1"
    assert gpu["gpu_numa_id"] == "N/A"
    assert topo.matrix.columns[0] == "device" and topo.matrix.height == 12


def test_pcie_only_hosts() -> None:
    a10 = load_topology(DATA / "topo-4xa10-pcie.txt")
    assert a10.interconnect == "pcie" and a10.summary()["gpu_links"] == {"SYS": 12}
    assert a10.summary()["nics"] == 2
    old = load_topology(DATA / "topo-2x1080ti.txt")
    assert old.interconnect == "pcie" and _link(old, "GPU0", "GPU1")["rank"] == 4  # PHB
    dev = old.devices.row(0, named=True)
    assert dev["numa_affinity"] == "N/A" and dev["gpu_numa_id"] is None  # no such column


def test_tab_separated_with_padded_cells_and_p2p_matrix() -> None:
    topo = load_topology(DATA / "topo-tabs-2x5090.txt")
    assert topo.interconnect == "pcie"
    dev = topo.devices.filter(pl.col("device") == "GPU1").row(0, named=True)
    assert (dev["cpu_affinity"], dev["numa_affinity"], dev["gpu_numa_id"]) == ("0-63", "0", "N/A")
    assert topo.p2p is not None
    assert topo.p2p.filter(pl.col("src") != pl.col("dst")).get_column("status").to_list() == [
        "GNS",
        "GNS",
    ]


def test_hybrid_cube_mesh_and_old_nic_name() -> None:
    topo = load_topology(DATA / "topo-dgx1-hybrid-oldnic.txt")
    assert topo.interconnect == "nvlink"  # some pairs NVLink, others SYS
    assert _link(topo, "GPU0", "GPU3")["nvlinks"] == 2
    assert _link(topo, "GPU0", "GPU5")["link"] == "SYS"
    nic = topo.devices.filter(pl.col("kind") == "nic").row(0, named=True)
    assert nic["device"] == "mlx5_0" and nic["nic_name"] == "mlx5_0"
    assert topo.devices.filter(pl.col("device") == "GPU6").row(0, named=True)["cpu_affinity"] == (
        "20-39,60-79"
    )


def test_topology_errors(write_log) -> None:
    with pytest.raises(ParseError, match="no nvidia-smi topo -m matrix"):
        load_topology(write_log("GPU0 X\n"))
    with pytest.raises(ParseError, match=r":3: row has 1 link codes for 2 devices"):
        load_topology(write_log("        GPU0    GPU1\nGPU0     X      PHB\nGPU1    PHB\n"))


# ---------------------------------------------------------------------- -L and compute apps
def test_gpu_list_with_mig_children() -> None:
    listing = load_gpu_list(DATA / "list-mig.txt")
    assert listing.filter(pl.col("mig_profile").is_null()).get_column("gpu").to_list() == [0, 1]
    new = listing.filter(pl.col("lineno") == 4).row(0, named=True)
    assert new["mig_profile"] == "3g.40gb" and new["mig_device"] == 2
    assert new["uuid"] == "MIG-50f1c4c9-1508-5e8d-bb06-d08145b22e01"
    assert new["parent_uuid"] == "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16"
    old = listing.filter(pl.col("lineno") == 7).row(0, named=True)
    assert old["uuid"].endswith("/2/0") and old["gpu"] == 1 and old["name"] == "A100-SXM4-40GB"


def test_compute_apps_mapped_to_indices_by_uuid() -> None:
    listing = load_gpu_list(DATA / "list-8gpu.txt")
    apps = load_compute_apps(DATA / "apps-8gpu.csv", listing)
    assert apps.get_column("gpu").to_list() == list(range(8))
    assert apps.get_column("pid").to_list()[3] == 85693
    assert apps.get_column("used_memory_mib").to_list()[7] == 78077.0
    assert load_compute_apps(DATA / "apps-empty.csv").height == 0
    odd = load_compute_apps(DATA / "apps-nounits-bus.csv")
    assert odd.get_column("pci_bus_id").to_list()[0] == "00000000:18:00.0"
    assert odd.get_column("process_name").to_list() == ["sglang::scheduler_TP0", None]
    assert odd.get_column("used_memory_mib").to_list() == [78000.0, None]


# ---------------------------------------------------------------------- roles
def _labels(args: dict) -> list[str]:
    return gpu_roles(args).get_column("label").to_list()


def test_pp8_roles_from_a_launch() -> None:
    launch = SimpleNamespace(server_args={"tp_size": 1, "pp_size": 8, "model_path": "m"})
    roles = gpu_roles(launch)
    assert roles.get_column("gpu").to_list() == list(range(8))
    assert roles.get_column("pp").to_list() == list(range(8))
    assert roles.row(3, named=True)["label"] == "PP3 (GPU 3)"


def test_pp4_tp2_and_base_gpu_id_step() -> None:
    assert _labels({"tp_size": 2, "pp_size": 4})[:3] == [
        "PP0 TP0 (GPU 0)",
        "PP0 TP1 (GPU 1)",
        "PP1 TP0 (GPU 2)",
    ]
    shifted = gpu_roles({"tp_size": 2, "pp_size": 1, "base_gpu_id": 4, "gpu_id_step": 2})
    assert shifted.get_column("gpu").to_list() == [4, 6]


def test_two_nodes_and_data_parallel() -> None:
    roles = gpu_roles({"tp_size": 1, "pp_size": 8, "nnodes": 2})
    assert roles.filter(pl.col("node") == 1).get_column("pp").to_list() == [4, 5, 6, 7]
    assert roles.filter(pl.col("node") == 1).get_column("gpu").to_list() == [0, 1, 2, 3]
    assert roles.row(5, named=True)["label"] == "PP5 (node 1 GPU 1)"
    tp_over_nodes = gpu_roles({"tp_size": 16, "pp_size": 1, "nnodes": 2})
    assert tp_over_nodes.filter(pl.col("node") == 1).get_column("tp").to_list()[0] == 8
    dp = gpu_roles({"tp_size": 2, "pp_size": 1, "dp_size": 2})
    assert dp.get_column("dp").to_list() == [0, 0, 1, 1]
    assert dp.get_column("label").to_list()[2] == "DP1 PP0 TP0 (GPU 2)"
    attn = gpu_roles({"tp_size": 4, "dp_size": 2, "enable_dp_attention": True})
    assert attn.get_column("gpu").to_list() == [0, 1, 2, 3]
    assert attn.get_column("dp").to_list() == [0, 0, 1, 1]


def test_roles_defaults_and_bad_values() -> None:
    assert _labels({}) == ["PP0 (GPU 0)"]
    with pytest.raises(ToolkitError, match="tp_size"):
        gpu_roles({"tp_size": "eight"})
    with pytest.raises(ToolkitError, match="server_args"):
        gpu_roles(42)
