"""flash_attention: inputs, float64 ground truth, error magnitudes, baselines and peers.

Case parameters (kata.yaml):
  B, H, Hkv, S, D  batch, query heads, key/value heads (H % Hkv == 0), sequence length, head dim
  causal           bool: query i sees keys 0..i
  sm_scale         optional: the softmax scale (default 1 / sqrt(D))
  q_scale          optional: q = q_scale * randn (default 1): 4 gives scores of +-30 and a
                   softmax that picks a few keys; 12 gives scores in the hundreds (exp overflows
                   float32 without the running max)
  rising           optional: adds rising * j / S to every score of key j (through one coordinate of
                   q and k), so the row max keeps growing from one key block to the next: every
                   block must rescale the accumulator
  layout           optional "bshd": every (B, *, S, D) tensor is a transposed view of a
                   contiguous (B, S, *, D) buffer (the layout most models keep); stride(3) is 1

The ground truth is float64, computed from the very inputs the kernel sees, a block of query
rows at a time so that the (rows, S) score matrices stay within a few hundred MB at S = 16384.
The truth and the magnitudes can also be asked for a subset of sequence positions only (`rows`):
O(S * len(rows)) per head instead of S^2, what the grade verifies its timed calls on.
"""

import math

import torch
import torch.nn.functional as F

LOG_ROWS_BUDGET = 25  # float64 elements of one (heads, rows, keys) score chunk: 2**25 = 256 MB
# The error magnitude of an output (below): |truth| plus this many root-sum-squares of the
# terms whose rounding to the input dtype a correct kernel cannot avoid.
RSS_MULTIPLE = 4.0
UNIT_ROUNDOFF = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8, torch.float32: 2.0 ** -24}


# ----------------------------------------------------------------------------- inputs

def _sm_scale(case):
    return float(case.get("sm_scale", 1.0 / math.sqrt(case["D"])))


def _randn(shape, layout, device, generator):
    """A float32 normal tensor of `shape` (B, X, S, D); with layout "bshd", a transposed view
    of a contiguous (B, S, X, D) buffer."""
    B, X, S, D = shape
    if layout == "bshd":
        return torch.randn(B, S, X, D, device=device, generator=generator).transpose(1, 2)
    return torch.randn(B, X, S, D, device=device, generator=generator)


def _empty_like_layout(shape, layout, dtype, device):
    B, X, S, D = shape
    if layout == "bshd":
        return torch.empty(B, S, X, D, dtype=dtype, device=device).transpose(1, 2)
    return torch.empty(B, X, S, D, dtype=dtype, device=device)


def _qkv(case, dtype, device, generator):
    B, H, Hkv, S, D = (case[k] for k in ("B", "H", "Hkv", "S", "D"))
    assert H % Hkv == 0
    layout = case.get("layout", "bhsd")
    q = case.get("q_scale", 1.0) * _randn((B, H, S, D), layout, device, generator)
    k = _randn((B, Hkv, S, D), layout, device, generator)
    v = _randn((B, Hkv, S, D), layout, device, generator)
    rising = case.get("rising", 0.0)
    if rising:
        # score(i, j) gains q[..., 0] * k[..., 0] * sm_scale = rising * j / S (one coordinate of
        # each, replaced: q's is a constant, k's grows with the key's position).
        q[..., 0] = 1.0 / _sm_scale(case)
        k[..., 0] = rising * torch.arange(S, device=device, dtype=torch.float32) / S
    return q.to(dtype), k.to(dtype), v.to(dtype)


def make_inputs(case, dtype, device, generator):
    q, k, v = _qkv(case, dtype, device, generator)
    return {"q": q, "k": k, "v": v, "causal": bool(case["causal"]), "sm_scale": _sm_scale(case)}


def make_backward_inputs(case, dtype, device, generator):
    """q, k, v, and what the forward saved: o in the input dtype and lse in float32 (computed
    here in float64 and rounded once), and a random upstream gradient do."""
    q, k, v = _qkv(case, dtype, device, generator)
    causal, sm_scale = bool(case["causal"]), _sm_scale(case)
    layout = case.get("layout", "bhsd")
    do = _randn(tuple(q.shape), layout, device, generator).to(dtype)
    o64, lse64, _ = _forward64(q, k, v, causal, sm_scale, stats=False)
    o = _empty_like_layout(tuple(q.shape), layout, dtype, device)
    o.copy_(o64)
    return {"q": q, "k": k, "v": v, "o": o, "lse": lse64.to(torch.float32), "do": do,
            "causal": causal, "sm_scale": sm_scale}


# ----------------------------------------------------------------------------- ground truth

def _rows_per_chunk(G, S):
    return max(1, min(S, (1 << LOG_ROWS_BUDGET) // max(1, G * S)))


def _future(query_pos, key_pos):
    """True where key key_pos[j] is in the future of query query_pos[i]: masked out. (Positions
    are absolute: a subset of rows keeps its causal mask.)"""
    return key_pos[None, :] > query_pos[:, None]


def _forward_chunk(qc, kk, vv, mask, sm_scale, stats):
    """Query rows qc (G, r, D) against the keys kk, vv (n, D) they see (mask: True where a key is
    masked out, or None): (o, lse) in float64, and with stats (rss, score_size) too."""
    s = torch.matmul(qc, kk.T).mul_(sm_scale)  # (G, r, n)
    if mask is not None:
        s.masked_fill_(mask, -math.inf)
    m = s.amax(dim=-1, keepdim=True)
    p = s.sub_(m).exp_()
    l = p.sum(dim=-1, keepdim=True)
    o = torch.matmul(p, vv) / l
    lse = (m + torch.log(l)).squeeze(-1)
    if not stats:
        return o, lse
    rss = torch.matmul(p.mul_(p), vv * vv).sqrt_() / l
    a = torch.matmul(qc.abs(), kk.abs().T)
    if mask is not None:
        a.masked_fill_(mask, 0.0)
    return o, lse, rss, sm_scale * a.amax(dim=-1)


def _forward64(q, k, v, causal, sm_scale, stats):
    """(o, lse, extras) in float64; extras = (rss, score_size) when stats, else None.

    rss[i, d]: sqrt(sum_j p_ij^2 v_jd^2) / l_i, the root-sum-square of the terms of o whose
    rounding (p to the input dtype before the P @ V product) a kernel cannot avoid.
    score_size[i]: sm_scale * max_j sum_d |q_id k_jd|, what a score's float32 error is relative to.
    """
    B, H, S, D = q.shape
    Hkv = k.shape[1]
    G = H // Hkv
    dev = q.device
    o = torch.empty((B, H, S, D), dtype=torch.float64, device=dev)
    lse = torch.empty((B, H, S), dtype=torch.float64, device=dev)
    rss = torch.empty_like(o) if stats else None
    size = torch.empty_like(lse) if stats else None
    rows = _rows_per_chunk(G, S)
    keys = torch.arange(S, device=dev)
    for b in range(B):
        for hk in range(Hkv):
            heads = slice(hk * G, (hk + 1) * G)
            kk, vv = k[b, hk].double(), v[b, hk].double()
            qg = q[b, heads].double()
            for r0 in range(0, S, rows):
                r1 = min(S, r0 + rows)
                n = r1 if causal else S  # keys this chunk of rows can see
                mask = _future(keys[r0:r1], keys[:n]) if causal else None
                chunk = _forward_chunk(qg[:, r0:r1], kk[:n], vv[:n], mask, sm_scale, stats)
                o[b, heads, r0:r1], lse[b, heads, r0:r1] = chunk[0], chunk[1]
                if stats:
                    rss[b, heads, r0:r1], size[b, heads, r0:r1] = chunk[2], chunk[3]
    return o, lse, ((rss, size) if stats else None)


def _backward_block(qc, oc, doc, lc, kk, vv, mask, sm_scale):
    """Query rows qc, oc, doc (G, r, D), their lse lc (G, r), against the keys kk, vv (n, D)
    (mask: True where a key is masked out, or None): p and ds = p (dp - delta), each (G, r, n)."""
    p = torch.matmul(qc, kk.T).mul_(sm_scale).sub_(lc[..., None]).exp_()
    if mask is not None:
        p.masked_fill_(mask, 0.0)
    delta = (oc * doc).sum(dim=-1, keepdim=True)
    ds = torch.matmul(doc, vv.T).sub_(delta).mul_(p)
    return p, ds


def _cancellation(oc, doc, vv, p):
    """dp_ij - delta_i cancels where o_i ~ v_j (a peaked softmax): its float32 error is relative
    to |do_i|.|v_j| + |o_i|.|do_i|, not to the difference; weighted by p, (G, r, n)."""
    a = torch.matmul(doc.abs(), vv.abs().T)
    return a.add_((oc * doc).abs().sum(dim=-1, keepdim=True)).mul_(p)


def _backward64(q, k, v, o, lse, do, causal, sm_scale, stats):
    """(dq, dk, dv) in float64 from the given o and lse (what the kernel is handed), and, when
    stats, the root-sum-squares of the terms each is a sum of (rounded by any kernel: p and ds
    to the input dtype before their products):
      dq_i = sm_scale * sum_j ds_ij k_j,  dk_j = sm_scale * sum_{h, i} ds_ij q_i,
      dv_j = sum_{h, i} p_ij do_i,  with p_ij = exp(s_ij - lse_i), ds_ij = p_ij (dp_ij - delta_i),
      dp_ij = do_i . v_j, delta_i = do_i . o_i."""
    B, H, S, D = q.shape
    Hkv = k.shape[1]
    G = H // Hkv
    dev = q.device
    dq = torch.empty((B, H, S, D), dtype=torch.float64, device=dev)
    dk = torch.zeros((B, Hkv, S, D), dtype=torch.float64, device=dev)
    dv = torch.zeros_like(dk)
    if stats:
        rq, rk2, rv2 = torch.empty_like(dq), torch.zeros_like(dk), torch.zeros_like(dk)
        cq, ck = torch.empty_like(dq), torch.zeros_like(dk)
    rows = _rows_per_chunk(G, S)
    keys = torch.arange(S, device=dev)
    for b in range(B):
        for hk in range(Hkv):
            heads = slice(hk * G, (hk + 1) * G)
            kk, vv = k[b, hk].double(), v[b, hk].double()
            qg, og, dog = q[b, heads].double(), o[b, heads].double(), do[b, heads].double()
            lg = lse[b, heads].double()
            for r0 in range(0, S, rows):
                r1 = min(S, r0 + rows)
                n = r1 if causal else S
                qc, oc, doc = qg[:, r0:r1], og[:, r0:r1], dog[:, r0:r1]
                mask = _future(keys[r0:r1], keys[:n]) if causal else None
                p, ds = _backward_block(qc, oc, doc, lg[:, r0:r1], kk[:n], vv[:n], mask, sm_scale)
                dq[b, heads, r0:r1] = sm_scale * torch.matmul(ds, kk[:n])
                dk[b, hk, :n] += sm_scale * torch.einsum("grn,grd->nd", ds, qc)
                dv[b, hk, :n] += torch.einsum("grn,grd->nd", p, doc)
                if stats:
                    a = _cancellation(oc, doc, vv[:n], p)
                    cq[b, heads, r0:r1] = sm_scale * torch.matmul(a, kk[:n].abs())
                    ck[b, hk, :n] += sm_scale * torch.einsum("grn,grd->nd", a, qc.abs())
                    del a
                    ds2 = ds.mul_(ds)
                    rq[b, heads, r0:r1] = sm_scale * torch.matmul(ds2, kk[:n] * kk[:n]).sqrt_()
                    rk2[b, hk, :n] += sm_scale ** 2 * torch.einsum("grn,grd->nd", ds2, qc * qc)
                    p2 = p.mul_(p)
                    rv2[b, hk, :n] += torch.einsum("grn,grd->nd", p2, doc * doc)
                del p, ds
    if not stats:
        return dq, dk, dv, None
    return dq, dk, dv, (rq, rk2.sqrt_(), rv2.sqrt_(), cq, ck)


# The row-restricted truth below is _forward64 and _backward64 on a subset of positions, through
# the same chunk functions. Its results equal the full ones at those positions to float64
# round-off; tests/test_flash_attention_rows.py keeps the two in step.

def _forward64_rows(q, k, v, causal, sm_scale, rows):
    """_forward64(stats=True) at the query positions `rows` only (1-D int64): (o, lse, (rss,
    score_size)), each (B, H, len(rows), ...), a row computed against every key it sees."""
    B, H, S, D = q.shape
    Hkv = k.shape[1]
    G = H // Hkv
    dev = q.device
    R = rows.numel()
    o = torch.empty((B, H, R, D), dtype=torch.float64, device=dev)
    lse = torch.empty((B, H, R), dtype=torch.float64, device=dev)
    rss, size = torch.empty_like(o), torch.empty_like(lse)
    per_chunk = _rows_per_chunk(G, S)
    keys = torch.arange(S, device=dev)
    for b in range(B):
        for hk in range(Hkv):
            heads = slice(hk * G, (hk + 1) * G)
            kk, vv = k[b, hk].double(), v[b, hk].double()
            qg = q[b, heads].index_select(1, rows).double()
            for c0 in range(0, R, per_chunk):
                c1 = min(R, c0 + per_chunk)
                pos = rows[c0:c1]
                n = int(pos.max()) + 1 if causal else S  # keys this chunk of rows can see
                mask = _future(pos, keys[:n]) if causal else None
                (o[b, heads, c0:c1], lse[b, heads, c0:c1], rss[b, heads, c0:c1],
                 size[b, heads, c0:c1]) = _forward_chunk(qg[:, c0:c1], kk[:n], vv[:n], mask, sm_scale, True)
    return o, lse, (rss, size)


def _backward64_rows(q, k, v, o, lse, do, causal, sm_scale, rows):
    """_backward64(stats=True) at the positions `rows` only (1-D int64): dq, rq, cq at those
    query rows; dk, dv, rk, rv, ck at those keys, each (B, *, len(rows), D). A key's gradient
    is a sum over every query row (of every head of its group), so all S query rows meet the
    keys `rows`, a chunk at a time: O(S * len(rows)) scores per head instead of S^2."""
    B, H, S, D = q.shape
    Hkv = k.shape[1]
    G = H // Hkv
    dev = q.device
    R = rows.numel()
    dq = torch.empty((B, H, R, D), dtype=torch.float64, device=dev)
    dk = torch.zeros((B, Hkv, R, D), dtype=torch.float64, device=dev)
    dv = torch.zeros_like(dk)
    rq, rk2, rv2 = torch.empty_like(dq), torch.zeros_like(dk), torch.zeros_like(dk)
    cq, ck = torch.empty_like(dq), torch.zeros_like(dk)
    rows_per_chunk = _rows_per_chunk(G, S)  # rows against up to S keys (dq)
    # all query rows against the R keys (dk, dv), and their (G, rows, D) operands, in budget
    queries_per_chunk = max(1, (1 << LOG_ROWS_BUDGET) // (G * max(R, D)))
    keys = torch.arange(S, device=dev)
    for b in range(B):
        for hk in range(Hkv):
            heads = slice(hk * G, (hk + 1) * G)
            kk, vv = k[b, hk].double(), v[b, hk].double()
            qg, og, dog = q[b, heads].double(), o[b, heads].double(), do[b, heads].double()
            lg = lse[b, heads].double()
            # dq at the query rows `rows`: against every key they see, as _backward64 does.
            for c0 in range(0, R, rows_per_chunk):
                c1 = min(R, c0 + rows_per_chunk)
                pos = rows[c0:c1]
                n = int(pos.max()) + 1 if causal else S
                qc, oc, doc = (t.index_select(1, pos) for t in (qg, og, dog))
                mask = _future(pos, keys[:n]) if causal else None
                p, ds = _backward_block(qc, oc, doc, lg[:, pos], kk[:n], vv[:n], mask, sm_scale)
                dq[b, heads, c0:c1] = sm_scale * torch.matmul(ds, kk[:n])
                a = _cancellation(oc, doc, vv[:n], p)
                cq[b, heads, c0:c1] = sm_scale * torch.matmul(a, kk[:n].abs())
                del a
                rq[b, heads, c0:c1] = sm_scale * torch.matmul(ds.mul_(ds), kk[:n] * kk[:n]).sqrt_()
                del p, ds
            # dk, dv at the keys `rows`: summed over the query rows that see them (causal: none
            # before the first of them).
            kr, vr = kk.index_select(0, rows), vv.index_select(0, rows)
            first = int(rows.min()) if causal and R else 0
            for r0 in range(first, S, queries_per_chunk):
                r1 = min(S, r0 + queries_per_chunk)
                qc, oc, doc = qg[:, r0:r1], og[:, r0:r1], dog[:, r0:r1]
                mask = _future(keys[r0:r1], rows) if causal else None
                p, ds = _backward_block(qc, oc, doc, lg[:, r0:r1], kr, vr, mask, sm_scale)  # (G, r, R)
                dk[b, hk] += sm_scale * torch.einsum("grn,grd->nd", ds, qc)
                dv[b, hk] += torch.einsum("grn,grd->nd", p, doc)
                a = _cancellation(oc, doc, vr, p)
                ck[b, hk] += sm_scale * torch.einsum("grn,grd->nd", a, qc.abs())
                del a
                ds2 = ds.mul_(ds)
                rk2[b, hk] += sm_scale ** 2 * torch.einsum("grn,grd->nd", ds2, qc * qc)
                p2 = p.mul_(p)
                rv2[b, hk] += torch.einsum("grn,grd->nd", p2, doc * doc)
                del p, ds
    return dq, dk, dv, (rq, rk2.sqrt_(), rv2.sqrt_(), cq, ck)


# The checker asks for the ground truth and then, separately, for each output's magnitude (on
# cloned inputs): both come from one float64 pass, kept for the inputs it was computed from.
_LAST = {"key": None, "inputs": None, "value": None}


def _memo(kind, inputs, compute):
    tensors = {name: t for name, t in inputs.items() if isinstance(t, torch.Tensor)}
    key = (kind, tuple(sorted((n, repr(x)) for n, x in inputs.items() if n not in tensors)),
           tuple((n, tuple(t.shape), t.stride(), t.dtype, str(t.device))
                 for n, t in sorted(tensors.items())))
    if _LAST["key"] == key and all(torch.equal(_LAST["inputs"][n], t) for n, t in tensors.items()):
        return _LAST["value"]
    _LAST.update(key=None, inputs=None, value=None)  # free the old one first
    value = compute()
    _LAST.update(key=key, inputs={n: t.clone() for n, t in tensors.items()}, value=value)
    return value


def _forward_stats(q, k, v, causal, sm_scale, rows=None):
    inputs = dict(q=q, k=k, v=v, causal=causal, sm_scale=sm_scale)
    if rows is None:
        return _memo("forward", inputs, lambda: _forward64(q, k, v, causal, sm_scale, stats=True))
    # rows is one more tensor of the key (its values compared): another kind, too, so that a
    # sampled pass never stands in for the full one or for another sample.
    return _memo("forward_rows", dict(inputs, rows=rows),
                 lambda: _forward64_rows(q, k, v, causal, sm_scale, rows))


def _backward_stats(q, k, v, o, lse, do, causal, sm_scale, rows=None):
    inputs = dict(q=q, k=k, v=v, o=o, lse=lse, do=do, causal=causal, sm_scale=sm_scale)
    if rows is None:
        return _memo("backward", inputs,
                     lambda: _backward64(q, k, v, o, lse, do, causal, sm_scale, stats=True))
    return _memo("backward_rows", dict(inputs, rows=rows),
                 lambda: _backward64_rows(q, k, v, o, lse, do, causal, sm_scale, rows))


def reference(q, k, v, causal, sm_scale, rows=None):
    """(o, lse) in float64; with `rows` (sorted unique int64 positions along S), at those query
    positions only: (o[:, :, rows], lse[:, :, rows])."""
    o, lse, _ = _forward_stats(q, k, v, causal, sm_scale, rows)
    return o, lse


def reference_backward(q, k, v, o, lse, do, causal, sm_scale, rows=None):
    """(dq, dk, dv) in float64; with `rows`, at those positions along S only: dq at those query
    positions, dk and dv at those key positions."""
    dq, dk, dv, _ = _backward_stats(q, k, v, o, lse, do, causal, sm_scale, rows)
    return dq, dk, dv


# ----------------------------------------------------------------------------- error magnitudes
# Each output is judged by |got - truth| <= atol + rtol * magnitude (kata.yaml). A correct
# kernel rounds p (forward, dv) and ds (dq, dk) to the input dtype before its tensor-core
# products: independent relative errors of at most half an ulp on every term of a sum, whose
# total is a random walk of size ~ 0.3 ulp * rss (the root-sum-square of the terms). The
# magnitude is |truth| + RSS_MULTIPLE * rss: the final rounding (half an ulp of |truth|) and
# a dozen standard deviations of the products' rounding, whatever S is; a relative error of
# O(1) (the bugs) stays far outside it. With `rows`, each is the same magnitude at those
# positions along S only (as reference and reference_backward take them).

def o_magnitude(q, k, v, causal, sm_scale, rows=None):
    o, _, (rss, _) = _forward_stats(q, k, v, causal, sm_scale, rows)
    return o.abs() + RSS_MULTIPLE * rss


def lse_magnitude(q, k, v, causal, sm_scale, rows=None):
    # A score's float32 error is relative to sum_d |q_d k_d| (times sm_scale), not to the score.
    _, lse, (_, size) = _forward_stats(q, k, v, causal, sm_scale, rows)
    return lse.abs() + size


def _cancellation_weight(dtype, D):
    """dp - delta is a difference of two float32 dot products of length D: its error, up to
    ~2 D float32 ulps of the terms' size (tensor cores truncate), in units of the input dtype's
    rounding (the tolerance's rtol)."""
    return 2.0 * D * 2.0 ** -24 / UNIT_ROUNDOFF[dtype]


def dq_magnitude(q, k, v, o, lse, do, causal, sm_scale, rows=None):
    dq, _, _, (rq, _, _, cq, _) = _backward_stats(q, k, v, o, lse, do, causal, sm_scale, rows)
    return dq.abs() + RSS_MULTIPLE * rq + _cancellation_weight(q.dtype, q.shape[-1]) * cq


def dk_magnitude(q, k, v, o, lse, do, causal, sm_scale, rows=None):
    _, dk, _, (_, rk, _, _, ck) = _backward_stats(q, k, v, o, lse, do, causal, sm_scale, rows)
    return dk.abs() + RSS_MULTIPLE * rk + _cancellation_weight(q.dtype, q.shape[-1]) * ck


def dv_magnitude(q, k, v, o, lse, do, causal, sm_scale, rows=None):
    _, _, dv, (_, _, rv, _, _) = _backward_stats(q, k, v, o, lse, do, causal, sm_scale, rows)
    return dv.abs() + RSS_MULTIPLE * rv


# ----------------------------------------------------------------------------- baselines and peers
# The targets are ratios to SDPA's FlashAttention-2 backend (forward 1.0x, backward
# 0.8x) and to its cuDNN backend (forward 0.75x). The graded baseline is SDPA with the flash
# backend wherever it is available (PyTorch's other choices allowed, cuDNN excluded: on some
# versions it is the default on an H100); peer_* pin one backend each, for the benchmark.

def _gqa(q, k):
    return q.shape[1] != k.shape[1]


def _backends(name):
    from torch.nn.attention import SDPBackend
    return {
        "default": [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH],
        "flash": [SDPBackend.FLASH_ATTENTION],
        "cudnn": [SDPBackend.CUDNN_ATTENTION],
    }[name]


_EXPANDED = {}  # (ptr, shape, dtype, group) -> k or v with its heads repeated (cuDNN's GQA)


def _expand_heads(t, group):
    """(B, Hkv, S, D) -> (B, Hkv * group, S, D), kv head h // group for query head h. Kept per
    buffer, so the cuDNN peer (no GQA in SDPA's cuDNN backend) is timed without the copy."""
    if group == 1:
        return t
    key = (t.data_ptr(), tuple(t.shape), t.dtype, group)
    if key not in _EXPANDED:
        if len(_EXPANDED) >= 8:
            _EXPANDED.clear()
        _EXPANDED[key] = t.repeat_interleave(group, dim=1)
    return _EXPANDED[key]


def _sdpa(q, k, v, causal, sm_scale, backend):
    from torch.nn.attention import sdpa_kernel
    if backend == "cudnn":
        group = q.shape[1] // k.shape[1]
        k, v = _expand_heads(k, group), _expand_heads(v, group)
    with sdpa_kernel(_backends(backend)):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm_scale,
                                              enable_gqa=_gqa(q, k))


def baseline(q, k, v, causal, sm_scale):
    """F.scaled_dot_product_attention (enable_gqa for GQA): FlashAttention-2 for bf16/fp16 on
    an H100/H200, which runs GQA natively."""
    return _sdpa(q, k, v, causal, sm_scale, "default")


def peer_sdpa_flash(q, k, v, causal, sm_scale):
    """The forward through SDPA's FlashAttention-2 backend only (the issue's first target)."""
    return _sdpa(q, k, v, causal, sm_scale, "flash")


def peer_sdpa_cudnn(q, k, v, causal, sm_scale):
    """The forward through SDPA's cuDNN backend only (the issue's second target). It has no GQA:
    k and v get the query heads' count first, once per buffer, outside the timed work."""
    return _sdpa(q, k, v, causal, sm_scale, "cudnn")


# The backward baselines time autograd's backward of SDPA, and only that: a forward is run once
# per shape on detached copies of q, k, v (outside the timing, which starts after warm-up
# calls), and every call runs torch.autograd.grad on that graph with the call's `do`. The
# backward kernels' time does not depend on the values; the graph is kept for the last shape.
_GRAPH = {"key": None, "leaves": None, "out": None}


def _sdpa_backward(q, k, v, do, causal, sm_scale, backend):
    key = (tuple(q.shape), tuple(k.shape), q.dtype, str(q.device), causal, sm_scale, backend)
    with torch.enable_grad():
        if _GRAPH["key"] != key:
            _GRAPH.update(key=None, leaves=None, out=None)
            leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
            qq, kk, vv = leaves
            if backend == "cudnn":  # no GQA there: the kv heads repeated inside the graph
                group = qq.shape[1] // kk.shape[1]
                kk, vv = kk.repeat_interleave(group, dim=1), vv.repeat_interleave(group, dim=1)
            from torch.nn.attention import sdpa_kernel
            with sdpa_kernel(_backends(backend)):
                out = F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal, scale=sm_scale,
                                                     enable_gqa=_gqa(qq, kk))
            _GRAPH.update(key=key, leaves=leaves, out=out)
        return torch.autograd.grad(_GRAPH["out"], _GRAPH["leaves"], do, retain_graph=True)


def baseline_backward(q, k, v, o, lse, do, causal, sm_scale):
    """Autograd's backward of F.scaled_dot_product_attention, as baseline() runs it (the
    FlashAttention-2 backward for bf16/fp16 on an H100/H200), from the same do."""
    return _sdpa_backward(q, k, v, do, causal, sm_scale, "default")


# An autograd call has nothing for torch.compile to fuse: benchmarks/bench.py times it eager
# only. (Marked here rather than with @torch.compiler.disable, which imports torch._dynamo when
# this module loads: seconds of every grade's start-up, in the worker and in the checker.)
baseline_backward.bench_compile = False


def peer_sdpa_flash_backward(q, k, v, o, lse, do, causal, sm_scale):
    """The backward of SDPA's FlashAttention-2 backend only (the issue's backward target)."""
    return _sdpa_backward(q, k, v, do, causal, sm_scale, "flash")


def peer_sdpa_cudnn_backward(q, k, v, o, lse, do, causal, sm_scale):
    """The backward of SDPA's cuDNN backend (the kv heads repeated inside the graph, since it
    has no GQA: the repeat's backward, a sum over each group, is part of what is timed)."""
    return _sdpa_backward(q, k, v, do, causal, sm_scale, "cudnn")


# benchmarks/bench.py times these beside the baseline (a peer that cannot take a task's
# arguments, a forward peer on the backward, is skipped there).
BENCH_PEERS = {
    "sdpa_flash": "peer_sdpa_flash", "sdpa_cudnn": "peer_sdpa_cudnn",
    "sdpa_flash_bwd": "peer_sdpa_flash_backward", "sdpa_cudnn_bwd": "peer_sdpa_cudnn_backward",
}
