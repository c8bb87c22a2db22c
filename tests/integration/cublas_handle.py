#!/usr/bin/env python3
"""A C++ program's own cuBLAS handle, never destroyed, is a leak.

examples/cublas_handle_leak.cpp (simpleCUBLAS without cublasDestroy) under
the shim on simcuda's libcublas.so.13: 67,240,960 B in 3 cuMemAlloc_v2
allocations leaked inside libcublas, reached from the program's
cublasCreate line, nothing library_held (no framework frame on the stacks),
the same from `torchseal report P.tseal`, and TORCHSEAL_EXIT_CODE fails the
run. With --destroy: nothing leaked, exit 0.

Paths from tests/integration/meson.build: TSEAL_IT_SHIM, TSEAL_IT_CLI,
TSEAL_IT_SIMCUDA_DIR, TSEAL_IT_BIN_cublas_handle_leak, TSEAL_IT_EXAMPLES_SRC.
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import harness  # noqa: E402

CHECK = harness.Checker("cublas_handle", verbose=True)
HANDLE_BYTES = (64 << 20) + (128 << 10) + (1 << 10)  # 67,240,960


def site_line(src):
    with open(src) as f:
        return next(i + 1 for i, l in enumerate(f) if "LEAK-SITE: handle" in l)


def main():
    shim = harness.need("TSEAL_IT_SHIM", "the shim")
    cli = harness.need("TSEAL_IT_CLI", "the CLI")
    sim = harness.need("TSEAL_IT_SIMCUDA_DIR", "simcuda")
    exe = harness.need("TSEAL_IT_BIN_cublas_handle_leak", "examples/cublas_handle_leak")
    src = os.path.join(harness.need("TSEAL_IT_EXAMPLES_SRC"), "cublas_handle_leak.cpp")
    line = site_line(src)
    with tempfile.TemporaryDirectory(prefix="tseal-cublas-") as tmp:
        for variant in ("leaky", "destroy"):
            out = os.path.join(tmp, variant)
            env = harness.with_simcuda(harness.clean_env(), sim)
            env.update(LD_PRELOAD=harness.preload(shim), TORCHSEAL_OUTPUT=out,
                       TORCHSEAL_EXIT_CODE="23")
            p = harness.run([exe] + (["--destroy"] if variant == "destroy" else []), env,
                            merge_stderr=True)
            print(f"$ cublas_handle_leak {variant}: exit {p.returncode}\n{p.stdout.strip()}")
            CHECK.true(f"{variant}: ran the gemm on simcuda's cuBLAS", "done" in p.stdout)
            r = CHECK.read_json(out + ".json")
            if r is None:
                continue
            leaks = r.get("leaks") or []
            CHECK.true(f"{variant}: nothing library_held (no framework owns the handle)",
                       not r.get("library_held"), json.dumps(r.get("library_held"))[:400])
            if variant == "destroy":
                CHECK.eq("destroy: exit status", p.returncode, 0)
                CHECK.eq("destroy: leaked_bytes", r["summary"]["leaked_bytes"], 0)
                continue
            CHECK.eq("leaky: exit status under TORCHSEAL_EXIT_CODE=23", p.returncode, 23)
            CHECK.eq("leaky: leaked_bytes (simpleCUBLAS on an H100)",
                     r["summary"]["leaked_bytes"], HANDLE_BYTES)
            CHECK.eq("leaky: leaked_allocations", r["summary"]["leaked_allocations"], 3)
            CHECK.true("leaky: every leak is cuMemAlloc_v2",
                       all(l.get("api") == "cuMemAlloc_v2" for l in leaks),
                       [l.get("api") for l in leaks])
            for l in leaks:
                frames = l.get("frames") or []
                CHECK.true(f"leaky: the {l['bytes']} B leak starts inside libcublas.so.13",
                           bool(frames) and os.path.basename(frames[0].get("module") or "")
                           == "libcublas.so.13", frames[:1])
                CHECK.true(f"leaky: the {l['bytes']} B leak passes cublasCreate_v2",
                           any(f.get("function") == "cublasCreate_v2" for f in frames))
                CHECK.true(f"leaky: the {l['bytes']} B leak is reached from "
                           f"cublas_handle_leak.cpp:{line}",
                           any((f.get("file") or "").endswith("cublas_handle_leak.cpp")
                               and f.get("line") == line for f in frames))
            e = harness.run([cli, "report", out + ".tseal", "--format", "json"],
                            harness.clean_env())
            if CHECK.true("torchseal report P.tseal ran", e.returncode == 0, e.stderr):
                replay = json.loads(e.stdout)
                CHECK.eq("replay: leaked_bytes", replay["summary"]["leaked_bytes"], HANDLE_BYTES)
                CHECK.true("replay: nothing library_held", not replay.get("library_held"))
    sys.exit(CHECK.finish())


if __name__ == "__main__":
    main()
