"""The real-torch patterns (examples/python/torch) on the chosen stack,
checked exactly as tests/torch/run.py checks them on simcuda.

tests/torch/run.py's own scenario runs each pattern's leaky and fixed twin
under the shim; only how a Python process is started changes: with this
stack's libraries on LD_LIBRARY_PATH instead of through scripts/simgpu.
Patterns whose expectations need a small simulated device (SIMCUDA_*
settings: the OOM patterns) are left out; a real device is far larger.

compute-sanitizer is not compared here: PyTorch's caching allocator keeps
its segments until the process ends, so compute-sanitizer lists every
segment as leaked, fixed twin included.
"""

import contextlib
import io
import os
import sys

from .examples import load_module

MODES = ("segments", "tensors", "expandable")


class Outcome:
    def __init__(self, name, status, log):
        self.name, self.status, self.log = name, status, log

    def agrees(self):
        return self.status == 0

    def skip_reason(self):
        return next((l[len("SKIP: "):] for l in self.log.splitlines() if l.startswith("SKIP: ")),
                    "(no reason given)")

    def details(self):
        return [l.strip() for l in self.log.splitlines() if l.startswith("FAIL")][:8] \
            or self.log.strip().splitlines()[-3:]


class Runner:
    def __init__(self, source_root, build, stack, python=None):
        os.environ.update(TSEAL_TORCH_SOURCE=source_root, TSEAL_TORCH_BUILD=build,
                          TSEAL_TORCH_SHIM=os.path.join(build, "shim", "libtorchseal.so"),
                          TSEAL_TORCH_CLI=os.path.join(build, "report", "torchseal"))
        self.tier = load_module("tseal_torch_tier",
                                os.path.join(source_root, "tests", "torch", "run.py"))
        self.harness = sys.modules["harness"]
        self.stack = stack
        self.python = python
        self.unusable = None  # why torch cannot run here; "" once it has
        self.tier.run = self._run
        self.tier.prerequisites = self._prerequisites

    def scenarios(self):
        """PATTERN-MODE names this stack can check."""
        return ["%s-%s" % (p, m) for p, spec in self.tier.PATTERNS.items()
                if not any(k.startswith("SIMCUDA_") for k in spec.get("env") or {})
                for m in MODES]

    def _run(self, py, args, timeout=300, **kw):
        env = self.stack.env(self.tier.sim_env(**kw))
        p = self.harness.run([py] + args, env, timeout=timeout, merge_stderr=True)
        print("$ python %s  [%s, %s, %.1fs]" % (" ".join(os.path.basename(a) for a in args),
                                                 kw.get("mode", "segments"), p.status(),
                                                 p.seconds))
        for line in p.stdout.splitlines()[-15:]:
            print("  | " + line)
        return p

    def _prerequisites(self, need_shim=True):
        if self.unusable is None:
            self.python = self.python or self.tier.torch_env()
            check = self._run(self.python, ["-c", "import torch; assert "
                                            "torch.cuda.is_available(), 'no CUDA device'; "
                                            "torch.zeros(1, device='cuda')"], timeout=300)
            self.unusable = "" if check.returncode == 0 else check.stdout[-2000:]
        if self.unusable:
            self.tier.loud_skip("torch does not see the GPU on this stack:\n" + self.unusable)
        return self.python

    def run(self, name):
        pattern, _, mode = name.rpartition("-")
        self.tier.CHECK = self.harness.Checker("torch real-gpu " + name, verbose=True)
        buf = io.StringIO()
        status = 1
        with contextlib.redirect_stdout(buf):
            try:
                self.tier.scenario_pattern(pattern, mode)
            except SystemExit as e:
                status = e.code
            except self.harness.Failed as e:
                print("FAIL: %s" % e)
        return Outcome(name, status, buf.getvalue())
