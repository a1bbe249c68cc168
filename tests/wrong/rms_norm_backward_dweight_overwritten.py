"""Wrong rms_norm_backward: programs store their partial dweight straight into the output.

Each program handles 16 rows and keeps its share of dweight in registers (right so far), then
stores it into dweight itself instead of into its own row of a partial buffer. The programs
overwrite each other: dweight ends up holding one program's 16 rows. Right only when M <= 16.
"""
# expect-fail: many_rows
# expect-fail: many_short_rows
# expect-fail: gpu_odd

import torch
import triton
import triton.language as tl


@triton.jit
def rms_norm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_ptr,
                        M, N, dy_row_stride, x_row_stride, dx_row_stride, rows_per_program,
                        BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, M)
    for row in range(row_start, row_end):
        dy = tl.load(dy_ptr + row * dy_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        g = dy * w
        c = tl.sum(g * x, axis=0) / N
        dx = (g - x * (rstd * rstd * c)) * rstd
        tl.store(dx_ptr + row * dx_row_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw_acc += dy * x * rstd
    # BUG: every program writes its own partial sum straight into dweight. They overwrite each
    # other (on a GPU whichever finishes last wins): dweight holds one program's rows only.
    tl.store(dw_ptr + cols, dw_acc, mask=mask)


def rms_norm_backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                      rstd: torch.Tensor):
    M, N = x.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    dweight = torch.empty(N, dtype=torch.float32, device=x.device)
    rows_per_program = 16
    P = triton.cdiv(M, rows_per_program)
    block = triton.next_power_of_2(N)
    rms_norm_bwd_kernel[(P,)](dy, x, weight, rstd, dx, dweight, M, N,
                              dy.stride(0), x.stride(0), dx.stride(0), rows_per_program,
                              BLOCK_N=block, num_warps=8)
    return dx, dweight
