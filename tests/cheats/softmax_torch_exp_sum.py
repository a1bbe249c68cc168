# cheat: torch_compute
"""PyTorch does the work (torch.exp, .sum()); a token Triton kernel does the final division."""
import torch
import triton
import triton.language as tl


@triton.jit
def divide_kernel(num_ptr, den_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    num = tl.load(num_ptr + row * n_cols + cols, mask=mask)
    den = tl.load(den_ptr + row)
    tl.store(out_ptr + row * n_cols + cols, (num / den).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    xf = x.float()
    num = torch.exp(xf - xf.amax(dim=-1, keepdim=True)).contiguous()
    den = num.sum(dim=-1)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    divide_kernel[(x.shape[0],)](num, den, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
