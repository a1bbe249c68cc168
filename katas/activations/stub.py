"""activations: relu, gelu (erf and tanh forms), silu, swiglu and swiglu's backward, each
computed by Triton kernels.

Run `kata grade` in this folder to check your work; `kata hint activations` if you are stuck.
All five functions are graded: each has its own cases.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def unary_kernel(x_ptr, out_ptr, n_elements, ACT: tl.constexpr, BLOCK: tl.constexpr):
    # TODO: each program handles one block of BLOCK elements of the flattened input.
    # - mind the last block: n_elements is rarely a multiple of BLOCK
    # - load, convert to float32, apply the activation chosen by ACT (a compile-time string:
    #   `if ACT == "relu": ...`), convert to the output's dtype on the store
    # - no intermediate value may overflow where the answer is finite
    pass


@triton.jit
def swiglu_kernel(gate_ptr, up_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    # TODO: out = silu(gate) * up, element by element, in float32.
    pass


@triton.jit
def swiglu_backward_kernel(gate_ptr, up_ptr, grad_out_ptr, grad_gate_ptr, grad_up_ptr,
                           n_elements, BLOCK: tl.constexpr):
    # TODO: both gradients of out = silu(gate) * up, from one read of the three inputs.
    pass


def relu(x: torch.Tensor) -> torch.Tensor:
    """max(x, 0) of a contiguous 2-D tensor, as a new tensor of x's shape and dtype."""
    raise NotImplementedError("relu: allocate the output, launch unary_kernel, return it")


def gelu(x: torch.Tensor, approximate: str) -> torch.Tensor:
    """GELU as torch.nn.functional.gelu defines it: approximate is "none" (erf) or "tanh"."""
    raise NotImplementedError("gelu: allocate the output, launch a kernel for the form asked, return it")


def silu(x: torch.Tensor) -> torch.Tensor:
    """x * sigmoid(x), as a new tensor of x's shape and dtype."""
    raise NotImplementedError("silu: allocate the output, launch unary_kernel, return it")


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up, as a new tensor of gate's shape and dtype."""
    raise NotImplementedError("swiglu: allocate the output, launch swiglu_kernel, return it")


def swiglu_backward(gate: torch.Tensor, up: torch.Tensor, grad_out: torch.Tensor):
    """(grad_gate, grad_up): the gradients of sum(swiglu(gate, up) * grad_out)."""
    raise NotImplementedError(
        "swiglu_backward: allocate both gradients, launch swiglu_backward_kernel, return them"
    )
