"""The Python side of the marks test: torchseal.mark() before the first
CUDA call (a no-op) and after it, run under the shim with the helper and
toytorch (examples/python) on sys.path."""
import torchseal
import toytorch as tt

torchseal.mark("py: before any CUDA call")
keep = tt.zeros(1024)
torchseal.mark("py: epoch 1")
more = tt.zeros(2048)
torchseal.mark("py: validation \u00e9")
del more
