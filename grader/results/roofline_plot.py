"""The roofline plot of a GPU grade, drawn with matplotlib (the optional extra
`pip install "triton-kata[plot]"`) as inline SVG for the HTML report.

Log-log: arithmetic intensity (FLOP per byte, from the kata's declared cost) against the rate
reached (TFLOP/s over the timed time), the copy ceiling as the slanted line and the matmul
ceiling as the flat one, each timed case a point and, when known, the reference's point beside
it. Cases whose kata declares no FLOPs (a transpose, a gather) have no intensity: they are drawn
in a second panel, bytes moved against the bandwidth reached, under the copy ceiling.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field

INSTALL = 'pip install "triton-kata[plot]"'
INTERPRETER_NOTE = ("no anatomy under the Triton interpreter: the kernels run as Python on the CPU, "
                    "so there are no GPU kernels, registers or occupancy to show; grade on a GPU "
                    "(kata grade --gpu) for the anatomy and the roofline plot")


@dataclass
class Point:
    label: str
    nbytes: float
    flops: float | None
    time_ms: float
    reference: bool = False

    @property
    def intensity(self) -> float | None:
        return self.flops / self.nbytes if self.flops else None

    @property
    def tflops(self) -> float | None:
        return self.flops / (self.time_ms * 1e9) if self.flops else None

    @property
    def gbps(self) -> float:
        return self.nbytes / (self.time_ms * 1e6)


@dataclass
class Plot:
    svg: str | None = None  # an <svg> element, ready to inline
    note: str = ""  # why there is no plot, or what it leaves out
    points: list[Point] = field(default_factory=list)


def points(result, reference: dict[str, float] | None = None) -> list[Point]:
    """Each timed case with a declared cost; reference: {"task/case/dtype": time_ms} of the
    kata's reference on the same device, drawn beside."""
    found = []
    for case in result.cases:
        if not case.timed or not case.nbytes:
            continue
        label = f"{case.task}/{case.name}/{case.dtype}"
        found.append(Point(label, case.nbytes, case.flops, case.time_ms))
        ref_ms = (reference or {}).get(label)
        if isinstance(ref_ms, (int, float)) and ref_ms > 0:
            found.append(Point(label, case.nbytes, case.flops, float(ref_ms), reference=True))
    return found


def roofline(result, reference: dict[str, float] | None = None) -> Plot:
    """The plot of a grade, or a note saying why there is none."""
    if result.mode != "gpu":
        return Plot(note="no roofline plot under the Triton interpreter: speed is measured on a GPU only")
    ceilings = (result.environment or {}).get("ceilings") or {}
    found = points(result, reference)
    if not found:
        return Plot(note="no roofline plot: no case was timed")
    if not ceilings.get("copy_gbps") or not ceilings.get("matmul_tflops"):
        return Plot(note="no roofline plot: the device's ceilings were not measured", points=found)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return Plot(note=f"the roofline plot needs matplotlib: {INSTALL}", points=found)
    return Plot(svg=_draw(found, ceilings["copy_gbps"], ceilings["matmul_tflops"]), points=found)


def _draw(found: list[Point], copy_gbps: float, matmul_tflops: float) -> str:
    from matplotlib import rc_context
    from matplotlib.figure import Figure  # no pyplot: no global figure state, no GUI backend

    with_flops = [p for p in found if p.flops]
    without = [p for p in found if not p.flops]
    panels = (1 if with_flops else 0) + (1 if without else 0)
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "triton-kata", "font.size": 9}):
        fig = Figure(figsize=(6.4 * panels, 4.2), layout="constrained")
        axes = fig.subplots(1, panels, squeeze=False)[0]
        if with_flops:
            _roofline_panel(axes[0], with_flops, copy_gbps, matmul_tflops)
        if without:
            _bandwidth_panel(axes[-1], without, copy_gbps)
        out = io.StringIO()
        fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    svg = out.getvalue()
    svg = svg[svg.index("<svg"):]  # inline: no XML declaration or doctype
    return re.sub(r"<svg ", '<svg class="chart roofline" role="img" aria-label="roofline plot" ', svg, count=1)


def _colours(found: list[Point]) -> dict[str, str]:
    palette = ["#1f6feb", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#0a3069", "#a40e26", "#116329"]
    labels = list(dict.fromkeys(p.label for p in found))
    return {label: palette[i % len(palette)] for i, label in enumerate(labels)}


def _scatter(ax, found: list[Point], x, y) -> None:
    colours = _colours(found)
    for p in found:
        ax.scatter([x(p)], [y(p)], s=46, marker="D" if p.reference else "o",
                   facecolors="none" if p.reference else colours[p.label], edgecolors=colours[p.label],
                   label=f"{p.label}{' (reference)' if p.reference else ''}", zorder=3)
    if len(found) > 6:  # many cases: the legend beside the plot, not over its points
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    else:
        ax.legend(fontsize=7, loc="lower right")


def _roofline_panel(ax, found: list[Point], copy_gbps: float, matmul_tflops: float) -> None:
    ridge = matmul_tflops * 1e3 / copy_gbps  # FLOP per byte where the two ceilings meet
    xs = [p.intensity for p in found]
    lo, hi = min(min(xs), ridge) / 8, max(max(xs), ridge) * 8
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(copy_gbps * x / 1e3, matmul_tflops) for x in grid], color="#57606a", lw=1.2)
    ax.plot([lo, hi], [matmul_tflops] * 2, color="#57606a", lw=0.8, ls=":")
    ax.plot(grid, [copy_gbps * x / 1e3 for x in grid], color="#57606a", lw=0.8, ls=":")
    ax.annotate(f"copy {copy_gbps:.0f} GB/s", (lo * 2, copy_gbps * lo * 2 / 1e3), fontsize=8,
                rotation=0, color="#57606a", va="bottom")
    ax.annotate(f"matmul {matmul_tflops:.0f} TFLOP/s", (hi / 40, matmul_tflops * 1.15), fontsize=8,
                color="#57606a")
    _scatter(ax, found, lambda p: p.intensity, lambda p: p.tflops)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(min(min(p.tflops for p in found), copy_gbps * lo / 1e3) / 3, matmul_tflops * 3)
    ax.set_xlabel("arithmetic intensity (FLOP / byte, declared cost)")
    ax.set_ylabel("TFLOP/s reached")
    ax.set_title("Roofline")
    ax.grid(True, which="major", alpha=0.3)


def _bandwidth_panel(ax, found: list[Point], copy_gbps: float) -> None:
    xs = [p.nbytes / 1e6 for p in found]
    lo, hi = min(xs) / 4, max(xs) * 4
    ax.plot([lo, hi], [copy_gbps] * 2, color="#57606a", lw=1.2)
    ax.annotate(f"copy {copy_gbps:.0f} GB/s", (lo * 1.3, copy_gbps * 1.1), fontsize=8, color="#57606a")
    _scatter(ax, found, lambda p: p.nbytes / 1e6, lambda p: p.gbps)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(min(min(p.gbps for p in found), copy_gbps) / 4, copy_gbps * 3)
    ax.set_xlabel("bytes moved (MB, declared cost)")
    ax.set_ylabel("GB/s reached")
    ax.set_title("Bandwidth (no FLOPs declared)")
    ax.grid(True, which="major", alpha=0.3)
