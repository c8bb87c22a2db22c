#!/usr/bin/env python3
"""Memory by role (docs/roles.md) on real PyTorch: planted tensors of every
role, then an OOM, each role checked against the program's own ledger.

    roles.py segments | tensors | uncaught

The program builds a model with parameters and buffers, runs a backward and
an Adam step (gradients, optimizer state), keeps a list of tensors (held by
`cache`), keeps a loss whose graph saves two tensors nothing else holds
(saved activations), frees a large tensor (free cache, segments mode) and
makes a raw cudaMalloc (outside the framework), writes its ledger
(untyped_storage().nbytes() per role, memory_reserved/allocated), and calls
torchseal.dump(). Then it fills the device until an OOM and marks a step.

Checked, in the dump: each planted role's bytes equal the ledger, the
parameters belong to the model's top-level module, `cache` is the first
user holder, the free cache is memory_reserved() - memory_allocated(), the
raw cudaMalloc is outside the framework at its line, and the roles add up
to the live total, which is the reserved memory plus the raw block within
1%. In the exit report: the OOM's split adds up to its live total within
1% and leads its P.txt entry; the peak and the per-step totals are there;
and `torchseal report P.tseal` gives the same splits. Exit 0 pass, 1 fail,
77 skip.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as tier  # noqa: E402
from holders import run_cli  # noqa: E402
from run import CHECK, done, load, prerequisites, replayed  # noqa: E402

PROGRAM = r'''
import ctypes, json, os
import torch
import torchseal

def nbytes(ts):
    return sum(t.untyped_storage().nbytes() for t in ts)

model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.BatchNorm1d(512),
                            torch.nn.Linear(512, 256)).cuda()
opt = torch.optim.Adam(model.parameters())
x = torch.randn(64, 512, device="cuda")
model(x).square().mean().backward()
opt.step()
cache = [torch.randn(256, 1024, device="cuda") for _ in range(3)]
leaf = torch.randn(128, 1024, device="cuda", requires_grad=True)
act1 = torch.randn(128, 1024, device="cuda")
act2 = torch.randn(128, 1024, device="cuda")
pending = (leaf * act1 * act2).sum()  # saves act1 and act2 for backward
saved = nbytes([act1, act2])
del act1, act2
tmp = torch.randn(4 * 1024 * 1024, device="cuda")
del tmp
cudart = ctypes.CDLL("libcudart.so.13")
raw = ctypes.c_void_p()
assert cudart.cudaMalloc(ctypes.byref(raw), ctypes.c_size_t(3 << 20)) == 0  # RAW
torch.cuda.synchronize()
ledger = {
    "parameters": nbytes(model.parameters()),
    "buffers": nbytes(model.buffers()),
    "gradients": nbytes(p.grad for p in model.parameters()),
    "optimizer_state": nbytes(v for st in opt.state.values() for v in st.values()
                              if torch.is_tensor(v) and v.is_cuda),
    "saved_activations": saved,
    "user_held": nbytes(cache + [leaf, pending, x]),
    "outside_framework": 3 << 20,
    "reserved": torch.cuda.memory_reserved(),
    "allocated": torch.cuda.memory_allocated(),
}
with open(os.environ["ROLES_LEDGER"], "w") as f:
    json.dump(ledger, f)
torchseal.dump()
for _ in range(3):
    torchseal.step()
big = []
try:
    while True:
        big.append(torch.empty(8 << 20, dtype=torch.uint8, device="cuda"))
except torch.OutOfMemoryError:
    pass
torchseal.step()  # the first safe point after the OOM
print("filled", len(big), flush=True)
'''

# A training loop that keeps every output (and its graph) in a list until
# PyTorch's OutOfMemoryError ends it: no torchseal.step() after the OOM, so
# the exit scan is the first safe point after it.
UNCAUGHT = r'''
import json, os
import torch
import torchseal

model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(3)]).cuda()
opt = torch.optim.AdamW(model.parameters())
keep = []
x = torch.randn(128, 1024, device="cuda")
with open(os.environ["ROLES_LEDGER"], "w") as f:
    json.dump({"parameters": sum(p.untyped_storage().nbytes() for p in model.parameters())}, f)
while True:
    model(x).square().mean().backward()
    opt.step()
    opt.zero_grad()
    keep.append(model(x))  # KEEP
    torchseal.step()
'''

SCAN_ROLES = ("parameters", "buffers", "gradients", "optimizer_state", "saved_activations",
              "user_held")


def line_of(marker):
    return next(i for i, l in enumerate(PROGRAM.splitlines(), 1) if "# " + marker in l)


def split_of(obj, key="roles"):
    """P.json's split at obj[key] (role entries only, DESIGN's `roles`) with
    its obj[key + "_scan"] (at, step, live_bytes), as one dict."""
    if not obj or key not in obj:
        return None
    return dict(obj.get(key + "_scan") or {}, roles=obj[key])


def role(split, name):
    return (split.get("roles") or {}).get(name) or {}


def show(title, split):
    print(f"  {title}: at {split.get('at')} step {split.get('step')}, "
          f"{split.get('live_bytes')} B live")
    for name, r in (split.get("roles") or {}).items():
        print(f"    {name:18} {r.get('bytes'):>10}  {r.get('tensors', r.get('allocations', ''))}")


def totals(split):
    """What a replay must agree on: the moment, and each role's bytes, count,
    modules and holders (native frames may symbolize differently offline)."""
    if not split:
        return split
    return (split.get("at"), split.get("step"), split.get("live_bytes"),
            {k: (r.get("bytes"), r.get("tensors", r.get("allocations")), r.get("modules"),
                 r.get("holders")) for k, r in split["roles"].items()})


def adds_up(title, split, total):
    s = sum(r["bytes"] for r in split["roles"].values())
    CHECK.true(f"{title}: the roles add up to the live total ({s} vs {total}) within 1%",
               total > 0 and abs(s - total) <= total / 100)


def check_dump(split, ledger, mode, script):
    show("dump", split)
    for name in SCAN_ROLES:
        CHECK.eq(f"{name}: the ledger's bytes", role(split, name).get("bytes"), ledger[name])
    mods = role(split, "parameters").get("modules") or []
    CHECK.true(f"parameters belong to the top-level module Sequential: {mods}",
               bool(mods) and mods[0]["module"] == "Sequential" and
               mods[0]["bytes"] == ledger["parameters"])
    holders = role(split, "user_held").get("holders") or []
    CHECK.true("the largest user holder is global 'cache'",
               bool(holders) and holders[0]["chain"][0].startswith("global 'cache' (list)"))
    outside = role(split, "outside_framework")
    CHECK.eq("outside the framework: the raw cudaMalloc", outside.get("bytes"),
             ledger["outside_framework"])
    sites = outside.get("sites") or []
    CHECK.true(f"... at its line {line_of('RAW')}",
               bool(sites) and any(f.get("file") == script and f.get("line") == line_of("RAW")
                                   for f in sites[0].get("python_frames") or []))
    if mode == "segments":
        CHECK.eq("free cache: memory_reserved() - memory_allocated()",
                 role(split, "free_cache").get("bytes"), ledger["reserved"] - ledger["allocated"])
        # What CUDA libraries allocated themselves is outside PyTorch's count.
        expected = (ledger["reserved"] + ledger["outside_framework"] +
                    role(split, "library_held").get("bytes", 0))
        adds_up("dump (against memory_reserved() + the raw block + the libraries')", split,
                expected)
    adds_up("dump", split, split["live_bytes"])


def scenario(mode):
    py = prerequisites()
    with tempfile.TemporaryDirectory(prefix="tseal-roles-") as tmp:
        ledger_path = os.path.join(tmp, "ledger.json")
        p, out = run_cli(py, PROGRAM, tmp, "roles", mode,
                         extra={"SIMCUDA_MEMORY_BYTES": "384MiB", "ROLES_LEDGER": ledger_path})
        if not CHECK.true("the program ran to its end", "filled" in p.stdout, p.stdout[-3000:]):
            done()
        ledger = json.load(open(ledger_path))
        print(f"  ledger: {ledger}")
        script = os.path.join(tmp, "roles.py")
        dumps = [d for d in tier.dumps_of(out) if load(d).get("trigger") == "api"]
        if CHECK.true("one API dump", len(dumps) == 1):
            split = split_of(load(dumps[0]))
            if CHECK.true("the dump has roles", bool(split)):
                check_dump(split, ledger, mode, script)
        r = load(out + ".json")
        ooms = [o for o in r.get("ooms") or [] if not o.get("recovered")]
        if CHECK.true("an unrecovered OOM", bool(ooms)):
            split = split_of(ooms[0])
            if CHECK.true("the OOM has roles", bool(split)):
                show("OOM", split)
                adds_up("OOM", split, ooms[0]["live_bytes"])
                held = role(split, "user_held")
                CHECK.true("at the OOM, `big` is the largest user holder",
                           any(h["chain"][0].startswith("global 'big' (list)")
                               for h in (held.get("holders") or [])[:1]))
                for name in ("parameters", "gradients", "optimizer_state"):
                    CHECK.eq(f"at the OOM, {name} as the ledger", role(split, name).get("bytes"),
                             ledger[name])
        txt = open(out + ".txt").read()
        CHECK.true("P.txt: the OOM entry leads with the split",
                   "Out of memory asking " in txt and " live: " in txt, txt[-3000:])
        peak = split_of(r.get("summary"), "peak_roles")
        CHECK.true("the peak's split is in P.json (summary.peak_roles)", bool(peak))
        if peak:
            adds_up("peak", peak, peak["live_bytes"])
        steps = r.get("roles_steps") or []
        CHECK.true(f"the step scans' totals are in P.json ({len(steps)})", len(steps) >= 1)
        rep = replayed(out)
        CHECK.eq("torchseal report P.tseal: the same roles", totals(split_of(rep)),
                 totals(split_of(r)))
        CHECK.eq("torchseal report P.tseal: the same summary.peak_roles",
                 totals(split_of(rep.get("summary"), "peak_roles")), totals(peak))
        CHECK.eq("torchseal report P.tseal: the same roles_steps",
                 rep.get("roles_steps"), r.get("roles_steps"))
        CHECK.eq("torchseal report P.tseal: the same OOM split",
                 [totals(split_of(o)) for o in rep.get("ooms") or []],
                 [totals(split_of(o)) for o in r.get("ooms") or []])
    done()


def scenario_uncaught():
    """The OOM nobody catches: the exit report's OOM entry still has its
    split, adding up to the OOM's live total, with `keep` holding."""
    py = prerequisites()
    with tempfile.TemporaryDirectory(prefix="tseal-roles-") as tmp:
        ledger_path = os.path.join(tmp, "ledger.json")
        p, out = run_cli(py, UNCAUGHT, tmp, "uncaught", "segments",
                         extra={"SIMCUDA_MEMORY_BYTES": "384MiB", "ROLES_LEDGER": ledger_path})
        CHECK.true("the program ended in torch.OutOfMemoryError",
                   p.returncode != 0 and "OutOfMemoryError" in p.stdout, p.stdout[-2000:])
        ledger = json.load(open(ledger_path))
        r = load(out + ".json")
        ooms = [o for o in r.get("ooms") or [] if not o.get("recovered")]
        if CHECK.true("an unrecovered OOM in the exit report", bool(ooms)):
            split = split_of(ooms[0])
            if CHECK.true("the uncaught OOM has roles", bool(split)):
                show("uncaught OOM", split)
                adds_up("uncaught OOM", split, ooms[0]["live_bytes"])
                CHECK.eq("parameters as the ledger", role(split, "parameters").get("bytes"),
                         ledger["parameters"])
                held = role(split, "user_held").get("holders") or []
                CHECK.true("`keep` is the largest user holder",
                           bool(held) and held[0]["chain"][0].startswith("global 'keep' (list)"),
                           held[:2])
                CHECK.true("the kept outputs' graphs are saved activations",
                           role(split, "saved_activations").get("bytes", 0) > 0)
        txt = open(out + ".txt").read()
        CHECK.true("P.txt: the OOM entry leads with the split",
                   "Out of memory asking " in txt and "held by global 'keep'" in txt, txt[-3000:])
    done()


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "segments"
    if mode not in ("segments", "tensors", "uncaught"):
        sys.exit(f"usage: {sys.argv[0]} segments | tensors | uncaught")
    if mode == "uncaught":
        scenario_uncaught()
    scenario(mode)
