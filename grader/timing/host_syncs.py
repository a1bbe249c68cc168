"""Host syncs in a submission's call: operations that make the host wait for the GPU.

A copy to the GPU from ordinary (pageable) memory, such as `torch.tensor(..., device="cuda")`,
and `.item()`, `.tolist()`, `.cpu()` or `torch.cuda.synchronize()` each block the host until the
GPU has run everything queued before them. The GPU then idles while the host launches what
follows. A kernel's time is right; it just includes that idle. The grader names these for the
learner as advice (`host_sync`), never as a fault: an honest kernel may sync, and the speedup
already counts what the sync costs.

PyTorch's sync debug mode (`torch.cuda.set_sync_debug_mode`) warns at each such operation, at
the Python line that called it. The timer runs one of the submission's untimed warm-up calls
under it, past the first calls, where an autotuner legitimately syncs while it benchmarks.
A submission that silences the warnings hides its syncs only from its own advice.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import torch

# PyTorch's wording of the warning (c10/cuda: warn_or_error_on_sync).
MARKER = "synchronizing CUDA operation"
_WARN = 1  # set_sync_debug_mode: 0 off, 1 warn, 2 error


@dataclass
class HostSyncs:
    count: int  # synchronizing operations seen in the watched call
    first_at: str | None = None  # "file.py:LINE" of the first, as the warning names it


def _set_mode(mode: int) -> None:
    torch.cuda.set_sync_debug_mode(mode)


def _quietly_set_mode(mode: int) -> None:
    # Setting the mode warns that it is a prototype: the grader's business, not the learner's.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _set_mode(mode)


def _get_mode() -> int:
    return torch.cuda.get_sync_debug_mode()


def watched(call):
    """(call()'s result, HostSyncs): call run once with PyTorch's sync warnings on. Only those
    warnings are taken; the call's own warnings meet its own filters and are shown as they would
    have been (one it turned into an error is still raised inside it)."""
    previous, syncs = _get_mode(), []
    with warnings.catch_warnings():  # restores the filters and showwarning, even when the call raised
        show = warnings.showwarning

        def shown(message, category, filename, lineno, file=None, line=None):
            if MARKER in str(message):
                syncs.append(f"{os.path.basename(filename)}:{lineno}")
            else:
                show(message, category, filename, lineno, file, line)

        warnings.filterwarnings("always", message=f".*{MARKER}")
        warnings.showwarning = shown
        _quietly_set_mode(_WARN)
        try:
            result = call()
        finally:
            _quietly_set_mode(previous)
    return result, HostSyncs(len(syncs), syncs[0] if syncs else None)
