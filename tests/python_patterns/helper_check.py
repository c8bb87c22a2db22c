"""helper_check.py absent|present HELPER_DIR EXAMPLES_DIR

Checks the `torchseal` helper module's contract (docs/pytorch.md):
`absent`: no shim in the process, every function is a harmless no-op;
`present`: under `torchseal run`, the helper comes from HELPER_DIR (on
PYTHONPATH because the CLI put it there), is inert before the first CUDA
call and live after it; `dump()` writes one on-demand report.
Never raising is part of the contract, so odd arguments are tried too."""
import os
import sys

mode, helper_dir, examples_dir = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


import torchseal  # noqa: E402

expect(os.path.realpath(os.path.dirname(os.path.dirname(torchseal.__file__)))
       == os.path.realpath(helper_dir),
       f"torchseal imported from {torchseal.__file__}, not from {helper_dir}")

ODD = [None, "", "epoch 1", b"bytes", "nul\0inside", "\udcff surrogate", 12, object()]

if mode == "absent":
    expect(not torchseal.available(), "available() without the shim")
    expect(torchseal.active() is False, "active() without the shim")
    for label in ODD:
        torchseal.step()
        torchseal.mark(label)
        expect(torchseal.dump(label) is False, f"dump({label!r}) without the shim")
else:
    expect(torchseal.available(), "available() is False under torchseal run")
    # Before the first CUDA call the shim is inert: calls are accepted, do nothing.
    expect(torchseal.active() is False, "active() before any CUDA call")
    torchseal.step()
    torchseal.mark("before CUDA")
    expect(torchseal.dump("too early") is False, "dump() before any CUDA call")
    sys.path.insert(0, examples_dir)
    import toytorch as tt  # noqa: E402

    keep = tt.zeros(1024)
    expect(torchseal.active() is True, "active() after a CUDA allocation")
    for label in ODD:
        torchseal.mark(label)
        torchseal.step()
    expect(torchseal.dump("api") is True, "dump() after CUDA")
    del keep

for f in failures:
    print("FAIL: " + f)
print("helper " + mode + (": ok" if not failures else ": failed"))
sys.exit(1 if failures else 0)
