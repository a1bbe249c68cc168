"""Is there a CUDA GPU to grade on? Asked of the driver directly, without importing torch.

Importing torch and asking torch.cuda.is_available() costs the command-line process seconds on a
GPU machine, for a process that never touches the GPU itself (the worker and the checker do).
"""

from __future__ import annotations

import ctypes
import functools
from importlib import metadata


@functools.lru_cache(maxsize=1)
def cuda_available() -> bool:
    return device_count() > 0


@functools.lru_cache(maxsize=1)
def device_count() -> int:
    """How many CUDA GPUs torch would see (0 with a CPU-only torch or no driver)."""
    try:
        if "+cpu" in metadata.version("torch"):  # a CPU-only torch cannot use the GPU
            return 0
    except metadata.PackageNotFoundError:
        return 0
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    count = ctypes.c_int(0)
    # cuInit honours CUDA_VISIBLE_DEVICES, as torch does.
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


@functools.lru_cache(maxsize=1)
def total_memory_bytes() -> int | None:
    """The first visible GPU's memory in bytes (the one a grade runs on), or None without one.
    Asked of the driver (cuDeviceTotalMem), which needs no CUDA context."""
    if device_count() <= 0:
        return None
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        device, total = ctypes.c_int(0), ctypes.c_size_t(0)
        if cuda.cuDeviceGet(ctypes.byref(device), 0) != 0 or \
                cuda.cuDeviceTotalMem_v2(ctypes.byref(total), device) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return int(total.value)
