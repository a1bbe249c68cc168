"""The trusted side of correctness: the submission's saved outputs against a ground truth computed
here, in a process that never imports the submission.

The worker (which does import it) only runs the calls and saves what they returned; it decides
nothing about values. The checker draws the same inputs from the grade's seed (grader.judge.inputs),
computes the reference, takes the outputs the worker handed over (grader.judge.handover: CUDA IPC
handles, or files loaded with weights_only=True, so no submission code can run here) and compares
them. A failing output gets a diagnosis (grader.judge.failure_codes: what was seen, and the likely bug);
the one cheat the values can prove is cached results (outputs that are copies of the result of
earlier inputs).

Run in the parent for CPU grades, and as `python -m grader.judge.checker REQUEST.json` for GPU
grades (so the command-line process never holds a CUDA context), answering the parent case by case
while the worker runs.
"""

from __future__ import annotations

import importlib.util
import json
import math
import random
import sys
from pathlib import Path

import torch

from grader.judge import failure_codes, handover
from grader.judge.compare import compare_values
from grader.judge.inputs import AGAIN, case_seed, clone, flatten, make_case_inputs, output_dtype
from grader.judge.properties import judge as judge_property
from grader.judge.wrong_values import DOWNGRADES, NEAR_MISS, analyse, exact_fraction, excess
from grader.kata.format import Kata, load_kata
from grader.profiling import run_maybe_profiled
from grader.timing.perturb import Replay, tensors


def load_spec(kata: Kata):
    spec = importlib.util.spec_from_file_location(f"kata_spec_{kata.name}", kata.spec_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Checker:
    def __init__(self, kata: Kata, seed: int, device: str):
        self.kata, self.seed, self.device = kata, seed, device
        self.spec = load_spec(kata)
        self.tasks = {t.name: t for t in kata.tasks}

    def _inputs(self, task, case_name: str, dtype: str, key: str, salt: str) -> dict:
        case = next(c for c in task.cases if c.name == case_name)
        return make_case_inputs(self.spec, task, case, dtype, self.device, self.seed, key, salt)

    def _truth(self, task, inputs, rows=None) -> tuple:
        truth = getattr(self.spec, task.reference_fn)(**clone(inputs), **_at(rows))
        return (truth,) if len(task.outputs) == 1 else tuple(truth)

    def compare(self, task, inputs, saved: dict, case: str, truth=None, rows=None) -> dict:
        """{ok, message, max_abs_err, max_rel_err, mismatched, total, mismatches, tolerance_used
        (per output, the worst error as a fraction of what the tolerance allows there: up to the
        failing tensor on a failure)}; a failure on
        the values also carries `leaf` (the failing tensor, its truth and tolerance), a failure
        of the structure a `diagnosis`. case: the case's name (tolerances may depend on it).
        rows: compare only these positions along the task's timed_rows dim (see _sampled_rows)."""
        case = task.case(case)
        if task.property_fn:
            return judge_property(self.spec, task, [(inputs, saved)], self.device, case)
        truth = truth if truth is not None else self._truth(task, inputs, rows)
        worst = {"max_abs_err": None, "max_rel_err": None, "mismatched": 0, "total": 0,
                 "tolerance_used": {}}
        for o, (output, expected) in enumerate(zip(task.outputs, truth)):
            got_leaves = saved.get(output.name)
            exp_leaves = [t for _, t in flatten(expected, output.name)]
            if not isinstance(got_leaves, list) or len(got_leaves) != len(exp_leaves):
                message = f"'{output.name}' is missing from the saved outputs"
                return dict(worst, ok=False, message=message,
                            diagnosis=failure_codes.Diagnosis("wrong_output", message))
            dtype = output_dtype(output, inputs)
            tol = task.tolerance(str(dtype).removeprefix("torch."), output, case)
            scales = self._scales(output, inputs, len(exp_leaves), rows)
            allowances = self._scales(output, inputs, len(exp_leaves), rows, fn=output.allowance_fn)
            for i, (got, exp, scale, allowance) in enumerate(zip(got_leaves, exp_leaves, scales, allowances)):
                label = f"'{output.name}[{i}]'" if isinstance(expected, (list, tuple)) else f"'{output.name}'"
                if rows is not None:  # _sampled_rows checked every leaf has the dim
                    got = got.index_select(task.timed_rows.dim, rows.to(got.device))
                problem = _structure(got, label, dtype, tuple(exp.shape))
                if problem:
                    return dict(worst, ok=False, message=problem,
                                diagnosis=failure_codes.from_message(problem, "fail"))
                cmp = compare_values(got.to(self.device), exp, label, mode=output.compare,
                                     atol=tol.atol, rtol=tol.rtol, ulp=output.ulp, scale=scale,
                                     allowance=allowance)
                for key in ("max_abs_err", "max_rel_err"):
                    value = getattr(cmp, key)
                    if value is not None and (worst[key] is None or value > worst[key]):
                        worst[key] = value
                if cmp.tolerance_used is not None:
                    used = worst["tolerance_used"]
                    used[output.name] = max(used.get(output.name, 0.0), cmp.tolerance_used)
                worst["mismatched"] += cmp.mismatched or 0
                worst["total"] += cmp.total or 0
                if not cmp.ok:
                    far = rows is None and self._others_far(task, inputs, saved, truth, case, o, i)
                    return dict(worst, ok=False, message=cmp.message, max_abs_err=cmp.max_abs_err,
                                max_rel_err=cmp.max_rel_err, mismatched=cmp.mismatched,
                                total=cmp.total, mismatches=cmp.mismatches, values=True,
                                leaf=dict(got=got.to(self.device), expected=exp, mode=output.compare,
                                          atol=tol.atol, rtol=tol.rtol, ulp=output.ulp, scale=scale,
                                          allowance=allowance, near_miss=output.near_miss,
                                          others_far=far))
        return dict(worst, ok=True, message="")

    def _others_far(self, task, inputs, saved: dict, truth, case, output_at: int, leaf_at: int) -> bool:
        """Is any tensor checked after the failing one (later leaves of its output, later outputs)
        beyond NEAR_MISS times its allowed error? Then the failure is no near miss: a planted bug
        can be small in one tensor (a param of one element) and far off in another (its moment)."""
        for o, (output, expected) in enumerate(zip(task.outputs, truth)):
            if o < output_at or output.compare != "allclose":
                continue
            exp_leaves = [t for _, t in flatten(expected, output.name)]
            got_leaves = saved.get(output.name)
            if not isinstance(got_leaves, list) or len(got_leaves) != len(exp_leaves):
                return True
            dtype = output_dtype(output, inputs)
            tol = task.tolerance(str(dtype).removeprefix("torch."), output, case)
            scales = self._scales(output, inputs, len(exp_leaves))
            allowances = self._scales(output, inputs, len(exp_leaves), fn=output.allowance_fn)
            for i, (got, exp, scale, allowance) in enumerate(zip(got_leaves, exp_leaves, scales, allowances)):
                if o == output_at and i <= leaf_at:
                    continue
                if _structure(got, "", dtype, tuple(exp.shape)) is not None or excess(
                        got.to(self.device), exp, atol=tol.atol, rtol=tol.rtol, scale=scale,
                        allowance=allowance) > NEAR_MISS:
                    return True
        return False

    def _scales(self, output, inputs, n_leaves: int, rows=None, fn: str | None = "") -> list:
        """Each leaf's magnitude for rtol (the output's `scale` function), or None per leaf;
        with fn=output.allowance_fn, each leaf's extra absolute allowance the same way."""
        fn = output.scale_fn if fn == "" else fn
        if not fn:
            return [None] * n_leaves
        scale = getattr(self.spec, fn)(**clone(inputs), **_at(rows))
        return [t for _, t in flatten(scale, output.name)]

    def downgraded(self, task, inputs, saved: dict) -> str | None:
        """The lower precision a failing float32 result was computed in, if it shows.

        Two tells, either suffices: nearly every output value is exactly representable in the
        lower precision (it was stored from there), or the output sits far closer to the
        reference computed from inputs rounded to it than to the true reference.
        """
        pairs = _float32_outputs(task, saved, self._truth(task, inputs))
        if not pairs:
            return None
        got, truth = [g for g, _ in pairs], [t for _, t in pairs]
        for low in DOWNGRADES:
            low_name = str(low).removeprefix("torch.")
            if all(exact_fraction(g, low) > 0.99 for g in got) and not all(exact_fraction(t, low) > 0.5 for t in truth):
                return low_name
            lowered = {k: _cast_floats(v, low) for k, v in inputs.items()}
            low_truth = [t for _, t in _float32_outputs(task, saved, self._truth(task, lowered))]
            err = sum(float((g - t).abs().nan_to_num(1e30).mean()) for g, t in zip(got, truth))
            err_low = sum(float((g - t).abs().nan_to_num(1e30).mean()) for g, t in zip(got, low_truth))
            if err_low < 0.25 * err:
                return low_name
        return None

    def diagnosis(self, task, inputs, saved: dict, verdict: dict, dtype: str) -> failure_codes.Diagnosis:
        """What a failing verdict shows (grader.judge.failure_codes), never a cheat."""
        if isinstance(verdict.get("diagnosis"), failure_codes.Diagnosis):
            return verdict["diagnosis"]
        leaf = verdict.get("leaf")
        if not leaf:
            return failure_codes.Diagnosis("property_failed" if task.property_fn else "wrong_values",
                                           failure_codes.first_line(verdict["message"]))
        downgraded = ((lambda: self.downgraded(task, inputs, saved))
                      if dtype == "float32" and leaf["got"].dtype == torch.float32 else None)
        return analyse(leaf["got"], leaf["expected"], mode=leaf["mode"], atol=leaf["atol"],
                                rtol=leaf["rtol"], ulp=leaf["ulp"], inputs=inputs,
                                downgraded=downgraded, scale=leaf.get("scale"),
                                allowance=leaf.get("allowance"), near_miss=leaf.get("near_miss", ""),
                                others_far=leaf.get("others_far", False))

    def check_case(self, planned: dict, worker_result: dict) -> dict:
        """The case's result: the worker's structural verdict, then the values."""
        result = dict(worker_result)
        if result.get("status") != "ran":
            return result
        task = self.tasks[planned["task"]]
        key, dtype = planned["key"], planned["dtype"]
        files = result.pop("outputs", {})
        if task.property_fn:
            return self._check_property_case(task, planned, result, files)
        inputs = self._inputs(task, planned["case"], dtype, key, "")
        first = handover.load(files.get("first"))
        verdict = self.compare(task, inputs, first, planned["case"])
        again = handover.load(files.get("again"))
        again_inputs = self._inputs(task, planned["case"], dtype, key, AGAIN)
        if not verdict["ok"]:
            found = self.diagnosis(task, inputs, first, verdict, dtype)
            if verdict.get("values") and self.compare(task, again_inputs, again, planned["case"])["ok"]:
                found = _one_call_failed(found, verdict, "the first call failed but the second, on "
                                         "other values in the same buffers, passed", "first")
            return _fail(result, verdict, _with(verdict["message"], found), found)
        # A bench case of a timed_rows task is verified whole once, on the first call; its second
        # call, on fresh inputs, at sampled rows (and whole if that fails, for the message).
        rows = (self._sampled_rows(task, again_inputs, again)
                if task.timed_rows and task.case(planned["case"]).bench else None)
        verdict_again = self._compare_at(task, again_inputs, again, planned["case"], rows)
        if not verdict_again["ok"]:
            if _same_outputs(first, again):
                return _fail(result, verdict_again,
                             "called again on the same buffers holding new inputs, it returned the "
                             "first call's result bit for bit: results are cached across calls "
                             "(keyed on the pointer, the shape or the contents)", cheat="cached_results")
            found = self.diagnosis(task, again_inputs, again, verdict_again, dtype)
            found = _one_call_failed(found, verdict_again, "the first call passed but the second, "
                                     "on other values in the same buffers, failed", "second")
            return _fail(result, verdict_again, _with(verdict_again["message"], found), found)
        result.update(status="pass", message="", **{k: verdict[k] for k in
                                                    ("max_abs_err", "max_rel_err", "mismatched", "total")})
        result["tolerance_used"] = _most_used(verdict, verdict_again)
        return result

    def _check_property_case(self, task, planned: dict, result: dict, files: dict) -> dict:
        """A task with a property check (grader.judge.properties): its function judges both checked
        calls together, so it can relate them (the same seed must give the same mask)."""
        key, dtype, case = planned["key"], planned["dtype"], planned["case"]
        first, again = handover.load(files.get("first")), handover.load(files.get("again"))
        calls = [(self._inputs(task, case, dtype, key, ""), first),
                 (self._inputs(task, case, dtype, key, AGAIN), again)]
        verdict = judge_property(self.spec, task, calls, self.device, task.case(case))
        if not verdict["ok"]:
            if _same_outputs(first, again) and judge_property(self.spec, task, calls[:1], self.device, task.case(case))["ok"]:
                return _fail(result, verdict, "called again on the same buffers holding new inputs, "
                             "it returned the first call's result: results are cached across calls",
                             cheat="cached_results")
            found = failure_codes.Diagnosis("property_failed", failure_codes.first_line(verdict["message"]))
            return _fail(result, verdict, verdict["message"], found)
        result.update(status="pass", message="", **{k: verdict[k] for k in
                                                    ("max_abs_err", "max_rel_err", "mismatched", "total")})
        return result

    def check_samples(self, planned: dict, samples: list[dict], method: str | None,
                      n_sets: int | None, change_keys: list[int] | None = None) -> dict | None:
        """Outputs of the timed calls the parent chose; None when all are right, else the failure:
        {"message", and "cheat" or "diagnosis"}.

        Each sample names the submission's call (or graph replay) and its input set; the inputs
        it saw are the set as drawn plus the changes made before every call up to it, replayed
        here from the seed. Outputs that match an earlier call's inputs on the same set are
        stale copies: cached results, a cheat. Any other wrong output is a diagnosis: honest bugs
        (a race, state kept across calls, a bug only the bench shapes hit) produce those too.
        """
        task = self.tasks[planned["task"]]
        graph = method == "cuda_graph"
        for sample in samples:
            call, index = sample.get("call"), sample.get("set")
            if not isinstance(call, int) or not isinstance(index, int) or not isinstance(n_sets, int) \
                    or not 0 <= index < n_sets:
                return {"cheat": "fake_result", "message": "a kept timed output the grader did not ask for"}
        # In call order, so one draw of the sets serves every sample: a large case's inputs can
        # take a float64 pass to draw (flash attention's backward), as long as its truth.
        sets, changes = None, None
        for sample in sorted(samples, key=lambda s: s["call"]):
            call, index = max(sample["call"], -1), sample["set"]
            if changes is None or call < changes.applied:
                sets, changes = self._timed_sets(task, planned, n_sets, graph, change_keys)
            changes.advance(call)
            inputs = sets[index]
            got = handover.load(sample.get("file"))
            rows = self._sampled_rows(task, inputs, got)
            verdict = self._compare_at(task, inputs, got, planned["case"], rows)
            if verdict["ok"]:
                continue
            sets = changes = None  # _stale draws the sets again: hold one set, not two draws
            if self._stale(task, planned, n_sets, call, graph, index, got, change_keys):
                return {"cheat": "cached_results", "message": (
                    f"timed call {call} returned the result of an earlier call's inputs, not of "
                    "the inputs it was given: results are cached across the timed calls")}
            seen = self.diagnosis(task, inputs, got, verdict, planned["dtype"])
            found = failure_codes.Diagnosis("timed_outputs_wrong", (
                f"a timed call (call {call} of the timing loop, on inputs of the bench shape) "
                f"returned wrong results although the checked calls were right "
                f"({failure_codes.first_line(verdict['message'])}); {seen.message}"))
            return {"cheat": None, "diagnosis": found.to_dict(), "message": found.text}
        return None

    def _compare_at(self, task, inputs, saved: dict, case: str, rows) -> dict:
        """compare() at `rows` (None: everywhere); a sampled failure is compared again whole, so
        that its message and diagnosis account for the whole output."""
        verdict = self.compare(task, inputs, saved, case, rows=rows)
        if not verdict["ok"] and rows is not None:
            verdict = self.compare(task, inputs, saved, case)
        return verdict

    def _sampled_rows(self, task, inputs: dict, saved: dict) -> torch.Tensor | None:
        """Where to verify a kept timed call of a task with timed_rows: `count` positions along
        its dim, drawn here (the worker cannot know them). The timing rescales every input at
        random before each call (grader.timing.perturb), so a result cached from an earlier
        call, or patched from one, is wrong at nearly every position, and any sample sees it. None
        (verify everywhere) when the outputs or inputs do not all have that dim at one size, or
        the sample would be most of it.
        """
        if task.timed_rows is None:
            return None
        dim, count = task.timed_rows.dim, task.timed_rows.count
        leaves = [t for o in task.outputs for t in _as_list(saved.get(o.name))]
        if not leaves or not all(isinstance(t, torch.Tensor) and t.dim() > dim for t in leaves):
            return None
        size = leaves[0].shape[dim]
        if any(t.shape[dim] != size for t in leaves) or any(
                t.dim() > dim and t.shape[dim] != size for t in tensors(list(inputs.values()))):
            return None
        if count >= size // 2:
            return None
        picked = random.SystemRandom().sample(range(size), count)
        return torch.tensor(sorted(picked), dtype=torch.int64, device=self.device)

    def _timed_sets(self, task, planned: dict, n_sets: int, graph: bool,
                    change_keys: list[int] | None) -> tuple[list[dict], Replay]:
        """The timed input sets as drawn, and the Replay that brings them (in place) to the
        inputs of a later call: with the keys the parent sent for each call's change, or from
        the case's seed where it sent none."""
        sets = [self._inputs(task, planned["case"], planned["dtype"], planned["key"], f"/timing{i}")
                for i in range(n_sets)]
        args = [tuple(s[a] for a in task.args) for s in sets]
        keys = change_keys if change_keys is not None else case_seed(self.seed, planned["key"] + "/rng")
        return sets, Replay(args, keys, graph)

    def _stale(self, task, planned: dict, n_sets: int, call: int, graph: bool, index: int,
               got: dict, change_keys: list[int] | None = None) -> bool:
        """Does `got` match the inputs of an earlier call on the same set (a cached result)? The
        calls a cache is likely to replay: the set as drawn, its first call and its last two.
        (Not the checked calls': a kernel that keeps the first call's pointers, keyed on the
        shape, passes both checked calls, which share buffers, and then returns their result in
        timed calls: state kept across calls, an honest bug.)"""
        step = 1 if graph else n_sets
        first = 0 if graph else index
        sets, changes = self._timed_sets(task, planned, n_sets, graph, change_keys)
        for earlier in sorted(c for c in {call - step, call - 2 * step, first, -1} if -1 <= c < call):
            changes.advance(earlier)  # ascending: one draw brought forward
            if self.compare(task, sets[index], got, planned["case"])["ok"]:
                return True
        return False


def _structure(got, label: str, dtype: torch.dtype, shape: tuple) -> str | None:
    if not isinstance(got, torch.Tensor):
        return f"{label} is missing from the saved outputs"
    if got.dtype != dtype:
        return f"{label} has dtype {str(got.dtype).removeprefix('torch.')}, expected {str(dtype).removeprefix('torch.')}"
    if tuple(got.shape) != shape:
        return f"{label} has shape {tuple(got.shape)}, expected {shape}"
    return None


def _float32_outputs(task, saved: dict, truth: tuple) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(got, its ground truth), both float64 on the CPU, for every float32 output leaf, paired
    output by output: with outputs of mixed dtypes (int8 q and float32 scales) the float32 ones
    must meet their own truth, not the first truth in the list."""
    pairs = []
    for output, expected in zip(task.outputs, truth):
        exp_leaves = [t for _, t in flatten(expected, output.name)]
        for got, exp in zip(saved.get(output.name) or [], exp_leaves):
            if isinstance(got, torch.Tensor) and got.dtype == torch.float32 and got.numel():
                pairs.append((got.double().cpu(), exp.double().cpu()))
    return pairs


def _cast_floats(value, dtype):
    if isinstance(value, torch.Tensor) and value.dtype == torch.float32:
        return value.to(dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_floats(v, dtype) for v in value)
    return value


def _as_list(value) -> list:
    """An output's saved leaves; anything else (a forged file) holds none."""
    return value if isinstance(value, list) else []


def _at(rows) -> dict:
    """The keyword that asks a spec function for some positions only (Task.timed_rows)."""
    return {} if rows is None else {"rows": rows}


def _with(message: str, found: failure_codes.Diagnosis) -> str:
    """The comparison's summary, then what the diagnosis saw and advises, on a line of its own."""
    return f"{message}\n{found.text}"


def _fail(result: dict, verdict: dict, message: str, found: failure_codes.Diagnosis | None = None,
          cheat: str | None = None) -> dict:
    result.update(status="fail", message=message, cheat=cheat,
                  diagnosis=found.to_dict() if found else None)
    for key in ("max_abs_err", "max_rel_err", "mismatched", "total"):
        result[key] = verdict.get(key)
    result["mismatches"] = verdict.get("mismatches", [])
    result["tolerance_used"] = verdict.get("tolerance_used") or None
    return result


def _most_used(*verdicts: dict) -> dict[str, float] | None:
    """Per output, the larger fraction of the tolerance the checked calls used (None: none known,
    as for a property check)."""
    used: dict[str, float] = {}
    for verdict in verdicts:
        for name, value in (verdict.get("tolerance_used") or {}).items():
            used[name] = max(used.get(name, 0.0), value)
    return used or None


def _one_call_failed(found: failure_codes.Diagnosis, verdict: dict, what: str,
                     which: str) -> failure_codes.Diagnosis:
    """One checked call of two failed. A near miss (an error of the size rounding produces) keeps
    its name, and so does low precision (every value of the output a float16 one): a draw that
    lands just outside the tolerance is not a race, and narrower storage is a cause of its own.
    Otherwise the error depends on the input values; a race is only one candidate among them,
    and with errors within NEAR_MISS times the tolerance it is not suggested at all."""
    if found.code in ("near_miss", "low_precision"):
        return failure_codes.Diagnosis(found.code, f"{found.message}; {what}, so the draw decides how "
                                       "far the rounding goes", found.advice)
    leaf = verdict.get("leaf") or {}
    times = (excess(leaf["got"], leaf["expected"], atol=leaf["atol"], rtol=leaf["rtol"],
                    scale=leaf.get("scale"), allowance=leaf.get("allowance"))
             if leaf.get("mode") == "allclose" and not leaf.get("others_far") else math.inf)
    if times <= NEAR_MISS:
        return failure_codes.Diagnosis("input_dependent_error", (
            f"{what}; on the {which}: {found.message}. Every error is within {times:.2g}x of the "
            "tolerance: a small error that depends on the values (rounding, or a term slightly off), "
            "not the signature of a race (a race gives different results for the same inputs)"),
            "look at the formula's rounding and its small terms: constants computed in float32 on "
            "the device, an exponential of a large offset, eps, a bias correction")
    return failure_codes.Diagnosis("input_dependent_error", f"{what}; on the {which}: {found.message}")


def _same_outputs(a: dict, b: dict) -> bool:
    if not a or a.keys() != b.keys():
        return False
    for name in a:
        for x, y in zip(a[name], b[name]):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if not bool(((x == y) | (torch.isnan(x) & torch.isnan(y))).all()):
                return False
    return True


def serve(request_path: str, requests, replies) -> int:
    """The checker as a process of its own (GPU grades): one JSON request per line in, one answer
    per line out. Started with the worker, so its imports and CUDA start-up overlap the worker's."""
    request = json.loads(Path(request_path).read_text())
    if request["device"] == "cuda":  # start CUDA now, while the worker starts, not at the first case
        torch.empty(1, device="cuda")
    else:  # beside the worker on the same cores: one thread each (grader.sandbox.worker.main)
        torch.set_num_threads(1)
    checker = Checker(load_kata(Path(request["kata_dir"])), request["seed"], request["device"])
    plan = {p["key"]: p for p in request["plan"]}
    for line in requests:
        ask = json.loads(line)
        if ask["op"] == "case":
            answer = {"result": checker.check_case(plan[ask["key"]], ask["result"])}
        elif ask["op"] == "ceilings":  # measured again in a trusted process (a floor in question)
            from grader.timing.timer import measure_ceilings

            answer = {"ceilings": measure_ceilings()}
        else:
            answer = {"failure": checker.check_samples(plan[ask["key"]], ask["samples"],
                                                       ask["method"], ask["sets"], ask.get("change_keys"))}
        replies.write(json.dumps(answer, default=str) + "\n")
        replies.flush()
    return 0


def run_process(request_path: str) -> int:
    """The checker process (`python -m grader.judge.checker REQUEST`, or forked by the warm start)."""
    # Answers go to the real stdout; anything else that prints (warnings) goes to stderr.
    out = sys.stdout
    sys.stdout = sys.stderr
    serving = lambda: serve(request_path, sys.stdin, out)  # noqa: E731
    return run_maybe_profiled(serving, "KATA_CHECKER_PROFILE")


if __name__ == "__main__":
    sys.exit(run_process(sys.argv[1]))
