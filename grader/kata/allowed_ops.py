"""What PyTorch may do while a submission's entry function runs (the `torch_compute` rule).

The outputs must be computed by the submission's Triton kernels. PyTorch may allocate tensors, fill
them with a constant, take views and change metadata, and copy tensors on their device (layout and
dtype copies); nothing else that computes on tensor data. A kata may allow more (kata.yaml
`allowed_ops`) and its `forbidden` list always wins. grader/sandbox/torch_compute.py enforces it; this
module only names the ops, without importing torch, so `kata show` and grader.kata.format can use
it.

Names are aten overload packets as the dispatcher sees them (`aten.exp`, not `torch.exp`), plus
a few Python-level ways of reading tensor values on the host (`Tensor.numpy`, ...).
"""

from __future__ import annotations

# (group, what it means for the user, aten overload packets). The order is the order shown.
ALLOWED_GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("allocate", "allocate tensors: torch.empty / zeros / ones / full / arange / linspace / eye, "
     "their _like and new_ forms, torch.tensor(...), resize_", (
        "aten.empty", "aten.empty_like", "aten.empty_strided", "aten.empty_permuted",
        "aten.new_empty", "aten.new_empty_strided", "aten.zeros", "aten.zeros_like",
        "aten.new_zeros", "aten.ones", "aten.ones_like", "aten.new_ones", "aten.full",
        "aten.full_like", "aten.new_full", "aten.scalar_tensor", "aten.arange", "aten.linspace",
        "aten.eye", "aten.lift_fresh", "aten.resize_", "aten.resize_as_", "aten.set_",
    )),
    ("fill", "fill a tensor with a constant: fill_, zero_", (
        "aten.fill_", "aten.zero_",
    )),
    ("view", "views and metadata: view, reshape, flatten, t, transpose, permute, expand, "
     "(un)squeeze, slicing and indexing with ints and slices, narrow, split, unbind, detach; "
     "dtype and layout queries (promote_types, can_cast, is_pinned)", (
        "aten.view", "aten._unsafe_view", "aten._reshape_alias", "aten.reshape", "aten.as_strided",
        "aten.as_strided_", "aten.alias", "aten.t", "aten.t_", "aten.transpose", "aten.transpose_",
        "aten.permute", "aten.expand", "aten.unsqueeze", "aten.unsqueeze_", "aten.squeeze",
        "aten.squeeze_", "aten.select", "aten.slice", "aten.narrow", "aten.unbind", "aten.split",
        "aten.split_with_sizes", "aten.unsafe_split", "aten.unsafe_split_with_sizes", "aten.chunk",
        "aten.unfold", "aten.diagonal", "aten.detach", "aten.detach_", "aten.view_as_real",
        "aten.view_as_complex", "aten.real", "aten.imag", "aten.sym_size", "aten.sym_stride",
        "aten.sym_numel", "aten.sym_storage_offset", "aten.size", "aten.stride", "aten.numel",
        "aten.dim", "aten.is_contiguous", "aten.is_same_size", "aten.record_stream",
        # dtype and layout queries: no tensor data read
        "aten.promote_types", "aten.result_type", "aten.can_cast", "aten.is_pinned", "aten.is_set_to",
        "aten.is_non_overlapping_and_dense", "aten.is_strides_like_format", "aten.sym_is_contiguous",
        "aten.get_device", "aten.is_floating_point", "aten.is_complex", "aten.is_signed",
        "aten.is_conj", "aten.is_neg", "aten.is_inference", "aten._has_compatible_shallow_copy_type",
        "profiler._record_function_enter_new", "profiler._record_function_exit",
    )),
    ("copy", "layout and dtype copies on the tensor's device: contiguous, clone, .to(dtype), copy_", (
        "aten.clone", "aten._to_copy", "aten.copy_", "aten.copy", "aten.contiguous", "aten.to",
        "aten._copy_from", "aten._copy_from_and_resize",
    )),
)

BASE_ALLOWED: frozenset[str] = frozenset(op for _, _, ops in ALLOWED_GROUPS for op in ops)

# The dtypes a kata may name in `forbidden_casts` (torch's names, without importing torch): PyTorch
# may then not convert another dtype into them during a call. A copy does no arithmetic beyond
# rounding, but in a quantization kata that rounding is the work.
CAST_TARGETS: tuple[str, ...] = (
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "int8", "uint8",
    "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64", "bool",
)

# Python-level reads of tensor values into Python or NumPy: no aten op runs for most of them.
HOST_READS: dict[str, str] = {
    "Tensor.numpy": ".numpy()",
    "Tensor.tolist": ".tolist()",
    "Tensor.__array__": "numpy.asarray(tensor)",
    "Tensor.__dlpack__": "DLPack export",
    "Tensor.__repr__": "printing a tensor",
    "Tensor.__format__": "formatting a tensor",
}

# How some aten ops are usually spelled in Python, for the message.
SPELLINGS: dict[str, str] = {
    "aten._local_scalar_dense": ".item(), int(t), float(t), bool(t), `if t:`",
    "aten.is_nonzero": "bool(t), `if t:`",
    "aten.mm": "a @ b, torch.matmul", "aten.addmm": "torch.nn.functional.linear, a @ b + c",
    "aten.bmm": "batched a @ b", "aten.dot": "1-D a @ b",
    "aten.index": "indexing with a tensor", "aten.index_put_": "assigning through a tensor index",
    "aten.constant_pad_nd": "torch.nn.functional.pad", "aten.cat": "torch.cat",
    "aten.div": "/", "aten.mul": "*", "aten.sub": "-", "aten.add": "+",
    "aten.amax": "amax / max(dim)", "aten.sum": ".sum()", "aten.exp": ".exp()",
}

def is_op_name(name: str) -> bool:
    """An aten-style op name (`namespace.op`), or one of the host reads."""
    if name in HOST_READS:
        return True
    parts = name.split(".")
    return len(parts) == 2 and all(p.replace("_", "a").isalnum() for p in parts) and not parts[0][0].isdigit()


def effective_allowed(allowed_ops, forbidden) -> frozenset[str]:
    """What a task may call: the base list and the kata's additions, minus what it forbids."""
    return frozenset((BASE_ALLOWED | set(allowed_ops)) - set(forbidden))


def describe(names, limit: int = 6) -> str:
    """'aten.exp (.exp()), aten.sum (.sum()) and 2 more' for a message."""
    names = list(dict.fromkeys(names))
    shown = []
    for name in names[:limit]:
        spelled = SPELLINGS.get(name) or HOST_READS.get(name)
        shown.append(f"{name} ({spelled})" if spelled and name not in HOST_READS else
                     (f"{spelled} ({name})" if spelled else name))
    more = len(names) - limit
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")
