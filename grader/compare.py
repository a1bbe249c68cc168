"""Comparing a submission's outputs with the ground truth (runs in the worker; needs torch).

Semantics follow torch.testing.assert_close: |got - expected| <= atol + rtol * |expected|,
elementwise, with the ground truth in float64. Stricter than assert_close in one way: a NaN or
inf never passes where the ground truth is finite.

Mode `norm` judges the whole tensor instead: ||got - expected||_F <= atol + rtol * ||expected||_F
in float64 (kata.yaml's `compare: {norm: TOL}` gives rtol = TOL, atol = 0), for outputs whose
elements carry no individual meaning after many low-precision steps (an iterated bf16 matrix
polynomial). Any NaN or inf fails it where the truth is finite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

MAX_LISTED = 5  # mismatching elements listed in a report


@dataclass
class Comparison:
    ok: bool
    message: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatched: int | None = None
    total: int | None = None
    mismatches: list[dict] = field(default_factory=list)


def check_tensor_type(got, label: str, device: torch.device, dtype: torch.dtype,
                      shape: tuple[int, ...]) -> str | None:
    """The structural checks: exact type, device, dtype, shape. Returns a message or None."""
    if type(got) is not torch.Tensor:
        if isinstance(got, torch.Tensor):
            return f"{label} is a {type(got).__name__}, a torch.Tensor subclass; return a plain torch.Tensor"
        return f"{label} is a {type(got).__name__}, expected a torch.Tensor"
    if got.device != device:
        return f"{label} is on {got.device}, expected {device} (the inputs' device)"
    if got.dtype != dtype:
        return f"{label} has dtype {_dtype_name(got.dtype)}, expected {_dtype_name(dtype)}"
    if tuple(got.shape) != tuple(shape):
        return f"{label} has shape {tuple(got.shape)}, expected {tuple(shape)}"
    return None


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def compare_values(got: torch.Tensor, expected: torch.Tensor, label: str, *, mode: str,
                   atol: float = 0.0, rtol: float = 0.0, ulp: int = 0,
                   scale: torch.Tensor | None = None) -> Comparison:
    """Compare values of a tensor that already passed check_tensor_type. scale: each element's
    magnitude for rtol (allclose), in place of |expected|."""
    got = got.detach()
    expected = expected.detach().to(got.device)
    total = got.numel()
    if total == 0:
        return Comparison(ok=True, total=0, mismatched=0)
    if mode == "norm":
        return _compare_norm(got, expected, label, atol, rtol)
    close, g, e, diff = close_mask(got, expected, mode=mode, atol=atol, rtol=rtol, ulp=ulp, scale=scale)

    finite_diff = diff[torch.isfinite(diff)]
    max_abs = float(finite_diff.max()) if finite_diff.numel() else None
    if finite_diff.numel() != diff.numel():
        max_abs = float("inf")
    # Relative error only where it means something: expected values that do not round to 0.
    meaningful = e.abs() > max(atol, 1e-30)
    rel = diff[meaningful] / e.abs()[meaningful]
    finite_rel = rel[torch.isfinite(rel)]
    max_rel = float(finite_rel.max()) if finite_rel.numel() else None

    bad = ~close
    n_bad = int(bad.sum())
    result = Comparison(ok=n_bad == 0, max_abs_err=max_abs, max_rel_err=max_rel,
                        mismatched=n_bad, total=total)
    if n_bad:
        idx = torch.nonzero(bad)[:MAX_LISTED].tolist()
        result.mismatches = [
            {"index": i, "got": _scalar(g[tuple(i)]), "expected": _scalar(e[tuple(i)])} for i in idx
        ]
        result.message = _mismatch_message(label, g, e, bad, n_bad, total, mode, atol, rtol, ulp,
                                           scaled=scale is not None)
    return result


def close_mask(got: torch.Tensor, expected: torch.Tensor, *, mode: str, atol: float = 0.0,
               rtol: float = 0.0, ulp: int = 0,
               scale: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
    """(close, got, expected, |got - expected|), elementwise, the last three as float64: the
    rule compare_values applies, for callers that need to know which elements failed."""
    expected = expected.to(got.device)
    if mode == "allclose":
        g = got.double()
        e = expected.double()
        diff = (g - e).abs()
        finite_e = torch.isfinite(e)
        magnitude = e.abs() if scale is None else scale.to(g.device, torch.float64).abs().expand_as(e)
        close = torch.where(finite_e, (diff <= atol + rtol * magnitude) & torch.isfinite(g), g == e)
    elif mode == "exact":
        e_rounded = expected.to(got.dtype)
        close = _bits(got) == _bits(e_rounded)
        g, e, diff = got.double(), e_rounded.double(), (got.double() - e_rounded.double()).abs()
    elif mode == "ulp":
        e_rounded = expected.to(got.dtype)
        distance = (_ordered(got) - _ordered(e_rounded)).abs()
        close = (distance <= ulp) & torch.isfinite(got.double())
        g, e, diff = got.double(), e_rounded.double(), (got.double() - e_rounded.double()).abs()
    elif mode == "norm":
        g, e = got.double(), expected.double()
        diff = (g - e).abs()
        close = _norm_share_mask(g, e, diff, atol, rtol)
    else:
        raise ValueError(f"unknown comparison mode {mode}")
    return close, g, e, diff


def norm_error(got: torch.Tensor, expected: torch.Tensor) -> tuple[float, float]:
    """(||got - expected||_F, ||expected||_F) in float64. The first is inf when got holds a NaN or
    inf where the truth is finite, or differs from a non-finite truth (which must be matched
    exactly, as in allclose); both norms run over the elements whose truth is finite."""
    g, e = got.detach().double(), expected.detach().double().to(got.device)
    finite_e = torch.isfinite(e)
    size = float(torch.linalg.vector_norm(e[finite_e]))
    unmatched = ~finite_e & ~((g == e) | (torch.isnan(g) & torch.isnan(e)))
    if bool(unmatched.any()) or not bool(torch.isfinite(g[finite_e]).all()):
        return float("inf"), size
    return float(torch.linalg.vector_norm((g - e)[finite_e])), size


def _norm_share_mask(g: torch.Tensor, e: torch.Tensor, diff: torch.Tensor, atol: float,
                     rtol: float) -> torch.Tensor:
    """Elementwise "close" for a norm comparison, for diagnoses and the listed mismatches: within
    its even share of the allowed error, (atol + rtol * ||e||_F) / sqrt(n), and finite (or equal
    to a non-finite truth). When the norm comparison fails, some element exceeds its share (the
    shares' squares sum to the allowance's square), so a failure always marks elements."""
    finite_e = torch.isfinite(e)
    n = max(1, e.numel())
    allowed = (atol + rtol * float(torch.linalg.vector_norm(e[finite_e]))) / math.sqrt(n)
    return torch.where(finite_e, (diff <= allowed) & torch.isfinite(g), g == e)


def _compare_norm(got: torch.Tensor, expected: torch.Tensor, label: str, atol: float,
                  rtol: float) -> Comparison:
    """||got - expected||_F <= atol + rtol * ||expected||_F, in float64. max_rel_err is the
    relative Frobenius error (the figure compared); a zero truth needs got within atol of 0."""
    err, size = norm_error(got, expected)
    total = got.numel()
    ok = err <= atol + rtol * size
    g, e = got.detach().double(), expected.detach().double().to(got.device)
    diff = (g - e).abs()
    finite_diff = diff[torch.isfinite(diff)]
    max_abs = float(finite_diff.max()) if finite_diff.numel() == diff.numel() else float("inf")
    rel = err / size if size > 0 else (0.0 if err == 0 else float("inf"))
    result = Comparison(ok=ok, max_abs_err=max_abs, max_rel_err=rel if math.isfinite(rel) else None,
                        mismatched=0, total=total)
    if ok:
        return result
    close = _norm_share_mask(g, e, diff, atol, rtol)
    bad = ~close
    result.mismatched = int(bad.sum())
    idx = torch.nonzero(bad)[:MAX_LISTED].tolist()
    result.mismatches = [
        {"index": i, "got": _scalar(g[tuple(i)]), "expected": _scalar(e[tuple(i)])} for i in idx
    ]
    floor = f"{atol:g} + " if atol else ""
    if size > 0:
        measured = f"relative Frobenius error ||got - truth|| / ||truth|| = {rel:.3g}"
    else:
        measured = f"the truth is all zeros and ||got||_F = {err:.3g}"
    msg = (f"{label}: {measured}, above the tolerance {floor}{rtol:g} (compared normwise, "
           f"||got - truth||_F <= {floor}{rtol:g} * ||truth||_F)")
    nan_bad = int((torch.isnan(g) & torch.isfinite(e)).sum())
    inf_bad = int((torch.isinf(g) & torch.isfinite(e)).sum())
    if nan_bad:
        msg += (f"; {nan_bad} of {total} elements are NaN: outputs are filled with NaN before the "
                "call, so NaN often means elements your kernel never wrote (or a 0/0, an overflow)")
    if inf_bad:
        msg += f"; {inf_bad} of {total} elements are inf (overflow?)"
    result.message = msg
    return result


def _mismatch_message(label, g, e, bad, n_bad, total, mode, atol, rtol, ulp, scaled=False) -> str:
    pct = 100.0 * n_bad / total
    of = " of the summed magnitude" if scaled else ""
    rule = {"allclose": f"atol={atol:g}, rtol={rtol:g}{of}", "exact": "exact match",
            "ulp": f"within {ulp} ULP"}[mode]
    msg = f"{label}: {n_bad} of {total} elements ({pct:.3g}%) out of tolerance ({rule})"
    nan_bad = int((torch.isnan(g) & bad).sum())
    inf_bad = int((torch.isinf(g) & bad & torch.isfinite(e)).sum())
    if nan_bad:
        msg += (f"; {nan_bad} are NaN: outputs are filled with NaN before the call, so NaN often "
                "means elements your kernel never wrote (or a 0/0, exp overflow)")
    if inf_bad:
        msg += f"; {inf_bad} are inf (overflow?)"
    return msg


def _scalar(value: torch.Tensor) -> float | str:
    v = float(value)
    return v if v == v and abs(v) != float("inf") else str(v)


_INT_OF_SIZE = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(t: torch.Tensor) -> torch.Tensor:
    if t.dtype.is_floating_point:
        return t.contiguous().view(_INT_OF_SIZE[t.element_size()])
    return t


def _ordered(t: torch.Tensor) -> torch.Tensor:
    """Map float bit patterns to integers whose difference counts ULPs (+0 and -0 coincide)."""
    bits = _bits(t).to(torch.int64)
    width = 8 * t.element_size()
    magnitude = bits & ((1 << (width - 1)) - 1)
    return torch.where(bits < 0, -magnitude, magnitude)


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise-equal contents (NaN equal to NaN): used to prove inputs were left unchanged."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.is_floating_point:
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool((a == b).all())
