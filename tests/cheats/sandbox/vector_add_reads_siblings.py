# door: reads
"""In a batch (SOURCE/HANDLE/KATA/solution.py), lists the batch's folder and reads the other
candidates' solutions (to copy one that works), by listing and by guessing a name; then looks
for what the others compiled, beside its own Triton cache."""
import os
from pathlib import Path

import torch
import triton
import triton.language as tl

here = Path(__file__).resolve()
source_dir = here.parents[2]
try:
    print("DOOR siblings-list OPEN", sorted(os.listdir(source_dir)))
except OSError as exc:
    print("DOOR siblings-list CLOSED", exc.strerror)
guess = source_dir / "bob" / here.parent.name / "solution.py"
try:
    print("DOOR sibling-file OPEN", len(guess.read_text()), "characters of", guess)
except OSError as exc:
    print("DOOR sibling-file CLOSED", exc.strerror)
cache = os.environ.get("TRITON_CACHE_DIR")
try:
    print("DOOR other-caches OPEN", cache, sorted(os.listdir(Path(cache).parent)))
except (OSError, TypeError) as exc:
    print("DOOR other-caches CLOSED", cache, getattr(exc, "strerror", exc))


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
