"""``nvidia-smi topo -m``: the GPU×GPU link matrix, NIC rows, CPU/NUMA affinity, and a verdict.

The raw output is tab-separated, pastes are space-aligned, and the affinity cells can be empty
or padded, so a row is read as: its device name, then one link code per device column, then
whatever is left as affinity fields (right-aligned when some are missing). A second matrix in
the same file (``topo -p2p r``) is kept as ``p2p``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import ParseError
from toolkit.load.gpu.format import COMPANION, Format, Options, Peek
from toolkit.load.inputs import check_input, head_lines
from toolkit.schema.gpu import TOPOLOGY_DEVICES, TOPOLOGY_LINKS

FORMAT = "nvidia-smi-topo"
LINK_RANK = {"X": 0, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 6, "SOC": 6}
P2P_CODES = {"X", "OK", "CNS", "GNS", "TNS", "NS", "DR", "U"}
_AFFINITY = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_DEVICE = re.compile(r"^(?:GPU\d+|NIC\d+|mlx\d+_\d+|[a-z]+\d*_\d+|ib\d+)$")


@dataclass
class Topology:
    """What ``nvidia-smi topo -m`` says about a host.

    Attributes
    ----------
    path
        The file read.
    matrix
        The matrix as printed: a ``device`` column, then one column per device.
    links
        Long form of the matrix (``toolkit.schema.gpu.TOPOLOGY_LINKS``): src, dst, link,
        nvlinks, rank.
    devices
        One row per GPU and NIC with its affinity (``toolkit.schema.gpu.TOPOLOGY_DEVICES``).
    p2p
        The ``topo -p2p`` matrix in long form (src, dst, status) when the file has one.
    interconnect
        ``nvlink`` when any GPU pair is joined by NVLink (``NV#``), else ``pcie``.
    """

    path: str
    matrix: pl.DataFrame
    links: pl.DataFrame
    devices: pl.DataFrame
    p2p: pl.DataFrame | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def gpus(self) -> list[str]:
        """GPU device names in matrix order."""
        return [d for d in self.matrix.get_column("device") if d.startswith("GPU")]

    @property
    def interconnect(self) -> str:
        """One word for the report header: ``nvlink`` or ``pcie``."""
        gpu_pairs = self.gpu_links()
        return "nvlink" if (gpu_pairs.get_column("nvlinks") > 0).any() else "pcie"

    def gpu_links(self) -> pl.DataFrame:
        """Links between two different GPUs only."""
        return self.links.filter(
            pl.col("src").str.starts_with("GPU")
            & pl.col("dst").str.starts_with("GPU")
            & (pl.col("src") != pl.col("dst"))
        )

    def summary(self) -> dict[str, Any]:
        """JSON-ready: path, format, gpus, nics, interconnect, GPU-pair link counts."""
        counts = self.gpu_links().group_by("link").len().sort("link")
        return {
            "path": self.path,
            "format": FORMAT,
            "gpus": len(self.gpus),
            "nics": self.devices.filter(pl.col("kind") == "nic").height,
            "interconnect": self.interconnect,
            "gpu_links": dict(counts.iter_rows()),
            "notes": self.notes,
        }


def find_header(lines: list[str]) -> int | None:
    """Index of the matrix header (``GPU0  GPU1 …``) followed by a ``GPU0`` row, else None."""
    for i, line in enumerate(lines[:-1]):
        tokens = line.split()
        if not tokens or tokens[0] != "GPU0":
            continue
        nxt = next((ln for ln in lines[i + 1 :] if ln.strip()), "")
        if nxt.split()[:1] == ["GPU0"]:
            return i
    return None


def load_topology(path: str | Path) -> Topology:
    """Read a ``nvidia-smi topo -m`` capture (compressed fine; prompt lines around it are ignored).

    Raises
    ------
    ParseError
        When no matrix header is found, or a row has fewer link codes than device columns.
    """
    path = check_input(path)
    text = head_lines(path, n=100_000, max_bytes=16 << 20)
    start = find_header(text)
    if start is None:
        raise ParseError(path, None, "no nvidia-smi topo -m matrix (a header starting GPU0)")
    devices, affinity_names, rows, end = _matrix(path, text, start, link_codes=None)
    nic_names = _nic_legend(text[end:])
    notes = []
    links, matrix_rows, device_rows = [], [], []
    for _lineno, label, codes, rest in rows:
        matrix_rows.append({"device": label, **dict(zip(devices, codes, strict=True))})
        for dst, code in zip(devices, codes, strict=True):
            links.append(_link(label, dst, code))
        device_rows.append(_device(label, rest, affinity_names, nic_names))
    p2p = None
    second = find_header(text[end:])
    if second is not None:
        p_devices, _, p_rows, _ = _matrix(path, text, end + second, link_codes=P2P_CODES)
        p2p = pl.DataFrame(
            [
                (label, dst, code)
                for _, label, codes, _ in p_rows
                for dst, code in zip(p_devices, codes, strict=True)
            ],
            schema={"src": pl.String, "dst": pl.String, "status": pl.String},
            orient="row",
        )
    for name in devices:
        if not any(r["device"] == name for r in device_rows):
            notes.append(f"column {name} has no row")
    return Topology(
        path=str(path),
        matrix=pl.DataFrame(
            matrix_rows, schema={"device": pl.String, **dict.fromkeys(devices, pl.String)}
        ),
        links=pl.DataFrame(links, schema=TOPOLOGY_LINKS, orient="row"),
        devices=pl.DataFrame(device_rows, schema=TOPOLOGY_DEVICES, orient="row"),
        p2p=p2p,
        notes=notes,
    )


def _matrix(
    path: Path, text: list[str], start: int, link_codes: set[str] | None
) -> tuple[list[str], list[str], list[tuple[int, str, list[str], list[str]]], int]:
    header = text[start].split()
    devices: list[str] = []
    for token in header:
        if not _DEVICE.match(token):
            break
        devices.append(token)
    tail = " ".join(header[len(devices) :])
    affinity_names = [name for name in _AFFINITY if name in tail]
    rows = []
    end = start + 1
    for i in range(start + 1, len(text)):
        tokens = text[i].split()
        if not tokens or tokens[0].rstrip(":") == "Legend":
            end = i
            break
        end = i + 1
        if len(tokens) < 1 + len(devices):
            raise ParseError(
                path,
                i + 1,
                f"row has {len(tokens) - 1} link codes for {len(devices)} devices",
                text[i],
            )
        codes = tokens[1 : 1 + len(devices)]
        if link_codes is not None and not set(codes) <= link_codes:
            break
        rows.append((i + 1, tokens[0], codes, tokens[1 + len(devices) :]))
    return devices, affinity_names, rows, end


def _link(src: str, dst: str, code: str) -> tuple[str, str, str, int | None, int | None]:
    nv = re.fullmatch(r"NV(\d+)", code)
    if nv:
        return src, dst, code, int(nv.group(1)), 1
    if code == "X":
        return src, dst, code, None, 0
    return src, dst, code, 0, LINK_RANK.get(code)


def _device(
    label: str, rest: list[str], names: list[str], nic_names: dict[str, str]
) -> dict[str, Any]:
    values = dict.fromkeys(_AFFINITY)
    if names:
        # Missing cells are the leading ones (an empty CPU affinity), so align to the right.
        shown = rest[-len(names) :] if len(rest) >= len(names) else rest
        for name, value in zip(names[len(names) - len(shown) :], shown, strict=True):
            values[name] = value
    kind = "gpu" if label.startswith("GPU") else "nic"
    m = re.search(r"(\d+)$", label) if label.startswith(("GPU", "NIC")) else None
    return {
        "device": label,
        "kind": kind,
        "index": int(m.group(1)) if m else None,
        "nic_name": nic_names.get(label, None if label.startswith(("GPU", "NIC")) else label),
        "cpu_affinity": values["CPU Affinity"],
        "numa_affinity": values["NUMA Affinity"],
        "gpu_numa_id": values["GPU NUMA ID"],
    }


def _nic_legend(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        m = re.match(r"^\s*(NIC\d+):\s*(\S+)\s*$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


# ---------------------------------------------------------------------- the format
def _detect(peek: Peek) -> bool:
    return find_header(peek.lines) is not None


def _load(path: Path, options: Options) -> Topology:
    return load_topology(path)


def _summarize(path: Path, options: Options) -> dict[str, Any]:
    return load_topology(path).summary()


NVIDIA_SMI_TOPO = Format(
    FORMAT,
    "nvidia-smi topo -m (and -p2p r): GPU×GPU links, NICs, CPU/NUMA affinity",
    _detect,
    _load,
    _summarize,
    COMPANION,
)
