#!/usr/bin/env python3
"""Plots heterospec benchmark results and tabulates them across devices.

    python tools/plot_bench.py results/*.json --out plots/

Each input is a JSON file; its kind is told from its content:
  bench-spec   `heterospec bench-spec -o json` ("sets" and "all"): speedup.png, tau_vs_verified.png, devices.md
  calibration  `heterospec calibrate` ("kind": "heterospec-calibration"): strata.png from "strata" (when they
               were fitted: some stratum has records; a device-only calibration may carry the defaults),
               cost_curve.png from "cost.verify_s" (and "cost.verify_long_s", measured after a long context;
               "verify_all_s" / "verify_all_long_s": the passes with every output head, eager lists)
  bench        `heterospec bench -o json` ("tests"): cost_curve.png from the vN tests, T(N) = n_verify / avg_ts

Written into --out (default plots/), each path printed on stdout:
  speedup.png          speedup over ar per set (and "all") and method, one subplot per bench-spec file
  tau_vs_verified.png  tau against verified tokens per round, one point per method of each file's "all" row
  strata.png           acceptance rate per entropy stratum and the strata's acceptance maps p = f(q)
  cost_curve.png       verification cost T(N) in ms and T(N) / T(1) against N, one line per device and source
  devices.md           the bench-spec files' "all" rows in one table, and their per-set rows in a second
A plot with no data is skipped with a note on stderr. An input that cannot be read, is not JSON or is of no
known kind is an error: a message on stderr and exit status 2. Run it with the venv of
`bash tools/pyenv.sh plot` (matplotlib, numpy).
"""
import argparse
import dataclasses
import json
import math
import os
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")  # before pyplot: files only, no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

PROG = "plot_bench"
CALIBRATION_KIND = "heterospec-calibration"
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def is_ar(method):
    """Plain decoding: "ar", or "ar @tT" when bench-spec ran several temperatures."""
    return method == "ar" or method.startswith("ar @t")


class InputError(Exception):
    """An input file that cannot be used: reported on stderr with exit status 2."""


class Skip(Exception):
    """A plot without data: reported on stderr, not an error."""


# ---------------------------------------------------------------------------------------------------------------
# inputs


@dataclasses.dataclass
class MethodRow:
    method: str
    tokens_per_s: float
    speedup: float
    tau: float
    verified_per_round: float
    draft_share: float  # a fraction of the generation time
    equal_to_ar: int
    compared_to_ar: int
    temperature: float = None  # the method's own, when bench-spec ran several (None: the file's)


@dataclasses.dataclass
class SpecRun:
    """One bench-spec file."""
    path: str
    device: str
    temperature: float
    sets: list  # [(set name, [MethodRow])]
    all: list  # [MethodRow]
    label: str = ""  # the device; with the file's name when another file has the same device and temperature
    temperatures: tuple = ()  # every temperature of the run, when bench-spec ran several

    @property
    def temp_text(self):
        """ "temperature T", or "temperatures T1, T2" for a run of several. """
        if len(self.temperatures) > 1:
            return "temperatures " + ", ".join(f"{t:g}" for t in self.temperatures)
        return f"temperature {self.temperature:g}"

    @property
    def has_ar(self):
        return any(is_ar(r.method) for r in self.all)


@dataclasses.dataclass
class Stratum:
    lo: float  # -inf / inf for the open ends (null in the JSON)
    hi: float
    records: int
    accept_rate: float
    map: list  # [(q, p)], q increasing; empty: the constant accept_rate

    @property
    def label(self):
        return f"[{fmt_edge(self.lo)}, {fmt_edge(self.hi)})"


@dataclasses.dataclass
class Calibration:
    path: str
    device: str
    mode: str
    feature: str
    strata: list  # [Stratum]
    verify_s: list  # [(N, seconds)]
    ctx: int = 0  # context rows of verify_s (0: not recorded)
    ctx_long: int = 0  # context rows of verify_long_s (0: none)
    verify_long_s: list = dataclasses.field(default_factory=list)  # [(N, seconds)] after ctx_long rows
    # the same passes with every row's output head (eager lists), where measured
    verify_all_s: list = dataclasses.field(default_factory=list)
    verify_all_long_s: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class BenchCurve:
    """The vN tests of one `heterospec bench -o json` file."""
    path: str
    device: str
    verify_s: list  # [(N, seconds)]


def fmt_edge(x):
    return ("-inf" if x < 0 else "inf") if math.isinf(x) else f"{x:.3g}"


def device_name(dev, path, host_cpu=None):
    """A device's name from a bench-spec/calibration device object or bench's device string; else the file's.
    A CPU device (lavapipe) has the same name on every processor, so its host_cpu (the object's, or bench's
    top-level one given here) follows: "llvmpipe (LLVM 15.0.6, 256 bits) on AMD EPYC (family 26, model 2) x2"."""
    if isinstance(dev, dict):
        host_cpu = dev.get("host_cpu")
        dev = dev.get("name")
    if not isinstance(dev, str) or not dev:
        return os.path.splitext(os.path.basename(path))[0]
    return f"{dev} on {host_cpu}" if isinstance(host_cpu, str) and host_cpu else dev


def detect_kind(data):
    if not isinstance(data, dict):
        raise InputError(f"not a JSON object but a JSON {type(data).__name__}")
    if "kind" in data:
        if data["kind"] == CALIBRATION_KIND:
            return "calibration"
        raise InputError(f"unknown kind {data['kind']!r} (known: {CALIBRATION_KIND!r})")
    if isinstance(data.get("sets"), list) and isinstance(data.get("all"), list):
        return "bench-spec"
    if isinstance(data.get("tests"), list):
        return "bench"
    raise InputError("unknown kind: neither bench-spec (\"sets\", \"all\"), bench (\"tests\") nor calibration "
                     f"(\"kind\": \"{CALIBRATION_KIND}\")")


def method_row(m):
    return MethodRow(method=str(m["method"]), tokens_per_s=float(m["tokens_per_s"]), speedup=float(m["speedup"]),
                     tau=float(m["tau"]), verified_per_round=float(m["verified_per_round"]),
                     draft_share=float(m["draft_share"]), equal_to_ar=int(m.get("equal_to_ar", 0)),
                     compared_to_ar=int(m.get("compared_to_ar", 0)),
                     temperature=float(m["temperature"]) if "temperature" in m else None)


def parse_spec(path, d):
    sets = [(str(s["set"]), [method_row(m) for m in s["methods"]]) for s in d["sets"]]
    return SpecRun(path=path, device=device_name(d.get("device"), path), temperature=float(d["temperature"]),
                   sets=sets, all=[method_row(m) for m in d["all"]],
                   temperatures=tuple(float(t) for t in d.get("temperatures", [])))


def pairs(a):
    return sorted((int(n), float(s)) for n, s in a)


def parse_calibration(path, d):
    strata = []
    for s in d.get("strata") or []:
        lo, hi = s.get("lo"), s.get("hi")
        strata.append(Stratum(lo=-math.inf if lo is None else float(lo), hi=math.inf if hi is None else float(hi),
                              records=int(s.get("records", 0)), accept_rate=float(s["accept_rate"]),
                              map=[(float(q), float(p)) for q, p in s.get("map") or []]))
    cost = d.get("cost") or {}
    return Calibration(path=path, device=device_name(d.get("device"), path), mode=str(d.get("mode", "")),
                       feature=str(d.get("feature", "entropy")), strata=strata,
                       verify_s=pairs(cost.get("verify_s") or []), ctx=int(cost.get("ctx", 0)),
                       ctx_long=int(cost.get("ctx_long", 0)), verify_long_s=pairs(cost.get("verify_long_s") or []),
                       verify_all_s=pairs(cost.get("verify_all_s") or []),
                       verify_all_long_s=pairs(cost.get("verify_all_long_s") or []))


def parse_bench(path, d):
    verify = [(int(t["n_verify"]), t["n_verify"] / t["avg_ts"]) for t in d["tests"]
              if t.get("n_verify", 0) > 0 and t.get("avg_ts", 0) > 0]
    return BenchCurve(path=path, device=device_name(d.get("device"), path, d.get("host_cpu")),
                      verify_s=sorted(verify))


PARSERS = {"bench-spec": parse_spec, "calibration": parse_calibration, "bench": parse_bench}


def load(path):
    """(kind, parsed input) of one file; InputError when it cannot be used."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read: {e}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON: {e}") from None
    try:
        kind = detect_kind(data)
    except InputError as e:
        raise InputError(f"{path}: {e}") from None
    try:
        return kind, PARSERS[kind](path, data)
    except (AttributeError, KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        what = f"missing key {e}" if isinstance(e, KeyError) else str(e)
        raise InputError(f"{path}: malformed {kind} file: {what}") from None


# ---------------------------------------------------------------------------------------------------------------
# plots


def save(fig, path):
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def plot_speedup(runs, path):
    """Grouped bars: speedup over ar per set (and "all") and method, one subplot per bench-spec file."""
    runs = [r for r in runs if r.has_ar and any(not is_ar(m.method) for m in r.all)]
    if not runs:
        raise Skip("no bench-spec file with ar and another method")
    colors = {}  # one color per method across the subplots
    for run in runs:
        for _, rows in run.sets + [("all", run.all)]:
            for m in rows:
                if not is_ar(m.method):
                    colors.setdefault(m.method, f"C{len(colors) % 10}")
    groups_max = max(len(r.sets) + 1 for r in runs)
    methods_max = max(sum(not is_ar(m.method) for m in r.all) for r in runs)
    fig, axes = plt.subplots(len(runs), 1, squeeze=False,
                             figsize=(min(20, max(7, 0.4 * groups_max * (methods_max + 1) + 2)), 4 * len(runs)))
    for ax, run in zip(axes[:, 0], runs):
        groups = run.sets + [("all", run.all)]
        methods = []
        for _, rows in groups:
            methods += [m.method for m in rows if not is_ar(m.method) and m.method not in methods]
        width = 0.8 / len(methods)
        x = np.arange(len(groups))
        for i, method in enumerate(methods):
            heights = [next((m.speedup for m in rows if m.method == method), np.nan) for _, rows in groups]
            bars = ax.bar(x + (i - (len(methods) - 1) / 2) * width, heights, width, label=method,
                          color=colors[method])
            ax.bar_label(bars, fmt="%.2f", fontsize=6, padding=1)
        ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label="ar (1.0)")
        ax.set_xticks(x, [name for name, _ in groups])
        ax.set_ylabel("speedup over ar")
        ax.set_title(f"{run.label}, {run.temp_text}")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    save(fig, path)


def plot_tau_vs_verified(runs, path):
    """tau against verified tokens per round, one labelled point per method of each file's "all" row."""
    runs = [r for r in runs if any(m.tau > 0 for m in r.all)]
    if not runs:
        raise Skip("no bench-spec file with a method that has tau > 0")
    fig, ax = plt.subplots(figsize=(8, 6))
    for i, run in enumerate(runs):
        rows = [m for m in run.all if m.tau > 0]
        xs, ys = [m.verified_per_round for m in rows], [m.tau for m in rows]
        ax.scatter(xs, ys, marker=MARKERS[i % len(MARKERS)], color=f"C{i % 10}",
                   label=f"{run.label}, {run.temp_text}")
        for m, xv, yv in zip(rows, xs, ys):
            ax.annotate(m.method, (xv, yv), textcoords="offset points", xytext=(4, 4), fontsize=7,
                        color=f"C{i % 10}")
    ax.set_xlabel("verified tokens per round")
    ax.set_ylabel("tau (tokens per round)")
    ax.set_title("acceptance length against verification width (all sets)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    save(fig, path)


def map_curve(s):
    """(q, p) of a stratum's acceptance map over [0, 1]: flat outside the knots; no knots: the constant rate."""
    if not s.map:
        return [0.0, 1.0], [s.accept_rate, s.accept_rate]
    q, p = [k[0] for k in s.map], [k[1] for k in s.map]
    if q[0] > 0:
        q, p = [0.0] + q, [p[0]] + p
    if q[-1] < 1:
        q, p = q + [1.0], p + [p[-1]]
    return q, p


def plot_strata(cals, path):
    """Per calibration with fitted strata: acceptance rate per stratum (bars) and their maps p = f(q) (lines).
    Strata without records are heterospec's defaults (a device-only calibration on a new device), not fitted."""
    cals = [c for c in cals if any(s.records > 0 for s in c.strata)]
    if not cals:
        raise Skip("no calibration file with fitted strata (strata with records)")
    fig, axes = plt.subplots(len(cals), 2, squeeze=False, figsize=(13, 4.5 * len(cals)))
    for (ax_rate, ax_map), cal in zip(axes, cals):
        mode = f", {cal.mode}" if cal.mode else ""
        dev = textwrap.fill(f"{cal.device}{mode}:", 60)  # names with their processor are long
        x = np.arange(len(cal.strata))
        bars = ax_rate.bar(x, [s.accept_rate for s in cal.strata], color=[f"C{i % 10}" for i in x])
        ax_rate.bar_label(bars, labels=[f"{s.accept_rate:.2f}\n{s.records} rec." for s in cal.strata],
                          fontsize=7, padding=1)
        ax_rate.set_xticks(x, [s.label for s in cal.strata], fontsize=8)
        ax_rate.set_ylim(0, 1.15)
        ax_rate.set_xlabel(f"{cal.feature} stratum")
        ax_rate.set_ylabel("acceptance rate")
        ax_rate.set_title(f"{dev}\nacceptance per stratum (all Top-K candidates)", fontsize=10)
        for i, s in enumerate(cal.strata):
            q, p = map_curve(s)
            style = "-" if s.map else ":"
            ax_map.plot(q, p, style, marker="." if s.map else None, color=f"C{i % 10}", label=s.label)
        ax_map.plot([0, 1], [0, 1], color="gray", linestyle="--", linewidth=0.8, label="p = q")
        ax_map.set_xlim(0, 1)
        ax_map.set_ylim(0, 1.05)
        ax_map.set_xlabel("draft probability q")
        ax_map.set_ylabel("acceptance probability p")
        ax_map.set_title(f"{dev}\nacceptance maps f(q) per {cal.feature} stratum", fontsize=10)
        ax_map.legend(fontsize="small", title=cal.feature, title_fontsize="small")
    fig.tight_layout(h_pad=2.0)
    save(fig, path)


def plot_cost_curve(cals, benches, path):
    """T(N) in ms, and T(N) / T(1), against N on a log2 axis: one line per device and source."""
    series = []
    for c in cals:
        if c.verify_s:
            series.append((c.device, f"calibration, context {c.ctx}" if c.ctx else "calibration", c.verify_s, c.path))
        if c.verify_long_s:
            series.append((c.device, f"calibration, context {c.ctx_long}", c.verify_long_s, c.path))
        if c.verify_all_s:
            series.append((c.device, f"calibration, every output head, context {c.ctx}" if c.ctx
                           else "calibration, every output head", c.verify_all_s, c.path))
        if c.verify_all_long_s:
            series.append((c.device, f"calibration, every output head, context {c.ctx_long}", c.verify_all_long_s,
                           c.path))
    series += [(b.device, "bench", b.verify_s, b.path) for b in benches if b.verify_s]
    if not series:
        raise Skip("no calibration cost.verify_s and no bench vN test")
    labels = [f"{dev} ({src})" for dev, src, _, _ in series]
    labels = [x if labels.count(x) == 1 else f"{x} [{os.path.basename(p)}]" for x, (*_, p) in zip(labels, series)]
    fig, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(13, 5))
    for i, ((_, src, pts, _), label) in enumerate(zip(series, labels)):
        n = [k for k, _ in pts]
        t = [s for _, s in pts]
        style = dict(color=f"C{i % 10}", marker=MARKERS[i % len(MARKERS)], markersize=4,
                     linestyle="-" if src.startswith("calibration") else "--", label=label)
        ax_t.plot(n, [1e3 * s for s in t], **style)
        if n[0] == 1:
            ax_r.plot(n, [s / t[0] for s in t], **style)
        else:
            print(f"{PROG}: {label}: no T(1), left out of T(N)/T(1)", file=sys.stderr)
    for ax, ylabel, title in ((ax_t, "T(N) [ms]", "verification cost"),
                              (ax_r, "T(N) / T(1)", "verification cost relative to one token")):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("N (tokens verified in one pass)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    # One legend for both axes, below them: device names with their processor are too long to sit inside.
    handles, names = ax_t.get_legend_handles_labels()
    if handles:
        fig.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize="small",
                   ncol=2 if len(handles) > 4 else 1)
    save(fig, path)


# ---------------------------------------------------------------------------------------------------------------
# table


def md_cell(x):
    return str(x).replace("|", "\\|")


def md_table(header, align, rows):
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def fmt_speedup(run, m):
    return f"{m.speedup:.2f}x" if run.has_ar else "n/a"


def fmt_temperature(run, m):
    """The method's own temperature when bench-spec ran several, else the file's."""
    return f"{run.temperature if m.temperature is None else m.temperature:g}"


def write_devices_md(runs, path):
    """The "all" rows of every bench-spec file in one table, then their per-set rows."""
    if not runs:
        raise Skip("no bench-spec file")
    all_rows = [[run.label, fmt_temperature(run, m), m.method,
                 f"{m.tokens_per_s:.2f}", fmt_speedup(run, m),
                 f"{m.tau:.2f}", f"{m.verified_per_round:.2f}", f"{100 * m.draft_share:.1f}%",
                 f"{m.equal_to_ar}/{m.compared_to_ar}" if m.compared_to_ar else "n/a"]
                for run in runs for m in run.all]
    set_rows = [[run.label, fmt_temperature(run, m), name, m.method,
                 f"{m.tokens_per_s:.2f}", fmt_speedup(run, m), f"{m.tau:.2f}"]
                for run in runs for name, rows in run.sets for m in rows]
    text = "## bench-spec, all sets\n\n"
    text += md_table(["device", "temperature", "method", "tokens/s", "speedup", "tau", "verified/round",
                      "draft share", "equal to ar"],
                     ["---", "---:", "---", "---:", "---:", "---:", "---:", "---:", "---:"], all_rows)
    text += "\n## bench-spec, per set\n\n"
    text += md_table(["device", "temperature", "set", "method", "tokens/s", "speedup", "tau"],
                     ["---", "---:", "---", "---", "---:", "---:", "---:"], set_rows)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


# ---------------------------------------------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(prog="plot_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", metavar="FILE.json",
                    help="bench-spec, bench or calibration JSON files, in any order")
    ap.add_argument("--out", default="plots", metavar="DIR", help="folder of the outputs (default plots/)")
    args = ap.parse_args(argv)

    by_kind = {k: [] for k in PARSERS}
    try:
        for path in args.inputs:
            kind, parsed = load(path)
            by_kind[kind].append(parsed)
    except InputError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    runs = by_kind["bench-spec"]
    keys = [(r.device, r.temperature) for r in runs]
    for run, key in zip(runs, keys):  # plots and tables show the temperature beside the device anyway
        run.label = run.device if keys.count(key) == 1 else f"{run.device} [{os.path.basename(run.path)}]"

    os.makedirs(args.out, exist_ok=True)
    outputs = (("speedup.png", lambda p: plot_speedup(runs, p)),
               ("tau_vs_verified.png", lambda p: plot_tau_vs_verified(runs, p)),
               ("strata.png", lambda p: plot_strata(by_kind["calibration"], p)),
               ("cost_curve.png", lambda p: plot_cost_curve(by_kind["calibration"], by_kind["bench"], p)),
               ("devices.md", lambda p: write_devices_md(runs, p)))
    for name, write in outputs:
        path = os.path.join(args.out, name)
        try:
            write(path)
        except Skip as e:
            print(f"{PROG}: skipped {name}: {e}", file=sys.stderr)
            continue
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
