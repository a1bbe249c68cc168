"""Will a kata's GPU grade fit this GPU? Its declared peak (kata.yaml `gpu_memory_gib`, measured on
an 80 GB H100) against the GPU's memory, said before the grade and where a case runs out.

The peak was measured with the caching allocator free to keep what it had freed, so a smaller
GPU may still fit the grade: the message says the large cases *may* not fit, never that they
will fail. (How much one call may use beyond its inputs and outputs is a different limit, the
kata's memory_budget: grader.kata.memory_budget.)
"""

from __future__ import annotations

from grader.kata.format import Kata

GIB = 1 << 30


def shortfall(kata: Kata, total_bytes: int | None) -> str | None:
    """A sentence when the kata's measured GPU-grade peak is more than this GPU has, else None."""
    if not kata.gpu_memory_gib or not total_bytes or kata.gpu_memory_gib * GIB <= total_bytes:
        return None
    return (f"{kata.name}'s GPU grade peaks near {kata.gpu_memory_gib:g} GiB of GPU memory (measured "
            f"on an 80 GB H100), and this GPU has {total_bytes / GIB:.0f} GiB: its largest cases "
            "may not fit here (a case that runs out of memory says so; `--case NAME` grades the "
            "others)")
