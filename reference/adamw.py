"""Reference solution for the adamw kata.

What it teaches: a fused, multi-tensor optimizer step, the way torch.optim.AdamW(fused=True)
and apex's multi_tensor_apply do it, in one Triton launch.

- The math is elementwise and tiny (a dozen FLOPs an element), so the step is memory-bound:
  each element reads param, grad, exp_avg and exp_avg_sq and writes three of them back, 28
  bytes in float32. The only way to be fast is to move those bytes once, at full bandwidth:
  every intermediate (the new moments, the denominator, the update) stays in registers.

- A model is not one tensor but a list of them, most of them small: GPT-2 small has 148
  parameters, 98 of which hold 768 to 3072 elements. One launch per tensor (what a first
  version does) pays a kernel launch, a few microseconds, for each, and a launch over 768
  elements cannot fill a GPU; the small tensors end up costing more than the big ones. So the
  whole list goes in a single launch.

- A single launch needs the kernel to find its tensor. The launcher builds a small table on
  the device, once per call: for every tensor, the index of its first program, its size, and
  the addresses of its four tensors. Program `pid` counts the tensors whose first program is
  <= pid (one vector compare over the table) and so knows which tensor, and which chunk of
  it, it owns. Addresses become pointers with `.to(tl.pointer_type(...))`.

- The table must reach the GPU without the host waiting for it. torch.tensor(..., device=)
  copies from pageable memory and then blocks until the GPU has run everything queued before
  the copy; only then does the host launch the kernel, and the GPU sits idle for that launch.
  Made in pinned memory and copied with non_blocking=True, the copy is queued like a kernel
  and the host goes straight on to the launch.

- Loads through such pointers need care to be fast. The compiler emits 16-byte vector loads
  only where it can prove alignment and contiguity: it knows a pointer argument is aligned
  (Triton checks at launch), but an address read from memory tells it nothing, and a mask
  `offs < numel` with numel read from memory splits every vector. So a full chunk of 16-byte
  aligned tensors (every tensor PyTorch allocates is aligned; all but the last chunk of each
  tensor are full) says so with tl.multiple_of and runs unmasked; the last, partial chunk of a
  tensor (and any unaligned view) takes a masked path. Checked by compiling for sm_90:
  ld.global.v4 on the fast path.

- AdamW as torch.optim.AdamW defines it, at step t (counted from 1):
      param  = param * (1 - lr * weight_decay)          decoupled weight decay, not L2
      m      = beta1 * m + (1 - beta1) * g
      v      = beta2 * v + (1 - beta2) * g * g
      param -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
  The bias corrections depend only on t, so they are computed once on the host. Everything is
  computed in float32; a bfloat16 param is rounded once, on its store. grads are only read.
"""

import itertools
import math

import torch
import triton
import triton.language as tl

# Elements per block, and blocks per program: a program owns one chunk of 8192 elements of one
# tensor, so the 124M parameters of GPT-2 make ~15 000 programs (many waves on 132 SMs) and a
# 768-element LayerNorm weight makes one. 1024 float32 over 4 warps is two 16-byte loads per
# thread and tensor, eight in flight per thread before the math (80 registers: 6 programs an
# SM, ~100 KB of loads in flight per SM, several times what the memory system needs).
BLOCK = 1024
BLOCKS_PER_PROGRAM = 8
CHUNK = BLOCK * BLOCKS_PER_PROGRAM
# Table entries each program compares its id with per step of its search (one step up to 256
# tensors; the 200 of the largest lists fit).
SEARCH = 256
NUM_WARPS = 4

_TL_DTYPES = {torch.float32: tl.float32, torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}


@triton.jit
def _adamw_block(p_ptr, g_ptr, m_ptr, v_ptr, offs, mask, decay, beta1, one_minus_beta1,
                 beta2, one_minus_beta2, step_size, inv_bc2_sqrt, eps):
    """One block of the update, in registers: 4 loads, 3 stores. mask=None: a full block."""
    p = tl.load(p_ptr + offs, mask=mask).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask).to(tl.float32)
    m = tl.load(m_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    # The moments first: the update uses the new ones.
    m = beta1 * m + one_minus_beta1 * g
    v = beta2 * v + one_minus_beta2 * g * g
    # eps is added to the bias-corrected sqrt(v), outside the square root.
    denom = tl.sqrt(v) * inv_bc2_sqrt + eps
    p = p * decay - step_size * m / denom
    tl.store(m_ptr + offs, m, mask=mask)
    tl.store(v_ptr + offs, v, mask=mask)
    tl.store(p_ptr + offs, p.to(p_ptr.dtype.element_ty), mask=mask)


@triton.jit
def adamw_kernel(
    table_ptr, n_tensors,
    decay, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, inv_bc2_sqrt, eps,
    PARAM_DTYPE: tl.constexpr, BLOCK: tl.constexpr, BLOCKS_PER_PROGRAM: tl.constexpr,
    SEARCH: tl.constexpr,
):
    pid = tl.program_id(0)

    # Which tensor is mine? Row 0 of the table holds each tensor's first program, in
    # increasing order: mine is the last one that starts at or before pid.
    t = -1
    for base in range(0, n_tensors, SEARCH):
        idx = base + tl.arange(0, SEARCH)
        first = tl.load(table_ptr + idx, mask=idx < n_tensors, other=2**62)
        t += tl.sum((first <= pid).to(tl.int32), axis=0)

    # Rows 1 to 5: its size and the addresses of param, grad, exp_avg, exp_avg_sq.
    numel = tl.load(table_ptr + n_tensors + t)
    p_addr = tl.load(table_ptr + 2 * n_tensors + t)
    g_addr = tl.load(table_ptr + 3 * n_tensors + t)
    m_addr = tl.load(table_ptr + 4 * n_tensors + t)
    v_addr = tl.load(table_ptr + 5 * n_tensors + t)
    chunk_start = (pid - tl.load(table_ptr + t)) * (BLOCK * BLOCKS_PER_PROGRAM)
    n_left = numel - chunk_start
    aligned = ((p_addr | g_addr | m_addr | v_addr) & 15) == 0

    if aligned & (n_left >= BLOCK * BLOCKS_PER_PROGRAM):
        # A full chunk of 16-byte-aligned tensors (all but the last chunk of every tensor
        # PyTorch allocates): say so, since the hint is what lets the compiler emit 16-byte
        # loads and stores, and drop the masks.
        p_ptr = tl.multiple_of(p_addr.to(tl.pointer_type(PARAM_DTYPE)), 16)
        g_ptr = tl.multiple_of(g_addr.to(tl.pointer_type(PARAM_DTYPE)), 16)
        m_ptr = tl.multiple_of(m_addr.to(tl.pointer_type(tl.float32)), 16)
        v_ptr = tl.multiple_of(v_addr.to(tl.pointer_type(tl.float32)), 16)
        for i in range(BLOCKS_PER_PROGRAM):
            offs = tl.multiple_of(chunk_start + i * BLOCK, BLOCK) + tl.arange(0, BLOCK)
            _adamw_block(p_ptr, g_ptr, m_ptr, v_ptr, offs, None, decay, beta1, one_minus_beta1,
                         beta2, one_minus_beta2, step_size, inv_bc2_sqrt, eps)
    else:
        # The tensor's last, partial chunk (or a view that is not 16-byte aligned): masked.
        p_ptr = p_addr.to(tl.pointer_type(PARAM_DTYPE))
        g_ptr = g_addr.to(tl.pointer_type(PARAM_DTYPE))
        m_ptr = m_addr.to(tl.pointer_type(tl.float32))
        v_ptr = v_addr.to(tl.pointer_type(tl.float32))
        n_blocks = tl.minimum((n_left + BLOCK - 1) // BLOCK, BLOCKS_PER_PROGRAM).to(tl.int32)
        for i in range(0, n_blocks):
            offs = chunk_start + i * BLOCK + tl.arange(0, BLOCK)
            _adamw_block(p_ptr, g_ptr, m_ptr, v_ptr, offs, offs < numel, decay, beta1,
                         one_minus_beta1, beta2, one_minus_beta2, step_size, inv_bc2_sqrt, eps)


def adamw_step(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay):
    n = len(params)
    if n == 0:
        return
    # The kata's contract: contiguous tensors; params and grads share one dtype; the states are
    # float32. (Checking contiguity here would cost a Python call per tensor on every step.)
    numels = [p.numel() for p in params]
    # First program of each tensor: a running sum of its chunk counts (cdiv: a partial last
    # chunk still needs a program). The last entry is the size of the grid.
    firsts = list(itertools.accumulate((-(-k // CHUNK) for k in numels), initial=0))
    n_programs = firsts.pop()
    if n_programs == 0:
        return
    # One small int64 tensor, made from Python ints: (6 x n) * 8 bytes, about 7 KB for GPT-2's
    # 148 tensors. It goes to the GPU from pinned (page-locked) host memory, asynchronously: a
    # plain torch.tensor(..., device="cuda") copies from pageable memory and then waits for the
    # GPU to finish everything queued before it, so the GPU idles while the host launches the
    # kernel. That wait cost 12% of a GPT-2 step in the grader (docs/PERFORMANCE.md). The pinned
    # buffer is not reused before the copy has run (PyTorch's pinned allocator waits for it).
    table = torch.tensor(
        firsts + numels
        + [p.data_ptr() for p in params] + [g.data_ptr() for g in grads]
        + [m.data_ptr() for m in exp_avgs] + [v.data_ptr() for v in exp_avg_sqs],
        dtype=torch.int64, pin_memory=params[0].is_cuda,
    ).to(params[0].device, non_blocking=True)
    # Bias corrections and step size, in double precision on the host, once per step.
    bc1 = 1.0 - beta1 ** step
    bc2 = 1.0 - beta2 ** step
    adamw_kernel[(n_programs,)](
        table, n,
        1.0 - lr * weight_decay, beta1, 1.0 - beta1, beta2, 1.0 - beta2,
        lr / bc1, 1.0 / math.sqrt(bc2), eps,
        PARAM_DTYPE=_TL_DTYPES[params[0].dtype], BLOCK=BLOCK,
        BLOCKS_PER_PROGRAM=BLOCKS_PER_PROGRAM, SEARCH=SEARCH, num_warps=NUM_WARPS,
    )
