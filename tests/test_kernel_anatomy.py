"""A timed case's anatomy, on the CPU: the worker's side (grader.timing.anatomy) on recorded
profiler events and fake compiled kernels, the parent's reading of it (grader.judge.kernel_anatomy:
types checked, garbage dropped, never a verdict changed) and each advice code triggered by a
recorded anatomy. tests/gpu/test_anatomy_gpu.py does the same with real kernels on a GPU."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from grader.judge import failure_codes, kernel_anatomy
from grader.results.schema import CaseResult
from grader.timing import anatomy

H200 = {"sm_count": 132, "regs_per_sm": 65536, "max_threads_per_sm": 2048, "shared_per_sm": 233472,
        "shared_per_block": 232448, "warp_size": 32, "capability": "9.0"}
CEILINGS = {"copy_gbps": 4000.0, "matmul_tflops": 700.0}
Meta = collections.namedtuple("Meta", "name num_warps num_stages shared")


class FakeKernel:
    """What triton's CompiledKernel shows once loaded (triton 3.6 and 3.9 alike)."""

    def __init__(self, name, warps=4, stages=3, shared=0, regs=32, spills=0, ttir="tt.func @k"):
        self.name, self.n_regs, self.n_spills = name, regs, spills
        self.metadata = Meta(name, warps, stages, shared)
        self.asm = {"ttir": ttir, "ptx": "// ptx"}


class KinetoEvent:
    def __init__(self, name, start_us, dur_us, device="DeviceType.CUDA", kind="kernel"):
        self._n, self._s, self._d, self._dev, self._k = name, start_us, dur_us, device, kind

    def name(self):
        return self._n

    def device_type(self):
        return self._dev

    def activity_type(self):
        return self._k

    def start_ns(self):
        return int(self._s * 1000)

    def duration_ns(self):
        return int(self._d * 1000)


def raw_anatomy(name="add_kernel", grid=(8, 1, 1), gpu_us=900.0, busy_us=None, call_us=950.0, **facts):
    kernel = dict(anatomy.kernel_facts(FakeKernel(name, **facts), grid), source="triton", launches=1,
                  gpu_us=gpu_us)
    return {"kernels": [kernel], "kernel_groups": 1, "gpu_busy_us": gpu_us if busy_us is None else busy_us,
            "call_us": call_us, "device": H200}


def timed_case(raw, *, time_ms=1.0, speedup=0.05, nbytes=12e6, flops=1e6, name="bench") -> CaseResult:
    case = CaseResult(task="vector_add", name=name, dtype="float32", shape=[1 << 20], hidden=False,
                      status="pass", time_ms=time_ms, baseline_ms=time_ms * speedup, speedup=speedup,
                      nbytes=nbytes, flops=flops)
    kernel_anatomy.attach(case, raw, CEILINGS, "gpu")
    return case


# ---- the worker's side ------------------------------------------------------------------------

def test_kernel_facts_read_triton_s_compiled_kernel_and_count_atomics_in_its_ir():
    kernel = FakeKernel("scatter_add", warps=8, stages=2, shared=4096, regs=40, spills=3,
                        ttir="%1 = tt.atomic_rmw fadd, relaxed, gpu\n%2 = tt.atomic_rmw fadd\ntt.atomic_cas")
    facts = anatomy.kernel_facts(kernel, (8,))
    assert facts == {"name": "scatter_add", "grid": [8, 1, 1], "num_warps": 8, "num_stages": 2,
                     "registers": 40, "spills": 3, "shared_bytes": 4096, "atomics": 3}


def test_kernel_facts_tolerate_a_kernel_of_another_shape():
    class Odd:
        metadata = {"name": "k", "num_warps": 4}
    facts = anatomy.kernel_facts(Odd(), None)
    assert facts["name"] == "k" and facts["grid"] is None and facts["num_warps"] == 4
    assert facts["registers"] is None and facts["atomics"] is None


def test_gpu_events_keep_the_device_s_activity_in_start_order():
    events = anatomy.gpu_events([
        KinetoEvent("aten::add", 0, 50, device="DeviceType.CPU"),
        KinetoEvent("add_kernel", 20, 10),
        KinetoEvent("Memset (Device)", 5, 1, kind="gpu_memset"),
        KinetoEvent("ProfilerStep#1", 0, 90, kind="gpu_user_annotation"),
        object(),  # another shape: left out
    ])
    assert [(e["name"], e["start_us"], e["dur_us"]) for e in events] == [
        ("Memset (Device)", 5.0, 1.0), ("add_kernel", 20.0, 10.0)]


def test_proton_s_tree_gives_each_launch_of_a_kernel_its_mean_time():
    # Proton's hatchet tree: the root's metrics are inclusive, the kernels are its leaves.
    tree = [{"frame": {"name": "ROOT", "type": "function"}, "metrics": {"count": 3, "time (ns)": 7000},
             "children": [
                 {"frame": {"name": "softmax_kernel", "type": "function"},
                  "metrics": {"count": 2, "time (ns)": 6000, "device_id": "0", "device_type": "CUDA"},
                  "children": []},
                 {"frame": {"name": "void at::native::fill_kernel<float>", "type": "function"},
                  "metrics": {"count": 1, "time (ns)": 1000, "cpu_time (ns)": 9e9}, "children": []},
                 {"frame": {"name": "__proton_launch_metadata"}, "metrics": {"time (ns)": 5}},
                 {"frame": {"name": "idle_scope"}, "metrics": {}, "children": []}]},
            {"CUDA": {"0": {"arch": "90", "num_sms": 132}}}]
    events = anatomy.proton_events(tree)
    assert [(e["name"], e["dur_us"]) for e in events] == [
        ("softmax_kernel", 3.0), ("softmax_kernel", 3.0), ("void at::native::fill_kernel<float>", 1.0)]
    assert [e["start_us"] for e in events] == [0.0, 3.0, 6.0]  # end to end: busy = the sum
    found = anatomy.assemble([{"name": "softmax_kernel", "grid": [8, 1, 1]}] * 2, events, 20.0, {})
    assert found["gpu_busy_us"] == 7.0
    assert [(k["name"], k["launches"], k["gpu_us"], k["source"]) for k in found["kernels"]] == [
        ("softmax_kernel", 2, 6.0, "triton"), ("void at::native::fill_kernel<float>", 1, 1.0, "kernel")]
    assert anatomy.proton_events([]) == [] and anatomy.proton_events({"frame": {}}) == []


def test_busy_time_is_the_union_of_overlapping_intervals():
    events = [{"start_us": 0, "dur_us": 10}, {"start_us": 5, "dur_us": 10}, {"start_us": 30, "dur_us": 5}]
    assert anatomy.busy_us(events) == 20


def test_launches_match_profiler_events_by_name_in_order_and_alike_launches_group():
    a = anatomy.kernel_facts(FakeKernel("row_kernel"), (4, 1, 1))
    b = anatomy.kernel_facts(FakeKernel("fix_kernel", warps=1), (1, 1, 1))
    events = [{"name": "row_kernel", "start_us": 0, "dur_us": 5, "kind": "kernel"},
              {"name": "row_kernel", "start_us": 6, "dur_us": 7, "kind": "kernel"},
              {"name": "vectorized_elementwise_kernel", "start_us": 14, "dur_us": 2, "kind": "kernel"},
              {"name": "fix_kernel", "start_us": 17, "dur_us": 1, "kind": "kernel"}]
    found = anatomy.assemble([a, a, b], events, call_us=40.0, device=H200)
    kernels = found["kernels"]
    assert [(k["name"], k["launches"], k["gpu_us"], k["source"]) for k in kernels] == [
        ("row_kernel", 2, 12.0, "triton"), ("vectorized_elementwise_kernel", 1, 2.0, "kernel"),
        ("fix_kernel", 1, 1.0, "triton")]
    assert found["gpu_busy_us"] == 15.0 and found["call_us"] == 40.0
    suffixed = anatomy.assemble([a], [dict(events[0], name="row_kernel_0d1d2")], 10.0, H200)
    assert suffixed["kernels"][0]["source"] == "triton" and suffixed["kernels"][0]["grid"] == [4, 1, 1]
    assert json.loads(json.dumps(found)) == found  # it travels as JSON


def test_the_launch_recorder_sees_kernel_and_grid_and_puts_triton_back(monkeypatch):
    from triton.runtime.jit import JITFunction

    def fake_run(self, *args, grid, warmup, **kwargs):
        return None if warmup else ("compiled", grid({"BLOCK": 128}) if callable(grid) else grid)

    monkeypatch.setattr(JITFunction, "run", fake_run)
    with anatomy.recording_launches() as seen:
        JITFunction.run(object(), grid=lambda meta: (1024 // meta["BLOCK"],), warmup=False)
        JITFunction.run(object(), grid=(3, 2), warmup=False)
        JITFunction.run(object(), grid=(5,), warmup=True)  # a compile only: no launch
    assert seen == [(("compiled", (8,)), (8,)), (("compiled", (3, 2)), (3, 2))]
    assert JITFunction.run is fake_run


def test_the_launch_recorder_sees_a_compiled_kernel_launched_without_jit_function_run(monkeypatch):
    """A kernel compiled by .warmup() (or kept in a library's cache) and launched as
    kernel[grid](...) never goes through JITFunction.run: the recorder sees it at the driver's
    launcher, with its compiled kernel; a launch through JITFunction.run is seen once."""
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction

    class Launcher:  # a driver's launcher: (gridX, gridY, gridZ, stream, function, ...)
        calls = 0

        def __call__(self, gridX, gridY, gridZ, stream, function, *args):
            type(self).calls += 1

    monkeypatch.setattr(anatomy, "launcher_classes", lambda: [Launcher])
    kernel = object.__new__(CompiledKernel)  # as .warmup() returns it, already loaded
    facts = FakeKernel("warm_kernel", warps=2, regs=40)
    kernel.__dict__.update(vars(facts), _run=Launcher(), module=object(), _module_pid=None, function=1, src=None,
                           packed_metadata=())
    original_call = Launcher.__call__

    def fake_run(self, *args, grid, warmup, **kwargs):  # Triton's: the kernel's launcher called
        kernel.run(*grid, 0, kernel.function, kernel.packed_metadata, None, None, None, *args)
        return kernel

    monkeypatch.setattr(JITFunction, "run", fake_run)
    with anatomy.recording_launches() as seen:
        kernel[(6, 2, 1)](1.0, stream=0)
        JITFunction.run(object(), grid=(3,), warmup=False)
    assert Launcher.calls == 2
    assert seen == [(kernel, (6, 2, 1)), (kernel, (3,))]
    assert anatomy.kernel_facts(*seen[0])["grid"] == [6, 2, 1]
    assert anatomy.kernel_facts(*seen[0])["registers"] == 40
    # Everything put back as it was.
    assert Launcher.__call__ is original_call and JITFunction.run is fake_run
    assert isinstance(CompiledKernel.__dict__["run"], property) and kernel.run is kernel._run


def test_profile_call_never_raises(monkeypatch):
    # No GPU here: the profiled call fails, and that is an anatomy with an error, not a crash.
    assert set(anatomy.profile_call(lambda: None, ())) == {"error"}


# ---- the parent's reading ---------------------------------------------------------------------

def test_occupancy_follows_warps_registers_and_shared_memory():
    limits = kernel_anatomy.device_limits(H200)
    assert kernel_anatomy.occupancy(4, 32, 0, limits) == 1.0
    assert kernel_anatomy.occupancy(4, 128, 0, limits) == 0.25  # 4096 registers a warp: 16 warps
    assert kernel_anatomy.occupancy(4, 32, 100 * 1024, limits) == 0.125  # two blocks fit
    assert kernel_anatomy.occupancy(8, 255, 0, limits) == 0.125
    assert kernel_anatomy.occupancy(4, 32, 300 * 1024, limits) == 0.0
    assert kernel_anatomy.occupancy(None, 32, 0, limits) is None


def test_missing_device_limits_fall_back_to_the_sm90_table():
    assert kernel_anatomy.device_limits({"capability": "9.0", "sm_count": 114})["sm_count"] == 114
    assert kernel_anatomy.device_limits({})["regs_per_sm"] == 65536


def test_the_parent_derives_shares_rates_and_occupancy():
    raw = raw_anatomy(gpu_us=750.0, busy_us=1000.0)
    raw["kernels"].append(dict(raw["kernels"][0], name="fill", source="kernel", gpu_us=250.0, grid=None))
    case = timed_case(raw, time_ms=1.0)
    top, fill = case.kernels
    assert top["share"] == 0.75 and fill["share"] == 0.25 and top["programs"] == 8
    assert top["gpu_ms"] == 0.75 and top["occupancy"] == 1.0
    assert case.anatomy["gbps"] == pytest.approx(12e6 / 1e-3 / 1e9)  # 12 MB over 1 ms busy
    assert case.anatomy["memory_bound"] is True and case.anatomy["sm_count"] == 132


@pytest.mark.parametrize("told, shown", [("proton", "proton"), ("kineto", "kineto"), ("<b>x</b>", None), (3, None)])
def test_the_anatomy_says_whose_gpu_times_these_are(told, shown):
    case = timed_case(dict(raw_anatomy(gpu_us=750.0, busy_us=1000.0), profiler=told), time_ms=1.0)
    assert case.anatomy["profiler"] == shown


GARBAGE = [None, "anatomy", 3, [], {"kernels": "many"}, {"kernels": [None, 1, "k", {"name": 5}]},
           {"kernels": [{"name": "k" * 10000, "grid": ["a", None, 1], "num_warps": True,
                         "registers": -4, "gpu_us": float("nan"), "source": "<script>"}]},
           {"kernels": [{"name": "k", "gpu_us": 1e300, "grid": [1, 2]}], "device": "H200",
            "gpu_busy_us": float("inf"), "call_us": "1 ms", "files": {"trace": "/etc/passwd", "x": 1}},
           {"error": ["not", "text"]}, {"kernels": [{"name": "<img src=x onerror=alert(1)>", "gpu_us": 5}]}]


@pytest.mark.parametrize("raw", GARBAGE)
def test_garbage_in_the_anatomy_is_dropped_never_fatal(raw):
    case = timed_case(raw)
    json.dumps(case.anatomy)
    for k in case.kernels or []:
        # C++ templates keep their <>, which the reports escape; nothing else odd gets through.
        assert "=" not in k["name"] and '"' not in k["name"] and len(k["name"]) <= 160
        assert k["registers"] is None or k["registers"] >= 0
    kernel_anatomy.advice([case])  # and the advice on it does not crash either


def test_no_anatomy_under_the_interpreter_or_for_a_case_not_timed():
    case = timed_case(raw_anatomy())
    kernel_anatomy.attach(case, raw_anatomy(), CEILINGS, "interpret")
    assert case.kernels is None and case.anatomy is None
    untimed = CaseResult(task="t", name="c", dtype="float32", shape=None, hidden=False, status="fail")
    kernel_anatomy.attach(untimed, raw_anatomy(), CEILINGS, "gpu")
    assert untimed.anatomy is None


def test_a_failed_profile_is_a_note():
    case = timed_case({"error": "RuntimeError: CUPTI unavailable"})
    assert case.kernels is None and "CUPTI unavailable" in case.anatomy["note"]


# ---- the advice ---------------------------------------------------------------------------------

def codes(*cases) -> list[str]:
    return [a["code"] for a in kernel_anatomy.advice(cases)]


def test_small_grid_names_the_idle_sms():
    case = timed_case(raw_anatomy(grid=(8, 1, 1)))
    found = kernel_anatomy.advice([case])
    small = next(a for a in found if a["code"] == "small_grid")
    assert small["message"].startswith("8 programs on 132 SMs: 124 SMs idle")
    assert "triton.cdiv(n, BLOCK)" in small["advice"]
    assert small["first_case"] == "vector_add/bench/float32"


def test_a_grid_that_fills_the_gpu_is_no_small_grid():
    assert "small_grid" not in codes(timed_case(raw_anatomy(grid=(8192, 1, 1))))
    assert "small_grid" not in codes(timed_case(raw_anatomy(grid=(132, 1, 1))))


def test_register_spills():
    assert "register_spills" in codes(timed_case(raw_anatomy(grid=(8192, 1, 1), regs=255, spills=48)))


def test_low_occupancy_on_a_slow_memory_bound_kernel():
    case = timed_case(raw_anatomy(grid=(8192, 1, 1), warps=4, regs=255, shared=120 * 1024))
    assert case.kernels[0]["occupancy"] < 0.25
    assert "low_occupancy" in codes(case)


def test_launch_bound_when_the_kernels_are_idle_most_of_the_call():
    case = timed_case(raw_anatomy(grid=(8192, 1, 1), gpu_us=20.0, call_us=400.0), time_ms=0.3, nbytes=1e6)
    assert "launch_bound" in codes(case)


def test_low_bandwidth_on_a_memory_bound_kata_below_half_the_copy_ceiling():
    # 12 MB in 900 us: 13 GB/s of 4000.
    case = timed_case(raw_anatomy(grid=(8192, 1, 1)))
    found = {a["code"]: a for a in kernel_anatomy.advice([case])}
    assert "low_bandwidth" in found and "of the copy ceiling" in found["low_bandwidth"]["message"]
    assert "uncoalesced" in found["low_bandwidth"]["advice"]


def test_low_bandwidth_is_not_for_a_compute_bound_kata():
    case = timed_case(raw_anatomy(grid=(8192, 1, 1)), nbytes=12e6, flops=1e12)
    assert "low_bandwidth" not in codes(case)


def test_atomics_contention_where_an_atomic_kernel_takes_the_time():
    case = timed_case(raw_anatomy(name="attn_bwd", grid=(8192, 1, 1), ttir="tt.atomic_rmw fadd"))
    assert "atomics_contention" in codes(case)


def test_a_fast_case_gets_no_anatomy_advice_even_with_a_small_grid():
    # A reference at or above the baseline: nothing to explain.
    assert codes(timed_case(raw_anatomy(grid=(8, 1, 1), spills=4), speedup=1.3)) == []


def test_a_healthy_slow_case_gets_none():
    # A full grid near the copy ceiling: 12 MB in 4 us is 3000 GB/s.
    case = timed_case(raw_anatomy(grid=(8192, 1, 1), gpu_us=4.0, call_us=10.0), time_ms=0.005)
    assert codes(case) == []


def test_speed_advice_carries_the_anatomy_codes_after_the_others():
    case = timed_case(raw_anatomy())
    case.launches = 100
    found = [a["code"] for a in failure_codes.speed_advice([case])]
    assert found[0] == "many_launches" and "small_grid" in found


def test_a_recorded_anatomy_from_a_file_round_trips(tmp_path: Path):
    path = tmp_path / "anatomy.json"
    path.write_text(json.dumps(raw_anatomy()))
    case = timed_case(json.loads(path.read_text()))
    assert case.kernels[0]["name"] == "add_kernel" and case.kernels[0]["programs"] == 8


# ---- through the runner -------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [raw_anatomy(), *GARBAGE[4:]])
def test_the_runner_reads_the_anatomy_as_advice_and_never_changes_the_verdict(raw):
    from test_worker_reports import BENCH, _grade, _timing

    result, case = _grade([{"type": "timing", "key": BENCH.key, "timing": _timing(anatomy=raw)}], {BENCH.key},
                          {BENCH.key: {"timing": _timing(anatomy=raw)}})
    plain, _ = _grade([{"type": "timing", "key": BENCH.key, "timing": _timing()}], {BENCH.key},
                      {BENCH.key: {"timing": _timing()}})
    assert result.cheats == [] and (result.status, result.score) == (plain.status, plain.score)
    assert case.anatomy is not None and json.dumps(result.to_dict())


def test_a_timing_with_no_anatomy_has_a_note():
    from test_worker_reports import BENCH, _grade, _timing

    _, case = _grade([{"type": "timing", "key": BENCH.key, "timing": _timing()}], {BENCH.key},
                     {BENCH.key: {"timing": _timing()}})
    assert case.kernels is None and case.anatomy == {"note": "no anatomy was reported for this case"}


def test_profile_files_are_copied_out_only_as_plain_files_of_the_worker_s_names(tmp_path: Path):
    source, dest = tmp_path / "grade" / "anatomy", tmp_path / "out"
    source.mkdir(parents=True)
    (source / "vector_add-bench.trace.json").write_text("{}")
    (source / "vector_add-bench.add_kernel.ptx").write_text("// ptx")
    (source / "notes.txt").write_text("not ours")
    secret = tmp_path / "secret.ttir"
    secret.write_text("private")
    (source / "planted.ttir").symlink_to(secret)  # the submission could plant a link
    copied = kernel_anatomy.copy_files(source, dest)
    assert sorted(copied) == ["vector_add-bench.add_kernel.ptx", "vector_add-bench.trace.json"]
    assert (dest / "vector_add-bench.trace.json").read_text() == "{}"
    assert not (dest / "planted.ttir").exists() and not (dest / "notes.txt").exists()
    assert kernel_anatomy.copy_files(source, None) == {}
    assert kernel_anatomy.copy_files(tmp_path / "missing", dest) == {}


def test_real_profiler_events_are_read_with_this_torch_s_names():
    # The CPU side of a real profile: the same event type Kineto gives for GPU kernels.
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.ones(64) + torch.ones(64)
    plain = [anatomy.event_dict(e) for e in prof.profiler.kineto_results.events()]
    add = next(p for p in plain if p and p["name"] == "aten::add")
    assert "CPU" in add["device"] and add["dur_us"] >= 0 and add["start_us"] > 0 and add["kind"]
    assert anatomy.gpu_events(prof.profiler.kineto_results.events()) == []  # no GPU work


def test_kernel_facts_of_a_kernel_triton_really_compiled(monkeypatch):
    # Compiled for sm_90 without a GPU (registers and spills appear once a GPU loads it).
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")  # triton 3.9 warns when it is unset
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def count_kernel(x_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.atomic_add(x_ptr + offsets, 1.0, mask=offsets < n)

    source = ASTSource(fn=count_kernel, signature={"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                       constexprs={"BLOCK": 128})
    try:
        kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32))
    except Exception as exc:  # noqa: BLE001 - no CUDA backend in this triton build
        pytest.skip(f"triton cannot compile for sm_90 here: {exc}")
    facts = anatomy.kernel_facts(kernel, (8,))
    assert facts["name"] == "count_kernel" and facts["grid"] == [8, 1, 1]
    assert facts["num_warps"] == 4 and facts["num_stages"] == 3 and facts["shared_bytes"] == 0
    assert facts["atomics"] == 1


def test_an_anatomy_that_is_not_even_an_object_is_out_of_the_worker_s_form_like_any_field():
    # The worker always writes an object (its figures, or {"error": ...}); anything inside it
    # is advice, but a timing field of another type is a timing the worker never writes.
    from test_worker_reports import BENCH, _grade, _timing

    result, case = _grade([{"type": "timing", "key": BENCH.key, "timing": _timing(anatomy=[1, 2])}], {BENCH.key})
    assert [c["reason"] for c in result.cheats] == ["fake_result"] and not case.timed


def test_profile_call_end_to_end_on_a_fake_gpu(monkeypatch, tmp_path: Path):
    """profile_call's own flow (flush, profile, launches seen, matched, IR and trace written) with
    the GPU's parts replaced: the profiler returns recorded events, the launch returns a kernel."""
    import torch
    import torch.profiler
    from triton.runtime.jit import JITFunction

    kernel = FakeKernel("add_kernel", warps=8, regs=26)
    events = [KinetoEvent("add_kernel", 10, 900), KinetoEvent("Memcpy HtoD", 1, 2, kind="gpu_memcpy"),
              KinetoEvent("cudaLaunchKernel", 5, 3, device="DeviceType.CPU", kind="cuda_runtime")]

    class FakeProfile:
        def __init__(self, activities):
            self.activities = activities
            self.profiler = type("P", (), {"kineto_results": type("R", (), {"events": lambda self: events})()})()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def export_chrome_trace(self, path):
            Path(path).write_text('{"traceEvents": []}')

    monkeypatch.setattr(torch.profiler, "profile", FakeProfile)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(anatomy, "_flush_l2", lambda: None)
    monkeypatch.setattr(anatomy, "_this_device", lambda: H200)
    def fake_run(self, *args, grid, warmup, **kwargs):  # as Triton does: the grid evaluated, the kernel returned
        grid({"BLOCK": 1024})
        return None if warmup else kernel

    monkeypatch.setattr(JITFunction, "run", fake_run)

    def call(n):
        JITFunction.run(object(), n, grid=lambda meta: (8,), warmup=False)

    found = anatomy.profile_call(call, (1 << 20,), tmp_path / "anatomy", "vector_add/bench/float32")
    assert "error" not in found, found
    top = found["kernels"][0]
    assert (top["name"], top["grid"], top["num_warps"], top["registers"], top["gpu_us"]) == \
        ("add_kernel", [8, 1, 1], 8, 26, 900.0)
    assert [k["source"] for k in found["kernels"]] == ["triton", "gpu_memcpy"]
    assert found["files"] == {"trace": "vector_add_bench_float32.trace.json",
                              "ttir": "vector_add_bench_float32.add_kernel.ttir",
                              "ptx": "vector_add_bench_float32.add_kernel.ptx"}
    copied = kernel_anatomy.copy_files(tmp_path / "anatomy", tmp_path / "out")
    case = timed_case(json.loads(json.dumps(found)))
    kernel_anatomy.attach(case, json.loads(json.dumps(found)), CEILINGS, "gpu", copied)
    assert set(case.anatomy["files"]) == {"trace", "ttir", "ptx"}
    assert Path(case.anatomy["files"]["ptx"]).read_text() == "// ptx"


def test_a_call_too_slow_to_profile_within_the_timing_limit_is_not_profiled():
    """Slow is not hung: a kernel of 15 s a call is timed at the floor (three calls, about 45 s of
    its 60 s limit); one more profiled call, or two, would take it past the limit and lose the
    grade's remaining cases to a time-limit error. The anatomy, advice only, steps aside."""
    assert anatomy.fits(5.0, 0.2, 60.0) and anatomy.fits(1000.0, 10.0, 60.0)
    assert not anatomy.fits(15_000.0, 45.0, 60.0)
    assert not anatomy.fits(2_500.0, 7.5, 10.0)  # --timeout 10, a kernel of 2.5 s a call
    assert anatomy.fits(15_000.0, 45.0, None)  # no limit known: as before
    raw = json.loads(json.dumps(anatomy.not_profiled(15_000.0, 60.0)))
    case = timed_case(raw)
    assert case.anatomy == {"note": raw["skipped"]} and case.kernels is None
    assert "15 s" in raw["skipped"] and "60 s" in raw["skipped"]


def test_the_profiler_s_own_log_lines_are_not_shown_as_the_submission_s_output(tmp_path: Path):
    # Recent torch's Kineto writes these to stderr (the submission's output file) for every
    # profiled call, whatever KINETO_LOG_LEVEL says: they were shown as "output of the submission".
    from grader.grading import processes

    path = tmp_path / "output.txt"
    path.write_text("my debug line\n"
                    "USDT:2026-11-29 02:09:40 25897:25897 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
                    "USDT:2026-11-29 02:09:40 25897:25897 SyncActivityProfilerHandler.cpp:59] profiler_stop\n"
                    "STAGE:2024-01-02 03:04:05 123:123 ActivityProfilerController.cpp:314] Completed Stage: Warm Up\n"
                    "loc(\"k.py\":3:4): error: failed to legalize operation\n"
                    "USDT: my own line\n")
    assert processes.read_output(path) == ("my debug line\nloc(\"k.py\":3:4): error: failed to legalize "
                                         "operation\nUSDT: my own line\n")
    path.write_text("USDT:2026-11-29 02:09:40 25897:25897 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
    assert processes.read_output(path) == ""  # nothing printed: no "output of the submission" at all
