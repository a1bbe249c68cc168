"""cross_entropy: inputs, ground truth, the gradient's scale for the tolerance, and the baseline.

Case parameters (kata.yaml):
  B, V           rows (tokens) and the vocabulary size
  ignore_index   the target value that marks a row as ignored (default -100); it may be a real
                 class id (0), and then every row whose target is that class is ignored
  ignore_frac    the fraction of rows given the target ignore_index (default 0.25; exactly
                 round(ignore_frac * B) rows, chosen at random); 1.0: every row ignored
  targets        optional: "edges" (targets alternate between column 0 and column V - 1)
  scale, offset  logits = offset + scale * randn (defaults 1 and 0)
  peaked         optional: added to each row's target logit (a confident model: p_target near 1,
                 so the target's gradient p - 1 cancels to nearly 0)
  row_stride     optional (> V): logits is a column slice of a wider tensor, as when the vocabulary
                 is padded (GPT-2's 50257 to 50304): logits.stride(0) == row_stride
"""

import torch
import torch.nn.functional as F

# Rows of the ground truth computed at once: its float64 temporaries stay near 128 MiB each.
TRUTH_CHUNK_ELEMENTS = 1 << 24
# Above this many elements the gradient's truth (and its scale) are returned in float32, rounded
# from the float64 computation: a bench case's 1e9 float64 elements would take 8 GB more GPU
# memory in the checker, and float32's rounding (6e-8 relative) is far inside every tolerance.
FLOAT64_TRUTH_ELEMENTS = 1 << 27


def make_inputs(case, dtype, device, generator):
    B, V = case["B"], case["V"]
    ignore_index = int(case.get("ignore_index", -100))
    row_stride = case.get("row_stride", V)
    full = torch.randn(B, row_stride, dtype=torch.float32, device=device, generator=generator)
    full = full * float(case.get("scale", 1.0)) + float(case.get("offset", 0.0))
    if case.get("targets") == "edges":
        target = (torch.arange(B, device=device) % 2) * (V - 1)
    else:
        target = torch.randint(0, V, (B,), device=device, generator=generator)
    if case.get("peaked"):
        full[torch.arange(B, device=device), target] += float(case["peaked"])
    n_ignored = round(float(case.get("ignore_frac", 0.25)) * B)
    ignored = torch.randperm(B, device=device, generator=generator)[:n_ignored]
    target[ignored] = ignore_index
    logits = full.to(dtype)[:, :V]
    return {"logits": logits, "target": target.to(torch.int64), "ignore_index": ignore_index}


def _softmax_rows(logits, target, ignore_index):
    """Yield (row slice, float64 softmax of those rows, their targets, their valid mask)."""
    B, V = logits.shape
    rows = max(1, TRUTH_CHUNK_ELEMENTS // max(V, 1))
    for start in range(0, B, rows):
        x = logits[start:start + rows].double()
        p = torch.softmax(x, dim=1)
        t = target[start:start + rows]
        yield slice(start, start + rows), x, p, t, t != ignore_index


def _truth_dtype(logits):
    return torch.float64 if logits.numel() <= FLOAT64_TRUTH_ELEMENTS else torch.float32


def reference(logits, target, ignore_index):
    # Float64 from the very values the kernel sees. With n the number of non-ignored rows:
    #   loss = (1 / n) * sum over non-ignored rows of (logsumexp(x_i) - x_i[t_i]), 0 when n == 0
    #   grad[i, :] = (softmax(x_i) - onehot(t_i)) / n on non-ignored rows, 0 on ignored ones
    B, V = logits.shape
    valid_all = target != ignore_index
    n = int(valid_all.sum())
    grad = torch.zeros(B, V, dtype=_truth_dtype(logits), device=logits.device)
    total = torch.zeros((), dtype=torch.float64, device=logits.device)
    for rows, x, p, t, valid in _softmax_rows(logits, target, ignore_index):
        safe_t = torch.where(valid, t, torch.zeros_like(t))  # ignore_index may be out of range
        x_t = x.gather(1, safe_t[:, None])[:, 0]
        total += torch.where(valid, torch.logsumexp(x, dim=1) - x_t, torch.zeros_like(x_t)).sum()
        p.scatter_add_(1, safe_t[:, None], -torch.ones_like(x_t)[:, None])
        p[~valid] = 0.0
        grad[rows] = (p / max(n, 1)).to(grad.dtype)
    loss = total / n if n else torch.zeros((), dtype=torch.float64, device=logits.device)
    return loss, grad


def grad_magnitude(logits, target, ignore_index):
    """The gradient's scale for the tolerance: (softmax + onehot) / n, the sum of the absolute
    values of the two terms of each element (0 on ignored rows, which must be exactly 0).

    At the target the two terms cancel when the model is confident (p_target near 1): a float32
    kernel then computes p - 1 to about 1e-7 absolute, far more than 2e-5 of the tiny result, yet
    right. The error is judged against the terms' size, as for any sum that cancels."""
    B, V = logits.shape
    n = max(int((target != ignore_index).sum()), 1)
    out = torch.zeros(B, V, dtype=_truth_dtype(logits), device=logits.device)
    for rows, _, p, t, valid in _softmax_rows(logits, target, ignore_index):
        safe_t = torch.where(valid, t, torch.zeros_like(t))
        p.scatter_add_(1, safe_t[:, None], torch.ones_like(p[:, :1]))
        p[~valid] = 0.0
        out[rows] = (p / n).to(out.dtype)
    return out


# Honest rounding beyond rtol (kata.yaml's `allowance`): float32 has a unit roundoff of 2^-24.
UNIT = 2.0 ** -24
# An honest kernel may normalise with exp(x - lse), or in base 2 (exp2(x * log2e - lse * log2e)):
# then lse (or x * log2e) is rounded at its own magnitude, ~1000 on large_negative, and the
# exponent carries an absolute error of a few |x| * 2^-24, which exp turns into that relative
# error of p: 1000 * 2^-24 = 6e-5, three times rtol. Four units of |x| cover the base-2 form (two
# products by log2e, each rounded) with room; subtracting the max first keeps the exponent's
# error at the size of x - m instead, but the kata accepts both.
OFFSET_UNITS = 4.0


def _row_offsets(x):
    """Each row's largest |x| or |lse|: the magnitude an exponent is rounded at."""
    return torch.maximum(x.abs().amax(dim=1), torch.logsumexp(x, dim=1).abs())


def grad_allowance(logits, target, ignore_index):
    """Each gradient element's extra allowance: p * OFFSET_UNITS * 2^-24 * max(|x|, |lse|) / n on
    rows that count (an exponent rounded at the offset's magnitude), 0 on ignored rows."""
    B, V = logits.shape
    n = max(int((target != ignore_index).sum()), 1)
    out = torch.zeros(B, V, dtype=_truth_dtype(logits), device=logits.device)
    for rows, x, p, t, valid in _softmax_rows(logits, target, ignore_index):
        offset = _row_offsets(x) * (OFFSET_UNITS * UNIT)
        p = p * offset[:, None]
        p[~valid] = 0.0
        out[rows] = (p / n).to(out.dtype)
    return out


def loss_allowance(logits, target, ignore_index):
    """The loss's extra allowance: each counted row's lse - x[t] rounded at the offset's size."""
    total, n = 0.0, 0
    for _, x, _, _, valid in _softmax_rows(logits, target, ignore_index):
        total += float((_row_offsets(x) * valid).sum()) * OFFSET_UNITS * UNIT
        n += int(valid.sum())
    return torch.tensor(total / max(n, 1), dtype=torch.float64, device=logits.device)


def baseline(logits, target, ignore_index):
    # What a user writes without a fused kernel: PyTorch's cross-entropy on float32 logits (a
    # float32 copy of the logits, as mixed-precision training does for the loss), forward and
    # backward, the gradient cast back to the logits' dtype. (With every row ignored PyTorch
    # returns NaN, 0/0; the kata asks for 0. The baseline is timed, never graded.)
    x = logits.detach().float().requires_grad_(True)
    loss = F.cross_entropy(x, target, ignore_index=ignore_index)
    (grad,) = torch.autograd.grad(loss, x)
    return loss.detach(), grad.to(logits.dtype)
