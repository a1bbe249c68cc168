"""adamw: inputs, float64 ground truth and baselines for one multi-tensor AdamW step.

Case parameters (kata.yaml):
  shapes        the tensors' shapes, in order; or
  layout        "gpt2": the parameter list of a GPT-2 (nanoGPT order, lm_head tied to wte) with
                vocab V, width D, L blocks and context C; "mixed": `count` 1-D tensors of odd
                sizes between 1 and `max_size` (a deterministic formula), every fourth one 2-D
  total         the number of elements over all tensors (checked here; the cost model uses it)
  step          the step number, counted from 1 (torch.optim's state['step'] after its +1)
  lr, beta1, beta2, eps, weight_decay   the hyperparameters, from the case
  state         "warm" (default): exp_avg and exp_avg_sq hold values from earlier steps;
                "zeros": the first step of a fresh optimizer
  param_scale   std of the params (default 1.0)
  grad_scale    std of the grads (default 1e-2); the warm states match it
  extreme       optional: a mix of zero gradients with zero states (a parameter that got no
                gradient), large params and grads, and tiny grads with tiny states

The dtype of a case is the dtype of params and grads; exp_avgs and exp_avg_sqs are always
float32 (the mixed-precision regime when the case's dtype is bfloat16).
"""

import math

import torch

SLAB = 1 << 24  # elements computed at a time in float64: big cases need no float64 copy of everything


def _gpt2_shapes(V, D, L, C):
    shapes = [(V, D), (C, D)]
    for _ in range(L):
        shapes += [(D,), (D,), (3 * D, D), (3 * D,), (D, D), (D,),   # ln_1, attn.c_attn, attn.c_proj
                   (D,), (D,), (4 * D, D), (4 * D,), (D, 4 * D), (D,)]  # ln_2, mlp.c_fc, mlp.c_proj
    return shapes + [(D,), (D,)]  # ln_f


def _mixed_shapes(count, max_size):
    shapes = []
    for i in range(count):
        n = 1 + (i * 2654435761) % max_size
        shapes.append((n,) if i % 4 else (3, n))
    return shapes


def shapes_of(case):
    layout = case.get("layout")
    if layout == "gpt2":
        return _gpt2_shapes(case["V"], case["D"], case["L"], case["C"])
    if layout == "mixed":
        return _mixed_shapes(case["count"], case["max_size"])
    return [tuple(s) for s in case["shapes"]]


def _draw(shape, std, device, generator):
    t = torch.randn(shape, device=device, generator=generator)
    return t.mul_(std)


def make_inputs(case, dtype, device, generator):
    shapes = shapes_of(case)
    total = sum(math.prod(s) for s in shapes)
    assert total == case["total"], f"case {case['name']}: total is {total}, kata.yaml says {case['total']}"
    p_std, g_std = case.get("param_scale", 1.0), case.get("grad_scale", 1e-2)
    warm = case.get("state", "warm") == "warm"
    params, grads, exp_avgs, exp_avg_sqs = [], [], [], []
    for shape in shapes:
        p = _draw(shape, p_std, device, generator)
        g = _draw(shape, g_std, device, generator)
        if warm:
            m = _draw(shape, g_std, device, generator)
            v = torch.rand(shape, device=device, generator=generator).add_(0.05).mul_(g_std * g_std)
        else:
            m = torch.zeros(shape, device=device)
            v = torch.zeros(shape, device=device)
        if case.get("extreme"):
            kind = torch.randint(0, 8, shape, device=device, generator=generator)
            none = kind == 0                     # no gradient this step, none before: all zero
            g[none], m[none], v[none] = 0.0, 0.0, 0.0
            big = kind == 1                      # large weights and gradients
            p[big] *= 1e3
            g[big] *= 1e4
            m[big] *= 1e4
            v[big] *= 1e8
            tiny = kind == 2                     # gradients far below eps ** 0.5
            g[tiny] *= 1e-5
            m[tiny] *= 1e-5
            v[tiny] *= 1e-10
            p[kind == 3] = 0.0                   # a zero weight still moves
        params.append(p.to(dtype))
        grads.append(g.to(dtype))
        exp_avgs.append(m)
        exp_avg_sqs.append(v)
    return {"params": params, "grads": grads, "exp_avgs": exp_avgs, "exp_avg_sqs": exp_avg_sqs,
            "step": case["step"], "lr": case["lr"], "beta1": case["beta1"], "beta2": case["beta2"],
            "eps": case["eps"], "weight_decay": case["weight_decay"]}


def _slabs(*tensors):
    """Yields matching flat float64 slabs of the tensors (SLAB elements at a time)."""
    flat = [t.reshape(-1) for t in tensors]
    n = flat[0].numel()
    for start in range(0, n, SLAB):
        yield start, [f[start:start + SLAB].double() for f in flat]


# float32's unit roundoff: the allowances below count roundings in these units.
UNIT = 2.0 ** -24


def _device_constant_error(beta, step):
    """The relative error of 1 - beta ** step computed on the device in float32, from a float32
    beta (Triton passes Python floats as float32): beta ** step is off by step * 2^-25 relative
    from beta's own rounding, plus ~2 units for a float32 pow (or exp(step * log(beta))), and the
    subtraction from 1 amplifies that by beta ** step / (1 - beta ** step), the condition number
    of 1 - x. At step 1 with beta2 = 0.999: ~2500 units, 1.5e-4."""
    power = beta ** step
    return UNIT * (step / 2 + 2) * power / (1.0 - power)


def _terms(p, g, m, v, step, lr, beta1, beta2, eps, weight_decay):
    """torch.optim.AdamW's step in float64, on one slab. Returns the new param, exp_avg and
    exp_avg_sq, the magnitudes of the terms each is summed from (for the tolerance), and the
    allowances for constants computed on the device (param, exp_avg, exp_avg_sq)."""
    bc1 = 1.0 - beta1 ** step
    bc2 = 1.0 - beta2 ** step
    decayed = p * (1.0 - lr * weight_decay)            # decoupled weight decay, first
    m_terms = beta1 * m.abs() + (1.0 - beta1) * g.abs()
    m_new = beta1 * m + (1.0 - beta1) * g
    v_new = beta2 * v + (1.0 - beta2) * g * g
    denom = v_new.sqrt() / math.sqrt(bc2) + eps        # eps outside the square root
    step_size = lr / bc1
    p_new = decayed - step_size * m_new / denom
    # A correct float32 kernel errs by a few roundings of each term: of the decayed weight, and
    # of the update computed from m's terms (m itself may cancel to near 0).
    update = step_size * m_terms / denom
    p_scale = decayed.abs() + update
    # Honest kernels compute 1 - beta1 and 1 - beta2 on the device from float32 betas: off by up
    # to 2^-25 absolute (beta in [0.5, 1)), so the terms (1 - beta1) g and (1 - beta2) g^2 are off
    # by 2^-25 |g| and 2^-25 g^2: 1.3e-5 of the new exp_avg_sq on a first step with beta2 = 0.999,
    # six times rtol. Allowed with 2x room. And the bias corrections on the device (see
    # _device_constant_error); the update inherits m's error, half of v's and v_hat's (through
    # the square root) and all of the first correction's.
    m_allow = UNIT * g.abs()
    v_allow = UNIT * g * g
    m_rel = torch.where(m_terms > 0, m_allow / m_terms, torch.zeros_like(m_terms))
    v_rel = torch.where(v_new > 0, v_allow / v_new, torch.zeros_like(v_new))
    rel = (m_rel + v_rel / 2 + _device_constant_error(beta1, step)
           + _device_constant_error(beta2, step) / 2)
    p_allow = 2 * update * rel
    return p_new, m_new, v_new, p_scale, m_terms, p_allow, m_allow, v_allow


def _per_tensor(inputs, pick, dtype=torch.float64):
    """For each tensor of the lists, a float64 result assembled slab by slab from _terms (an
    allowance in float32: its own rounding does not matter, and the checker holds less)."""
    scalars = {k: inputs[k] for k in ("step", "lr", "beta1", "beta2", "eps", "weight_decay")}
    out = []
    for p, g, m, v in zip(inputs["params"], inputs["grads"], inputs["exp_avgs"], inputs["exp_avg_sqs"]):
        results = [torch.empty(p.shape, dtype=dtype, device=p.device) for _ in pick]
        flat = [r.view(-1) for r in results]
        for start, (ps, gs, ms, vs) in _slabs(p, g, m, v):
            terms = _terms(ps, gs, ms, vs, **scalars)
            for f, i in zip(flat, pick):
                f[start:start + terms[i].numel()] = terms[i]
        out.append(results)
    return out


def reference(**inputs):
    """(params, exp_avgs, exp_avg_sqs) after the step, each a list of float64 tensors."""
    per = _per_tensor(inputs, (0, 1, 2))
    return [r[0] for r in per], [r[1] for r in per], [r[2] for r in per]


def param_scale(**inputs):
    """|decayed param| + step_size * (beta1 |m| + (1 - beta1) |g|) / denom, per element."""
    return [r[0] for r in _per_tensor(inputs, (3,))]


def param_allowance(**inputs):
    """The param's extra allowance for constants computed on the device (_terms)."""
    return [r[0] for r in _per_tensor(inputs, (5,), torch.float32)]


def exp_avg_allowance(**inputs):
    """2^-24 |g|: the term (1 - beta1) g with 1 - beta1 computed from a float32 beta1."""
    return [r[0] for r in _per_tensor(inputs, (6,), torch.float32)]


def exp_avg_sq_allowance(**inputs):
    """2^-24 g^2: the term (1 - beta2) g^2 with 1 - beta2 computed from a float32 beta2."""
    return [r[0] for r in _per_tensor(inputs, (7,), torch.float32)]


def exp_avg_scale(**inputs):
    """beta1 |m| + (1 - beta1) |g|, per element: the new exp_avg may cancel to near 0."""
    return [r[0] for r in _per_tensor(inputs, (4,))]


# ---- baselines ---------------------------------------------------------------------------------

def baseline(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay):
    """torch.optim.AdamW(fused=True)'s kernel: torch._fused_adamw_ over the lists."""
    if params[0].dtype != exp_avgs[0].dtype:
        return _upcast_baseline(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay)
    # The kernel reads the step from a float32 tensor per param (the optimizer's state["step"],
    # which its step() increments with one more launch); one tensor shared by all serves.
    state_step = torch.full((), float(step), dtype=torch.float32, device=params[0].device)
    torch._fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, [], [state_step] * len(params),
                        lr=lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay, eps=eps,
                        amsgrad=False, maximize=False)


def _upcast_baseline(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay):
    # torch's fused and foreach AdamW want params and states in one dtype: with bfloat16 params
    # and float32 states, a user upcasts, steps, and copies back. (No bench case times this.)
    p32 = [p.float() for p in params]
    g32 = [g.float() for g in grads]
    baseline(p32, g32, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay)
    torch._foreach_copy_(params, p32)


def foreach_adamw(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay):
    """torch.optim.AdamW(foreach=True)'s kernels (its default on CUDA): the same step as a
    sequence of _foreach ops, each one pass over all tensors (a second peer for benchmarks)."""
    bc1 = 1.0 - beta1 ** step
    bc2_sqrt = math.sqrt(1.0 - beta2 ** step)
    torch._foreach_mul_(params, 1.0 - lr * weight_decay)
    torch._foreach_lerp_(exp_avgs, grads, 1.0 - beta1)
    torch._foreach_mul_(exp_avg_sqs, beta2)
    torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1.0 - beta2)
    denom = torch._foreach_sqrt(exp_avg_sqs)
    torch._foreach_div_(denom, bc2_sqrt)
    torch._foreach_add_(denom, eps)
    torch._foreach_addcdiv_(params, exp_avgs, denom, -lr / bc1)


# Extra peers benchmarks/bench.py times beside the baseline (name: function in this module).
BENCH_PEERS = {"foreach": "foreach_adamw"}
