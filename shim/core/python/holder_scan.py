# The holder scan: which Python objects keep each live GPU block alive.
#
# The shim runs this file (embedded in libtorchseal.so at build time, so it
# needs no sys.path entry) with PyRun_String in a private namespace, and calls
# scan() only at a safe point: the GIL is held and no intercepted CUDA call is
# on the thread's stack. It never imports torch (without torch loaded there is
# no tensor to find), never calls a CUDA operation (it reads metadata:
# is_cuda, data_ptr, nbytes, dtype, shape) and stops at its time budget.
#
# A breadth-first search from the roots (every thread's frame locals,
# exception tracebacks, module globals and the classes they name) over
# containers, object attributes, nn.Module parameters/buffers/children,
# gradients and the autograd graph (grad_fn, next_functions, _saved_*) finds
# the shortest referrer chain to each CUDA storage. Storages whose chains
# differ only in container indices are one holder: `[3]` becomes `[0..29]`.
#
# scan() returns bytes, one record per line, fields separated by \x1f:
#   G <group> <step>...        a holder's chain, root first
#   S <data_ptr hex> <nbytes> <group>   one storage and its holder
#   M <key> <value>            counters (visited, ms, partial)

import gc
import sys
import time
import warnings

_SEP = "\x1f"
_KEY = object()  # label marker: a dict key, formatted by _key_text
_MAX_CHAIN = 14  # steps shown; longer chains keep both ends
# Library modules (the standard library, site-packages) are walked last and
# only this many steps deep: torch's own registries are tens of thousands of
# tuples and dicts that never hold a tensor, while a library cache that does
# (module dict -> cache -> entry -> tensor) is shallow. Tensors and autograd
# nodes are always followed.
_LIBRARY_DEPTH = 3
_UNBOUNDED = 1 << 30


def _clean(text):
    return str(text).replace(_SEP, " ").replace("\n", " ")


def _basename(path):
    path = str(path or "?")
    return path[path.rfind("/") + 1:]


def _tensor_text(t):
    try:
        shape = tuple(t.shape)
        dtype = str(t.dtype).replace("torch.", "")
    except Exception:  # noqa: BLE001 - a subclass with odd metadata
        return type(t).__name__
    return "%s %s %s" % (type(t).__name__, dtype, shape)


def _key_text(k, tensor_type):
    if isinstance(k, str):
        return "[%r]" % (k[:40],)
    if isinstance(k, bool) or k is None:
        return "[%r]" % (k,)
    if isinstance(k, int):
        return "[%d]" % k
    if tensor_type is not None and isinstance(k, tensor_type):
        return "[<%s>]" % _tensor_text(k)
    return "[<%s>]" % type(k).__name__


def _frame_text(frame):
    code = frame.f_code
    name = getattr(code, "co_qualname", code.co_name)
    return name, "%s:%d" % (_basename(code.co_filename), frame.f_lineno or 0)


def _user_module(mod, prefixes):
    f = getattr(mod, "__file__", None)
    return bool(f) and not any(str(f).startswith(p) for p in prefixes)


# Kinds of objects, decided once per type; from _OBJ on, generic objects.
_SKIP, _TENSOR, _NODE, _DICT, _SEQ, _SET, _NNMOD, _OBJ, _REFS, _FRAME, _TB, _EXC = range(12)
_ATOMIC = (str, bytes, bytearray, int, float, complex, bool, type(None), type, type(sys),
           type(len), type(_clean), type(_clean.__code__), memoryview, range, slice,
           type(Ellipsis), property, staticmethod, classmethod)


class _Search:
    def __init__(self, torch, deadline):
        self.torch = torch
        self.tensor = torch.Tensor
        nn = getattr(torch, "nn", None)
        self.nn_module = getattr(nn, "Module", None) if nn else None
        self.deadline = deadline
        self.kinds = {}
        self.skip = set()  # types of kind _SKIP: tested inline before add()
        self.saved_names = {}
        self.objs = []      # everything visited, kept alive so ids stay unique
        self.parent = []    # index of the referrer, -1 for a root
        self.label = []     # the step that reached the object
        self.depth = []     # steps left below it (see _LIBRARY_DEPTH)
        self.root_depth = _UNBOUNDED
        self.seen = set()
        self.queue = []
        self.head = 0
        self.storages = {}  # data_ptr -> (nbytes, index of the tensor)
        self.partial = False
        self.snapshots = []  # frame-locals dicts built by this scan (3.10-3.12)

    def kind(self, t):
        k = self.kinds.get(t)
        if k is not None:
            return k
        if issubclass(t, _ATOMIC):
            k = _SKIP
        elif issubclass(t, self.tensor):
            k = _TENSOR
        elif hasattr(t, "next_functions") and hasattr(t, "register_hook"):
            k = _NODE
        elif issubclass(t, dict):
            k = _DICT
        elif issubclass(t, (list, tuple)) or t.__name__ == "deque":
            k = _SEQ
        elif issubclass(t, (set, frozenset)):
            k = _SET
        elif self.nn_module is not None and issubclass(t, self.nn_module):
            k = _NNMOD
        elif t is type(sys._getframe()):
            k = _FRAME
        elif t.__name__ == "traceback" and hasattr(t, "tb_frame"):
            k = _TB
        elif issubclass(t, BaseException):
            k = _EXC
        elif t.__module__ == "builtins" and t.__name__ in (
                "function", "builtin_function_or_method", "method", "code", "cell",
                "getset_descriptor", "member_descriptor", "wrapper_descriptor",
                "method_descriptor", "weakref", "weakproxy", "weakcallableproxy",
                "generator", "coroutine", "async_generator", "mappingproxy"):
            k = _SKIP
        elif hasattr(t, "__dict__") and "__dict__" in dir(t):
            k = _OBJ
        else:
            k = _REFS
        self.kinds[t] = k
        if k == _SKIP:
            self.skip.add(t)
        return k

    def add(self, obj, parent, label):
        # label: a str, or a (format, args...) tuple formatted only if the
        # object ends up on a reported chain (most never do).
        i = id(obj)
        if i in self.seen:
            return
        t = type(obj)
        k = self.kinds.get(t)
        if k is None:
            k = self.kind(t)
        if k == _SKIP:
            return
        d = self.depth[parent] - 1 if parent >= 0 else self.root_depth
        if d < _LIBRARY_DEPTH and k != _TENSOR and k != _NODE and (d < 0 or k >= _OBJ):
            # Below a library global: only containers, tensors and autograd
            # nodes (not the op, schema and registry objects libraries keep).
            return
        self.seen.add(i)
        self.objs.append(obj)
        self.parent.append(parent)
        self.label.append(label)
        self.depth.append(d)
        self.queue.append(len(self.objs) - 1)

    def add_frame_locals(self, frame, parent, where):
        name, pos = _frame_text(frame)
        try:
            loc = frame.f_locals
        except Exception:  # noqa: BLE001
            return
        if type(loc) is dict and frame.f_code.co_flags & 1:  # CO_OPTIMIZED: a snapshot
            self.snapshots.append(loc)
        try:
            items = list(loc.items())
        except Exception:  # noqa: BLE001
            return
        for var, val in items:
            self.add(val, parent, ("%s() local '%s' (%s) at %s%s", name, var,
                                   type(val).__name__, pos, where))

    def roots(self, own_globals):
        # Frame locals of every thread, innermost frame first.
        for frame in list(sys._current_frames().values()):
            while frame is not None:
                # Module and class bodies (not CO_OPTIMIZED): their names are
                # globals and class attributes, reached below with those names.
                if frame.f_globals is not own_globals and frame.f_code.co_flags & 1:
                    self.add_frame_locals(frame, -1, "")
                frame = frame.f_back
        # Exceptions being handled, or left by the last uncaught one.
        excs = []
        cur = getattr(sys, "_current_exceptions", None)
        if cur is not None:
            try:
                for e in cur().values():
                    excs.append(e[1] if isinstance(e, tuple) else e)
            except Exception:  # noqa: BLE001
                pass
        excs.append(sys.exc_info()[1])
        excs.append(getattr(sys, "last_value", None))
        excs.append(getattr(sys, "last_exc", None))
        for e in excs:
            if e is not None:
                self.add(e, -1, "exception %s" % type(e).__name__)
        tb = getattr(sys, "last_traceback", None)
        if tb is not None:
            self.add(tb, -1, "sys.last_traceback")
        # The program's own modules, then (see scan) the libraries'.
        prefixes = tuple({p for p in (sys.prefix, sys.base_prefix, sys.exec_prefix) if p})
        mods = [m for m in list(sys.modules.values()) if m is not None]
        mods.sort(key=lambda m: m.__name__ != "__main__")
        user = [m for m in mods if m.__name__ == "__main__" or _user_module(m, prefixes)]
        self.module_roots(user, own_globals)
        return [m for m in mods if not (m.__name__ == "__main__" or _user_module(m, prefixes))]

    def module_roots(self, mods, own_globals, user=True):
        for mod in mods:
            try:
                d = vars(mod)
            except TypeError:
                continue
            if d is own_globals:
                continue
            if mod.__name__ == "__main__":
                # runpy drops __main__.__file__ once the script returns (exit scan).
                where = _basename(getattr(mod, "__file__", None) or
                                  (sys.argv[0] if sys.argv and sys.argv[0] else "__main__"))
            else:
                where = mod.__name__
            skip = self.skip
            for var, val in list(d.items()):
                if type(val) in skip or var.startswith("__"):  # __builtins__, __spec__...
                    continue
                if isinstance(val, type):
                    # Class attributes of the classes the program defines.
                    if user and getattr(val, "__module__", None) == mod.__name__:
                        self.add_class(val, where)
                    continue
                self.add(val, -1, ("global '%s' (%s) in %s", var, type(val).__name__, where))

    def add_class(self, cls, where):
        try:
            attrs = list(vars(cls).items())
        except TypeError:
            return
        for var, val in attrs:
            if not var.startswith("__"):
                self.add(val, -1, ("class attribute %s.%s.%s (%s)", where, cls.__qualname__, var,
                                   type(val).__name__))

    def saved_attrs(self, t):
        names = self.saved_names.get(t)
        if names is None:
            names = [n for n in dir(t) if n.startswith("_saved_")]
            self.saved_names[t] = names
        return names

    def expand(self, i):
        o = self.objs[i]
        k = self.kinds[type(o)]
        add = self.add
        if k == _TENSOR:
            try:
                cuda = o.is_cuda
            except Exception:  # noqa: BLE001
                cuda = False
            if cuda:
                try:
                    s = o.untyped_storage()
                    ptr, nbytes = s.data_ptr(), s.nbytes()
                except Exception:  # noqa: BLE001 - sparse, nested, fake tensors
                    ptr, nbytes = 0, 0
                if ptr and ptr not in self.storages:
                    self.storages[ptr] = (nbytes, i)
            try:
                g = o.grad if o.is_leaf else None
            except Exception:  # noqa: BLE001
                g = None
            if g is not None:
                add(g, i, ".grad")
            try:
                fn = o.grad_fn
            except Exception:  # noqa: BLE001
                fn = None
            if fn is not None:
                add(fn, i, (".grad_fn (%s)", type(fn).__name__))
        elif k == _NODE:
            for n in self.saved_attrs(type(o)):
                try:
                    v = getattr(o, n)
                except Exception:  # noqa: BLE001 - released after backward
                    continue
                if isinstance(v, (tuple, list)):
                    for j, x in enumerate(v):
                        add(x, i, (".%s[%d]", n, j))
                else:
                    add(v, i, "." + n)
            var = getattr(o, "variable", None)  # AccumulateGrad: the leaf
            if var is not None:
                add(var, i, ".variable")
            try:
                nexts = o.next_functions
            except Exception:  # noqa: BLE001
                nexts = ()
            for j, pair in enumerate(nexts):
                f = pair[0]
                if f is not None:
                    add(f, i, (".next_functions[%d] (%s)", j, type(f).__name__))
        elif k == _DICT:
            tensor = self.tensor
            skip = self.skip
            for key, val in list(o.items()):
                # Keys: only tensors (an optimizer's state is keyed by its
                # parameters); other keys are ops, types, names.
                if isinstance(key, tensor):
                    add(key, i, ("key <%s>", type(key).__name__))
                if type(val) not in skip:
                    add(val, i, (_KEY, key))
        elif k == _SEQ:
            skip = self.skip
            for j, val in enumerate(list(o)):
                if type(val) not in skip:
                    add(val, i, ("[%d]", j))
        elif k == _SET:
            skip = self.skip
            for val in list(o):
                if type(val) not in skip:
                    add(val, i, ("{<%s>}", type(val).__name__))
        elif k == _NNMOD:
            d = getattr(o, "__dict__", {})
            for part in ("_parameters", "_buffers", "_modules"):
                for name, val in list((d.get(part) or {}).items()):
                    if val is not None:
                        add(val, i, (".%s (%s)", name, type(val).__name__))
            for name, val in list(d.items()):
                if name not in ("_parameters", "_buffers", "_modules"):
                    add(val, i, (".%s (%s)", name, type(val).__name__))
        elif k == _OBJ:
            try:
                d = vars(o)
            except TypeError:
                d = {}
            for name, val in list(d.items()):
                add(val, i, (".%s (%s)", name, type(val).__name__))
        elif k == _FRAME:
            self.add_frame_locals(o, i, " (in a traceback)")
        elif k == _TB:
            add(o.tb_frame, i, "frame")
            if o.tb_next is not None:
                add(o.tb_next, i, ".tb_next")
        elif k == _EXC:
            for name in ("__traceback__", "__context__", "__cause__"):
                v = getattr(o, name, None)
                if v is not None:
                    add(v, i, "." + name)
            for j, v in enumerate(o.args):
                add(v, i, (".args[%d]", j))
        elif k == _REFS:
            for v in gc.get_referents(o):
                add(v, i, ("<%s>", type(v).__name__))

    def run(self):
        q = self.queue
        while self.head < len(q):
            if (self.head & 1023) == 0 and time.monotonic() > self.deadline:
                self.partial = True
                break
            i = q[self.head]
            self.head += 1
            try:
                self.expand(i)
            except Exception:  # noqa: BLE001 - one odd object never ends the scan
                pass

    def text(self, label):
        if type(label) is str:
            return label
        if label[0] is _KEY:
            return _key_text(label[1], self.tensor)
        return label[0] % label[1:]

    def chain(self, i):
        steps = [_tensor_text(self.objs[i])]
        while i >= 0:
            steps.append(self.text(self.label[i]))
            i = self.parent[i]
        steps.reverse()
        return steps


def _index_of(step):
    # A container index: "[12]", or ".12 (Linear)" (an nn.ModuleList child)
    # -> (12, text before it, text after it); else None.
    if len(step) > 2 and step[0] == "[" and step[-1] == "]" and step[1:-1].isdigit():
        return int(step[1:-1]), "[", "]"
    if step[:1] == ".":
        name, sep, rest = step[1:].partition(" ")
        if name.isdigit():
            return int(name), ".", sep + rest
    return None


def _marked(steps):
    # Each step with its index mark (see _index_of). A run of the same
    # attribute step is one step with a count, which groups like an index:
    # a loss summed with its graph reaches step k's tensors through k
    # `.next_functions[0] (AddBackward0)` steps, and all k are one holder.
    out, marks = [], []
    for s in steps:
        if out and s[:1] == "." and s == out[-1] and (marks[-1] is None or
                                                       marks[-1][1] == s + " (x"):
            marks[-1] = ((marks[-1][0] if marks[-1] else 1) + 1, s + " (x", ")")
            continue
        out.append(s)
        marks.append(_index_of(s))
    return out, marks


def _group(search):
    groups = {}   # shape -> [group id, steps, {position: (lo, hi, before, after)}]
    out = []
    for ptr, (nbytes, i) in search.storages.items():
        steps, marks = _marked(search.chain(i))
        shape = tuple(s if m is None else m[1] + "#" + m[2] for s, m in zip(steps, marks))
        g = groups.get(shape)
        if g is None:
            g = groups[shape] = [len(groups), steps, {}]
        for pos, m in enumerate(marks):
            if m is not None:
                lo, hi, _, _ = g[2].get(pos, (m[0], m[0], "", ""))
                g[2][pos] = (min(lo, m[0]), max(hi, m[0]), m[1], m[2])
        out.append("S%s%x%s%d%s%d" % (_SEP, ptr, _SEP, nbytes, _SEP, g[0]))
    for gid, steps, ranges in groups.values():
        shown = list(steps)
        for pos, (lo, hi, before, after) in ranges.items():
            shown[pos] = before + ("%d" % lo if lo == hi else "%d..%d" % (lo, hi)) + after
        if len(shown) > _MAX_CHAIN:
            keep = _MAX_CHAIN // 2
            shown = shown[:keep] + ["... %d more" % (len(shown) - 2 * keep)] + shown[-keep:]
        out.append(_SEP.join(["G", str(gid)] + [_clean(s) for s in shown]))
    return out


def scan(budget_seconds, libraries=True):
    t0 = time.monotonic()
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "Tensor"):
        return ("M%storch%s0" % (_SEP, _SEP)).encode()
    search = _Search(torch, t0 + budget_seconds)
    # One uninterrupted pass: no other Python thread mutates the containers
    # being walked, and no object dies mid-walk.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(max(interval, 10.0))
    try:
        with warnings.catch_warnings():
            # Reading attributes of deprecated objects must not print.
            warnings.simplefilter("ignore")
            library_modules = search.roots(globals())
            search.run()
            if libraries:
                # Step scans leave them out: what grows across steps is held
                # by the program, and the libraries' modules are most of a
                # scan's time, which would space step scans far apart.
                search.root_depth = _LIBRARY_DEPTH
                search.module_roots(library_modules, globals(), user=False)
                search.run()
            lines = _group(search)
    finally:
        sys.setswitchinterval(interval)
        # A thread that asked for the GIL during the scan is still in a wait
        # timed with the raised interval, and a thread only gives the GIL up
        # on request: without this it could wait until finalization has
        # begun, and a thread that takes the GIL then is ended by CPython in
        # the middle of its work (PyTorch's autograd thread, dropping a graph
        # task, aborts the process: "terminate called without an active
        # exception"). Each release wakes one waiter, which then waits with
        # the normal interval.
        for _ in range(3):
            time.sleep(0.0005)
        # A function frame's f_locals (3.10-3.12) is a snapshot dict the
        # frame keeps: left filled, it would keep this step's tensors alive
        # past their last use in the program.
        for d in search.snapshots:
            d.clear()
        search.snapshots = []
    lines.append("M%svisited%s%d" % (_SEP, _SEP, len(search.objs)))
    lines.append("M%sms%s%.3f" % (_SEP, _SEP, (time.monotonic() - t0) * 1e3))
    lines.append("M%spartial%s%d" % (_SEP, _SEP, 1 if search.partial else 0))
    del search
    return "\n".join(lines).encode("utf-8", "replace")
