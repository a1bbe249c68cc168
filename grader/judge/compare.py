"""Comparing a submission's outputs with the ground truth (runs in the worker; needs torch).

Semantics follow torch.testing.assert_close: |got - expected| <= atol + rtol * |expected|,
elementwise, with the ground truth in float64. Stricter than assert_close in one way: a NaN or
inf never passes where the ground truth is finite.

An output may carry a per-element `allowance` (kata.yaml's `allowance: FN`, computed by the
kata's spec from the honest formulations' error analysis): the rule becomes |got - expected| <=
atol + rtol * |expected| + allowance, for math that amplifies rounding where rtol cannot say so.

Mode `norm` judges the whole tensor instead: ||got - expected||_F <= atol + rtol * ||expected||_F
in float64 (kata.yaml's `compare: {norm: TOL}` gives rtol = TOL, atol = 0), for outputs whose
elements carry no individual meaning after many low-precision steps (an iterated bf16 matrix
polynomial). Any NaN or inf fails it where the truth is finite.

Every comparison also reports `tolerance_used`: the worst error as a fraction of what the
tolerance allows there (allclose: max |got - expected| / (atol + rtol * scale + allowance); norm:
the error norm over its allowance; ulp: the ULP distance over the ULPs allowed). 1.0 is at the
limit; above 1 fails. It measures the honest-error envelope (benchmarks/honest_envelope.py).
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
    # The worst error as a fraction of what the tolerance allows there (module docstring).
    tolerance_used: float | None = None


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


CHUNK_ELEMENTS = 1 << 25  # compared at a time: float64 temporaries of ~256 MB each, not of the output


def _slices(total: int):
    """(start, slice) over a flattened tensor of `total` elements, CHUNK_ELEMENTS at a time."""
    for start in range(0, total, CHUNK_ELEMENTS):
        yield start, slice(start, start + CHUNK_ELEMENTS)


def compare_values(got: torch.Tensor, expected: torch.Tensor, label: str, *, mode: str,
                   atol: float = 0.0, rtol: float = 0.0, ulp: int = 0,
                   scale: torch.Tensor | None = None,
                   allowance: torch.Tensor | None = None) -> Comparison:
    """Compare values of a tensor that already passed check_tensor_type. scale: each element's
    magnitude for rtol (allclose), in place of |expected|; allowance: each element's extra
    absolute allowance (allclose). Large outputs are compared a slice
    at a time (a 1e9-element gradient would need tens of GB of float64 temporaries at once)."""
    got = got.detach()
    expected = expected.detach().to(got.device)
    total = got.numel()
    if total == 0:
        return Comparison(ok=True, total=0, mismatched=0, tolerance_used=0.0)
    if mode == "norm":
        return _compare_norm(got, expected, label, atol, rtol)
    flat_got, flat_exp = got.reshape(-1), expected.reshape(-1)
    flat_scale = None if scale is None else scale.to(got.device).expand_as(expected).reshape(-1)
    flat_allow = None if allowance is None else allowance.to(got.device).expand_as(expected).reshape(-1)
    max_abs = max_rel = None
    used = 0.0
    n_bad, mismatches = 0, []
    nan_bad = inf_bad = 0
    for start, part in _slices(total):
        part_scale = None if flat_scale is None else flat_scale[part]
        part_allow = None if flat_allow is None else flat_allow[part]
        bound = None
        if mode == "allclose":
            close, g, e, diff, bound = _allclose(flat_got[part], flat_exp[part], atol, rtol,
                                                 part_scale, part_allow)
        else:
            close, g, e, diff = close_mask(flat_got[part], flat_exp[part], mode=mode, ulp=ulp)
        used = max(used, _fraction_used(close, g, e, diff, dtype=got.dtype, mode=mode, ulp=ulp, bound=bound))
        finite = torch.isfinite(diff)
        if not bool(finite.all()):
            max_abs = float("inf")
        elif max_abs != float("inf"):
            max_abs = max(max_abs or 0.0, float(diff.max()))
        # Relative error only where it means something: expected values that do not round to 0.
        meaningful = e.abs() > max(atol, 1e-30)
        rel = diff[meaningful] / e.abs()[meaningful]
        finite_rel = rel[torch.isfinite(rel)]
        if finite_rel.numel():
            max_rel = max(max_rel or 0.0, float(finite_rel.max()))
        bad = ~close
        chunk_bad = int(bad.sum())
        if chunk_bad:
            n_bad += chunk_bad
            nan_bad += int((torch.isnan(g) & bad).sum())
            inf_bad += int((torch.isinf(g) & bad & torch.isfinite(e)).sum())
            if len(mismatches) < MAX_LISTED:
                for i in torch.nonzero(bad).flatten()[:MAX_LISTED - len(mismatches)].tolist():
                    mismatches.append({"index": _unravel(start + i, tuple(got.shape)),
                                       "got": _scalar(g[i]), "expected": _scalar(e[i])})
    result = Comparison(ok=n_bad == 0, max_abs_err=max_abs, max_rel_err=max_rel,
                        mismatched=n_bad, total=total, tolerance_used=used)
    if n_bad:
        result.mismatches = mismatches
        result.message = _mismatch_message(label, n_bad, total, mode, atol, rtol, ulp, nan_bad,
                                           inf_bad, scaled=scale is not None,
                                           allowed=allowance is not None)
    return result


def close_mask(got: torch.Tensor, expected: torch.Tensor, *, mode: str, atol: float = 0.0,
               rtol: float = 0.0, ulp: int = 0,
               scale: torch.Tensor | None = None,
               allowance: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
    """(close, got, expected, |got - expected|), elementwise, the last three as float64: the
    rule compare_values applies, for callers that need to know which elements failed."""
    expected = expected.to(got.device)
    if mode == "allclose":
        close, g, e, diff, _ = _allclose(got, expected, atol, rtol, scale, allowance)
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
        # Elementwise only for diagnoses: each element within its even share of the allowance
        # (the norm itself is judged by compare_values, over the whole tensor).
        g, e = got.double(), expected.double()
        diff = (g - e).abs()
        _, size = norm_error(got, expected)
        close = _norm_share_mask(g, e, diff, _share(atol, rtol, size, e.numel()))
    else:
        raise ValueError(f"unknown comparison mode {mode}")
    return close, g, e, diff


def _allclose(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float,
              scale: torch.Tensor | None, allowance: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
    """close_mask's allclose rule: (close, got, expected, |got - expected|, the allowed error),
    the last four as float64."""
    g = got.double()
    e = expected.double()
    diff = (g - e).abs()
    finite_e = torch.isfinite(e)
    magnitude = e.abs() if scale is None else scale.to(g.device, torch.float64).abs().expand_as(e)
    bound = atol + rtol * magnitude
    if allowance is not None:
        bound = bound + allowance.to(g.device, torch.float64).abs().expand_as(e)
    close = torch.where(finite_e, (diff <= bound) & torch.isfinite(g), g == e)
    return close, g, e, diff, bound


def _fraction_used(close: torch.Tensor, g: torch.Tensor, e: torch.Tensor, diff: torch.Tensor, *,
                   dtype: torch.dtype, mode: str, ulp: int, bound: torch.Tensor | None) -> float:
    """The worst element's error over its allowed error (`bound`, allclose), by close_mask's
    rule: 0 where nothing is allowed and nothing is off, inf for an element that fails with
    nothing allowed (or a NaN, an inf, an exact mismatch)."""
    if mode == "exact":
        return 0.0 if bool(close.all()) else math.inf
    if mode == "ulp":
        if not bool((close | torch.isfinite(g)).all()):
            return math.inf
        distance = float((_ordered(g.to(dtype)) - _ordered(e.to(dtype))).abs().max())
        if ulp <= 0:
            return 0.0 if distance == 0 else math.inf
        return distance / ulp
    finite_e = torch.isfinite(e)
    if not bool((close | finite_e).all()) or not bool(torch.isfinite(g[finite_e]).all()):
        return math.inf
    if not bool(finite_e.any()):
        return 0.0
    d, b = diff[finite_e], bound[finite_e]
    if bool(((d > 0) & (b <= 0)).any()):
        return math.inf
    ratio = torch.where(d > 0, d / b.clamp_min(1e-300), torch.zeros_like(d))
    return float(ratio.max())


def _norm_parts(got: torch.Tensor, expected: torch.Tensor):
    """(start, got, expected) float64 slices of the flattened tensors, CHUNK_ELEMENTS at a time."""
    flat_got, flat_exp = got.detach().reshape(-1), expected.detach().to(got.device).reshape(-1)
    for start, part in _slices(flat_got.numel()):
        yield start, flat_got[part].double(), flat_exp[part].double()


def norm_error(got: torch.Tensor, expected: torch.Tensor) -> tuple[float, float]:
    """(||got - expected||_F, ||expected||_F) in float64. The first is inf when got holds a NaN or
    inf where the truth is finite, or differs from a non-finite truth (which must be matched
    exactly, as in allclose); both norms run over the elements whose truth is finite."""
    err2 = size2 = 0.0
    broken = False
    for _, g, e in _norm_parts(got, expected):
        finite_e = torch.isfinite(e)
        size2 += float(e[finite_e].square().sum())
        unmatched = ~finite_e & ~((g == e) | (torch.isnan(g) & torch.isnan(e)))
        if bool(unmatched.any()) or not bool(torch.isfinite(g[finite_e]).all()):
            broken = True
        elif not broken:
            err2 += float((g - e)[finite_e].square().sum())
    return (float("inf") if broken else math.sqrt(err2)), math.sqrt(size2)


def _share(atol: float, rtol: float, size: float, n: int) -> float:
    """An element's even share of a norm's allowance: (atol + rtol * ||e||_F) / sqrt(n). If every
    element is within it, the norm passes (the shares' squares sum to the allowance's square),
    so a failing norm always has elements beyond it: those are listed and diagnosed."""
    return (atol + rtol * size) / math.sqrt(max(1, n))


def _norm_share_mask(g: torch.Tensor, e: torch.Tensor, diff: torch.Tensor, share: float) -> torch.Tensor:
    return torch.where(torch.isfinite(e), (diff <= share) & torch.isfinite(g), g == e)


def _compare_norm(got: torch.Tensor, expected: torch.Tensor, label: str, atol: float,
                  rtol: float) -> Comparison:
    """||got - expected||_F <= atol + rtol * ||expected||_F, in float64. max_rel_err is the
    relative Frobenius error (the figure compared); a zero truth needs got within atol of 0."""
    err, size = norm_error(got, expected)
    total = got.numel()
    rel = err / size if size > 0 else (0.0 if err == 0 else float("inf"))
    allowed = atol + rtol * size
    used = (err / allowed if allowed > 0 else (0.0 if err == 0 else math.inf)) if math.isfinite(err) else math.inf
    result = Comparison(ok=err <= allowed, max_rel_err=rel if math.isfinite(rel) else None,
                        mismatched=0, total=total, tolerance_used=used)
    share = _share(atol, rtol, size, total)
    n_bad = nan_bad = inf_bad = 0
    max_abs = 0.0
    for start, g, e in _norm_parts(got, expected):
        diff = (g - e).abs()
        finite = torch.isfinite(diff)
        max_abs = float("inf") if not bool(finite.all()) else max(max_abs, float(diff.max()))
        if result.ok:
            continue
        bad = ~_norm_share_mask(g, e, diff, share)
        n_bad += int(bad.sum())
        nan_bad += int((torch.isnan(g) & torch.isfinite(e)).sum())
        inf_bad += int((torch.isinf(g) & torch.isfinite(e)).sum())
        for i in torch.nonzero(bad).flatten()[:MAX_LISTED - len(result.mismatches)].tolist():
            result.mismatches.append({"index": _unravel(start + i, tuple(got.shape)),
                                      "got": _scalar(g[i]), "expected": _scalar(e[i])})
    result.max_abs_err = max_abs
    if result.ok:
        return result
    result.mismatched = n_bad
    floor = f"{atol:g} + " if atol else ""
    if size > 0:
        measured = f"relative Frobenius error ||got - truth|| / ||truth|| = {rel:.3g}"
    else:
        measured = f"the truth is all zeros and ||got||_F = {err:.3g}"
    msg = (f"{label}: {measured}, above the tolerance {floor}{rtol:g} (compared normwise, "
           f"||got - truth||_F <= {floor}{rtol:g} * ||truth||_F)")
    if nan_bad:
        msg += (f"; {nan_bad} of {total} elements are NaN: outputs are filled with NaN before the "
                "call, so NaN often means elements your kernel never wrote (or a 0/0, an overflow)")
    if inf_bad:
        msg += f"; {inf_bad} of {total} elements are inf (overflow?)"
    result.message = msg
    return result


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    """The multi-index of a flat position (plain arithmetic: torch.unravel_index imports sympy,
    two seconds of a checker's first failure)."""
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        index.append(i)
    return index[::-1]


def _mismatch_message(label, n_bad, total, mode, atol, rtol, ulp, nan_bad, inf_bad,
                      scaled=False, allowed=False) -> str:
    pct = 100.0 * n_bad / total
    of = " of the summed magnitude" if scaled else ""
    if allowed:
        of += ", plus the kata's allowance for honest rounding"

    rule = {"allclose": f"atol={atol:g}, rtol={rtol:g}{of}", "exact": "exact match",
            "ulp": f"within {ulp} ULP"}[mode]
    msg = f"{label}: {n_bad} of {total} elements ({pct:.3g}%) out of tolerance ({rule})"
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
