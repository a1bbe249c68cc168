"""Property checks (grader/judge/properties.py) and the dropout kata's own (katas/dropout/spec.py).

Outputs here are made with torch, a mask drawn from torch's generator standing in for a correct
kernel's: the property check must accept any good generator, and name each classic bug.
"""

from __future__ import annotations

import pytest
import torch

from grader.judge.checker import Checker, load_spec
from grader.judge.inputs import AGAIN, make_case_inputs
from grader.judge.properties import judge
from grader.kata.catalog import get_kata

KATA = get_kata("dropout")
TASK = KATA.tasks[0]
SPEC = load_spec(KATA)
TOL = {"float32": {"out": (0.0, 1e-6)}, "float16": {"out": (0.0, 1e-3)}}


def make_x(m, n, dtype=torch.float32, seed=0):
    case = {"M": m, "N": n, "p": 0.5, "seed": 1}
    return SPEC.make_inputs(case, dtype, "cpu", torch.Generator().manual_seed(seed))["x"]


def keep_mask(shape, p, seed):
    """A correct mask: independent, each element kept with probability 1 - p."""
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)) >= p


def apply(x, keep, p):
    return torch.where(keep, (x.double() / (1 - p)).to(x.dtype), torch.zeros((), dtype=x.dtype))


def call(x, p, seed, out):
    return {"inputs": {"x": x, "p": p, "seed": seed}, "outputs": {"out": out}}


def check(*calls, dtype="float32"):
    return SPEC.check_dropout(list(calls), TOL[dtype])


def good_pair(m, n, p, seed=5, dtype=torch.float32, second_seed=None):
    second_seed = seed if second_seed is None else second_seed
    x1, x2 = make_x(m, n, dtype, 1), make_x(m, n, dtype, 2)
    return (call(x1, p, seed, apply(x1, keep_mask(x1.shape, p, seed), p)),
            call(x2, p, second_seed, apply(x2, keep_mask(x2.shape, p, second_seed), p)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9])
@pytest.mark.parametrize("shape", [(1, 1), (1, 2), (3, 1025), (64, 100)])
def test_dropout_property_accepts_correct_outputs(dtype, p, shape):
    name = str(dtype).removeprefix("torch.")
    for pair in (good_pair(*shape, p, dtype=dtype), good_pair(*shape, p, dtype=dtype, second_seed=6)):
        verdict = check(*pair, dtype=name)
        assert verdict["ok"], verdict["message"]
        assert verdict["max_abs_err"] is not None and verdict["total"] == 2 * shape[0] * shape[1]
        assert check(pair[0], dtype=name)["ok"]


def test_dropout_property_accepts_many_short_rows():
    for p in (0.1, 0.9):
        verdict = check(*good_pair(2049, 16, p, second_seed=6))
        assert verdict["ok"], verdict["message"]


def test_dropout_property_no_false_alarms_on_small_shapes():
    """Small shapes are where chance agreement is likeliest: the repetition and different-seed
    checks must only speak when agreement cannot be chance."""
    shapes = [(1, 1), (1, 2), (2, 1), (1, 7), (3, 5), (1, 40), (8, 8), (5, 63), (17, 17)]
    for p in (0.1, 0.5, 0.9):
        for shape in shapes:
            for seed in range(40):
                verdict = check(*good_pair(*shape, p, seed=seed, second_seed=seed + 1000))
                assert verdict["ok"], (p, shape, seed, verdict["message"])


def test_dropout_property_scale_forgotten_fails():
    x = make_x(16, 257)
    verdict = check(call(x, 0.1, 7, torch.where(keep_mask(x.shape, 0.1, 7), x, 0.0)))
    assert not verdict["ok"] and "scale is missing" in verdict["message"]
    assert verdict["mismatched"] > 0


def test_dropout_property_scale_by_p_fails():
    x = make_x(16, 257)
    verdict = check(call(x, 0.1, 7, torch.where(keep_mask(x.shape, 0.1, 7), x / 0.1, 0.0)))
    assert not verdict["ok"] and "x / p" in verdict["message"]


@pytest.mark.parametrize("p, block", [(0.5, 256), (0.1, 1024), (0.9, 4096)])
def test_dropout_property_same_mask_per_block_fails(p, block):
    """Offsets not added to the generator's counter: every block of the flat index draws the
    same numbers, so the mask repeats; each block alone looks right."""
    x = make_x(8, 4099)
    base = keep_mask((block,), p, 3)
    keep = base.repeat(x.numel() // block + 1)[: x.numel()].reshape(x.shape)
    verdict = check(call(x, p, 3, apply(x, keep, p)))
    assert not verdict["ok"] and f"repeats every {block} elements" in verdict["message"]


def test_dropout_property_same_mask_per_row_fails():
    x = make_x(2049, 16)
    keep = keep_mask((1, 16), 0.1, 3).expand(x.shape)
    verdict = check(call(x, 0.1, 3, apply(x, keep, 0.1)))
    assert not verdict["ok"] and "every row" in verdict["message"]


def test_dropout_property_same_mask_per_2d_tile_fails():
    """A 2-D tile (16 x 64) whose generator sees the offset within the tile: N = 1000 is no
    multiple of the tile, yet the mask repeats along the columns within every row."""
    x = make_x(8, 1000)
    tile = keep_mask((16, 64), 0.5, 3)
    rows, cols = torch.arange(8)[:, None] % 16, torch.arange(1000)[None, :] % 64
    verdict = check(call(x, 0.5, 3, apply(x, tile[rows, cols], 0.5)))
    assert not verdict["ok"] and "every 64 columns within each row" in verdict["message"]


@pytest.mark.parametrize("p", [0.1, 0.9])
def test_dropout_property_keep_probability_confusion_fails(p):
    x = make_x(16, 1000)
    keep = ~keep_mask(x.shape, p, 3)  # kept with probability p
    verdict = check(call(x, p, 3, apply(x, keep, p)))
    assert not verdict["ok"] and "keep probability" in verdict["message"]


def test_dropout_property_p0_must_be_the_identity():
    x = make_x(4, 1000)
    assert check(call(x, 0.0, 3, x.clone()))["ok"]
    one_dropped = x.clone()
    one_dropped[2, 17] = 0
    verdict = check(call(x, 0.0, 3, one_dropped))
    assert not verdict["ok"] and "p = 0 must return x unchanged" in verdict["message"]
    # Within the float32 tolerance of x / (1 - 0), but not x: p = 0 is exactly the identity.
    nudged = x * (1 + 2.0**-21)
    verdict = check(call(x, 0.0, 3, nudged))
    assert not verdict["ok"] and "p = 0 must return x unchanged" in verdict["message"]


def test_dropout_property_same_seed_must_keep_the_same_elements():
    first, second = good_pair(64, 100, 0.5, seed=5, second_seed=6)
    second["inputs"]["seed"] = 5  # the seed did not change, yet the mask did
    verdict = check(first, second)
    assert not verdict["ok"] and "two calls with the same seed" in verdict["message"]


def test_dropout_property_another_seed_must_change_the_mask():
    """Seed ignored (the mask a function of the index alone): each call alone is right."""
    x1, x2 = make_x(64, 100, seed=1), make_x(64, 100, seed=2)
    keep = keep_mask(x1.shape, 0.5, 3)
    first, second = call(x1, 0.5, 11, apply(x1, keep, 0.5)), call(x2, 0.5, 12, apply(x2, keep, 0.5))
    assert check(first)["ok"] and check(second)["ok"]
    verdict = check(first, second)
    assert not verdict["ok"] and "different seeds (11 and 12" in verdict["message"]


def test_dropout_property_unwritten_and_misshapen_outputs_fail():
    x = make_x(8, 100)
    out = apply(x, keep_mask(x.shape, 0.5, 3), 0.5)
    out[out == 0] = float("nan")  # dropped elements never written
    verdict = check(call(x, 0.5, 3, out))
    assert not verdict["ok"] and "never wrote" in verdict["message"]
    verdict = check(call(x, 0.5, 3, torch.zeros(800)))
    assert not verdict["ok"] and "shape (800,)" in verdict["message"]


# ---- grader/judge/properties.py and the checker's side -------------------------------------------


def saved(out):
    return {"out": [out]}


def test_judge_checks_dtype_and_presence_first():
    x = make_x(8, 100)
    out = apply(x, keep_mask(x.shape, 0.5, 3), 0.5)
    inputs = {"x": x, "p": 0.5, "seed": 3}
    assert judge(SPEC, TASK, [(inputs, saved(out))], "cpu")["ok"]
    verdict = judge(SPEC, TASK, [(inputs, saved(out.half()))], "cpu")
    assert not verdict["ok"] and verdict["message"] == "'out' has dtype float16, expected float32"
    verdict = judge(SPEC, TASK, [(inputs, {})], "cpu")
    assert not verdict["ok"] and "missing" in verdict["message"]


def test_judge_turns_an_exception_of_the_check_into_a_failed_case():
    class Spec:
        @staticmethod
        def check_dropout(calls, tolerance):
            raise IndexError("index 3 is out of bounds")

    x = make_x(8, 100)
    verdict = judge(Spec, TASK, [({"x": x, "p": 0.5, "seed": 3}, saved(x))], "cpu")
    assert not verdict["ok"] and "IndexError: index 3 is out of bounds" in verdict["message"]


def _checked(tmp_path, case_name, first, again, dtype="float32"):
    checker = Checker(KATA, seed=99, device="cpu")
    planned = {"task": "dropout", "case": case_name, "dtype": dtype, "key": f"dropout/{case_name}/{dtype}"}
    files = {}
    for which, make in (("first", first), ("again", again)):
        inputs = make_case_inputs(SPEC, TASK, next(c for c in TASK.cases if c.name == case_name),
                                  dtype, "cpu", 99, planned["key"], "" if which == "first" else AGAIN)
        files[which] = str(tmp_path / f"{which}.pt")
        torch.save(saved(make(inputs)), files[which])
    return checker.check_case(planned, {"status": "ran", "message": "", "cheat": None, "outputs": files})


def _good(inputs):
    return apply(inputs["x"], keep_mask(inputs["x"].shape, inputs["p"], inputs["seed"]), inputs["p"])


def test_checker_judges_both_calls_of_a_property_case(tmp_path):
    result = _checked(tmp_path, "small", _good, _good)
    assert result["status"] == "pass" and result["max_abs_err"] == 0.0
    result = _checked(tmp_path, "new_seed", _good, _good)  # a new seed for the second call
    assert result["status"] == "pass"

    def remasked(inputs):
        return apply(inputs["x"], keep_mask(inputs["x"].shape, inputs["p"], inputs["seed"] + 1), inputs["p"])

    result = _checked(tmp_path, "small", _good, remasked)
    assert result["status"] == "fail" and result["cheat"] is None
    assert "two calls with the same seed" in result["message"]


def test_checker_still_names_cached_results_in_a_property_case(tmp_path):
    first_out = []

    def first(inputs):
        first_out.append(_good(inputs))
        return first_out[0]

    result = _checked(tmp_path, "small", first, lambda inputs: first_out[0])
    assert result["status"] == "fail" and result["cheat"] == "cached_results"
