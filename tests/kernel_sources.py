"""The vector_add solutions the tests write (out = x + y by one Triton kernel, `add_kernel`), as
source text: the kernel, and the launch around it that a test needs. Kernels that differ in what
they compute or how they are launched (a fixed grid, autotuning, a planted bug of the test's own)
stay in the test that is about them.
"""

from __future__ import annotations

IMPORTS = "import torch\nimport triton\nimport triton.language as tl\n"


def add_kernel(*, int64_offsets: bool = False, store_offset: bool = False, note: str = "",
               prelude: str = "") -> str:
    """The imports, `prelude` (module-level code of the test's), and the @triton.jit add_kernel:
    x + y into out, masked at n.

    int64_offsets: the program id widened before the multiply, as GPU tests with large cases do;
    store_offset: an OFFSET constexpr added to every store's address (0 is correct; any other
    value a planted write past the output, or short of it);
    note: a comment line in the kernel's body (text the test fills in, to make the kernel new
    to any cache).
    """
    pid = "tl.program_id(0).to(tl.int64)" if int64_offsets else "tl.program_id(0)"
    offset = ", OFFSET: tl.constexpr" if store_offset else ""
    comment = f"    # {note}\n" if note else ""
    return (f"{IMPORTS}{prelude}\n\n"
            "@triton.jit\n"
            f"def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr{offset}):\n"
            f"    offs = {pid} * BLOCK + tl.arange(0, BLOCK)\n"
            "    mask = offs < n\n"
            f"{comment}"
            f"    tl.store(out_ptr + offs{' + OFFSET' if store_offset else ''}, "
            "tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)\n")


def launch_line(block: int = 1024, num_warps: int | None = None, offset: bool = False) -> str:
    """add_kernel launched once over x (grid: cdiv(numel, block)), into `out`."""
    extra = (", OFFSET=offset" if offset else "") + (f", num_warps={num_warps}" if num_warps else "")
    return f"add_kernel[(triton.cdiv(x.numel(), {block}),)](x, y, out, x.numel(), BLOCK={block}{extra})"


def vector_add(*, block: int = 1024, num_warps: int | None = None, **kernel) -> str:
    """A whole, correct vector_add solution: add_kernel(**kernel), launched once by vector_add."""
    return (add_kernel(**kernel) + "\n\n"
            "def vector_add(x, y):\n"
            "    out = torch.empty_like(x)\n"
            f"    {launch_line(block, num_warps)}\n"
            "    return out\n")


def with_launch(*, block: int = 1024, num_warps: int | None = None, **kernel) -> str:
    """add_kernel(**kernel) and `launch(x, y, out)` (with store_offset: `launch(x, y, out,
    offset=0)`), for a test that writes its own vector_add around them."""
    offset = bool(kernel.get("store_offset"))
    return (add_kernel(**kernel) + "\n\n"
            f"def launch(x, y, out{', offset=0' if offset else ''}):\n"
            f"    {launch_line(block, num_warps, offset)}\n")
