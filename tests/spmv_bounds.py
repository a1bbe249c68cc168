"""The spmv kata's reference under a bounds-checking Triton interpreter, in a fresh process.

The interpreter reads and writes host memory through raw addresses and checks none of them: a
kernel that reads a few entries before a tensor passes every interpreter grade and faults on a GPU
only when that tensor happens to begin its allocation ("an illegal memory access", depending on the
allocator's state: one dtype of a case, not the other). Here every unmasked address of every load,
store and atomic of the reference's kernels must lie inside one of the launch's tensor arguments,
every tl.gather index inside its source, and every output element must be written (the outputs are
torch.empty: filled with NaN here, as a GPU's recycled memory would hold garbage).

`python tests/spmv_bounds.py` prints one JSON line per (task, matrix, dtype): {"case", "oob",
"unwritten", "ok"}; tests/test_spmv_bounds.py asserts on them.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton.runtime.interpreter as interp  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPANS: list[tuple[int, int, str]] = []  # [lo, hi) byte ranges of the running launch's tensors
FAULTS: list[str] = []


def _load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _spans(values, names):
    SPANS.clear()
    for value, name in zip(values, names):
        if isinstance(value, torch.Tensor) and value.numel():
            last = sum((n - 1) * s for n, s in zip(value.shape, value.stride()))
            SPANS.append((value.data_ptr(), value.data_ptr() + (last + 1) * value.element_size(), name))


def _check(ptrs, mask, what):
    addr = np.asarray(ptrs).astype(np.uint64)
    if mask is not None:
        addr = addr[np.broadcast_to(np.asarray(mask), addr.shape)]
    addr = addr.ravel()
    if addr.size == 0:
        return
    inside = np.zeros(addr.shape, dtype=bool)
    for lo, hi, _ in SPANS:
        inside |= (addr >= lo) & (addr < hi)
    if not inside.all():
        bad = int(addr[~inside][0])
        where = ", ".join(f"{n}{bad - lo:+d}B" for lo, _, n in SPANS)
        FAULTS.append(f"{what} of program {interp.interpreter_builder.grid_idx} outside every "
                      f"argument ({where})")


def install():
    builder = interp.InterpreterBuilder
    init, load, store = (interp.GridExecutor._init_args_hst, builder.create_masked_load,
                         builder.create_masked_store)
    rmw, gather = builder.create_atomic_rmw, builder.create_gather

    def init_args(self, args_dev, kwargs):
        args, kw = init(self, args_dev, kwargs)
        names = inspect.getfullargspec(self.fn).args
        _spans(list(args) + list(kw.values()), names[:len(args)] + list(kw))
        return args, kw

    def masked_load(self, ptrs, mask, *rest):
        _check(ptrs.data, mask.data, "load")
        return load(self, ptrs, mask, *rest)

    def masked_store(self, ptrs, value, mask, *rest):
        _check(ptrs.data, mask.data, "store")
        return store(self, ptrs, value, mask, *rest)

    def atomic_rmw(self, op, ptr, val, mask, *rest):
        _check(ptr.data, None if mask is None else mask.data, "atomic")
        return rmw(self, op, ptr, val, mask, *rest)

    def create_gather(self, src, indices, axis):
        idx = np.asarray(indices.data)
        if idx.size and (idx.min() < 0 or idx.max() >= src.data.shape[axis]):
            FAULTS.append(f"gather index {idx.min()}..{idx.max()} of a source of {src.data.shape}")
        return gather(self, src, indices, axis)

    interp.GridExecutor._init_args_hst = init_args
    builder.create_masked_load, builder.create_masked_store = masked_load, masked_store
    builder.create_atomic_rmw, builder.create_gather = atomic_rmw, create_gather


class _PoisonedTorch:
    """The reference's `torch`, whose empty() returns NaN-filled floats (garbage ints)."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def empty(*args, **kwargs):
        out = torch.empty(*args, **kwargs)
        out.fill_(float("nan") if out.dtype.is_floating_point else -12345)
        return out


# Matrices (kata.yaml's case parameters; nnz and max_row are filled in): the structures of the GPU
# cases, shrunk. Rows spanning several programs, mostly empty rows, power laws with hubs.
SPMV = {
    "dense_rows_across_programs": dict(R=64, C=5000, row_len=[1, 8], dense_rows=2),
    "empty_heavy": dict(R=3000, C=1000, alpha=2.5, cap=200, empty_frac=0.6),
    "power_law_hubs": dict(R=2000, C=3000, alpha=2.2, cap=100, long_rows=2, long_len=2500,
                           empty_frac=0.2),
    "nnz_zero": dict(R=37, C=10, row_len=[0, 0]),
    "one_row": dict(R=1, C=3000, row_len=[2500, 2500]),
}
SPMM = {
    "mm_power_law": dict(R=600, C=3000, alpha=2.5, cap=32, long_rows=1, long_len=1500, N=24),
    "mm_empty_heavy": dict(R=1000, C=500, alpha=2.5, cap=60, empty_frac=0.6, N=20),
    "mm_long_rows": dict(R=40, C=1200, row_len=[10, 40], dense_rows=1, N=16),  # the "ell" mode
}


def main():
    install()
    spec = _load_module(ROOT / "katas" / "spmv" / "spec.py", "spmv_spec")
    ref = _load_module(ROOT / "reference" / "spmv.py", "spmv_reference")
    ref.torch = _PoisonedTorch()
    for task, cases in (("spmv", SPMV), ("spmm", SPMM)):
        for name, params in cases.items():
            case = dict(params)
            lens = spec.row_lengths(case)
            case["nnz"], case["max_row"] = int(lens.sum()), int(lens.max())
            for dtype in (torch.float32, torch.float16):
                gen = torch.Generator().manual_seed(len(name))
                if task == "spmv":
                    inp = spec.make_inputs(case, dtype, "cpu", gen)
                    args = (inp["crow_indices"], inp["col_indices"], inp["values"], inp["x"])
                    got, truth, mag = ref.spmv(*args), spec.reference(*args), spec.summed_magnitude(*args)
                else:
                    inp = spec.make_spmm_inputs(case, dtype, "cpu", gen)
                    args = (inp["crow_indices"], inp["col_indices"], inp["values"], inp["b"])
                    got = ref.spmm(*args)
                    truth, mag = spec.spmm_reference(*args), spec.spmm_summed_magnitude(*args)
                err = (got.double() - truth).abs()
                ok = bool((err <= 1e-6 + 1e-2 * mag).all())  # loose: not the kata's tolerance
                print(json.dumps({"case": f"{task}/{name}/{str(dtype)[6:]}", "oob": FAULTS[:3],
                                  "unwritten": int(got.isnan().sum()), "ok": ok}), flush=True)
                FAULTS.clear()


if __name__ == "__main__":
    sys.exit(main())
