"""The per-device ceilings: the cache of measured rates, and the datasheet peaks they answer to.

Two uses, two ceilings (docs/SCORING.md, "Ceilings"):
- roofline *credit* uses the best rates ever measured on this device and software stack (what a
  kernel can reach here); a measurement can only raise them, so one taken on a busy GPU never
  lowers the bar;
- the *cheat floor* (`below_physical_floor`) uses the physical ceilings: the larger of those and
  the device's datasheet peak where it is known, so a floor can never sit above what the
  hardware allows, whatever was measured.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from grader.paths import cache_dir

RATES = ("copy_gbps", "matmul_tflops")
# Dense bf16 tensor-core TFLOP/s and HBM GB/s from NVIDIA's datasheets (the sparse figures
# halved), matched by a lower-case part of the device name, first match wins. Sources: the
# specification tables of nvidia.com/en-us/data-center/h200/, /h100/ (SXM, PCIe and NVL
# columns), /a100/ (80GB SXM), /grace-hopper-superchip/, and for the H100 PCIe card its product
# brief PB-11133-001; the H800 is listed with the H100 SXM's figures. The TFLOP/s are
# at the datasheet's boost clock; a card may clock up to ~8% higher (H100 SXM: 1980 vs 1830 MHz),
# which the floor's 10% margin (grader.grading.timing_evidence.FLOOR_MARGIN) covers.
DATASHEET = (
    ("gh200", {"matmul_tflops": 989.5, "copy_gbps": 4900.0}),
    ("h200", {"matmul_tflops": 989.5, "copy_gbps": 4800.0}),
    ("h100 nvl", {"matmul_tflops": 835.5, "copy_gbps": 3900.0}),
    ("h100 pcie", {"matmul_tflops": 756.5, "copy_gbps": 2000.0}),
    ("h100", {"matmul_tflops": 989.5, "copy_gbps": 3350.0}),
    ("h800", {"matmul_tflops": 989.5, "copy_gbps": 3350.0}),
    ("a100", {"matmul_tflops": 312.0, "copy_gbps": 2039.0}),
)
# A cached rate below this share of the datasheet peak was not measured on an idle device
# (an idle H100/H200 measures ~70% of the matmul peak and ~85% of the bandwidth): measure again.
FAR_OFF = 0.5


def _path() -> Path:
    return cache_dir() / "ceilings.json"


def cache_key(device: str, versions: dict) -> str:
    return f"{device}|torch {versions.get('torch')}|triton {versions.get('triton')}"


def load_all() -> dict:
    try:
        data = json.loads(_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _rate(ceilings: dict | None, name: str) -> float | None:
    value = (ceilings or {}).get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def best(*measured: dict | None) -> dict | None:
    """The best of several measurements of one device: each rate the highest any of them saw
    (a measurement can only raise a ceiling), the other fields the last one's."""
    found = [m for m in measured if isinstance(m, dict)]
    if not found:
        return None
    merged = {}
    for m in found:
        merged.update({k: v for k, v in m.items() if k not in RATES})
    for name in RATES:
        rates = [r for r in (_rate(m, name) for m in found) if r is not None]
        if rates:
            merged[name] = max(rates)
    return merged


def save(key: str, ceilings: dict) -> None:
    """Keep `ceilings` for `key`, merged with what is cached: a rate only ever rises."""
    path = _path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = load_all()
        data[key] = best(data.get(key), ceilings)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(path)  # atomic: a concurrent grade never reads half a file
    except OSError:
        pass  # a read-only cache only costs a re-measurement next time


def datasheet(device: str | None) -> dict | None:
    """The device's datasheet peaks ({copy_gbps, matmul_tflops}), or None for a device not listed."""
    name = (device or "").lower()
    return next((dict(peaks) for part, peaks in DATASHEET if part in name), None)


def physical(ceilings: dict | None, device: str | None) -> dict | None:
    """The ceilings a cheat floor rests on: each rate the larger of the measured one and the
    datasheet peak, so a floor worked out from them is never above what the device can do."""
    return best(ceilings, datasheet(device))


def far_off(ceilings: dict | None, device: str | None, cache: dict | None = None) -> list[str]:
    """What in `ceilings` is far below what the device reaches (a measurement taken while
    something else used the GPU): its datasheet peak, or for a device not listed the best rate
    measured on it under any software stack in `cache`. Sentences; empty when nothing is."""
    peaks = datasheet(device)
    if not ceilings:
        return []
    what = "the datasheet peak"
    if not peaks:
        other = [v for k, v in (cache or {}).items() if isinstance(k, str) and k.startswith(f"{device}|")]
        peaks, what = best(*other), "measured here before"
    if not peaks:
        return []
    units = {"copy_gbps": "GB/s copy bandwidth", "matmul_tflops": "TFLOP/s bf16 matmul rate"}
    found = []
    for name in RATES:
        rate, peak = _rate(ceilings, name), _rate(peaks, name)
        if rate is not None and peak is not None and rate < FAR_OFF * peak:
            found.append(f"{rate:.0f} {units[name]} ({what}: {peak:.0f})")
    return found


def floor_ms(nbytes: float | None, flops: float | None, ceilings: dict) -> float | None:
    """The roofline time: the larger of bytes over copy bandwidth and FLOPs over matmul rate.
    (Here, with no torch, so that the grading process works it out too.)"""
    floors = []
    if nbytes:
        floors.append(nbytes / (ceilings["copy_gbps"] * 1e9) * 1e3)
    if flops:
        floors.append(flops / (ceilings["matmul_tflops"] * 1e12) * 1e3)
    return max(floors) if floors else None
