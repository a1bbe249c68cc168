"""Honest variant: scalar running sums (each block reduced with tl.sum, then added to a float32
scalar: a blocked sequential order); total_sum with one program per large chunk writing a
partial and a one-program tree over the partials; row_argmax per block as the smallest column
equal to the block max."""
# panel-cases: large_positive, ties_long, many_blocks, all_negative, extreme_negative, zero_mean_long

import torch
import triton
import triton.language as tl


@triton.jit
def _row_sum(x_ptr, out_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    total = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        total += tl.sum(tl.load(x_ptr + row * stride + cols, mask=cols < N, other=0.0).to(tl.float32), axis=0)
    tl.store(out_ptr + row, total)


@triton.jit
def _row_argmax(x_ptr, out_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    best = float("-inf")
    best_i = 0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        m = tl.max(x, axis=0)
        first = tl.min(tl.where((x == m) & (cols < N), cols, N), axis=0)
        take = m > best
        best_i = tl.where(take, first, best_i)
        best = tl.where(take, m, best)
    tl.store(out_ptr + row, best_i.to(tl.int64))


@triton.jit
def _chunk(x_ptr, part_ptr, n, BLOCK: tl.constexpr, CHUNK: tl.constexpr):
    pid = tl.program_id(0)
    base = pid.to(tl.int64) * (BLOCK * CHUNK)
    total = 0.0
    for i in range(CHUNK):
        offs = base + i * BLOCK + tl.arange(0, BLOCK)
        total += tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32), axis=0)
    tl.store(part_ptr + pid, total)


@triton.jit
def _tree(part_ptr, out_ptr, P, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, P, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + idx, mask=idx < P, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


def row_sum(x):
    M, N = x.shape
    out = torch.empty(M, dtype=torch.float32, device=x.device)
    _row_sum[(M,)](x, out, N, x.stride(0), BLOCK=min(512, triton.next_power_of_2(N)))
    return out


def row_argmax(x):
    M, N = x.shape
    out = torch.empty(M, dtype=torch.int64, device=x.device)
    _row_argmax[(M,)](x, out, N, x.stride(0), BLOCK=min(512, triton.next_power_of_2(N)))
    return out


def total_sum(x):
    n = x.numel()
    BLOCK, CHUNK = 2048, 32
    P = triton.cdiv(n, BLOCK * CHUNK)
    part = torch.empty(P, dtype=torch.float32, device=x.device)
    out = torch.empty(1, dtype=torch.float32, device=x.device)
    _chunk[(P,)](x, part, n, BLOCK=BLOCK, CHUNK=CHUNK)
    _tree[(1,)](part, out, P, BLOCK=1024)
    return out
