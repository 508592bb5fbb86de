"""Tests of the benchmark plotter (tools/plot_bench.py).

    cd tools/tests && "$(bash ../pyenv.sh plot | tail -n 1)" -m unittest -v test_plot_bench

Small synthetic bench-spec, calibration and bench files are written to a temporary folder and the script is run
on them as a process; the PNGs must be there and devices.md must hold the inputs' numbers (read back from the
table and compared with the inputs to the precision the table prints).
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.dirname(HERE)
sys.path.insert(0, TOOLS)

import plot_bench  # noqa: E402

SCRIPT = os.path.join(TOOLS, "plot_bench.py")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PLOTS = ("speedup.png", "tau_vs_verified.png", "strata.png", "cost_curve.png")


def method(label, tps, ar_tps, tau, verified, draft_share, equal, compared, questions=4):
    return {"method": label, "questions": questions, "tokens": tps * 10.0, "gen_s": 10.0, "tokens_per_s": tps,
            "speedup": tps / ar_tps, "tau": tau, "verified_per_round": verified, "draft_share": draft_share,
            "equal_to_ar": equal, "compared_to_ar": compared}


def bench_spec(device, temperature, scale, greedy, host_cpu=None):
    """A bench-spec result of two sets and four methods; the numbers differ by set and device (scale)."""
    sets = []
    for k, name in enumerate(("mt_bench", "gsm8k")):
        ar = 21.37 * scale + k
        c = 4 if greedy else 0
        sets.append({"set": name, "methods": [
            method("ar", ar, ar, 1.0, 1.0, 0.0, c, c),
            method("chain/d1", ar * 1.234 + k, ar, 1.613 + 0.1 * k, 2.0, 0.1234, c, c),
            method("eagle2/k4/d3/n8", ar * 1.567 - k, ar, 2.345 - 0.05 * k, 8.0, 0.2345, c - 1 if c else 0, c),
            method("heterospec", ar * 1.891, ar, 2.718 + 0.01 * k, 5.4321, 0.1818, c, c),
        ]})
    all_rows = []
    for i, label in enumerate(m["method"] for m in sets[0]["methods"]):
        rows = [s["methods"][i] for s in sets]
        ar_tps = sum(s["methods"][0]["tokens"] for s in sets) / sum(s["methods"][0]["gen_s"] for s in sets)
        tps = sum(r["tokens"] for r in rows) / sum(r["gen_s"] for r in rows)
        all_rows.append(method(label, tps, ar_tps, sum(r["tau"] for r in rows) / 2,
                               sum(r["verified_per_round"] for r in rows) / 2,
                               sum(r["draft_share"] for r in rows) / 2, sum(r["equal_to_ar"] for r in rows),
                               sum(r["compared_to_ar"] for r in rows), questions=8))
    dev = {"name": device, "driver": "drv", "uuid": "0"}
    if host_cpu:
        dev["host_cpu"] = host_cpu
    return {"model": "m.gguf", "head": "h.gguf", "build": "test", "device": dev, "n_predict": 64,
            "temperature": temperature, "seed": 1, "question_from": 1, "question_to": 4, "sets": sets,
            "all": all_rows, "questions": []}


CALIBRATION = {
    "kind": "heterospec-calibration", "version": 1, "device": {"name": "Dev A", "driver": "drv", "uuid": "0"},
    "mode": "greedy", "feature": "parent_ent",
    "strata": [
        {"lo": None, "hi": 0.5, "records": 900, "accept_rate": 0.81, "look": 0.7, "depth_cap": 8, "prune": 0.01,
         "map": [[0.1, 0.3], [0.5, 0.8], [0.9, 0.95]]},
        {"lo": 0.5, "hi": 2.0, "records": 400, "accept_rate": 0.52, "look": 0.4, "depth_cap": 4, "prune": 0.05,
         "map": [[0.2, 0.2], [0.8, 0.7]]},
        {"lo": 2.0, "hi": None, "records": 120, "accept_rate": 0.18, "look": 0.1, "depth_cap": 2, "prune": 0.2,
         "map": []},
    ],
    "cost": {"t_consume_s": 0.0004, "verify_s": [[n, 0.01 + 0.0005 * n] for n in range(1, 17)],
             "ctx": 258, "ctx_long": 1024, "verify_long_s": [[n, 0.012 + 0.0009 * n] for n in range(1, 17)],
             "verify_all_s": [[n, 0.01 + 0.0008 * n] for n in range(1, 9)],
             "verify_all_long_s": [[n, 0.012 + 0.0012 * n] for n in range(1, 9)],
             "draft_s": [[w, 0.002 + 0.0001 * w] for w in range(1, 9)]},
}
DEVICE_ONLY_CALIBRATION = {"kind": "heterospec-calibration", "version": 1,
                           "device": {"name": "Dev C", "driver": "drv", "uuid": "2"},
                           "cost": {"t_consume_s": 0.0003, "verify_s": [[1, 0.02], [2, 0.021], [3, 0.0225]],
                                    "draft_s": [[1, 0.003]]}}
# `calibrate --device` on a new device: heterospec's default stratum (no records) beside the measured cost
DEFAULT_STRATA_CALIBRATION = dict(DEVICE_ONLY_CALIBRATION, device={"name": "Dev D", "driver": "drv", "uuid": "3"},
                                  strata=[{"lo": None, "hi": None, "records": 0, "accept_rate": 0.5, "look": 0.5,
                                           "depth_cap": 6, "prune": 0, "map": [[0, 0], [1, 1]]}])
BENCH = {"model": "m.gguf", "device": "Dev B", "tests": [
    {"test": "pp64", "n_prompt": 64, "n_gen": 0, "n_verify": 0, "avg_ts": 900.0},
    {"test": "tg32", "n_prompt": 0, "n_gen": 32, "n_verify": 0, "avg_ts": 40.0},
] + [{"test": f"v{n}", "n_prompt": 0, "n_gen": 0, "n_verify": n, "avg_ts": n / (0.015 + 0.001 * n)}
     for n in (1, 2, 4, 8, 16, 32)]}


def run_script(*args):
    p = subprocess.run([sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def md_tables(text):
    """{heading: [{column: cell}]} of the markdown file's tables."""
    tables, heading, header = {}, None, None
    for line in text.splitlines():
        if line.startswith("#"):
            heading, header = line.lstrip("#").strip(), None
        elif line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
                tables[heading] = []
            elif not all(set(c) <= set("-:") for c in cells):
                tables[heading].append(dict(zip(header, cells)))
    return tables


class TestPlotBench(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name
        self.out = os.path.join(self.tmp, "plots")

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, name, obj):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj))
        return path

    def assert_close(self, cell, value, scale=1.0, suffix=""):
        """cell (as printed, with suffix) is value * scale rounded to the cell's decimals."""
        self.assertTrue(cell.endswith(suffix), cell)
        text = cell[:len(cell) - len(suffix)] if suffix else cell
        decimals = len(text.split(".")[1]) if "." in text else 0
        self.assertAlmostEqual(float(text), value * scale, delta=0.5 * 10 ** -decimals + 1e-9, msg=cell)

    def test_all_outputs(self):
        # Dev A twice, greedy and at temperature 1 (as tools/report.sh writes a device's runs): the same device and
        # methods, told apart by the temperature column.
        specs = {("Dev A", 0.0): bench_spec("Dev A", 0.0, 1.0, True), ("Dev B", 0.7): bench_spec("Dev B", 0.7, 2.5, False),
                 ("Dev A", 1.0): bench_spec("Dev A", 1.0, 0.8, False)}
        paths = [self.write("spec_a.json", specs["Dev A", 0.0]), self.write("spec_b.json", specs["Dev B", 0.7]),
                 self.write("spec_a1.json", specs["Dev A", 1.0]),
                 self.write("cal_a.json", CALIBRATION), self.write("cal_c.json", DEVICE_ONLY_CALIBRATION),
                 self.write("bench_b.json", BENCH)]
        rc, out, err = run_script(*paths, "--out", self.out)
        self.assertEqual(rc, 0, err)
        written = [os.path.join(self.out, n) for n in PLOTS + ("devices.md",)]
        self.assertEqual(sorted(out.split()), sorted(written))
        for path in written[:-1]:
            with open(path, "rb") as f:
                self.assertEqual(f.read(8), PNG_MAGIC, path)
            self.assertGreater(os.path.getsize(path), 5000, path)

        with open(os.path.join(self.out, "devices.md")) as f:
            tables = md_tables(f.read())
        self.assertEqual(len(tables), 2, tables.keys())
        all_table, set_table = tables.values()

        self.assertEqual(len(all_table), sum(len(s["all"]) for s in specs.values()))
        for (device, temp), spec in specs.items():
            for m in spec["all"]:
                rows = [r for r in all_table
                        if r["device"] == device and float(r["temperature"]) == temp and r["method"] == m["method"]]
                self.assertEqual(len(rows), 1, (device, temp, m["method"]))
                r = rows[0]
                self.assert_close(r["tokens/s"], m["tokens_per_s"])
                self.assert_close(r["speedup"], m["speedup"], suffix="x")
                self.assert_close(r["tau"], m["tau"])
                self.assert_close(r["verified/round"], m["verified_per_round"])
                self.assert_close(r["draft share"], m["draft_share"], scale=100, suffix="%")
                want = f"{m['equal_to_ar']}/{m['compared_to_ar']}" if m["compared_to_ar"] else "n/a"
                self.assertEqual(r["equal to ar"], want)

        self.assertEqual(len(set_table), sum(len(s["methods"]) for spec in specs.values() for s in spec["sets"]))
        for (device, temp), spec in specs.items():
            for s in spec["sets"]:
                for m in s["methods"]:
                    rows = [r for r in set_table
                            if (r["device"], float(r["temperature"]), r["set"], r["method"])
                            == (device, temp, s["set"], m["method"])]
                    self.assertEqual(len(rows), 1, (device, temp, s["set"], m["method"]))
                    self.assert_close(rows[0]["tokens/s"], m["tokens_per_s"])
                    self.assert_close(rows[0]["speedup"], m["speedup"], suffix="x")
                    self.assert_close(rows[0]["tau"], m["tau"])

    def test_missing_data_skips_plots(self):
        rc, out, err = run_script(self.write("cal_c.json", DEVICE_ONLY_CALIBRATION),
                                  self.write("cal_d.json", DEFAULT_STRATA_CALIBRATION), "--out", self.out)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.split(), [os.path.join(self.out, "cost_curve.png")])
        for name in ("speedup.png", "tau_vs_verified.png", "strata.png", "devices.md"):
            self.assertIn(f"skipped {name}", err)
            self.assertFalse(os.path.exists(os.path.join(self.out, name)), name)

    def test_bad_input(self):
        good = self.write("cal.json", CALIBRATION)
        for name, content, message in (("notjson.json", "{not json", "not JSON"),
                                        ("kind.json", {"kind": "something-else"}, "unknown kind"),
                                        ("other.json", {"hello": 1}, "unknown kind"),
                                        ("list.json", [1, 2], "not a JSON object"),
                                        ("broken.json", {"sets": [{"set": "x"}], "all": []}, "malformed")):
            with self.subTest(name):
                rc, out, err = run_script(good, self.write(name, content), "--out", self.out)
                self.assertEqual(rc, 2, err)
                self.assertIn(name, err)
                self.assertIn(message, err)
                self.assertEqual(out, "")
        rc, _, err = run_script(os.path.join(self.tmp, "absent.json"), "--out", self.out)
        self.assertEqual(rc, 2)
        self.assertIn("cannot read", err)

    def test_host_cpu_in_device_names(self):
        """A CPU device (lavapipe) has one name on every processor: runs on two processors are two devices,
        named with their host_cpu, in devices.md and in bench's cost curves."""
        cpus = ("AMD EPYC (family 25, model 17) x2", "AMD EPYC (family 26, model 2) x2")
        specs = {f"llvmpipe on {c}": bench_spec("llvmpipe", 0.0, 1.0 + i, True, host_cpu=c)
                 for i, c in enumerate(cpus)}
        paths = [self.write(f"spec_{i}.json", spec) for i, spec in enumerate(specs.values())]
        rc, _, err = run_script(*paths, "--out", self.out)
        self.assertEqual(rc, 0, err)
        with open(os.path.join(self.out, "devices.md")) as f:
            all_table = list(md_tables(f.read()).values())[0]
        self.assertEqual(sorted({r["device"] for r in all_table}), sorted(specs))
        for device, spec in specs.items():
            ar = [r for r in all_table if r["device"] == device and r["method"] == "ar"]
            self.assertEqual(len(ar), 1, device)
            self.assert_close(ar[0]["tokens/s"], spec["all"][0]["tokens_per_s"])
        _, bench = plot_bench.load(self.write("bench_cpu.json", dict(BENCH, host_cpu=cpus[1])))
        self.assertEqual(bench.device, f"Dev B on {cpus[1]}")
        _, spec = plot_bench.load(self.write("spec_plain.json", bench_spec("Dev A", 0.0, 1.0, True)))
        self.assertEqual(spec.device, "Dev A")

    def test_parsed_costs(self):
        """T(N) = n_verify / avg_ts of bench's vN tests; calibration strata with open ends."""
        kind, bench = plot_bench.load(self.write("bench.json", BENCH))
        self.assertEqual(kind, "bench")
        self.assertEqual(bench.device, "Dev B")
        want = [(t["n_verify"], t["n_verify"] / t["avg_ts"]) for t in BENCH["tests"] if t["n_verify"]]
        self.assertEqual([n for n, _ in bench.verify_s], [n for n, _ in want])
        for (_, got), (_, t) in zip(bench.verify_s, want):
            self.assertAlmostEqual(got, t)
        kind, cal = plot_bench.load(self.write("cal.json", CALIBRATION))
        self.assertEqual(kind, "calibration")
        self.assertEqual([s.label for s in cal.strata], ["[-inf, 0.5)", "[0.5, 2)", "[2, inf)"])
        self.assertTrue(math.isinf(cal.strata[0].lo) and math.isinf(cal.strata[-1].hi))
        self.assertEqual(cal.verify_s, [tuple(p) for p in CALIBRATION["cost"]["verify_s"]])
        self.assertEqual((cal.ctx, cal.ctx_long), (258, 1024))
        self.assertEqual(cal.verify_long_s, [tuple(p) for p in CALIBRATION["cost"]["verify_long_s"]])
        self.assertEqual(cal.verify_all_s, [tuple(p) for p in CALIBRATION["cost"]["verify_all_s"]])
        self.assertEqual(cal.verify_all_long_s, [tuple(p) for p in CALIBRATION["cost"]["verify_all_long_s"]])


if __name__ == "__main__":
    unittest.main()
