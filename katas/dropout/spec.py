"""dropout: inputs, the property check that judges the outputs, and the baseline.

There is no ground truth to compare with: which elements are kept depends on the generator the
candidate picks, and any good one is right. So the outputs are judged by their properties
(kata.yaml: `check: {property: check_dropout}`; grader/judge/properties.py calls it in the trusted
checker with the regenerated inputs and the saved outputs of both checked calls):

- every element is 0 (dropped) or x / (1 - p) (kept), within the dtype's tolerance;
- p = 0 returns x exactly;
- the kept fraction is within 5 sigma of 1 - p (binomial: sigma = sqrt(n p (1 - p)));
- the mask does not repeat with a block-like period (every block drawing the same numbers);
- two calls with the same seed keep the same elements (x's contents differ between them, so it is
  the masks, out != 0, that are compared), and two calls with different seeds do not.

x never holds a 0 (|x| is drawn log-uniform in [lo, hi], lo > 0), so out != 0 says exactly which
elements were kept.

Case parameters: M, N (x is M x N, contiguous); p; seed: an int, the same in both checked calls
(the masks must match), or "per_call": drawn from the grade's generator, so the second call gets
another seed (the masks must differ); magnitude: [lo, hi] for |x|, default [0.25, 4].
"""

import math

import torch

SIGMAS = 5.0  # the kept fraction may stray this many binomial standard deviations from 1 - p
# A correct (independent) mask passes the repetition and different-seed checks except with at
# most this probability: they only run where enough elements take part to make that so.
CHANCE = 1e-12
MAX_LISTED = 5


def make_inputs(case, dtype, device, generator):
    m, n = case["M"], case["N"]
    lo, hi = (float(v) for v in case.get("magnitude", (0.25, 4.0)))
    u = torch.rand(m, n, dtype=torch.float32, device=device, generator=generator)
    magnitude = torch.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
    negative = torch.rand(m, n, dtype=torch.float32, device=device, generator=generator) < 0.5
    x = torch.where(negative, -magnitude, magnitude).to(dtype)
    seed = case["seed"]
    if seed == "per_call":
        seed = int(torch.randint(0, 2**31 - 1, (1,), device=device, generator=generator))
    return {"x": x, "p": float(case["p"]), "seed": int(seed)}


def baseline(x, p, seed):
    # Timing only: PyTorch draws its own mask (and also writes it out, as a bool tensor).
    return torch.nn.functional.dropout(x, p=p, training=True)


def check_dropout(calls, tolerance):
    """The property check: {"ok", "message", figures} for one call or a checked pair."""
    atol, rtol = tolerance["out"]
    names = (["the first call", "the second call (same buffers, new contents of x)"]
             if len(calls) == 2 else ["the call"])
    figures = {"max_abs_err": 0.0, "max_rel_err": 0.0, "mismatched": 0, "total": 0}
    masks = []
    for name, call in zip(names, calls):
        x, p, seed = (call["inputs"][k] for k in ("x", "p", "seed"))
        problem, mask, listed = _judge_call(x, p, call["outputs"]["out"], atol, rtol, figures)
        if problem:
            return dict(figures, ok=False, mismatches=listed,
                        message=f"{name} (M={x.shape[0]}, N={x.shape[1]}, p={p}, seed={seed}): {problem}")
        masks.append(mask)
    if len(calls) == 2:
        problem = _judge_pair(calls, masks)
        if problem:
            return dict(figures, ok=False, message=problem)
    return dict(figures, ok=True, message="")


def _judge_call(x, p, out, atol, rtol, figures):
    """(problem or None, kept mask, listed mismatches) for one call."""
    if tuple(out.shape) != tuple(x.shape):
        return f"out has shape {tuple(out.shape)}, expected {tuple(x.shape)}", None, []
    g, xs = out.double(), x.double()
    expected = xs / (1.0 - p)
    figures["total"] += g.numel()
    finite = torch.isfinite(g)
    if not bool(finite.all()):
        n_bad = int((~finite).sum())
        figures["mismatched"] += n_bad
        nan = int(torch.isnan(g).sum())
        return (f"{n_bad} of {g.numel()} elements are NaN or inf ({nan} NaN: outputs are filled "
                "with NaN before the call, so NaN usually means elements the kernel never wrote; "
                "a dropped element must be written as 0)"), None, _listed(~finite, g, expected)
    kept = g != 0
    diff = (g - expected).abs()
    bad = kept & (diff > atol + rtol * expected.abs())
    if bool(kept.any()):
        figures["max_abs_err"] = max(figures["max_abs_err"], float(diff[kept].max()))
        rel = diff[kept & (expected != 0)] / expected[kept & (expected != 0)].abs()
        if rel.numel():
            figures["max_rel_err"] = max(figures["max_rel_err"], float(rel.max()))
    n_bad = int(bad.sum())
    if n_bad:
        figures["mismatched"] += n_bad
        return (f"{n_bad} of {int(kept.sum())} kept elements (out != 0) are not x / (1 - p) "
                f"(atol={atol:g}, rtol={rtol:g}){_why_values(g[bad], xs[bad], p, atol, rtol)}"), \
            None, _listed(bad, g, expected)
    informative = xs != 0  # where x is 0 both outcomes are 0: nothing to learn there
    n = int(informative.sum())
    k = int((kept & informative).sum())
    if p == 0.0:
        changed = g != xs
        if bool(changed.any()):
            figures["mismatched"] += int(changed.sum())
            why = (f"{n - k} dropped: keep an element when its random number r is >= p, and r can "
                   "be exactly 0" if n - k else "none dropped, but the kept values are not x exactly")
            return (f"p = 0 must return x unchanged, but {int(changed.sum())} of {g.numel()} "
                    f"elements differ ({why})"), None, _listed(changed, g, expected)
        return None, kept & informative, []
    if n == 0:
        return None, kept & informative, []
    if 0 < k < n:  # (a mask with nothing kept or nothing dropped is the statistics' to judge)
        problem = _repeats(kept, informative, p)
        if problem:
            return problem, None, []
    mean, sd = (1.0 - p) * n, math.sqrt(n * p * (1.0 - p))
    if abs(k - mean) > SIGMAS * sd:
        lo, hi = max(0.0, mean - SIGMAS * sd) / n, min(n, mean + SIGMAS * sd) / n
        why = ""
        if p != 0.5 and abs(k - p * n) <= SIGMAS * sd:
            why = (": that is about p, is p used as the keep probability? Each element is "
                   "dropped with probability p")
        elif k == 0:
            why = ": nothing was kept"
        elif k == n:
            why = ": nothing was dropped"
        return (f"kept {k} of {n} elements ({k / n:.4g}), but with p = {p} the kept fraction should be "
                f"1 - p = {1 - p:.4g} (between {lo:.4g} and {hi:.4g}, {SIGMAS:g} sigma){why}"), None, []
    return None, kept & informative, []


def _why_values(got, x, p, atol, rtol):
    """A guess at the bug behind kept values that are not x / (1 - p)."""
    def near(target):
        return bool(((got - target).abs() <= atol + rtol * target.abs()).all())
    if near(x):
        return ": they equal x, the 1 / (1 - p) scale is missing"
    if p > 0 and near(x / p):
        return ": they are x / p; scale the kept elements by 1 / (1 - p)"
    if near(x * (1 - p)):
        return ": they are x * (1 - p); divide by 1 - p instead"
    return ""


def _listed(bad, got, expected):
    idx = torch.nonzero(bad)[:MAX_LISTED].tolist()
    return [{"index": i, "got": _scalar(got[tuple(i)]), "expected": _scalar(expected[tuple(i)])}
            for i in idx]


def _scalar(value):
    v = float(value)
    return v if v == v and abs(v) != float("inf") else str(v)


def _pairs_needed(p_same):
    """Pairs of elements that must all agree before agreement is no longer chance."""
    if p_same >= 1.0:
        return math.inf
    return math.ceil(math.log(CHANCE) / math.log(p_same))


def _repeats(kept, informative, p):
    """Why the mask looks like one block's mask repeated, or None.

    An independent mask agrees with itself shifted by P elements at every one of L positions
    with probability at most max(p, 1 - p)^L; so a mask that does, for L large enough, repeats.
    Shifts tried: powers of two along the flat index (the same numbers in every 1-D block),
    multiples of a row (every row, or every band of rows, the same), and powers of two along
    each row (the same numbers in every column block of a 2-D tile).
    """
    m, n_cols = kept.shape
    need = _pairs_needed(max(p, 1.0 - p))
    flat, valid = kept.reshape(-1), informative.reshape(-1)
    total = flat.numel()

    def same(a, b, va, vb):
        both = va & vb
        return int(both.sum()) >= need and bool(((a == b) | ~both).all())

    shifts = {}
    shift = 1
    while shift < total:
        shifts.setdefault(shift, f"every {shift} elements: the same random numbers in every block "
                                 "of the flat index? Give the generator each element's own flat "
                                 "index (the block's start plus the lane), not the lane alone")
        shift *= 2
    rows = 1
    while rows < m:
        which = "row" if rows == 1 else f"{rows} rows"
        shifts[rows * n_cols] = (f"every {which} ({rows * n_cols} elements): the same mask for every "
                                 f"{'row' if rows == 1 else 'band of rows'}? The generator's offset "
                                 "must be the flat index row * N + column, not the column alone")
        rows *= 2
    for shift in sorted(shifts):
        if total - shift >= need and same(flat[:-shift], flat[shift:], valid[:-shift], valid[shift:]):
            return f"the mask repeats {shifts[shift]}"
    if m > 1:
        shift = 1
        while shift < n_cols:
            if same(kept[:, :-shift], kept[:, shift:], informative[:, :-shift], informative[:, shift:]):
                return (f"the mask repeats every {shift} columns within each row: the same random "
                        "numbers in every column block? The generator's offset must be the flat "
                        "index row * N + column")
            shift *= 2
    return None


def _judge_pair(calls, masks):
    """The two checked calls, together: the seed alone decides the mask."""
    (first, second), (m1, m2) = calls, masks
    s1, s2 = first["inputs"]["seed"], second["inputs"]["seed"]
    p = first["inputs"]["p"]
    both = (first["inputs"]["x"] != 0) & (second["inputs"]["x"] != 0)
    if s1 == s2:
        differ = int(((m1 != m2) & both).sum())
        if differ:
            return (f"two calls with the same seed ({s1}, p={p}) kept different elements ({differ} of "
                    f"{int(both.sum())} differ; x's contents changed between them, the seed did not): "
                    "whether an element is kept must depend only on the seed and its flat index, "
                    "not on x, a counter kept between calls, or a race")
        return None
    need = _pairs_needed(p * p + (1.0 - p) * (1.0 - p))
    if int(both.sum()) >= need and bool(((m1 == m2) | ~both).all()):
        return (f"two calls with different seeds ({s1} and {s2}, p={p}) kept exactly the same "
                "elements: the seed must change the mask (is it handed to the generator?)")
    return None
