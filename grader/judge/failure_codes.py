"""Cheats and diagnoses: what a failure is called, and what the learner is told about it.

A **cheat** is named only on evidence that an honest kernel cannot produce: a forbidden op or
torch doing the work, no Triton kernel at all, tampering, forged results, an output subclass or
lazy wrapper, a side stream or thread, results served without a launch or as stale copies,
timing-aware behaviour, a time below the physical floor. Everything an honest bug can also
cause is a **diagnosis**: a short code, a sentence of what was seen, and advice about the likely
bug. Both fail the grade; only a cheat is shown as "Rejected" (docs/SCORING.md has both tables).

What a failing output's values show is grader.judge.wrong_values (`analyse`, run by the checker);
this module is the vocabulary, with no torch import: the command-line process uses it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from grader.judge import kernel_anatomy

# ---- the two vocabularies ------------------------------------------------------------------------

# Reasons that are cheats: evidence an honest kernel cannot produce. A reason not listed here
# nor in RECLASSIFIED (a new one, say) is treated as a cheat too.
CHEATS = {
    "no_triton_kernel": "no Triton kernel launched",
    "forbidden_op": "a forbidden op called",
    "torch_compute": "torch did the work",
    "cached_results": "results served without a launch, or stale copies of earlier outputs",
    "output_type": "an output subclass or lazy wrapper",
    "side_stream": "a kernel launched on a side stream",
    "background_thread": "work done in a background thread",
    "tampering": "the grader, its timer or its checker patched",
    "fake_result": "forged events in the grader's result channel",
    "protected_path_written": "the results store or a report written",
    "slow_first_calls": "timing-aware behaviour",
    "below_physical_floor": "a time below the physical floor",
}

# Reasons once named as cheats that an honest bug can produce: now diagnosis codes.
RECLASSIFIED = {
    "out_of_bounds_write": "out_of_bounds_write",
    "input_mutated": "input_mutated",
    "output_aliases_input": "output_aliases_input",
    "sandbox_violation": "sandbox_violation",
    "precision_downgraded": "low_precision",
    "partial_work": "unwritten_elements",
    "nondeterministic": "input_dependent_error",
    "public_cases_only": "hidden_cases_fail",
    "timed_outputs_wrong": "timed_outputs_wrong",
}

# Advice per diagnosis code: what the likely bug is, and what to try.
ADVICE = {
    # values (the checker's analysis)
    "tail_wrong": "does your grid cover the tail? Launch triton.cdiv(n, BLOCK) programs, not "
                  "n // BLOCK, and mask the last block (offsets < n)",
    "rows_wrong": "does your grid cover every row? Launch triton.cdiv(n_rows, ROWS_PER_PROGRAM) "
                  "programs, not n_rows // ROWS_PER_PROGRAM",
    "row_end_wrong": "the end of every row is not covered: mask with cols < N (not N - 1) and loop "
                     "over rows longer than one block (for start in range(0, N, BLOCK))",
    "unwritten_elements": "some blocks or rows were skipped: check the grid and the program-id "
                          "arithmetic, and that every program stores its whole block",
    "nothing_written": "is the grid empty for this size (n // BLOCK == 0?), or does the kernel "
                       "write to a different tensor than the one returned?",
    "overflow": "an intermediate overflowed or underflowed at this magnitude: in float32 exp(x) "
                "is inf above x = 88 and 0 below x = -103, so subtract the row max before exp (and "
                "keep padding lanes out of the max: other=-inf); in float16 x * x is inf above "
                "|x| = 256, so compute sums of squares in float32",
    "zero_output": "never written into a zero-filled output (torch.zeros), or a statistic that "
                   "overflowed or underflowed: compute statistics in float32",
    "non_finite": "look for 0/0, inf - inf, the square root or log of a negative number, or "
                  "elements never written (new outputs are filled with NaN)",
    "row_scale": "the row's statistic (its max, sum, mean or norm) is wrong while the elementwise "
                 "part is right: check what the reduction includes (padding lanes past N must not "
                 "count: other=0 for a sum, -inf for a max), the divisor (N, not BLOCK_SIZE), where eps "
                 "goes (inside the square root), and that a running sum is rescaled when the "
                 "running max changes",
    "column_scale": "a per-column input (a weight?) is applied wrongly or not at all: load it at "
                    "the column offsets and multiply",
    "low_precision": "this task must be computed in float32 (or better): load with "
                     ".to(tl.float32) and keep intermediates and accumulators in float32",
    "property_failed": "the kata's property check says what is wrong (a random output has no "
                       "single right answer, so it is judged by its properties)",
    "near_miss": "the error is of the size rounding produces, not a logic bug's: compute constants "
                 "on the host in float64 and pass them in, subtract the max before an exponential, "
                 "sum long reductions in blocks of float32 partials",
    "wrong_values": "compare your kernel with the reference on this case (its name says what "
                    "it tests); the first mismatches are listed in the report",
    "input_dependent_error": "the error depends on the input values: a numerical edge case one "
                             "draw hits and the other does not (tiny or huge values, all-negative "
                             "rows, zeros), or a race or a read of memory before it is written",
    "hidden_cases_fail": "edge cases the public ones do not cover: sizes that are not a multiple "
                         "of the block, one row or column, long or strided rows, extreme values; "
                         "the case names say which",
    "timed_outputs_wrong": "right in the checked calls but wrong while timed: look for state kept "
                           "across calls (a reused output buffer, a cache), a race between "
                           "launches, or a bug only the large bench shapes hit",
    # what the worker saw
    "out_of_bounds_write": "mask the store (and the loads) with offsets < n, and find row "
                           "starts with the row stride",
    "input_mutated": "write only to the outputs; allocate any scratch space you need",
    "output_aliases_input": "allocate a new output (torch.empty_like(x)) and return it",
    "sandbox_violation": "a submission may not start processes (fork, os.system, subprocess "
                         "with a shell or an interpreter): remove such calls, debugging ones too",
    "wrong_device": "allocate outputs on the inputs' device (device=x.device) and compute there",
    "wrong_dtype": "allocate the output with the dtype the kata asks for (usually the input's: "
                   "torch.empty_like(x)); compute in float32 inside the kernel and cast on the store",
    "wrong_shape": "allocate the output with the shape the kata asks for",
    "wrong_output": "return what the kata's signature says: plain tensors, as many as it lists",
    "torch_outside_kernels": "do the final reduction over partials in a second Triton kernel "
                             "(or accumulate across programs with tl.atomic_add), convert dtypes in "
                             "the kernel's store, and count or check integer inputs inside a kernel "
                             "(tl.sum over a mask) instead of with .item(); during the call PyTorch may "
                             "only allocate, fill, view and copy (`kata show` lists it)",
    "memory_budget": "the call allocated more scratch memory than the kata's budget allows: "
                     "look for a copy of an input in a wider dtype (x.float()), an intermediate as "
                     "large as the input (a softmax, an exp, a buffer per element), or PyTorch "
                     "temporaries; keep each row in registers and stream it block by block, "
                     "allocating only the outputs and small per-row or per-program buffers",
    "exception": "the traceback shows where; Triton compile errors name the kernel line",
    "compiler_error": "not necessarily your bug: a kernel Triton should compile crashed its "
                      "compiler. What usually gets round it: another BLOCK size or num_warps (or "
                      "num_stages), splitting the kernel in two, or writing the construct the failing "
                      "pass works on another way (a scan or reduction over a 2-D block, a reshape, "
                      "permute or join, a dot of an unusual shape, an atomic on a reduced value). "
                      "TRITON_REPRODUCER_PATH=FILE writes a reproducer to report upstream",
    "gpu_only_feature": "this needs a GPU, which the Triton interpreter does not provide: "
                        "questions for the GPU's driver (device properties such as the SM count, "
                        "the current target) and triton.testing.do_bench. On the CPU use a fixed "
                        "value where the driver would answer (a grid of a few programs), and keep "
                        "the rest for `kata grade --gpu`. (@triton.autotune itself runs its first "
                        "configuration under the interpreter)",
    "not_implemented": "the stub is not filled in yet",
    "failed_while_timed": "the traceback shows where; it ran while timed on the bench shapes",
    "time_limit": "look for an infinite loop in the launcher or a kernel loop that never ends "
                  "(raise the limit with --timeout if it is only slow)",
    "limit_exceeded": "the submission used more memory, processes or output than the sandbox allows",
    "crashed": "the process died: a CUDA fault, a segfault, or an exit called by the submission",
    "cuda_fault": "an illegal memory access is usually an unmasked load or store, or a wrong "
                  "offset (row stride, int32 overflow on large tensors)",
    "load_error": "fix the file so it imports and defines the kata's entry function",
    "internal_error": "not your fault: please report it",
    "gpu_busy": "not your fault: the GPU's memory was taken by another grade or program (see "
                "nvidia-smi); grade again when the GPU is free. With nothing else on it, the GPU "
                "is too small for this kata's largest cases (up to ~72 GB: adamw, cross_entropy, "
                "paged_decode)",
}

DIAGNOSES = sorted(ADVICE)

# How to be faster: what a passing or failing grade's timing showed, with advice. Never a fault:
# it does not change the verdict.
SPEED_ADVICE = {
    "host_sync": "each of these makes the host wait until the GPU has run everything queued "
                 "before it, and the GPU then sits idle while the host launches what follows. "
                 "Usual causes: torch.tensor(..., device='cuda') or .to('cuda') from ordinary "
                 "memory (build it with pin_memory=True and copy it with non_blocking=True); "
                 ".item(), .tolist(), .cpu() or int() of a GPU value (keep it on the GPU, or "
                 "compute it on the host); torch.cuda.synchronize()",
    "many_launches": "each launch costs the host a few microseconds, and a launch over a few "
                     "thousand elements cannot fill the GPU. Cover the work in one launch: a grid "
                     "over every row or tensor, a table of pointers for a list of tensors, a loop "
                     "inside the kernel for long rows",
}
# A call that launches this many Triton kernels or more is told so (no kata's reference launches
# more than 15: muon's iterations).
MANY_LAUNCHES = 64
# Where the first host sync was called, as grader.timing.host_syncs writes it: "file.py:LINE".
_SYNC_AT = re.compile(r"[A-Za-z0-9_.+-]{1,100}:[0-9]{1,9}")


@dataclass(frozen=True)
class Diagnosis:
    code: str
    message: str  # what was seen, for this case
    advice: str = ""  # the likely bug and what to try

    def __post_init__(self):
        if not self.advice:
            object.__setattr__(self, "advice", ADVICE.get(self.code, ""))

    @property
    def text(self) -> str:
        return f"{self.message}: {self.advice}" if self.advice else self.message

    def to_dict(self) -> dict:
        return asdict(self)


def is_cheat(reason: str, message: str = "") -> bool:
    return classify(reason, message)[0] == "cheat"


def classify(reason: str, message: str = "") -> tuple[str, str]:
    """('cheat', reason) or ('diagnosis', code) for a reason the worker or checker named."""
    if reason == "output_type" and "the inputs' device" in message:
        return "diagnosis", "wrong_device"  # on the wrong device: an honest bug, not a wrapper
    if reason in RECLASSIFIED:
        return "diagnosis", RECLASSIFIED[reason]
    return "cheat", reason


_STRUCTURE = [  # (pattern in the message, code): the worker's and checker's own messages
    (re.compile(r"^not implemented yet"), "not_implemented"),
    (re.compile(r"could not be checked: .*(OutOfMemoryError|out of memory)"), "gpu_busy"),
    (re.compile(r"never checked|could not be checked"), "internal_error"),
    # Triton's autotuner (and do_bench, and driver queries) ask for a GPU driver the interpreter lacks.
    (re.compile(r"raised an exception:.*\b0 active drivers", re.S), "gpu_only_feature"),
    # Triton's compiler itself failed (an MLIR pass, LLVM): not the learner's exception.
    (re.compile(r"raised an exception:.*(PassManager::run failed|processing an MLIR pass pipeline"
                r"|LLVM ERROR|failed to legalize operation|please share the reproducer)", re.S),
     "compiler_error"),
    (re.compile(r"raised an exception"), "exception"),
    (re.compile(r" has dtype \S+, expected "), "wrong_dtype"),
    (re.compile(r" has shape \(.*\), expected "), "wrong_shape"),
    (re.compile(r" is on \S+, expected "), "wrong_device"),
    (re.compile(r"^peak extra GPU memory .* exceeds the budget"), "memory_budget"),
    (re.compile(r"^PyTorch computed outside your Triton kernels: "), "torch_outside_kernels"),
]


def from_message(message: str, status: str) -> Diagnosis:
    """A failure the worker reported without naming a reason (a type, a shape, an exception)."""
    for pattern, code in _STRUCTURE:
        if pattern.search(message):
            if code == "compiler_error":
                return Diagnosis(code, "Triton's compiler failed on this kernel (an internal error, "
                                       "not necessarily a bug in your code): " + _last_line(message))
            return Diagnosis(code, first_line(message))
    return Diagnosis("exception" if status == "error" else "wrong_output", first_line(message))


def first_line(text: str) -> str:
    """A message's first line: what a diagnosis quotes of an error or a failed check."""
    return (text.strip().splitlines() or [""])[0]


def _last_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[-1]


# What Triton's compiler writes (to the process's stderr, so into the submission's output) when
# a pass fails: MLIR's "error:" and "note:" diagnostics, the failing pass, LLVM's fatal errors.
_COMPILER_LINE = re.compile(r"(\berror:|\bnote:|Pipeline failed while executing|LLVM ERROR|"
                            r"PassManager::run failed|Assertion .* failed)")
_FAILED_PASS = re.compile(r"Pipeline failed while executing \[`([\w.:-]{1,100})`")
COMPILER_LINES = 6  # the compiler's last lines kept in the case's message


def compiler_lines(output: str) -> list[str]:
    """The compiler's own last lines in a grade's output (the pass that failed among them)."""
    found = [line.strip()[:400] for line in output.splitlines() if _COMPILER_LINE.search(line)]
    distinct = list(dict.fromkeys(reversed(found)))[:COMPILER_LINES]  # each kernel's crash repeats
    return distinct[::-1]


def attach_compiler_lines(cases, diagnoses: list[dict], output: str) -> None:
    """Add the compiler's last lines to each case diagnosed compiler_error, and the failing pass
    to the diagnosis (the exception alone says only "PassManager::run failed")."""
    lines = compiler_lines(output)
    if not lines:
        return
    for case in cases:
        if case.diagnosis == "compiler_error" and "the compiler's last lines" not in case.message:
            case.message += "\nthe compiler's last lines:\n" + "\n".join(f"  {line}" for line in lines)
    failed = [m.group(1) for m in map(_FAILED_PASS.search, lines) if m]
    for d in diagnoses:
        if d["code"] == "compiler_error" and failed and "pass that failed" not in d["message"]:
            d["message"] += f" (the pass that failed: {failed[-1]})"


# ---- a grade's findings ------------------------------------------------------------------------

class Findings:
    """The cheats and diagnoses of one grade, each listed once per code with a count of cases
    and the first case (the order of first appearance is kept)."""

    def __init__(self):
        self._cheats: dict[str, dict] = {}
        self._diagnoses: dict[str, dict] = {}

    def cheat(self, reason: str, case: str | None, message: str, first: bool = False) -> None:
        entry = self._cheats.get(reason)
        if entry is None:
            entry = {"reason": reason, "count": 0, "first_case": case, "message": message}
            if first:
                self._cheats = {reason: entry, **self._cheats}
            else:
                self._cheats[reason] = entry
        if case is not None:
            entry["count"] += 1
            if entry["first_case"] is None:
                entry["first_case"], entry["message"] = case, entry["message"] or message

    def diagnosis(self, diagnosis: Diagnosis | dict, case: str | None, count: int = 1) -> None:
        d = diagnosis if isinstance(diagnosis, dict) else diagnosis.to_dict()
        entry = self._diagnoses.get(d["code"])
        if entry is None:
            self._diagnoses[d["code"]] = {"code": d["code"], "count": count, "first_case": case,
                                          "message": d["message"],
                                          "advice": d.get("advice") or ADVICE.get(d["code"], "")}
        else:
            entry["count"] += count

    @property
    def cheats(self) -> list[dict[str, Any]]:
        return list(self._cheats.values())

    @property
    def diagnoses(self) -> list[dict[str, Any]]:
        return list(self._diagnoses.values())


def speed_advice(cases) -> list[dict[str, Any]]:
    """How to be faster, once per code, from the timed cases: {code, count, first_case, message,
    advice}, the shape of a diagnosis."""
    def counted(value) -> int:  # the worker's figures, untrusted: anything but a positive int is none
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    advice = []
    synced = [c for c in cases if counted(c.host_syncs)]
    if synced:
        first = synced[0]
        # Untrusted too: shown only in the shape the timer writes ("file.py:LINE"), never as text.
        at = first.host_sync_at
        where = f", the first at {at}" if isinstance(at, str) and _SYNC_AT.fullmatch(at) else ""
        advice.append(_advice("host_sync", synced, f"{first.host_syncs} operation(s) in one call of "
                              f"{first.task} made the host wait for the GPU{where}"))
    launching = [c for c in cases if counted(c.launches) >= MANY_LAUNCHES]
    if launching:
        most = max(launching, key=lambda c: c.launches)
        advice.append(_advice("many_launches", launching, f"one call of {most.task} launched "
                              f"{most.launches} Triton kernels (case {most.name})"))
    return advice + kernel_anatomy.advice(cases)


def _advice(code: str, cases: list, message: str) -> dict[str, Any]:
    first = cases[0]
    return {"code": code, "count": len(cases), "first_case": f"{first.task}/{first.name}/{first.dtype}",
            "message": message, "advice": SPEED_ADVICE[code]}


def hidden_only(cases) -> tuple[Diagnosis, list] | None:
    """Every public case passes and some hidden case fails: an edge case only the hidden ones
    test. Returns the diagnosis and the failing hidden cases."""
    ran = [c for c in cases if c.status not in ("skipped", "not_run")]
    public = [c for c in ran if not c.hidden]
    failed = [c for c in ran if c.hidden and c.status in ("fail", "error")]
    if not public or not failed or any(c.status != "pass" for c in public):
        return None
    names = []
    for c in failed:
        if c.name not in names:
            names.append(c.name)
    return Diagnosis("hidden_cases_fail", "passes the public cases but fails hidden edge cases: "
                     + ", ".join(names)), failed
