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
