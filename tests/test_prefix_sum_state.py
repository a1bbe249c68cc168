"""The prefix_sum reference keeps its look-back flags between launches, tagged with an epoch,
instead of zeroing them before each launch. A word left by an earlier launch must never be
taken for this launch's: these checks run launch after launch over sizes that grow, shrink and
wrap the epochs, on the interpreter (in a fresh process, so TRITON_INTERPRET holds at import).
The persistent look-back (LOOKBACK_PERSISTENT) draws more tickets than it has tiles: the host's
count of them, which the next launch's tickets start from, is checked against the counter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import importlib.util, torch
spec = importlib.util.spec_from_file_location("prefix_sum", "reference/prefix_sum.py")
ps = importlib.util.module_from_spec(spec); spec.loader.exec_module(ps)
assert ps.REUSE_STATE
ps.TILE = 64; ps.WINDOW = 4; ps.ROW_BLOCK_MAX = 64  # many tiles per row at small sizes

def check(shape, dtype, scale):
    gen = torch.Generator().manual_seed(hash((shape, scale)) % 1000)
    if dtype == torch.int32:
        x = torch.randint(-scale, scale, shape, generator=gen, dtype=torch.int32)
        assert torch.equal(ps.cumsum(x), x.long().cumsum(-1).to(torch.int32)), (shape, scale)
    else:
        x = torch.randn(shape, generator=gen) * scale
        torch.testing.assert_close(ps.cumsum(x), x.double().cumsum(-1).float(), rtol=1e-5,
                                   atol=1e-5 * scale * shape[1])

# Large values first, then small sizes: a stale word read as current would add a large value.
for shape in [(3, 700), (1, 65), (2, 300), (1, 1000), (4, 129), (1, 130)]:
    check(shape, torch.int32, 10**6 if shape == (3, 700) else 3)
    check(shape, torch.float32, 1.0)
state = next(iter(ps._LOOKBACK_STATES.values()))
assert state.epoch == 12, state.epoch
assert state.words.numel() - 1 >= 64, state.words.numel()
# The epochs wrap: the words are zeroed again and the scans stay right.
ps._LookbackState.EPOCHS = 3
for shape in [(2, 300), (1, 1000), (3, 129), (1, 700), (2, 65)]:
    check(shape, torch.int32, 100)
assert 1 <= state.epoch <= 3, state.epoch

# The decoding itself (the interpreter runs programs one after another, so a launch never reads a
# predecessor's word before it is published: the sequence above cannot show a stale word read
# as current). Words of epochs 5 and 6, every flag: only epoch 6's keep their flag.
import triton, triton.language as tl

@triton.jit
def decode(value_ptr, flag_ptr, epoch_ptr, out_ptr, epoch, N: tl.constexpr):
    i = tl.arange(0, N)
    word = ps._pack(tl.load(value_ptr + i), tl.load(flag_ptr + i), tl.load(epoch_ptr + i), True)
    tl.store(out_ptr + i, ps._flag(word, epoch))
    tl.store(out_ptr + N + i, ps._unpack_value(word, True).to(tl.int32, bitcast=True))

values = torch.tensor([-1.5, 2.0, 3.25, -0.0, 7.0, 1e30, -2.0, 0.5])
flags = torch.tensor([0, 1, 2, 3, 0, 1, 2, 1], dtype=torch.int32)
epochs = torch.tensor([5, 5, 5, 5, 6, 6, 6, ps._LookbackState.EPOCHS], dtype=torch.int32)
out = torch.empty(16, dtype=torch.int32)
decode[(1,)](values, flags, epochs, out, 6, N=8)
assert out[:8].tolist() == [0, 0, 0, 0, 0, 1, 2, 0], out[:8].tolist()
assert torch.equal(out[8:].view(torch.float32), values)
print("ok")
"""


PERSISTENT_SCRIPT = r"""
import importlib.util, torch
spec = importlib.util.spec_from_file_location("prefix_sum", "reference/prefix_sum.py")
ps = importlib.util.module_from_spec(spec); spec.loader.exec_module(ps)
assert ps.REUSE_STATE and ps.LOOKBACK_PERSISTENT == 4 and ps.INTERPRETER_SMS == 4
ps.TILE = 64; ps.WINDOW = 4; ps.ROW_BLOCK_MAX = 64  # many tiles per row at small sizes

def check(shape, dtype, scale, persistent, early=False, strided=False):
    ps.LOOKBACK_PERSISTENT, ps.LOOKBACK_EARLY_AGGREGATE = persistent, early
    gen = torch.Generator().manual_seed(hash((shape, scale, persistent)) % 1000)
    wide = (shape[0], shape[1] + (3 if strided else 0))
    if dtype == torch.int32:
        x = torch.randint(-scale, scale, wide, generator=gen, dtype=torch.int32)[:, :shape[1]]
        want = x.long().cumsum(-1).to(torch.int32)
    else:
        x = (torch.randn(wide, generator=gen) * scale)[:, :shape[1]]
        want = x.double().cumsum(-1).float()
    state = ps._LOOKBACK_STATES.get(("cpu", 0))
    before = None if state is None else (state.words, state.tickets)
    got = ps.cumsum(x)
    state = ps._LOOKBACK_STATES[("cpu", 0)]
    if dtype == torch.int32:
        assert torch.equal(got, want), (shape, persistent)
    else:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * scale * shape[1])
    # The tickets drawn: one per tile, plus one past the end per persistent program.
    tiles = shape[0] * -(-shape[1] // ps.TILE)
    drawn = tiles + (min(tiles, 4 * persistent) if persistent else 0)
    fresh = before is None or state.words is not before[0]
    assert state.tickets == (0 if fresh else before[1]) + drawn, (shape, persistent, state.tickets)
    # The kernel's counter (the last word) agrees with the host's count.
    assert state.words[-1].item() == state.tickets, (shape, persistent, state.words[-1].item())

# The first launches fill the words exactly (100 tiles): a write past the last tile's word would
# land on the counter. Large values first: a stale word read as current would add a large value.
check((2, 64 * 50), torch.int32, 10**6, 1)
check((4, 64 * 25), torch.float32, 1.0, 1, early=True)
# Persistent launches of every grid size (more programs than tiles, fewer, equal), between and
# after one-program-per-tile launches, sizes that grow and shrink, rows with and without a tail,
# strided rows, each way of publishing the prefetched tile's sum.
plan = [((3, 700), 1), ((1, 65), 2), ((2, 300), 0), ((1, 1000), 3), ((4, 129), 1),
        ((1, 130), 0), ((5, 64 * 7), 2), ((3, 64 * 40 + 1), 1), ((3, 700), 0), ((2, 65), 3),
        ((7, 200), 1), ((1, 5000), 2)]
for i, (shape, persistent) in enumerate(plan):
    check(shape, torch.int32, 3, persistent, early=i % 2 == 1, strided=i % 3 == 0)
    check(shape, torch.float32, 1.0, persistent, early=i % 2 == 0, strided=i % 3 == 1)
state = ps._LOOKBACK_STATES[("cpu", 0)]
assert state.epoch == 2 * (len(plan) - 7), state.epoch  # launches since the words grew
assert state.words.numel() - 1 == 200, state.words.numel()  # grown once: (3, 2561) is 123 tiles
# The epochs wrap: the words are zeroed again, the counter with them, and the scans stay right.
ps._LookbackState.EPOCHS = 3
for shape, persistent in [((2, 300), 1), ((1, 1000), 2), ((3, 129), 0), ((1, 700), 1), ((2, 65), 1)]:
    check(shape, torch.int32, 100, persistent)
assert 1 <= state.epoch <= 3, state.epoch
# Without kept state: zeroed words for each launch, tickets from 0.
ps.REUSE_STATE = False
ps.LOOKBACK_PERSISTENT = 2
x = torch.randint(-5, 5, (3, 1000), dtype=torch.int32)
assert torch.equal(ps.cumsum(x), x.long().cumsum(-1).to(torch.int32))
print("ok")
"""


def _run(script: str) -> None:
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT)),
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")


def test_lookback_state_reused_across_launches():
    _run(SCRIPT)


def test_persistent_lookback_ticket_accounting():
    _run(PERSISTENT_SCRIPT)
