"""Ways a submission might hide PyTorch work from the torch_compute check, run in a fresh process
(install_op_checks() patches torch for the life of the process, as the worker does).

`python tests/op_escapes.py` prints {scenario: {"ops": [...], "escapes": [...], "threads": [...]}}
as JSON; tests/test_torch_compute.py asserts on it. Each scenario is the body of a checked call.
The honest idioms of tests/honest_idioms.py are scenarios too ("idiom:NAME"); `--idioms-on
cuda` runs only those, on a GPU (tests/gpu/test_gpu_torch_compute.py).
"""

from __future__ import annotations

import json
import os
import sys
import threading

os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from grader.kata.allowed_ops import effective_allowed  # noqa: E402
from grader.sandbox.forbidden_ops import submission_guards  # noqa: E402
from grader.sandbox.torch_compute import install_op_checks, watch_torch_compute  # noqa: E402

x = torch.randn(64)


@triton.jit
def _double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def honest():
    out = torch.empty_like(x)
    z = torch.zeros(4, 4).t().contiguous().view(-1)[2:5]
    _double[(1,)](x.view(8, 8).reshape(-1), out, 64, BLOCK=64)
    z.fill_(1.0)
    bits = x.view(torch.int32).view(torch.uint8).view(torch.float32)  # bit views: torch adds a detach
    assert bits.data_ptr() == x.data_ptr()
    return out.to(torch.float16).float().unsqueeze(0).expand(2, 64).clone()


def fp8_cast():
    return x.to(torch.float8_e4m3fn)  # PyTorch rounds into float8


def fp8_copy_into():
    q = torch.empty(64, dtype=torch.float8_e4m3fn)
    q[:] = x
    return q


def fp8_honest():
    # Rounding done elsewhere (a kernel writing the bits): a bit view into float8 and casts out of
    # float8 or into other dtypes convert nothing into it.
    q = torch.zeros(64, dtype=torch.uint8).view(torch.float8_e4m3fn)
    q[:8] = torch.tensor(0.0)  # a constant filled in
    return q.float(), x.to(torch.bfloat16), q.clone()


def exp_sum():
    return x.exp() / x.exp().sum(-1, keepdim=True)


def random_numbers():
    return x * (torch.rand_like(x) > 0.5)  # dropout's mask drawn by PyTorch


def disable_torch_dispatch():
    with torch._C._DisableTorchDispatch():
        return x.exp()


def no_dispatch():
    from torch.utils._mode_utils import no_dispatch as nd
    with nd():
        return x.exp()


def pop_mode_temporarily():
    from torch.utils._python_dispatch import _pop_mode_temporarily
    with _pop_mode_temporarily():
        return x.exp()


def disable_current_modes():
    from torch.utils._python_dispatch import _disable_current_modes
    with _disable_current_modes():
        return x.exp()


def exclude_python_key():
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.Python)
    with torch._C._ExcludeDispatchKeyGuard(keys):
        return x.exp()


def pop_mode_and_leave_it():
    from torch.utils._python_dispatch import _pop_mode
    _pop_mode()
    return x.exp()


def redispatch():
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
    return torch.ops.aten.exp.default.redispatch(keys, x)


def record_function_off():
    torch.autograd._enable_record_function(False)
    with torch._C._DisableTorchDispatch():
        y = x.exp()
    torch.autograd._enable_record_function(True)
    return y


def profiler_off():
    torch.autograd._disable_profiler_legacy()
    with torch._C._DisableTorchDispatch():
        return x.exp()


def profiler_off_through_original():
    # the grader's own reference to the original, dug out of the wrapper's closure
    cells = torch.autograd._disable_profiler_legacy.__closure__
    original = next(c.cell_contents for c in cells if callable(c.cell_contents))
    original()
    with torch._C._DisableTorchDispatch():
        return x.exp()


def recorder_patched():
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    class Everything(frozenset):
        def __contains__(self, item):
            return True
    _get_current_dispatch_mode_stack()[-1].allowed = Everything()
    return x.exp()


def thread_does_the_work():
    box = []
    worker = threading.Thread(target=lambda: box.append(x.exp()))
    worker.start()
    worker.join()
    return box[0]


class _Hiding(torch.Tensor):
    """A subclass whose __torch_dispatch__ computes exp when asked for a view."""

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device)

    def __init__(self, inner):
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        inner = args[0].inner
        if func is torch.ops.aten.view.default:
            return inner.exp().view(args[1])
        return func(inner, *args[1:], **(kwargs or {}))


_hiding = _Hiding(x)


def subclass_hides_work():
    return _hiding.view(-1)


_library = None


def python_kernel_over_allowed_op():
    # A Python kernel registered (at import) over aten::alias for CPU, computing exp inside it.
    global _library
    if _library is None:
        import warnings
        warnings.simplefilter("ignore")
        _library = torch.library.Library("aten", "IMPL")
        _library.impl("alias", lambda t: torch.ops.aten.exp.default(t), "CPU")
    return torch.ops.aten.alias.default(x)


def numpy_read():
    import numpy as np
    out = torch.empty_like(x)
    out.copy_(torch.from_numpy(np.exp(x.numpy())))
    return out


def tolist_read():
    return torch.tensor([v * 2 for v in x.tolist()])


def item_read():
    return float(x[0]) + x[1].item()


def printing():
    print(x, file=open(os.devnull, "w"))


def custom_op():
    return torch.ops.kata_test.double(x)


torch.library.define("kata_test::double", "(Tensor x) -> Tensor")
torch.library.impl("kata_test::double", "CPU")(lambda t: t * 2)

SCENARIOS = [honest, exp_sum, random_numbers, disable_torch_dispatch, no_dispatch, pop_mode_temporarily,
             disable_current_modes, exclude_python_key, pop_mode_and_leave_it, redispatch,
             record_function_off, profiler_off, profiler_off_through_original, recorder_patched,
             thread_does_the_work, subclass_hides_work, python_kernel_over_allowed_op, numpy_read,
             tolist_read, item_read, printing, custom_op]


def run(scenario, allowed=None, forbidden=(), forbidden_casts=frozenset()) -> dict:
    from grader.sandbox import torch_compute
    from grader.sandbox.forbidden_ops import resolve_forbidden

    torch_compute._audit.clear()  # each scenario on its own (the worker keeps them for the whole grade)
    allowed = effective_allowed((), forbidden) if allowed is None else allowed
    python_level, aten_level = resolve_forbidden(forbidden)
    seen: list[str] = []
    error = None
    try:
        with submission_guards(python_level, aten_level, seen), watch_torch_compute(allowed, forbidden_casts) as record:
            scenario()
    except Exception as exc:  # noqa: BLE001
        error = f"{type(exc).__name__}: {exc}"
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
    return {"ops": record.ops, "escapes": record.escapes, "threads": record.threads, "error": error,
            "forbidden": seen, "modes_left": len(_get_current_dispatch_mode_stack())}


def main() -> None:
    from honest_idioms import idioms

    install_op_checks()
    results = {}
    if sys.argv[1:3] == ["--idioms-on", "cuda"]:
        for name, idiom in idioms("cuda").items():
            results[f"idiom:{name}"] = run(idiom)
        json.dump(results, sys.stdout)
        return
    for name, idiom in idioms("cpu").items():
        results[f"idiom:{name}"] = run(idiom)
    # Triton's own argument marshalling (copy_ on the interpreter) in a kata that forbids copy_.
    results["launch_with_copy_forbidden"] = run(honest, forbidden=("aten.copy_",))
    for scenario in SCENARIOS:
        results[scenario.__name__] = run(scenario)
    fp8 = frozenset({"float8_e4m3fn"})
    for scenario in (fp8_cast, fp8_copy_into, fp8_honest, honest):
        results[f"{scenario.__name__}_fp8_forbidden"] = run(scenario, forbidden_casts=fp8)
    for scenario in (fp8_cast, fp8_copy_into):
        results[scenario.__name__] = run(scenario)
    results["exp_allowed_by_the_kata"] = run(exp_sum, allowed=effective_allowed(
        ("aten.exp", "aten.sum", "aten.div"), ()))
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
