"""Reference solution for the matmul kata.

What it teaches: how a Triton GEMM reaches cuBLAS speed on a Hopper GPU, and what each part of
it buys.

1. Tiles and the K loop. Each program owns one BLOCK_M x BLOCK_N tile of C and walks K in
   BLOCK_K steps, accumulating tl.dot(a_tile, b_tile) into a float32 accumulator. tl.dot runs on
   the tensor cores (wgmma on sm_90) and multiplies float16 or bfloat16 exactly; the sums must
   stay in float32 whatever the input dtype: a float16 running sum keeps 11 bits, and once it
   has grown large every new product loses most of its digits. Round once, on the store.

2. Arithmetic intensity. A 128 x 256 tile reads (128 + 256) * 64 elements per K step and does
   2 * 128 * 256 * 64 FLOPs with them: 85 FLOPs per byte, enough to keep the tensor cores fed
   from shared memory. Eight warps (two warpgroups, each 64 x 256 of the accumulator: 128 fp32
   registers a thread) issue the MMAs.

3. The pipeline. Loads of step k + 1 and k + 2 are in flight while step k multiplies
   (num_stages = 3 buffers of shared memory, 48 KB each). Here the loads are TMA loads
   (tensor descriptors): one thread asks the copy engine for a whole tile, no registers hold
   addresses, and the engine pads out-of-bounds rows and columns with zeros, which is the K tail
   (and the M, N tails of the operands) handled in hardware. A pointer-based kernel
   (tl.load(a_ptrs, mask=...)) computes the same thing, and the hints show it; on Hopper it
   tends to stay further below cuBLAS, because every 16-byte cp.async needs its own address and
   mask in registers and its own instruction.

4. Grouped program ordering (L2 reuse). About one program per SM runs at a time, and they move
   through K at roughly the same pace, so what one wave of programs reads at each K step is
   what must come from HBM. In row-major order (pid_m = pid // num_pid_n) a wave of 132
   programs at 8192^3 covers 4 rows of tiles x all 32 columns: 4 slices of A and 32 of B per
   step. Grouped ordering hands program ids out GROUP_M = 8 rows of tiles at a time, column by
   column: the wave covers 8 rows x ~16 columns, 8 slices of A and 16 of B, 40% fewer bytes
   from HBM for the same work (and the L2 hit rate to match). Correct either way; the
   difference is HBM traffic, and it grows with the problem.

5. Strides and alignment. b may be a transposed view (w.t() of a contiguous (N, K) weight, the
   layout of every nn.Linear): then its tile is read as a (BLOCK_N, BLOCK_K) block of w and fed
   to tl.dot transposed (.T), which the tensor cores read directly, no copy. TMA needs each row
   to start on a 16-byte boundary: for K = 4097 (or N = 4097) the rows of a float16 matrix are
   8194 bytes apart and only 2-byte aligned, and no 16-byte load of any kind is possible. The
   launcher then copies the operand once into a buffer whose rows are padded to a multiple of 8
   elements and describes the first K columns of it (PyTorch's compiler pads such matmuls too).
   The copy moves about 4 x 34 MB at 4097^3, some 15% of the GEMM's own time, and buys 16-byte
   TMA loads for the O(MNK) loop.

6. A config chosen by shape, not autotuned. Large problems use 128 x 256 tiles; where they
   would leave most of the last wave of programs idle (wave quantization: tiles / SMs just above
   an integer) the 128 x 128 tile is cheaper, and few-tile problems use 64 x 128. Decode-like
   shapes (M <= 64) read B once and do little arithmetic: they are bound by memory bandwidth, so
   their tiles are narrow in N (16 or 64 rows of A, 32 to 128 columns of B) to give every SM a
   program streaming its own columns of B. Split-K would help when even that leaves SMs idle,
   but it needs a second pass to add the partial sums, and the bias and activation of
   matmul_bias_act could only be applied in it: not needed at these shapes.

7. The fused epilogue. matmul_bias_act adds the bias, applies the activation and rounds in
   registers, on the float32 accumulator, before the one store: eager PyTorch writes a @ b,
   reads it back to add the bias, writes that, reads it again for the activation and writes
   once more. gelu_tanh is x * sigmoid(2u) (the same function as 0.5 x (1 + tanh(u)), with no
   tanh to overflow), with u = sqrt(2 / pi) (x + 0.044715 x^3). The erf form,
   x * Phi(x), differs from it by up to 4.7e-4 (at x = -2.7, where gelu is only -0.009).
"""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

# Constants a kernel reads must be tl.constexpr (a plain module-level float is refused).
LOG2E = tl.constexpr(1.4426950408889634)
TWO_SQRT_2_OVER_PI = tl.constexpr(2.0 * 0.7978845608028654)
GELU_CUBIC = tl.constexpr(0.044715)


@triton.jit
def _activation(x, ACTIVATION: tl.constexpr):
    # ACTIVATION is a compile-time string: each activation is its own specialised kernel.
    if ACTIVATION == "relu":
        x = tl.maximum(x, 0.0)
    elif ACTIVATION == "gelu_tanh":
        # 0.5 * x * (1 + tanh(u)) == x * sigmoid(2u) == x / (1 + exp(-2u)): exp(-2u) = inf for
        # very negative x gives x / inf = -0, and 0 for very positive x gives x.
        two_u = TWO_SQRT_2_OVER_PI * x * (1.0 + GELU_CUBIC * x * x)
        x = x / (1.0 + tl.exp2(-two_u * LOG2E))
    return x


@triton.jit
def matmul_kernel(a_desc, b_desc, c_ptr, bias_ptr, M, N, K, stride_cm,
                  B_KMAJOR: tl.constexpr, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr):
    # Grouped ordering: consecutive program ids walk down a group of GROUP_M rows of tiles,
    # column by column, so the programs in flight share rows of A and columns of B in L2. The
    # last group may be shorter: group_m clips it, or some tiles would never be computed.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_m
    pid_n = (pid % num_pid_in_group) // group_m
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N

    # The main loop: TMA loads (zero-filled past M, N and K), tensor-core dots, float32 sums.
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        if B_KMAJOR:
            b = b_desc.load([off_n, k * BLOCK_K]).T  # a (BLOCK_N, BLOCK_K) block of w = b.t()
        else:
            b = b_desc.load([k * BLOCK_K, off_n])
        acc = tl.dot(a, b, acc)

    # The epilogue, on the float32 accumulator: bias, activation, one rounding, one store.
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
        acc = acc + bias[None, :]
    acc = _activation(acc, ACTIVATION)
    # int64 row offsets: M * N may pass 2**31 elements.
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


# ----------------------------------------------------------------------------------------------
# Configs: (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages), and each tile's rough
# throughput relative to the 128 x 256 one (smaller tiles re-read more operand bytes per FLOP).
# Shared memory per stage: (BLOCK_M + BLOCK_N) * BLOCK_K * 2 bytes: 48 KB x 3 and 32 KB x 4.
LARGE_TILES = [
    ((128, 256, 64, 8, 8, 3), 1.0),
    ((128, 128, 64, 8, 8, 4), 0.9),
    ((64, 128, 64, 8, 4, 4), 0.75),
]
# A transposed b (read as blocks of the (N, K) weight) prefers the tile the other way round:
# measured on an H100 at 8192^3 fp16, 256 x 128 runs at 0.99x cuBLAS there, 128 x 256 at 0.86x
# (row-major b: 128 x 256 at 1.00x, 256 x 128 at 0.96x).
KMAJOR_TILES = [((256, 128, 64, 8, 8, 3), 1.0)] + LARGE_TILES[1:]
DEFAULT_SMS = 132  # H100 SXM and H200; used under the interpreter, which has no device to ask
_sms_cache: dict = {}


def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return DEFAULT_SMS
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _sms_cache:
        _sms_cache[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _sms_cache[index]


def _pick_config(M: int, N: int, K: int, sms: int, b_kmajor: bool = False) -> tuple:
    block_k = min(64, max(16, triton.next_power_of_2(K)))
    if M <= 64:
        # Decode-like: bound by reading B once. 16, 32 or 64 rows of A (tl.dot needs 16), and
        # N tiles narrow enough that (nearly) every SM streams its own columns of B.
        block_m = max(16, triton.next_power_of_2(M))
        block_n = 128
        while block_n > 32 and triton.cdiv(N, block_n) < 0.9 * sms:
            block_n //= 2
        block_k = min(128, max(16, triton.next_power_of_2(K)))
        return (block_m, block_n, block_k, 1, 4, 4)

    # Time ~ waves of programs x the work of one tile / its throughput: pick the cheapest.
    def cost(entry):
        (bm, bn, _, _, _, _), speed = entry
        waves = triton.cdiv(triton.cdiv(M, bm) * triton.cdiv(N, bn), sms)
        return waves * bm * bn / speed

    bm, bn, _, group_m, warps, stages = min(KMAJOR_TILES if b_kmajor else LARGE_TILES, key=cost)[0]
    return (bm, bn, block_k, group_m, warps, stages)


def _tma_ready(x: torch.Tensor) -> torch.Tensor:
    """x itself when TMA can read it (unit stride along the row, rows 16-byte aligned), else a
    copy into a buffer whose rows are padded to 16 bytes, viewed back to x's shape."""
    R, C = x.shape
    if x.stride(1) == 1 and (x.stride(0) * x.element_size()) % 16 == 0 and x.data_ptr() % 16 == 0:
        return x
    per_16_bytes = 16 // x.element_size()
    padded = torch.empty((R, triton.cdiv(C, per_16_bytes) * per_16_bytes), dtype=x.dtype, device=x.device)
    padded[:, :C].copy_(x)  # a layout copy (allowed); the padding columns are never read
    return padded[:, :C]


def _descriptor(x: torch.Tensor, block_shape) -> TensorDescriptor:
    return TensorDescriptor(x, list(x.shape), list(x.stride()), list(block_shape))


def _gemm(a: torch.Tensor, b: torch.Tensor, bias, activation: str) -> torch.Tensor:
    assert a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0], "shapes (M, K) and (K, N)"
    assert a.dtype == b.dtype and a.dtype in (torch.float16, torch.bfloat16)
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    # b's strides decide how it is read: a row-major (K, N) b by (BLOCK_K, BLOCK_N) blocks; a
    # transposed view of a (N, K) weight (stride 1 along K) by (BLOCK_N, BLOCK_K) blocks of the
    # weight itself. Any other strides: one copy to row-major.
    b_kmajor = b.stride(0) == 1 and b.stride(1) != 1
    block_m, block_n, block_k, group_m, warps, stages = _pick_config(M, N, K, _num_sms(a.device), b_kmajor)

    a_desc = _descriptor(_tma_ready(a), (block_m, block_k))
    if b_kmajor:
        b_desc = _descriptor(_tma_ready(b.t()), (block_n, block_k))
    else:
        b_desc = _descriptor(_tma_ready(b if b.stride(1) == 1 else b.contiguous()), (block_k, block_n))

    grid = (triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)
    matmul_kernel[grid](
        a_desc, b_desc, c, bias if bias is not None else c, M, N, K, c.stride(0),
        B_KMAJOR=b_kmajor, HAS_BIAS=bias is not None, ACTIVATION=activation,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m,
        num_warps=warps, num_stages=stages,
    )
    return c


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a (M, K) @ b (K, N) in float16 or bfloat16, float32 accumulation, output in a's dtype."""
    return _gemm(a, b, None, "none")


def matmul_bias_act(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, activation: str) -> torch.Tensor:
    """activation(a @ b + bias), activation in {"none", "relu", "gelu_tanh"}, in one kernel."""
    if activation not in ("none", "relu", "gelu_tanh"):
        raise ValueError(f"unknown activation {activation!r}")
    assert bias.shape == (b.shape[1],)
    return _gemm(a, b, bias.contiguous(), activation)
