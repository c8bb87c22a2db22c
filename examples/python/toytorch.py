"""toytorch: a tiny PyTorch-shaped tensor library over the CUDA runtime.

It exists so torchseal's Python examples and tests can reproduce real
training-loop leaks without PyTorch or a GPU. What matters is that its memory
behaves like PyTorch's:

* Every Tensor's data lives in device memory obtained from the CUDA runtime
  (``libcudart.so.13``) through ``ctypes``, and is given back when the last
  Python reference to it dies (``__del__``), as with PyTorch's storages.
  ``ctypes.CDLL`` releases the GIL around every CUDA call, as PyTorch's C++
  code runs without it, so the detector must find the Python stack of a
  thread that does not hold the GIL.
* Autograd keeps the graph: a result that requires grad holds its parent
  tensors, so whatever keeps a result alive (``total_loss += loss``, a list
  of losses, a stored exception's traceback) keeps every tensor that
  produced it alive. PyTorch keeps the graph nodes and the tensors they saved
  for backward; it frees the saved tensors at ``backward()`` unless
  ``retain_graph=True``. The toy keeps them regardless, which is what PyTorch
  does for a graph that is never backpropagated (a validation loop without
  ``no_grad``) and keeps the leaked memory on the device where a detector of
  device allocations can see it.
* Two allocators, chosen like PyTorch's (``PYTORCH_CUDA_ALLOC_CONF``):
  ``caching`` (PyTorch's default) carves small tensors out of 2 MiB segments
  from ``cudaMalloc`` and keeps freed blocks for reuse; ``async``
  (``backend:cudaMallocAsync``, what ``torchseal run --tensors`` selects)
  makes one ``cudaMallocAsync``/``cudaFreeAsync`` pair per tensor.
  ``TOYTORCH_ALLOC=caching|async`` overrides the choice.
* A failed allocation raises ``OutOfMemoryError`` (after the caching
  allocator has released its unused segments and retried, as PyTorch does).

Values are float32 and computed on the host: each tensor keeps a host copy
(an ``array``) next to its device buffer, which is filled with ``cudaMemcpy``
(or ``cudaMemset``), and ``item()``/``tolist()`` read the device copy back.
Tensors are one-dimensional; operations are elementwise with Python-number
broadcasting, plus reductions to a one-element tensor.

Runtime lookup (first hit wins): ``TOYTORCH_CUDART`` (a path); with an NVIDIA
GPU present, the system's ``libcudart.so.13``, the ``nvidia-cuda-runtime``
wheel's, ``$CUDA_HOME/lib64``; without one, simcuda from
``$TORCHSEAL_BUILD_DIR`` (or ``build/`` of this checkout). A ``libcuda.so.1``
next to the chosen runtime is loaded first so the runtime's
``dlopen("libcuda.so.1")`` finds the matching driver.

Standard library only; CPython 3.8+.
"""

import array
import contextlib
import ctypes
import glob
import math
import operator
import os
import random
import sys
from itertools import repeat

__all__ = [
    "CudaError", "OutOfMemoryError", "Tensor", "allocator_mode", "empty", "full",
    "memory_allocated", "memory_reserved", "mse_loss", "no_grad", "randn", "runtime_path",
    "tensor", "zeros", "SGD",
]

_FLOAT = 4  # bytes per element (float32)

# cudaMemcpyKind
_H2D = 1
_D2H = 2

# cudaError_t values the library reacts to (driver_types.h).
_CUDA_SUCCESS = 0
_CUDA_ERROR_MEMORY_ALLOCATION = 2


class CudaError(RuntimeError):
    """A CUDA runtime call failed."""

    def __init__(self, call, code, name):
        super().__init__(f"{call} failed: {name} ({code})")
        self.call = call
        self.code = code


class OutOfMemoryError(CudaError):
    """Device memory is exhausted (torch.cuda.OutOfMemoryError)."""


# --------------------------------------------------------------------------
# Finding and binding the CUDA runtime


def _gpu_present():
    # The NVIDIA kernel driver publishes this once a GPU is bound to it.
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


def _wheel_cudart():
    """libcudart.so.13 of the nvidia-cuda-runtime wheel (nvidia/cu13/lib or
    nvidia/cuda_runtime/lib), without importing anything heavy."""
    for entry in sys.path:
        for pattern in ("nvidia/cu13/lib/libcudart.so.13", "nvidia/cuda_runtime/lib/libcudart.so.13"):
            hits = glob.glob(os.path.join(entry or ".", pattern))
            if hits:
                return hits[0]
    return None


def _simcuda_cudart():
    roots = []
    if os.environ.get("TORCHSEAL_BUILD_DIR"):
        roots.append(os.environ["TORCHSEAL_BUILD_DIR"])
    # examples/python/ -> the checkout's default build directory.
    roots.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build"))
    for root in roots:
        path = os.path.join(root, "simcuda", "libcudart.so.13")
        if os.path.exists(path):
            return os.path.normpath(path)
    return None


def _candidates():
    forced = os.environ.get("TOYTORCH_CUDART")
    if forced:
        return [forced]  # an explicit choice is never second-guessed
    if _gpu_present():
        cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
        found = ["libcudart.so.13", _wheel_cudart(), os.path.join(cuda_home, "lib64", "libcudart.so.13")]
    else:
        # simcuda first; then whatever the loader finds (LD_LIBRARY_PATH may
        # name a simcuda build elsewhere).
        found = [_simcuda_cudart(), "libcudart.so.13"]
    return [c for c in found if c]


def _load_runtime():
    errors = []
    for cand in _candidates():
        try:
            if os.sep in cand:
                driver = os.path.join(os.path.dirname(cand), "libcuda.so.1")
                if os.path.exists(driver):
                    # By soname: the runtime's dlopen("libcuda.so.1") then
                    # returns this one, not a system driver of another build.
                    ctypes.CDLL(driver, mode=ctypes.RTLD_GLOBAL)
            return cand, ctypes.CDLL(cand)
        except OSError as err:
            errors.append(f"{cand}: {err}")
    raise CudaError("loading libcudart.so.13", -1,
                    "no CUDA runtime found (set TOYTORCH_CUDART=/path/to/libcudart.so.13); tried: "
                    + ("; ".join(errors) or "nothing"))


class _Runtime:
    """The handful of runtime entry points the library uses, with prototypes.
    Symbols are looked up in the runtime's own handle (dlsym(handle, ...)),
    as ctypes-based CUDA bindings do: a preloaded tool cannot interpose these
    calls by symbol name and has to see them some other way."""

    def __init__(self):
        self.path, lib = _load_runtime()
        vp, sz, i = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int

        def bind(name, argtypes, restype=i):
            fn = getattr(lib, name)
            fn.argtypes = argtypes
            fn.restype = restype
            return fn

        self.malloc = bind("cudaMalloc", [ctypes.POINTER(vp), sz])
        self.free = bind("cudaFree", [vp])
        self.malloc_async = bind("cudaMallocAsync", [ctypes.POINTER(vp), sz, vp])
        self.free_async = bind("cudaFreeAsync", [vp, vp])
        self.memcpy = bind("cudaMemcpy", [vp, vp, sz, i])
        self.memset = bind("cudaMemset", [vp, i, sz])
        self.get_last_error = bind("cudaGetLastError", [])
        self.error_name = bind("cudaGetErrorName", [i], ctypes.c_char_p)

    def check(self, call, err):
        if err == _CUDA_SUCCESS:
            return
        name = (self.error_name(err) or b"?").decode("ascii", "replace")
        # Out-of-memory is not sticky, but the runtime also keeps it as the
        # "last error"; clear it so later checks do not see it again.
        self.get_last_error()
        if err == _CUDA_ERROR_MEMORY_ALLOCATION:
            raise OutOfMemoryError(call, err, name)
        raise CudaError(call, err, name)


_rt = None


def _runtime():
    global _rt
    if _rt is None:
        _rt = _Runtime()
    return _rt


def runtime_path():
    """The libcudart the library loaded (loads it if needed)."""
    return _runtime().path


# --------------------------------------------------------------------------
# Allocators


class _Block:
    __slots__ = ("ptr", "size", "segment", "unit")

    def __init__(self, ptr, size, segment=None, unit=0):
        self.ptr = ptr
        self.size = size
        self.segment = segment  # _SmallSegment for the small pool, else None
        self.unit = unit        # first 512 B unit inside that segment


class _AsyncAllocator:
    """backend:cudaMallocAsync: one stream-ordered allocation per tensor, on
    the legacy default stream, freed as soon as the tensor dies."""

    name = "async"

    def __init__(self, rt):
        self.rt = rt
        self.allocated = 0

    def malloc(self, nbytes):
        ptr = ctypes.c_void_p()
        self.rt.check("cudaMallocAsync", self.rt.malloc_async(ctypes.byref(ptr), nbytes, None))
        self.allocated += nbytes
        return _Block(ptr.value, nbytes)

    def free(self, block):
        self.allocated -= block.size
        self.rt.check("cudaFreeAsync", self.rt.free_async(block.ptr, None))

    def reserved(self):
        return self.allocated


class _SmallSegment:
    """A 2 MiB cudaMalloc segment cut into 512 B units. `used` has one byte
    per unit (0 free, 1 used), so a first fit is one bytearray.find()."""

    __slots__ = ("ptr", "used", "in_use")

    def __init__(self, ptr, units):
        self.ptr = ptr
        self.used = bytearray(units)
        self.in_use = 0


class _CachingAllocator:
    """PyTorch's default allocator, simplified.

    Requests are rounded up to 512 B. Up to 1 MiB they come from 2 MiB
    segments shared by many tensors (the small pool); larger ones get a block
    of their own, rounded up to 2 MiB (the large pool; PyTorch would also
    split big segments, which does not change when segments are created).
    Freed memory stays cached in its segment or block and is reused; new
    segments come from cudaMalloc only when nothing cached fits, so the
    allocation that overflows the cache is the one whose stack the detector
    records for the new segment. On cudaMalloc failure, unused cached memory
    is released (cudaFree) and the request retried once before raising."""

    name = "caching"
    ROUND = 512
    SMALL_MAX = 1 << 20
    SEGMENT = 2 << 20

    def __init__(self, rt):
        self.rt = rt
        self.small = []        # _SmallSegment
        self.large_free = []   # cached _Block, unused
        self.allocated = 0
        self.reserved_bytes = 0

    def malloc(self, nbytes):
        size = max(self.ROUND, -(-nbytes // self.ROUND) * self.ROUND)
        block = self._small(size) if size <= self.SMALL_MAX else self._large(size)
        self.allocated += block.size
        return block

    def free(self, block):
        self.allocated -= block.size
        seg = block.segment
        if seg is None:
            self.large_free.append(block)  # cached for the next large request
            return
        units = block.size // self.ROUND
        seg.used[block.unit:block.unit + units] = bytes(units)
        seg.in_use -= units

    def reserved(self):
        return self.reserved_bytes

    def _small(self, size):
        units = size // self.ROUND
        want = b"\x00" * units
        for seg in self.small:
            if len(seg.used) - seg.in_use < units:
                continue
            unit = seg.used.find(want)
            if unit >= 0:
                return self._take(seg, unit, units)
        seg = _SmallSegment(self._cuda_malloc(self.SEGMENT), self.SEGMENT // self.ROUND)
        self.small.append(seg)
        return self._take(seg, 0, units)

    def _take(self, seg, unit, units):
        seg.used[unit:unit + units] = b"\x01" * units
        seg.in_use += units
        return _Block(seg.ptr + unit * self.ROUND, units * self.ROUND, seg, unit)

    def _large(self, size):
        rounded = -(-size // self.SEGMENT) * self.SEGMENT
        fits = [b for b in self.large_free if b.size >= rounded]
        if fits:
            best = min(fits, key=lambda b: b.size)
            self.large_free.remove(best)
            return best
        return _Block(self._cuda_malloc(rounded), rounded)

    def _cuda_malloc(self, nbytes):
        for attempt in (0, 1):
            ptr = ctypes.c_void_p()
            err = self.rt.malloc(ctypes.byref(ptr), nbytes)
            if err == _CUDA_SUCCESS:
                self.reserved_bytes += nbytes
                return ptr.value
            if err != _CUDA_ERROR_MEMORY_ALLOCATION or attempt == 1 or not self.release_cached():
                self.rt.check("cudaMalloc", err)
        raise AssertionError("unreachable")

    def release_cached(self):
        """cudaFree every cached block and fully unused small segment
        (torch.cuda.empty_cache()). Returns whether anything was released."""
        released = False
        for block in self.large_free:
            self.rt.check("cudaFree", self.rt.free(block.ptr))
            self.reserved_bytes -= block.size
            released = True
        self.large_free = []
        keep = []
        for seg in self.small:
            if seg.in_use:
                keep.append(seg)
            else:
                self.rt.check("cudaFree", self.rt.free(seg.ptr))
                self.reserved_bytes -= self.SEGMENT
                released = True
        self.small = keep
        return released


def _choose_mode():
    forced = os.environ.get("TOYTORCH_ALLOC", "").strip().lower()
    if forced:
        if forced not in ("async", "caching"):
            raise ValueError(f"TOYTORCH_ALLOC={forced!r}: expected 'async' or 'caching'")
        return forced
    # Same switch as PyTorch's, so TORCHSEAL_TORCH=tensors selects async here too.
    for var in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        for item in os.environ.get(var, "").split(","):
            key, _, value = item.partition(":")
            if key.strip() == "backend":
                return "async" if value.strip() == "cudaMallocAsync" else "caching"
    return "caching"


_allocator = None


def _alloc():
    global _allocator
    if _allocator is None:
        rt = _runtime()
        _allocator = _AsyncAllocator(rt) if _choose_mode() == "async" else _CachingAllocator(rt)
    return _allocator


def allocator_mode():
    return _alloc().name


def memory_allocated():
    """Bytes held by live tensors (torch.cuda.memory_allocated)."""
    return _alloc().allocated


def memory_reserved():
    """Bytes obtained from CUDA (torch.cuda.memory_reserved)."""
    return _alloc().reserved()


class _Storage:
    """Owns one device block; several tensors may share it (detach())."""

    __slots__ = ("block", "allocator", "__weakref__")

    def __init__(self, nbytes):
        self.block = None  # __del__ runs even when malloc raises
        self.allocator = _alloc()
        self.block = self.allocator.malloc(nbytes)

    def __del__(self):
        # Runs at any time, interpreter shutdown included: use only what the
        # object holds, and never let a failure escape a finalizer.
        block, self.block = self.block, None
        if block is not None:
            try:
                self.allocator.free(block)
            except Exception:  # noqa: BLE001
                pass


# --------------------------------------------------------------------------
# Autograd state

_grad_enabled = True


@contextlib.contextmanager
def no_grad():
    global _grad_enabled
    previous, _grad_enabled = _grad_enabled, False
    try:
        yield
    finally:
        _grad_enabled = previous


# --------------------------------------------------------------------------
# Tensor


def _values(x, n):
    """Host values of a Tensor operand, or an iterator repeating a number."""
    if isinstance(x, Tensor):
        if x.numel != n and x.numel != 1:
            raise ValueError(f"shape mismatch: {x.numel} vs {n}")
        return x._host if x.numel == n else repeat(x._host[0], n)
    return repeat(float(x), n)


class Tensor:
    """A one-dimensional float32 device tensor."""

    __slots__ = ("_storage", "_host", "numel", "requires_grad", "grad", "_parents",
                 "_backward", "__weakref__")

    def __init__(self, host, requires_grad=False, parents=(), backward=None, storage=None):
        self.numel = len(host)
        if storage is None:
            # Allocate first, fill second: an OOM leaves no half-made tensor.
            storage = _Storage(self.numel * _FLOAT)
            rt = _runtime()
            addr, _ = host.buffer_info()
            rt.check("cudaMemcpy", rt.memcpy(storage.block.ptr, addr, self.numel * _FLOAT, _H2D))
        self._storage = storage
        self._host = host
        self.requires_grad = requires_grad
        self.grad = None
        # The graph: a result that needs grad keeps what produced it.
        self._parents = parents
        self._backward = backward

    # -- construction of results --

    @staticmethod
    def _result(host, parents, backward):
        needs = _grad_enabled and any(isinstance(p, Tensor) and p.requires_grad for p in parents)
        if needs:
            return Tensor(host, True, tuple(parents), backward)
        return Tensor(host)

    def _elementwise(self, other, fn, backward):
        n = self.numel if not isinstance(other, Tensor) else max(self.numel, other.numel)
        # Allocate the output before computing, as a kernel launch would.
        storage = _Storage(n * _FLOAT)
        host = array.array("f", map(fn, _values(self, n), _values(other, n)))
        rt = _runtime()
        rt.check("cudaMemcpy", rt.memcpy(storage.block.ptr, host.buffer_info()[0], n * _FLOAT, _H2D))
        parents = (self, other) if isinstance(other, Tensor) else (self,)
        needs = _grad_enabled and any(p.requires_grad for p in parents)
        if needs:
            return Tensor(host, True, parents, backward, storage)
        return Tensor(host, storage=storage)

    def __add__(self, other):
        return self._elementwise(other, operator.add, _grad_add)

    __radd__ = __add__

    def __sub__(self, other):
        return self._elementwise(other, operator.sub, _grad_sub)

    def __mul__(self, other):
        if isinstance(other, Tensor):
            return self._elementwise(other, operator.mul, _grad_mul)
        scale = float(other)
        return self._elementwise(scale, operator.mul, lambda res, g: (g * scale,))

    __rmul__ = __mul__

    def sum(self):
        return _reduce(self, math.fsum(self._host), _grad_sum)

    def mean(self):
        return _reduce(self, math.fsum(self._host) / self.numel, _grad_mean)

    def repeat(self, times):
        """The data `times` times over (a bigger batch)."""
        storage = _Storage(self.numel * times * _FLOAT)
        host = self._host * times
        rt = _runtime()
        rt.check("cudaMemcpy", rt.memcpy(storage.block.ptr, host.buffer_info()[0], len(host) * _FLOAT, _H2D))
        if _grad_enabled and self.requires_grad:
            return Tensor(host, True, (self,), _grad_repeat, storage)
        return Tensor(host, storage=storage)

    # -- in place (no allocation), for optimizers --

    def sub_(self, other):
        # In place, so tensors sharing the storage (detach()) see the update.
        self._host[:] = array.array("f", map(operator.sub, self._host, _values(other, self.numel)))
        rt = _runtime()
        rt.check("cudaMemcpy", rt.memcpy(self._storage.block.ptr, self._host.buffer_info()[0],
                                         self.numel * _FLOAT, _H2D))
        return self

    # -- leaving the device --

    def _download(self):
        out = array.array("f", bytes(self.numel * _FLOAT))
        rt = _runtime()
        rt.check("cudaMemcpy", rt.memcpy(out.buffer_info()[0], self._storage.block.ptr,
                                         self.numel * _FLOAT, _D2H))
        return out

    def item(self):
        if self.numel != 1:
            raise ValueError(f"item() needs a one-element tensor, not {self.numel}")
        return float(self._download()[0])

    def tolist(self):
        return list(self._download())

    def detach(self):
        """Same device memory, no graph (like torch.Tensor.detach)."""
        return Tensor(self._host, storage=self._storage)

    # -- autograd --

    def backward(self):
        if not self.requires_grad:
            raise RuntimeError("backward() on a tensor that does not require grad")
        if self.numel != 1:
            raise RuntimeError("backward() needs a scalar (one-element) tensor")
        order, seen, stack = [], set(), [(self, False)]
        while stack:  # iterative post-order: deep graphs must not hit the recursion limit
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            for p in node._parents:
                if isinstance(p, Tensor) and p.requires_grad and id(p) not in seen:
                    stack.append((p, False))
        with no_grad():
            grads = {id(self): full(1, 1.0)}
            for node in reversed(order):
                g = grads.pop(id(node), None)
                if g is None:
                    continue
                if not node._parents:  # a leaf: accumulate, as PyTorch does
                    node.grad = g if node.grad is None else node.grad + g
                    continue
                for parent, pg in zip(node._parents, node._backward(node, g)):
                    if pg is None or not parent.requires_grad:
                        continue
                    prev = grads.get(id(parent))
                    grads[id(parent)] = pg if prev is None else prev + pg

    def __repr__(self):
        head = ", ".join(f"{v:.4g}" for v in self._host[:4])
        more = ", ..." if self.numel > 4 else ""
        return f"tensor([{head}{more}], numel={self.numel}{', requires_grad=True' if self.requires_grad else ''})"

    def __len__(self):
        return self.numel


def _reduce(t, value, backward):
    return Tensor._result(array.array("f", [value]), (t,), backward)


# Backward functions: (result, grad of result) -> grads of the parents.

def _grad_add(res, g):
    return tuple(_reduce_to(p, g) for p in res._parents)


def _grad_sub(res, g):
    a, b = (res._parents + (None,))[:2]
    return (_reduce_to(a, g), _reduce_to(b, g * -1.0) if b is not None else None)


def _grad_mul(res, g):
    a, b = res._parents
    return (_reduce_to(a, g * b), _reduce_to(b, g * a))


def _grad_sum(res, g):
    (a,) = res._parents
    return (full(a.numel, g._host[0]),)


def _grad_mean(res, g):
    (a,) = res._parents
    return (full(a.numel, g._host[0] / a.numel),)


def _grad_repeat(res, g):
    (a,) = res._parents
    n = a.numel
    acc = array.array("f", bytes(n * _FLOAT))
    for start in range(0, g.numel, n):
        acc = array.array("f", map(operator.add, acc, g._host[start:start + n]))
    return (Tensor(acc),)


def _grad_mse(res, g):
    pred, target = res._parents
    scale = 2.0 * g._host[0] / pred.numel
    diff = array.array("f", map(operator.sub, pred._host, target._host))
    gp = Tensor(array.array("f", map(operator.mul, diff, repeat(scale, pred.numel))))
    return (gp, gp * -1.0 if target.requires_grad else None)


def _reduce_to(p, g):
    """Gradient for operand `p` (a broadcast one-element tensor sums it up)."""
    if not isinstance(p, Tensor):
        return None
    if p.numel == g.numel:
        return g
    return full(1, math.fsum(g._host))


# --------------------------------------------------------------------------
# Factories and functions


def tensor(values, requires_grad=False):
    return Tensor(array.array("f", values), requires_grad)


def full(n, value, requires_grad=False):
    return Tensor(array.array("f", [value]) * n, requires_grad)


def zeros(n, requires_grad=False):
    # cudaMemset, not a copy: what torch.zeros does on the device.
    storage = _Storage(n * _FLOAT)
    rt = _runtime()
    rt.check("cudaMemset", rt.memset(storage.block.ptr, 0, n * _FLOAT))
    return Tensor(array.array("f", bytes(n * _FLOAT)), requires_grad, storage=storage)


def empty(n):
    """Uninitialized device memory (zero on the host side)."""
    return Tensor(array.array("f", bytes(n * _FLOAT)), storage=_Storage(n * _FLOAT))


def randn(n, seed=0, requires_grad=False):
    rng = random.Random(seed)
    return Tensor(array.array("f", (rng.gauss(0.0, 1.0) for _ in range(n))), requires_grad)


def mse_loss(pred, target):
    """Mean squared error, one fused op (like torch.nn.functional.mse_loss):
    the result's graph holds `pred` and `target`."""
    if pred.numel != target.numel:
        raise ValueError(f"shape mismatch: {pred.numel} vs {target.numel}")
    diff = array.array("f", map(operator.sub, pred._host, target._host))
    value = math.fsum(map(operator.mul, diff, diff)) / pred.numel
    return Tensor._result(array.array("f", [value]), (pred, target), _grad_mse)


class SGD:
    """Plain SGD over leaf tensors; updates in place (no allocation)."""

    def __init__(self, params, lr):
        self.params = list(params)
        self.lr = lr

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def step(self):
        with no_grad():
            for p in self.params:
                if p.grad is not None:
                    p.sub_(p.grad * self.lr)
