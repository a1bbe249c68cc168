"""What honest launchers do with PyTorch around their kernels: views, metadata, allocation, casts.

None of it may leave a trace in the torch_compute check (an honest solution named a cheat is as
bad a defect as a missed cheat). tests/op_escapes.py runs each idiom as the body of a checked
call on the CPU, tests/gpu/test_gpu_torch_compute.py on a GPU.
"""

from __future__ import annotations

import torch


def idioms(device: str) -> dict:
    x = torch.randn(6, 8, device=device)
    y = torch.randn(6, 8, device=device)
    half = x.half()
    int8 = torch.randint(-5, 5, (6, 8), dtype=torch.int8, device=device)
    param = torch.nn.Parameter(torch.randn(4, device=device))
    found = {
        # metadata
        "metadata": lambda: (x.stride(), x.shape, x.numel(), x.is_contiguous(), x.data_ptr(),
                             x.element_size(), x.ndim, x.dim(), len(x), x.nbytes, x.itemsize,
                             x.storage_offset(), x.is_floating_point(), x.size(-1), x.device.type,
                             x.untyped_storage().nbytes(), torch.finfo(half.dtype).max,
                             torch.iinfo(torch.int8).max, tuple(x.stride()), int(x.shape[0])),
        # views
        "bit_views": lambda: (x.view(torch.int32), half.view(torch.int16), int8.view(torch.uint8),
                              torch.zeros(8, dtype=torch.uint8, device=device).view(torch.float8_e4m3fn)),
        "shape_views": lambda: (x.T, x.mT, x[None], x[..., :3], x[:, 0], x[2], x[-1, -1:], x[::2],
                                x.view(-1, x.shape[-1]), x.view_as(y), x.reshape_as(y), x.permute(1, 0),
                                x[:, :1].squeeze(-1), x.unsqueeze(0), x.select(0, 1), x.narrow(0, 1, 2),
                                x.diagonal(), x.unbind(0), x.chunk(2), torch.split(x, 2), x.swapaxes(0, 1),
                                x.as_strided((2, 2), (1, 1)), x.reshape(-1).unfold(0, 4, 4)),
        "composite_views": lambda: (x.flatten(), x.t().flatten(), x.ravel(), x.movedim(0, 1),
                                    x.reshape(-1).unflatten(0, (6, 8)), x[:1].expand_as(y),
                                    x[:1].broadcast_to(6, 8), torch.broadcast_tensors(x[:1], y)),
        "dtype_queries": lambda: (torch.promote_types(x.dtype, half.dtype), torch.result_type(x, half),
                                  torch.can_cast(x.dtype, half.dtype), x.is_pinned(), x.get_device(),
                                  x.is_complex(), x.is_signed(), torch.is_floating_point(x)),
        "complex_views": lambda: torch.view_as_real(torch.view_as_complex(x.reshape(6, 4, 2))),
        "parameter": lambda: (param.view(2, 2), param.detach(), param.data, param.contiguous()),
        # allocation and fills
        "allocation": lambda: (torch.empty_like(x), torch.empty_like(x.t()), x.new_empty((3, 3)),
                               x.new_zeros(3), x.new_full((2,), 1.0), torch.zeros_like(x),
                               torch.empty(3, device=x.device, dtype=x.dtype),
                               torch.empty_strided((2, 3), (1, 2), device=device),
                               torch.full((1,), float("-inf"), device=device),
                               torch.ones(3, dtype=torch.int64, device=device),
                               torch.arange(10, device=device), torch.linspace(0, 1, 5, device=device),
                               torch.eye(3, device=device), torch.tensor([1.0, 2.0], device=device),
                               x.new_tensor([1.0]), torch.empty(0, device=device).resize_(3, 4),
                               torch.empty(3, device=device).fill_(2.0), torch.empty(3, device=device).zero_(),
                               torch.empty(3, device=device).requires_grad_(False)),
        # copies and casts on the device
        "copies": lambda: (x.contiguous(), x.t().contiguous(), x.t().reshape(-1),
                           x.clone(memory_format=torch.contiguous_format), x.half(), half.float(),
                           x.bfloat16(), int8.float(), x.to(torch.int32), half.type_as(x),
                           x.to(x.device), torch.empty(6, 8, device=device).copy_(x),
                           torch.empty(6, 8, dtype=torch.half, device=device).copy_(x)),
        "slice_assignment": lambda: torch.empty(6, 8, device=device).__setitem__(
            (slice(None), slice(0, 2)), x[:, :2]),
    }
    if device == "cuda":
        import triton

        # What persistent kernels and careful launchers ask of the device.
        found["device_queries"] = lambda: (
            torch.cuda.get_device_properties(x.device).multi_processor_count,
            torch.cuda.current_device(), torch.cuda.current_stream().cuda_stream,
            torch.cuda.get_device_capability(), torch.cuda.synchronize(),
            triton.runtime.driver.active.utils.get_device_properties(x.device.index or 0)["multiprocessor_count"])
    return found
