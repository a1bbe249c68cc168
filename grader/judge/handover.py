"""Outputs handed from the worker to the checker: CUDA IPC on a GPU, files on the CPU.

On a GPU both processes sit on the same device, so the worker hands over CUDA IPC handles (JSON:
bytes as hex) and the checker maps the very memory the kernel wrote: nothing goes through host
memory or a file. The worker keeps the tensors alive until the parent has the verdict. A handle
is plain data: the checker validates every field and rebuilds the tensor itself, so nothing the
submission made is unpickled or imported. On the CPU, or where sharing fails, outputs are saved
with torch.save and loaded with weights_only=True.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

_REFCOUNT_NAME = re.compile(r"/?torch_[A-Za-z0-9_]+")
_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
    torch.int16, torch.int8, torch.uint8, torch.bool, torch.float8_e4m3fn, torch.float8_e5m2)}


def share(t: torch.Tensor) -> dict:
    """A CUDA tensor's IPC description (the caller keeps `t` alive until it is read)."""
    storage = t.untyped_storage()
    desc = {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
            "stride": list(t.stride()), "storage_offset": t.storage_offset()}
    if t.numel() == 0:
        return dict(desc, empty=True)
    device, handle, size, offset, rc_handle, rc_offset, event, sync = storage._share_cuda_()
    return dict(desc, device=int(device), handle=bytes(handle).hex(), size=int(size),
                offset=int(offset), rc_handle=bytes(rc_handle).hex(), rc_offset=int(rc_offset),
                event=bytes(event or b"").hex(), sync=bool(sync))


def open_shared(desc: dict) -> torch.Tensor:
    """A copy of the tensor a `share` description names; ValueError for a malformed one."""
    dtype = _DTYPES.get(desc.get("dtype"))
    shape, stride = desc.get("shape"), desc.get("stride")
    if dtype is None or not _ints(shape) or not _ints(stride) or len(shape) != len(stride) \
            or not isinstance(desc.get("storage_offset"), int):
        raise ValueError("malformed tensor description")
    if desc.get("empty"):
        return torch.empty(shape, dtype=dtype, device="cuda")
    fields = ("device", "size", "offset", "rc_offset")
    if not all(isinstance(desc.get(f), int) and desc[f] >= 0 for f in fields) or \
            not all(isinstance(desc.get(f), str) for f in ("handle", "rc_handle", "event")):
        raise ValueError("malformed tensor description")
    rc_handle = bytes.fromhex(desc["rc_handle"])
    if not _REFCOUNT_NAME.fullmatch(rc_handle.decode("ascii", "replace")):
        raise ValueError("malformed reference-counter name")
    storage = torch.UntypedStorage._new_shared_cuda(
        desc["device"], bytes.fromhex(desc["handle"]), desc["size"], desc["offset"], rc_handle,
        desc["rc_offset"], bytes.fromhex(desc["event"]), bool(desc.get("sync")))
    view = torch.empty(0, dtype=dtype, device=f"cuda:{desc['device']}")
    view.set_(storage, desc["storage_offset"], shape, stride)  # set_ checks the bounds
    return view.clone()


def _ints(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and v >= 0 for v in value)


def save(plain: dict, path: Path) -> str:
    torch.save(plain, path)
    return str(path)


def load(handed) -> dict:
    """{output name: [tensors]} from what the worker handed over; {} for anything malformed."""
    try:
        if isinstance(handed, dict):
            return {name: [open_shared(d) for d in descs] for name, descs in handed.items()
                    if isinstance(descs, list) and all(isinstance(d, dict) for d in descs)}
        if isinstance(handed, str):
            return torch.load(handed, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - a missing, forged or unopenable handle is simply no output
        return {}
    return {}
