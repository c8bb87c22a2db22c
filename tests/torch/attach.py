#!/usr/bin/env python3
"""`torchseal attach PID` on a real torch training loop (simcuda).

    attach.py loop-tensors | loop-segments | snapshot

The loop is started plainly: simcuda on its library path, no torchseal
preloaded. It imports the `torchseal` helper (as a user's script may) and
calls torchseal.step(), which does nothing until the attach. The test reads
the loop's CUDA GOT entries, attaches with `--steps N` (through ptrace on
the venv's CPython 3.11), and checks:
  * the report names the leaking line and its holder (the list `history`);
    memory allocated before the attach is not listed, and its frees are
    counted as pre-existing; memory by role counts the tensors from before
    the attach that Python holds (the list `pre`) and, in segments mode, the
    rest of the older segments;
  * while attached the GOT entries point elsewhere and torchseal threads
    run; after the detach every entry holds its old value again, no
    torchseal thread is left and CUPTI is free (the loop subscribes itself
    at the end);
  * the loop keeps stepping, prints exactly what it prints unattached, and
    exits 0.
loop-tensors: PYTORCH_NO_CUDA_MEMORY_CACHING=1 (each tensor its own
cudaMalloc); loop-segments: the caching allocator, where the leak shows as
the segments the list's tensors keep. snapshot: `--snapshot` lists what
Python holds now, memory allocated before the attach included (`held_now`),
then detaches the same way.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "attach"))
import run as tier  # noqa: E402
from run import BUILD, CHECK, CLI, SIMGPU, done, load, prerequisites  # noqa: E402
import gotview  # noqa: E402
from session import Attach, Program, torchseal_threads  # noqa: E402

PYDIR = os.path.join(BUILD, "python")

PROGRAM = '''\
import ctypes, os, sys, time
import torch
import torchseal

w = torch.ones(1 << 14, device="cuda", requires_grad=True)
opt = torch.optim.SGD([w], lr=1e-3)
pre = [torch.full((1 << 12,), 1.0, device="cuda") for _ in range(3000)]   # PRE
history = []
i = 0
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    x = torch.full((1 << 14,), float(i % 7), device="cuda")
    loss = (w * x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    history.append(torch.ones(1 << 16, device="cuda") * loss.detach())   # KEEP
    pre.pop()
    loss.item()
    torchseal.step()
    print(f"step {i} {len(history)} {len(pre)}", flush=True)
    i += 1
    time.sleep(0.02)
cupti = ctypes.CDLL("libcupti.so.13")
handle = ctypes.c_void_p()
rc = cupti.cuptiSubscribe(ctypes.byref(handle), None, None)
if rc == 0:
    cupti.cuptiUnsubscribe(handle)
print(f"cupti subscribe {rc}", flush=True)
print(f"exit ok {i}", flush=True)
'''


def line_of(tag):
    return next(i for i, l in enumerate(PROGRAM.splitlines(), 1) if tag in l)


def at_line(entries, script, line):
    return [e for e in entries or []
            if any(f.get("file") == script and f.get("line") == line
                   for f in e.get("python_frames") or [])]


def check_snapshot(report, prog, prefix):
    CHECK.eq("trigger", report.get("trigger"), "snapshot")
    held = report.get("held_now") or {}
    holders = held.get("holders") or []
    by = {name: sum(h["bytes"] for h in holders if any(f"'{name}'" in step for step in h["chain"]))
          for name in ("pre", "history")}
    # The list `pre` had 3000 tensors of 16 KiB; the loop pops one per step.
    at_least = (3000 - len(prog.steps()) - 50) * (1 << 14)
    CHECK.true("held_now has the tensors of `pre`, allocated before the attach",
               by["pre"] >= at_least, (by, at_least, holders[:3]))
    CHECK.true("and those of `history`", by["history"] > 0, holders[:5])
    CHECK.true("its total covers its holders", held.get("bytes", 0) >= by["pre"] + by["history"],
               held.get("bytes"))
    text = open(prefix + ".txt").read()
    CHECK.true("the text report shows what is held now, `pre` first",
               "Held now by Python objects" in text and "'pre'" in text, text[-2000:])
    again = subprocess.run([CLI, "report", prefix + ".json"], capture_output=True, text=True)
    CHECK.true("`torchseal report` reads the snapshot back",
               again.returncode == 0 and "Held now by Python objects" in again.stdout,
               again.stderr[-500:])


def scenario(mode):
    py = prerequisites()
    keep_dir = os.environ.get("TSEAL_ATTACH_KEEP")  # a directory to leave the files in
    with tempfile.TemporaryDirectory(prefix="tseal-attach-torch-", dir=keep_dir) as tmp:
        script = os.path.join(tmp, "train.py")
        open(script, "w").write(PROGRAM)
        stop = os.path.join(tmp, "stop")
        prefix = os.path.join(tmp, "attached")
        extra = {"PYTHONPATH": PYDIR}
        snapshot = mode == "snapshot"
        if mode == "tensors":
            extra["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
        env = tier.sim_env(extra=extra)
        prog = Program(["bash", SIMGPU, "--build", BUILD, py, script, stop], env)
        try:
            started = prog.out.wait_for(lambda l: l.startswith("step 5 "), 240)
            if not CHECK.true("the loop runs, without torchseal", started,
                              "\n".join(prog.out.all[-30:])):
                done()
            CHECK.true("no torchseal in it", "libtorchseal" not in open(f"/proc/{prog.pid}/maps").read())
            where = gotview.slots(prog.pid)
            CHECK.true("its libraries call CUDA through GOT entries", len(where) > 10, len(where))
            before = gotview.read(prog.pid, where)

            n_steps = 8 if mode == "tensors" else 30
            how = ["--snapshot"] if snapshot else ["--steps", n_steps]
            cli = Attach(CLI, [prog.pid] + how + ["-o", prefix])
            line = cli.err.wait_for(lambda l: "torchseal: attached" in l, 120)
            if not CHECK.true("the CLI says it attached", line, "\n".join(cli.err.all)):
                cli.wait(60)
                done()
            CHECK.true("through ptrace", "via ptrace" in line, line)
            during = gotview.read(prog.pid, where)
            changed = [w for w in where if during[w[2]] != before[w[2]]]
            threads_during = torchseal_threads(prog.pid)
            rc = cli.wait(300)
            CHECK.eq("attach exits 0", rc, 0, "\n".join(cli.err.all))
            CHECK.eq(f"the CLI says {n_steps} steps are too few for a growth verdict only if "
                     "they are (10 needed; never for a snapshot)",
                     any("too few for a growth verdict" in l for l in cli.err.all),
                     not snapshot and n_steps < 10, cli.err.all)
            CHECK.true("while attached, the CUDA GOT entries led to the shim", changed,
                       len(where))
            CHECK.true("and torchseal threads ran", "torchseal-wr" in threads_during,
                       threads_during)
            after = gotview.read(prog.pid, where)
            CHECK.eq("after the detach, every CUDA GOT entry holds its old value",
                     {a for a in before if after[a] != before[a]}, set())
            CHECK.eq("no torchseal thread is left", torchseal_threads(prog.pid), [])
            restored = [l for l in cli.err.all if "GOT entries restored" in l]
            CHECK.true("the CLI says how many entries it restored", restored, cli.err.all[-3:])
            at_detach = len(prog.steps())
            CHECK.true("the loop keeps stepping after the detach",
                       prog.wait_steps(at_detach + 5, 60))
            rc = prog.finish(stop, timeout=180)
            CHECK.eq("the loop exits 0", rc, 0, "\n".join(prog.out.all[-30:]))
            steps = prog.steps()
            CHECK.true("it stepped on after the detach", len(steps) > at_detach)
            lines = [l for l in prog.out.all if l.startswith("step ")]
            CHECK.true("its output is unchanged: every step line as unattached",
                       lines == [f"step {n} {n + 1} {3000 - n - 1}" for n in range(len(lines))],
                       lines[:4])
            CHECK.true("CUPTI is free again (the loop subscribes itself)",
                       "cupti subscribe 0" in prog.out.all, prog.out.all[-4:])
            CHECK.eq("its last line is its own", prog.out.all[-1], f"exit ok {len(steps)}")
            CHECK.true("nothing else was printed into its output",
                       all(l.startswith(("step ", "cupti subscribe", "exit ok", "ready"))
                           for l in prog.out.all),
                       [l for l in prog.out.all
                        if not l.startswith(("step ", "cupti subscribe", "exit ok", "ready"))][:10])

            report = load(prefix + ".json")
            if snapshot:
                check_snapshot(report, prog, prefix)
                done()
            keep, pre = line_of("# KEEP"), line_of("# PRE")
            found = at_line(report.get("leaks"), script, keep) + \
                at_line(report.get("reachable"), script, keep)
            CHECK.true(f"the leak is found at train.py:{keep}", found,
                       json.dumps(report, indent=1)[:4000])
            CHECK.true("held by the list `history`",
                       found and all(tier.names_holder(e, "history") for e in found),
                       [e.get("holders") for e in found])
            if mode == "tensors":
                CHECK.true("one 256 KiB tensor per tracked step at least",
                           sum(e["bytes"] for e in found) >= n_steps * (1 << 18),
                           [e["bytes"] for e in found])
            listed = (report.get("leaks") or []) + (report.get("reachable") or [])
            CHECK.eq("nothing allocated before the attach is listed",
                     at_line(listed, script, pre), [])
            if mode == "tensors":
                CHECK.true("the frees of pre-existing tensors are counted",
                           report["summary"].get("preexisting_frees", 0) >= 8, report["summary"])
            CHECK.true("a history was written", os.path.getsize(prefix + ".tseal") > 0)
            text = open(prefix + ".txt").read()
            CHECK.true("the text report names the line and the holder",
                       f"train.py:{keep}" in text and "history" in text, text[:3000])
            # Memory by role counts the tensors from before the attach that
            # Python holds: most of `pre` is still in its list (user_held).
            roles = report.get("roles") or {}
            user = (roles.get("user_held") or {}).get("bytes", 0)
            at_least = (3000 - len(prog.steps()) - 50) * (1 << 14)
            CHECK.true("memory by role counts `pre`, allocated before the attach",
                       user >= at_least, (user, at_least, report.get("roles_scan")))
            CHECK.eq("its roles add up to its scan's live total",
                     sum(r.get("bytes", 0) for r in roles.values()),
                     (report.get("roles_scan") or {}).get("live_bytes"))
            CHECK.true("and the text says what it leaves out",
                       "Memory from before tracking started" in text, text[-2500:])
            scan = report.get("roles_scan") or {}
            CHECK.eq("the split says it counts memory from before tracking",
                     scan.get("before_tracking"), True, scan)
            if mode == "segments":
                # With the older segments' rest, the split is PyTorch's whole
                # cache: here 2 MiB segments only (every tensor is small)...
                live = scan.get("live_bytes", 1)
                CHECK.eq("memory by role covers the cache's older segments too: whole 2 MiB "
                         "segments", live % (2 << 20), 0, live)
                # ...and exactly: PyTorch's reserved count, read by the same
                # scan, plus the tracked memory outside its cache (missing or
                # doubled, the older cache breaks this).
                outside = sum((roles.get(k) or {}).get("bytes", 0)
                              for k in ("library_held", "outside_framework"))
                CHECK.eq("the split is PyTorch's reserved bytes plus the memory outside its cache",
                         live, scan.get("torch_reserved_bytes", -1) + outside, scan)
        finally:
            prog.kill()
            if keep_dir:
                os.system(f"cp -r {tmp} {keep_dir}/last")
    done()


def main():
    s = sys.argv[1] if len(sys.argv) > 1 else ""
    if s in ("loop-tensors", "loop-segments"):
        scenario(s.split("-")[1])
    if s == "snapshot":
        scenario("snapshot")
    print(f"unknown scenario {s!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
