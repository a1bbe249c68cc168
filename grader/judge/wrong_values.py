"""What a failing output's values show, next to its ground truth (run in the checker, which never
imports the submission): a tail or the end of every row never written, NaN or 0 on rows of
large magnitude, one wrong factor per row or per column, a float32 result computed in a lower
precision. When nothing specific fits it says so plainly, with the mismatch summary: a
diagnosis must be useful, but never wrong. The codes and their advice: grader.judge.failure_codes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from grader.judge.compare import close_mask, norm_error
from grader.judge.failure_codes import Diagnosis
from grader.timing.perturb import tensors

LARGE_INPUT = 50.0  # |x| from which exp (and, summed, squares in float16) start to overflow
SCALE_SPREAD = 1e-3  # a factor is "the same" across a row when it varies less than this (relative)
NO_FACTOR = 1e-6  # a row "off by a factor" closer to 1 than this (and than rtol) is not called one
LISTED_ROWS = 5
# A near miss: every wrong element within this many times its allowed error. Only an error of
# that size, with the pattern of a known honest-formulation effect, is named as that effect.
NEAR_MISS = 10.0
UNIT = 2.0 ** -24  # float32's unit roundoff
LARGE_OFFSET = 100.0  # |x| from which an exponent rounded at |x| costs more than float32's rtol
DOWNGRADES = (torch.bfloat16, torch.float16)  # bfloat16 first: its values are float16's too
STORED_LOW_MIN = 4  # values a float32 output needs before "all exact in float16" says anything


def analyse(got: torch.Tensor, expected: torch.Tensor, *, mode: str = "allclose",
            atol: float = 0.0, rtol: float = 0.0, ulp: int = 0, inputs: dict | None = None,
            downgraded: Callable[[], str | None] | None = None,
            scale: torch.Tensor | None = None, allowance: torch.Tensor | None = None,
            near_miss: str = "", others_far: bool = False) -> Diagnosis:
    """What a failing output shows, next to its ground truth (same shape and dtype as asked).

    inputs: the case's inputs (tensors of the output's shape give each row's magnitude);
    downgraded: called to ask whether a float32 result was computed in a lower precision;
    allowance, near_miss: the output's extra allowance for honest rounding and what it models;
    others_far: other tensors of the same output are far outside the tolerance (no near miss).
    """
    got, expected = got.detach(), expected.detach().to(got.device)
    close, g, e, diff = close_mask(got, expected, mode=mode, atol=atol, rtol=rtol, ulp=ulp, scale=scale,
                                   allowance=allowance)
    n = got.numel()
    cols = got.shape[-1] if got.dim() >= 1 and got.shape[-1] else 1
    rows = max(1, n // cols)
    wrong = ~close.reshape(rows, cols)
    g, e = g.reshape(rows, cols), e.reshape(rows, cols)
    n_wrong = int(wrong.sum())
    if not n_wrong:
        return Diagnosis("wrong_values", "the values compare equal here")
    finite_e = torch.isfinite(e)
    nan_w = torch.isnan(g) & finite_e & wrong
    zero_w = (g == 0) & (e != 0) & finite_e & wrong
    bad_w = (~torch.isfinite(g) & finite_e & wrong) | zero_w  # NaN, inf or 0 where they should not be
    magnitude = _row_magnitude(inputs, got.shape, rows)
    shape = _Shape(rows, cols, n, got.dim())

    # Overflow first: NaN or 0 confined to rows of much larger inputs is not a grid bug, even
    # when those rows happen to come last.
    found = (_overflow(wrong, bad_w, nan_w, zero_w, magnitude, shape)
             or _stored_low(got, expected, wrong, bool((bad_w & wrong).any()))
             or _tail(wrong, nan_w, zero_w, shape)
             or _row_end(wrong, nan_w, zero_w, shape)
             or (_spread_non_finite(g, shape) if mode == "norm" else None)
             or _unwritten(wrong, nan_w, shape))
    if found:
        return found
    if downgraded is not None:
        low = downgraded()
        if low:
            return Diagnosis("low_precision", f"the float32 results match a {low} computation "
                             "far better than the float32 truth")
    if mode == "allclose" and not others_far:
        times = excess(got, expected, atol=atol, rtol=rtol, scale=scale, allowance=allowance)
        size = (e.abs() if scale is None else
                scale.to(g.device, torch.float64).abs().expand_as(expected).reshape(rows, cols))
        near = times <= NEAR_MISS and _near_miss(wrong, g, e, diff.reshape(rows, cols), times,
                                                 size, magnitude)
        if near:
            return near
        if near_miss and allowance is not None and times <= NEAR_MISS:
            widened = close_mask(got, expected, mode=mode, atol=atol, rtol=rtol, scale=scale,
                                 allowance=allowance.double() * NEAR_MISS)[0]
            if bool(widened.all()):
                return Diagnosis("near_miss", (
                    f"{n_wrong} of {n} elements are just outside the tolerance ({times:.2g}x the "
                    f"allowed error), within {NEAR_MISS:g}x of the kata's allowance for {near_miss}"))
    inf_w = torch.isinf(g) & finite_e & wrong
    return (_zeros(wrong, zero_w, shape) or _non_finite(wrong, inf_w, nan_w, shape)
            # A norm's rtol bounds the whole tensor, not each ratio: judge "one factor" strictly.
            or _scaled(wrong, g, e, atol, 0.0 if mode == "norm" else rtol, shape)
            or (_generic_norm(wrong, g, e, atol, rtol, shape) if mode == "norm" else None)
            or _generic(wrong, diff.reshape(rows, cols), e, atol, shape))


@dataclass(frozen=True)
class _Shape:
    rows: int
    cols: int
    n: int
    dim: int

    @property
    def two_d(self) -> bool:
        return self.dim >= 2 and self.rows > 1


def _suffix(mask: torch.Tensor) -> int:
    """How many trailing elements of a 1-D bool tensor are all True."""
    if not mask.numel():
        return 0
    return int(torch.cumprod(mask.flip(0).to(torch.int64), 0).sum())


def _describe(kind: str, plural: bool) -> str:
    """What a region whose wrong values are all NaN ('nan'), all 0 ('zero'), or neither holds."""
    if kind == "nan":
        return ("were never written (they still hold the NaN the grader fills new outputs with)"
                if plural else "was never written (it still holds the NaN the grader fills new "
                "outputs with)")
    if kind == "zero":
        return "are 0 where they should not be" if plural else "is 0 where it should not be"
    return "are wrong" if plural else "is wrong"


def _kind(nan: bool, zero: bool) -> str:
    return "nan" if nan else "zero" if zero else "wrong"


def exact_fraction(t: torch.Tensor, low: torch.dtype) -> float:
    """The fraction of t's finite nonzero values that `low` represents exactly (zero is exact in
    every format: an output of zeros, such as a scale a buggy kernel left at 0, proves nothing)."""
    finite = t[torch.isfinite(t) & (t != 0)]
    if not finite.numel():
        return 0.0
    return float((finite.to(low).double() == finite.double()).double().mean())


def _stored_low(got: torch.Tensor, expected: torch.Tensor, wrong: torch.Tensor, bad: bool) -> Diagnosis | None:
    """A float32 output whose every value a lower precision holds exactly, where the truth's
    wrong ones are not: it was computed or stored in that precision and converted (where the
    truth is exact there too, as a copied float16 row or a small integer is, the error is no
    rounding). Checked before the tail, since such values round in or out of tolerance at
    random, and a few rounded out at the end of a short output (4 rows' statistics) are no grid
    that stops short. Needs no recomputation, so it holds in a float16 case too (whose
    statistics the kata still asks in float32)."""
    if bad or got.dtype not in (torch.float32, torch.float64):
        return None
    if int((torch.isfinite(got) & (got != 0)).sum()) < STORED_LOW_MIN:
        return None
    truth = expected.to(got.dtype).reshape(wrong.shape)[wrong]
    for low in DOWNGRADES:
        if exact_fraction(got, low) == 1.0 and exact_fraction(truth, low) <= 0.5:
            name = str(low).removeprefix("torch.")
            return Diagnosis("low_precision", (
                f"every value of this {str(got.dtype).removeprefix('torch.')} output is exactly a "
                f"{name} value, as computed results would not be: it was computed or stored in "
                f"{name} and converted"),
                f"keep it in float32 to the end: allocate the output as torch.float32 and store "
                f"the float32 value, not one cast to the input's dtype (a {name} buffer converted "
                "afterwards keeps its rounding)")
    return None


def _tail(wrong, nan_w, zero_w, s: _Shape) -> Diagnosis | None:
    """The wrong elements are exactly the last k of the (row-major) output."""
    flat = wrong.flatten()
    k = _suffix(flat)
    if not k or k != int(flat.sum()) or k == s.n:
        return None
    a = s.n - k
    kind = _kind(bool(nan_w.flatten()[a:].all()), bool(zero_w.flatten()[a:].all()))
    if kind == "wrong" and 2 * k > s.n:
        return None  # most of the output wrong: a wrong tail says little about the grid
    rest = "" if kind == "nan" else ", the rest is right"
    if s.two_d and a % s.cols == 0:
        r = a // s.cols
        if r == s.rows - 1:
            return Diagnosis("rows_wrong", f"row {r} (the last of {s.rows}) {_describe(kind, False)}{rest}")
        return Diagnosis("rows_wrong", f"rows {r}..{s.rows - 1} (the last {s.rows - r} of {s.rows}) "
                         f"{_describe(kind, True)}{rest}")
    if k == 1:
        return Diagnosis("tail_wrong", f"element {a} (the last of {s.n}) {_describe(kind, False)}{rest}",
                         "the mask or the grid stops one element short: mask = offsets < n (not "
                         "n - 1), and launch triton.cdiv(n, BLOCK) programs")
    return Diagnosis("tail_wrong", f"elements {a}..{s.n - 1} (the last {k} of {s.n}) "
                     f"{_describe(kind, True)}{rest}")


def _row_end(wrong, nan_w, zero_w, s: _Shape) -> Diagnosis | None:
    """From some column on, every row is wrong (never written, 0, or wrong values)."""
    if s.cols < 2:
        return None
    for kind, mask in (("nan", nan_w), ("zero", zero_w), ("wrong", wrong)):
        k = _suffix(mask.all(dim=0))
        c = s.cols - k
        if not k or not c:
            continue
        others = int(wrong[:, :c].sum())
        if kind != "wrong" and int(mask[:, :c].sum()) > 0.05 * int(mask.sum()):
            continue  # NaN or 0 all over the rows, not only at their end: not a column cut
        # Unwritten columns are structural evidence even when the statistics are off too; merely
        # wrong ones only when nothing before them is wrong (else a coincidence of many errors).
        if kind == "wrong" and (others or not s.two_d):
            continue
        rows = "every row" if s.rows > 1 else "the row"
        if k == 1:
            message = f"the last column (column {c}) of {rows} {_describe(kind, False)}"
        else:
            message = f"columns {c}..{s.cols - 1} of {rows} (the last {k} of {s.cols}) {_describe(kind, True)}"
        if others:
            message += (f"; {others} element(s) before column {c} are off too (statistics that "
                        "missed those columns?)")
        if k == 1:
            advice = ("the mask or the block stops one column short: mask = cols < N (not N - 1), "
                      "and loop over rows longer than one block")
        elif c >= 256 and c & (c - 1) == 0:
            advice = (f"your block stops at column {c} = 2^{c.bit_length() - 1}: loop over rows "
                      "longer than one block (for start in range(0, N, BLOCK)), masking with cols < N")
        else:
            advice = ""
        return Diagnosis("row_end_wrong", message, advice)
    return None


def _row_magnitude(inputs: dict | None, shape, rows: int) -> torch.Tensor | None:
    """max |x| per output row over the inputs shaped like the output, or None."""
    if not inputs:
        return None
    mags = []
    for value in inputs.values():
        for t in tensors(value):
            if t.is_floating_point() and tuple(t.shape) == tuple(shape) and t.numel():
                mags.append(t.detach().double().abs().reshape(rows, -1).nan_to_num(0.0).amax(dim=1))
    if not mags:
        return None
    return torch.stack(mags).amax(dim=0)


def _overflow(wrong, bad_w, nan_w, zero_w, magnitude, s: _Shape) -> Diagnosis | None:
    """NaN, inf or 0 where the truth is finite, on rows of large magnitude and only there."""
    if magnitude is None or not bool(bad_w.any()):
        return None
    bad_rows = bad_w.any(dim=1)
    wrong_rows = wrong.any(dim=1)
    good_rows = ~wrong_rows
    # Most of what is wrong in those rows must be NaN, inf or 0: the overflow, not another bug.
    if int(bad_w.sum()) < 0.9 * int(wrong[bad_rows].sum()):
        return None
    magnitude = magnitude.to(bad_rows.device)
    low, high = float(magnitude[bad_rows].min()), float(magnitude[bad_rows].max())
    if bool(good_rows.any()):
        good_high = float(magnitude[good_rows].max())
        if not (low > good_high and high >= 2 * good_high and low >= 1.0):
            return None
        contrast = f", while the rows that came out right stay below {good_high:.3g}"
    else:
        if low < LARGE_INPUT:
            return None
        contrast = ""
    n_nan = int(nan_w.sum())
    n_zero = int(zero_w.sum())
    n_inf = int(bad_w.sum()) - n_nan - n_zero
    parts = [f"{n} {what}" for n, what in ((n_nan, "NaN"), (n_inf, "inf"), (n_zero, "0")) if n]
    n_rows = int(bad_rows.sum())
    where = f"{n_rows} of {s.rows} rows" if s.rows > 1 else "the output"
    if n_nan or n_inf:
        message = (f"{' and '.join(parts)} where the ground truth is finite, in {where}, whose "
                   f"inputs reach |x| = {high:.4g}{contrast}")
    else:
        message = (f"the output is 0 where it should not be ({n_zero} elements, in {where}, whose "
                   f"inputs reach |x| = {high:.4g}{contrast})")
    return Diagnosis("overflow", message)


def _unwritten(wrong, nan_w, s: _Shape) -> Diagnosis | None:
    """Every wrong element still holds the NaN fill, in no simple pattern."""
    n_wrong = int(wrong.sum())
    if int(nan_w.sum()) != n_wrong:
        return None
    if n_wrong == s.n:
        return Diagnosis("nothing_written", f"no element was written: all {s.n} still hold the NaN "
                         "the grader fills new outputs with")
    return Diagnosis("unwritten_elements", f"{n_wrong} of {s.n} elements{_rows_note(wrong, s)} were "
                     "never written (they still hold the NaN the grader fills new outputs with)")


def _zeros(wrong, zero_w, s: _Shape) -> Diagnosis | None:
    n_wrong = int(wrong.sum())
    if int(zero_w.sum()) != n_wrong:
        return None
    if n_wrong == s.n:
        return Diagnosis("zero_output", f"every element ({s.n}) is 0 where it should not be: was "
                         "anything written? (an empty grid leaves a torch.zeros output as it was)")
    return Diagnosis("zero_output", f"the output is 0 where it should not be: {n_wrong} of "
                     f"{s.n} elements{_rows_note(wrong, s)}")


def _non_finite(wrong, inf_w, nan_w, s: _Shape) -> Diagnosis | None:
    n_nan, n_inf = int(nan_w.sum()), int(inf_w.sum())
    if not n_nan + n_inf:
        return None
    parts = " and ".join(f"{n} {what}" for n, what in ((n_nan, "NaN"), (n_inf, "inf")) if n)
    return Diagnosis("non_finite", f"{parts} where the ground truth is finite (of {int(wrong.sum())} "
                     f"wrong elements){_rows_note(nan_w | inf_w, s)}")


def _scaled(wrong, g, e, atol: float, rtol: float, s: _Shape) -> Diagnosis | None:
    """Each wrong row (or column) off by one factor: a wrong statistic, a wrong per-column input."""
    valid = torch.isfinite(g) & torch.isfinite(e) & (e.abs() > max(atol, 1e-30))
    ratio = torch.where(valid, g / torch.where(valid, e, torch.ones_like(e)), torch.zeros_like(e))
    spread = max(SCALE_SPREAD, 4 * rtol)
    # A factor within a millionth of 1 is no factor: an exactly compared integer sum off by one
    # unit in 2.5e7 (a float32 accumulator) has rows "all off by 1.0000000", which says nothing.
    # Nor is a row whose ratios straddle 1, or touch it: there a few elements are off by small,
    # unrelated amounts (an optimizer's update, judged against the size of its terms) and the
    # rest are right, so the ratios agree to 1e-3 only because they all sit near 1.
    unit = max(rtol, NO_FACTOR)

    def constant(dim: int, lines: torch.Tensor):
        count = valid.sum(dim=dim)
        hi = torch.where(valid, ratio, torch.full_like(ratio, -math.inf)).amax(dim=dim)
        lo = torch.where(valid, ratio, torch.full_like(ratio, math.inf)).amin(dim=dim)
        off = (lo - 1 > unit) | (hi - 1 < -unit)  # every ratio of the line on one side of 1
        same = (count >= 2) & ((hi - lo).abs() <= spread * hi.abs()) & off
        return bool(same[lines].all()) and bool(lines.any()), lo[lines], hi[lines]

    wrong_rows = wrong.any(dim=1)
    ok, lo, hi = constant(1, wrong_rows)
    if ok:
        rows = int(wrong_rows.sum())
        span = (f"{float(lo.min()):.4g}" if float(hi.max() - lo.min()) <= spread * abs(float(hi.max()))
                else f"{float(lo.min()):.4g} to {float(hi.max()):.4g}")
        where = f"each of the {rows} wrong rows" if s.rows > 1 else "the output"
        return Diagnosis("row_scale", f"in {where} every element is off by the same factor "
                         f"(got / expected = {span}{' across rows' if ' to ' in span else ''})")
    if s.two_d:
        wrong_cols = wrong.any(dim=0)
        ok, lo, hi = constant(0, wrong_cols)
        if ok and float(hi.max() - lo.min()) > spread * abs(float(hi.max())):
            return Diagnosis("column_scale", f"every wrong column is off by a factor of its own, the "
                             f"same in every row (got / expected from {float(lo.min()):.4g} to "
                             f"{float(hi.max()):.4g} across columns)")
    return None


def _rows_note(mask, s: _Shape) -> str:
    if not s.two_d:
        return ""
    rows = torch.nonzero(mask.any(dim=1)).flatten()
    if int(rows.numel()) == s.rows:
        return ", in every row"
    listed = ", ".join(str(int(r)) for r in rows[:LISTED_ROWS])
    more = ", ..." if rows.numel() > LISTED_ROWS else ""
    return f", in {int(rows.numel())} of {s.rows} rows ({listed}{more})"


def _spread_non_finite(g, s: _Shape) -> Diagnosis | None:
    """A norm-compared output (an iterated computation) that is NaN or inf everywhere: one
    overflow, or one unwritten element of an intermediate, reaches every element through the
    products, so "never written" cannot be told from divergence."""
    if bool(torch.isfinite(g).any()):
        return None
    return Diagnosis("non_finite", f"all {s.n} elements are NaN or inf: in an iterated product one "
                     "overflow (inf - inf, inf * 0) or one element of an intermediate never written "
                     "spreads to every element, so this is divergence or an unwritten buffer",
                     "an iteration that diverges overflows to inf, then NaN: check its start (scaled "
                     "as the statement says?) and its coefficients and their roles; a tile of an "
                     "intermediate buffer never written (new buffers are filled with NaN) poisons "
                     "every product that reads it")


def _generic_norm(wrong, g, e, atol: float, rtol: float, s: _Shape) -> Diagnosis:
    """A norm-compared output with finite values, off as a whole: say so in the compared terms
    (the elements counted are those beyond their even share of the allowed error)."""
    err, size = norm_error(g, e)
    measured = (f"relative Frobenius error {err / size:.3g}" if size > 0
                else f"||got||_F = {err:.3g} where the truth is all zeros")
    floor = f" plus {atol:g} absolute" if atol else ""
    return Diagnosis("wrong_values", f"the output is off as a whole ({measured}, tolerance "
                     f"{rtol:g}{floor}); {int(wrong.sum())} of {s.n} elements are beyond their even "
                     f"share of the allowed error{_rows_note(wrong, s)}")


def _generic(wrong, diff, e, atol: float, s: _Shape) -> Diagnosis:
    n_wrong = int(wrong.sum())
    finite = diff[wrong & torch.isfinite(diff)]
    worst = f"; the largest error is {float(finite.max()):.3g}" if finite.numel() else ""
    return Diagnosis("wrong_values", f"{n_wrong} of {s.n} elements are out of tolerance"
                     f"{_rows_note(wrong, s)}{worst}")


def excess(got: torch.Tensor, expected: torch.Tensor, *, atol: float = 0.0, rtol: float = 0.0,
           scale: torch.Tensor | None = None, allowance: torch.Tensor | None = None) -> float:
    """The worst element's error in units of its allowed error (allclose): <= 1 passes, a few is
    a near miss, inf for NaN or inf where the truth is finite."""
    g, e = got.detach().double(), expected.detach().to(got.device).double()
    finite = torch.isfinite(e)
    if not bool(finite.any()):
        return 0.0
    diff = (g - e).abs()[finite]
    magnitude = (e.abs() if scale is None else scale.to(g.device, torch.float64).abs().expand_as(e))[finite]
    bound = atol + rtol * magnitude
    if allowance is not None:
        bound = bound + allowance.to(g.device, torch.float64).abs().expand_as(e)[finite]
    if not bool(torch.isfinite(diff).all()):
        return math.inf
    over = diff[diff > bound]
    if not over.numel():
        return float((diff / bound.clamp_min(1e-300)).max()) if diff.numel() else 0.0
    return float((over / bound[diff > bound].clamp_min(1e-300)).max())


def _near_miss(wrong, g, e, diff, times: float, size, magnitude) -> Diagnosis | None:
    """Errors just outside the tolerance with the pattern of a known honest-formulation effect:
    an exponent rounded at a large offset (errors only in rows of large |x|, about |x| * 2^-24
    of the values: checked first, since a row's rounded lse is also one factor per row), or a
    constant rounded to float32 (every wrong element off by one factor near 1)."""
    valid = wrong & torch.isfinite(g) & (e != 0)
    if not bool(valid.any()) or int(valid.sum()) != int(wrong.sum()):
        return None
    if magnitude is not None:
        rows = wrong.any(dim=1)
        mags = magnitude.to(g.device)[rows]
        if bool((mags >= LARGE_OFFSET).all()):
            per_row = mags[:, None] * UNIT * size[rows]
            units = float((diff[rows][wrong[rows]] / per_row[wrong[rows]].clamp_min(1e-300)).max())
            if units <= 32:
                top = float(mags.max())
                return Diagnosis("near_miss", (
                    f"the errors are just outside the tolerance ({times:.2g}x the allowed error) and "
                    f"only in rows whose inputs reach |x| = {top:.4g}, about {units:.2g} x |x| x 2^-24 "
                    f"of the values: exp(x - lse) at |x| ~ {top:.3g} loses ~{top * UNIT * 1.0:.1g} "
                    "in float32 (an exponent rounded at the offset's size, in base e or 2)"),
                    "subtract the row max before the exponential: exp(x - m) / sum(exp(x - m)) keeps "
                    "the exponent at the size of x - m, not of x")
    ratio = (g / torch.where(e != 0, e, torch.ones_like(e)))[valid]
    lo, hi = float(ratio.min()), float(ratio.max())
    off = (lo - 1.0) if lo > 1.0 else (hi - 1.0) if hi < 1.0 else 0.0
    if off and int(valid.sum()) >= 2 and hi - lo <= max(8 * UNIT, 0.05 * abs(off)) and abs(off) < 1e-3:
        return Diagnosis("near_miss", (
            f"every wrong element is off by the same factor, got / expected = 1 {'+' if off > 0 else '-'} "
            f"{abs(off):.2g}, just outside the tolerance ({times:.2g}x the allowed error): the "
            "float32 rounding of a constant, such as 1 - beta2 computed on the device from a float32 "
            "beta2 = 0.999 (off by 1.3e-5 relative)"),
            "compute such constants on the host in float64 and pass them in: Triton passes Python "
            "floats as float32, so 1 - beta computed in the kernel is rounded at 1, not at its own size")
    return None
