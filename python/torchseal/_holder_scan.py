# The holder scan: which Python objects keep each live GPU block alive.
#
# The shim runs this file (embedded in libtorchseal.so at build time by
# shim/runtime/holder_scan/embed_source.py, so it needs no installed package and no
# sys.path entry) with PyRun_String in a private namespace, and calls
# scan() only at a safe point: the GIL is held and no intercepted CUDA call is
# on the thread's stack. It never imports torch (without torch loaded there is
# no tensor to find), never calls a CUDA operation (it reads metadata:
# is_cuda, data_ptr, nbytes, dtype, shape) and stops at its time budget.
#
# It runs none of the program's Python code: every read goes through the C
# implementation of the base type (dict.items, list.copy, the type's own
# __dict__ descriptor, TensorBase's getters with __torch_function__ off), never
# through an attribute lookup a class can override. A lazy module's
# __getattr__, a lazy mapping's items() (transformers imports its whole model
# zoo from there), a proxy's __class__ or a metaclass's __getattribute__ are
# never called, so no object can raise into the scan or make it slow.
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
#   S <data_ptr hex> <nbytes> <group> <role> <module>  one storage, its holder,
#                              its role (_ROLE_NAMES' index) and the top-level
#                              module it belongs to (a D id, -1: none)
#   D <module> <name>          a top-level nn.Module, named by its type
#   A <allocated> <reserved>   PyTorch's caching allocator, all devices (bytes)
#   N <nodes> <bytes> <data_ptr hex> <step>...  a tensor's autograd graph: the
#                              nodes (and CUDA bytes) reached first through it,
#                              the tensor's own storage, its chain
#   E <type> <message> <where> the scan failed: the exception and its place
#   M <key> <value>            counters (visited, skipped, ms, partial, roles_ms:
#                              the time telling roles took)

import collections
import gc
import sys
import time
import types
import warnings

_SEP = "\x1f"
# Memory by role (docs/roles.md). A storage reached by several tensors takes
# the first role of this list that one of them has.
_PARAM, _BUFFER, _GRAD, _OPTIM, _SAVED, _USER = range(6)
_ROLE_NAMES = ("parameters", "buffers", "gradients", "optimizer_state", "saved_activations",
               "user_held")
_ROLE_RANK = (0, 1, 2, 3, 5, 4)  # lower wins: a tensor the program holds is its own
_KEY = object()  # label marker: a dict key, formatted by _key_text
_MAX_CHAIN = 14  # steps shown; longer chains keep both ends
# Library modules (the standard library, site-packages) are walked last and
# only this many steps deep: torch's own registries are tens of thousands of
# tuples and dicts that never hold a tensor, while a library cache that does
# (module dict -> cache -> entry -> tensor) is shallow. Tensors and autograd
# nodes are always followed.
_LIBRARY_DEPTH = 3
_UNBOUNDED = 1 << 30
# Graph owners reported (N records): the largest, and only real graphs.
_MAX_GRAPHS = 32
_MIN_GRAPH_NODES = 4

# The C implementations every read goes through (see the header).
_type_mro = type.__dict__["__mro__"].__get__
_type_dict = type.__dict__["__dict__"].__get__
_type_name = type.__dict__["__name__"].__get__
_type_qualname = type.__dict__["__qualname__"].__get__
_module_dict = types.ModuleType.__dict__["__dict__"].__get__
_dict_items = dict.items
_list_copy = list.copy
_GETSET = types.GetSetDescriptorType
_exc_get = {n: BaseException.__dict__[n].__get__
            for n in ("__traceback__", "__context__", "__cause__", "args")}


def _clean(text):
    return str(text).replace(_SEP, " ").replace("\n", " ")


def _basename(path):
    path = path if type(path) is str else "?"
    return path[path.rfind("/") + 1:]


def _name(t):
    try:
        return _type_name(t)
    except Exception:  # noqa: BLE001 - not a type
        return "?"


def _lookup(t, name):
    # The class attribute `name` of type t, read from the type dicts of its
    # MRO (what type.__getattribute__ does, without a metaclass's override).
    for klass in _type_mro(t):
        d = _type_dict(klass)
        if name in d:
            return d[name]
    return None


def _instance_dict(o, t):
    # o.__dict__ through the type's own descriptor (never a property or a
    # __getattribute__ of the class); None if it has none.
    desc = _lookup(t, "__dict__")
    if type(desc) is not _GETSET:
        return None
    d = desc.__get__(o, t)
    return d if type(d) is dict else None


def _tensor_text(search, t):
    try:
        shape = tuple(search.t_shape(t))
        dtype = str(search.t_dtype(t)).replace("torch.", "")
    except Exception:  # noqa: BLE001 - a subclass with odd metadata
        return _name(type(t))
    return "%s %s %s" % (_name(type(t)), dtype, shape)


def _key_text(search, k):
    t = type(k)
    if issubclass(t, str):
        return "[%r]" % (str.__str__(k)[:40],)
    if t is bool or k is None:
        return "[%r]" % (k,)
    if issubclass(t, int):
        return "[%s]" % int.__repr__(k)
    if search.tensor in _type_mro(t):
        return "[<%s>]" % _tensor_text(search, k)
    return "[<%s>]" % _name(t)


def _frame_text(frame):
    code = frame.f_code
    name = getattr(code, "co_qualname", code.co_name)
    return name, "%s:%d" % (_basename(code.co_filename), frame.f_lineno or 0)


def _module_file(d):
    f = d.get("__file__")
    return f if type(f) is str else None


# Kinds of objects, decided once per type; from _OBJ on, generic objects.
_SKIP, _TENSOR, _NODE, _DICT, _SEQ, _SET, _NNMOD, _OBJ, _REFS, _FRAME, _TB, _EXC = range(12)
_ATOMIC = (str, bytes, bytearray, int, float, complex, bool, type(None), type, types.ModuleType,
           memoryview, range, slice, type(Ellipsis), property, staticmethod, classmethod)
# Never followed: code and callables (what they reach is reached as globals),
# descriptors, weak references and proxies (they hold nothing), suspended
# generators (their frames are not the program's roots).
_SKIPPED = frozenset([
    types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.CodeType,
    types.CellType, types.GetSetDescriptorType, types.MemberDescriptorType,
    types.WrapperDescriptorType, types.MethodDescriptorType, types.MethodWrapperType,
    types.ClassMethodDescriptorType, types.MappingProxyType, types.GeneratorType,
    types.CoroutineType, types.AsyncGeneratorType, type(sys.getrefcount),
    __import__("weakref").ref, __import__("weakref").ProxyType,
    __import__("weakref").CallableProxyType])
_FRAME_TYPE = types.FrameType
_TB_TYPE = types.TracebackType


class _ProgramCode(Exception):
    """A saved-tensor getter was about to run the program's code."""


def _refuse_program_code(frame, event, arg):
    # Profile function while the saved-tensor getters run: a tensor saved
    # under torch.autograd.graph.saved_tensors_hooks is unpacked by the
    # program's Python hook (save_on_cpu copies it back to the GPU,
    # non-reentrant checkpoint recomputes the forward, on one rank of many):
    # its first call is refused, and the getter fails instead.
    if event == "call" and frame.f_code.co_filename != _OWN_FILE:
        raise _ProgramCode()


class _Search:
    def __init__(self, torch, deadline):
        self.torch = torch
        self.tensor = torch.Tensor
        base = getattr(torch._C, "TensorBase", None) or getattr(torch._C, "_TensorBase")
        tb = _type_dict(base)
        self.t_is_cuda = tb["is_cuda"].__get__
        self.t_is_leaf = tb["is_leaf"].__get__
        self.t_grad = tb["grad"].__get__
        self.t_grad_fn = tb["grad_fn"].__get__
        self.t_shape = tb["shape"].__get__
        self.t_dtype = tb["dtype"].__get__
        self.t_storage = tb["untyped_storage"]
        sb = _type_dict(torch._C.StorageBase)
        self.s_data_ptr = sb["data_ptr"]
        self.s_nbytes = sb["nbytes"]
        nn = sys.modules.get("torch.nn.modules.module")
        self.nn_module = _module_dict(nn).get("Module") if nn is not None else None
        param = sys.modules.get("torch.nn.parameter")
        self.parameter = _module_dict(param).get("Parameter") if param is not None else None
        optim = sys.modules.get("torch.optim.optimizer")
        self.optimizer = _module_dict(optim).get("Optimizer") if optim is not None else None
        self.deadline = deadline
        self.kinds = {}
        self.skip = set()  # types of kind _SKIP: tested inline before add()
        self.saved_names = {}
        self.objs = []      # everything visited, kept alive so ids stay unique
        self.parent = []    # index of the referrer, -1 for a root
        self.label = []     # the step that reached the object
        self.depth = []     # steps left below it (see _LIBRARY_DEPTH)
        self.root_depth = _UNBOUNDED
        self.seen = {}      # id -> index in objs
        # Roles (docs/roles.md): decided after the walk, from what reached
        # each tensor, whichever reached it first.
        self.cuda = []      # (tensor index, storage data_ptr) of every CUDA tensor
        self.direct = set()  # ids some referrer other than an autograd node reaches
        self.from_node = False  # the object being expanded is an autograd node
        self.marks = {}     # id -> (role, module id): a module's parameters and buffers
        self.grad_of = {}   # id(grad) -> id(its leaf)
        self.state_of = {}  # id(optimizer state tensor) -> id(its parameter)
        self.top_module = {}  # module index -> module id (index into module_names)
        self.module_names = []
        self.module_ids = {}
        self.keep = []
        self.queue = []
        self.head = 0
        self.storages = {}  # data_ptr -> (nbytes, index of the tensor)
        self.graph_of = {}  # autograd node index -> index of the tensor owning its graph
        self.graph_nodes = {}  # owner tensor index -> nodes reached first through it
        self.partial = False
        self.skipped = 0    # objects that raised when read, and were left out
        self.odd_modules = []  # (name, object) of sys.modules entries that are no module
        self.snapshots = []  # frame-locals dicts built by this scan (3.10-3.12)

    def kind(self, t):
        k = self.kinds.get(t)
        if k is not None:
            return k
        mro = _type_mro(t)
        if t in _SKIPPED or issubclass(t, _ATOMIC):
            k = _SKIP
        elif self.tensor in mro:
            k = _TENSOR
        elif _lookup(t, "next_functions") is not None and _lookup(t, "register_hook") is not None:
            k = _NODE
        elif issubclass(t, dict):
            k = _DICT
        elif issubclass(t, (list, tuple, collections.deque)):
            k = _SEQ
        elif issubclass(t, (set, frozenset)):
            k = _SET
        elif self.nn_module is not None and self.nn_module in mro:
            k = _NNMOD
        elif t is _FRAME_TYPE:
            k = _FRAME
        elif t is _TB_TYPE:
            k = _TB
        elif issubclass(t, BaseException):
            k = _EXC
        elif type(_lookup(t, "__dict__")) is _GETSET:
            k = _OBJ
        else:
            k = _REFS
        self.kinds[t] = k
        if k == _SKIP:
            self.skip.add(t)
        return k

    def add(self, obj, parent, label):
        # label: a str, or a (format, args...) tuple formatted only if the
        # object ends up on a reported chain (most never do). Types among the
        # args are shown by name.
        i = id(obj)
        j = self.seen.get(i)
        if j is not None:
            if not self.from_node:
                self.direct.add(i)
            return j
        t = type(obj)
        k = self.kinds.get(t)
        if k is None:
            try:
                k = self.kind(t)
            except Exception:  # noqa: BLE001 - a type that cannot be read
                self.kinds[t] = k = _SKIP
                self.skipped += 1
        if k == _SKIP:
            return None
        d = self.depth[parent] - 1 if parent >= 0 else self.root_depth
        if d < _LIBRARY_DEPTH and k != _TENSOR and k != _NODE and (d < 0 or k >= _OBJ):
            # Below a library global: only containers, tensors and autograd
            # nodes (not the op, schema and registry objects libraries keep).
            return None
        if parent < 0 or not self.from_node:
            self.direct.add(i)
        self.seen[i] = len(self.objs)
        self.objs.append(obj)
        self.parent.append(parent)
        self.label.append(label)
        self.depth.append(d)
        self.queue.append(len(self.objs) - 1)
        if parent >= 0:
            # The tensor whose grad_fn leads here first owns the graph, and
            # what its nodes reach (saved tensors, their own graphs).
            owner = self.graph_of.get(parent)
            if owner is None and k == _NODE and self.kinds.get(type(self.objs[parent])) == _TENSOR:
                owner = parent
            if owner is not None:
                self.graph_of[len(self.objs) - 1] = owner
                if k == _NODE:
                    self.graph_nodes[owner] = self.graph_nodes.get(owner, 0) + 1
        return len(self.objs) - 1

    def add_items(self, items, parent, label_of):
        skip = self.skip
        for key, val in items:
            if type(val) not in skip:
                self.add(val, parent, label_of(key, val))

    def add_frame_locals(self, frame, parent, where):
        name, pos = _frame_text(frame)
        loc = frame.f_locals
        # CO_OPTIMIZED: a snapshot, cleared after the scan. Not a traced
        # frame's (pdb, debugpy): the tracer writes its snapshot back into the
        # frame's variables when its callback returns, and a scan inside that
        # callback (a dump typed at the debugger's prompt) would unbind them.
        if (type(loc) is dict and frame.f_code.co_flags & 1 and frame.f_trace is None
                and sys.gettrace() is None):
            self.snapshots.append(loc)
        items = list(_dict_items(loc) if type(loc) is dict else loc.items())
        for var, val in items:
            self.add(val, parent, ("%s() local '%s' (%s) at %s%s", name, var, type(val), pos,
                                   where))

    def guarded(self, fn, *args):
        # One root that cannot be read never ends the scan.
        try:
            fn(*args)
        except Exception:  # noqa: BLE001
            self.skipped += 1

    def roots(self, own_globals):
        # Frame locals of every thread, innermost frame first.
        for frame in list(sys._current_frames().values()):
            while frame is not None:
                # Module and class bodies (not CO_OPTIMIZED): their names are
                # globals and class attributes, reached below with those names.
                if frame.f_globals is not own_globals and frame.f_code.co_flags & 1:
                    self.guarded(self.add_frame_locals, frame, -1, "")
                frame = frame.f_back
        # Exceptions being handled, or left by the last uncaught one.
        excs = []
        cur = getattr(sys, "_current_exceptions", None)
        if cur is not None:
            for e in cur().values():
                excs.append(e[1] if type(e) is tuple else e)
        excs.append(sys.exc_info()[1])
        excs.append(sys.__dict__.get("last_value"))
        excs.append(sys.__dict__.get("last_exc"))
        for e in excs:
            if e is not None:
                self.add(e, -1, ("exception %s", type(e)))
        tb = sys.__dict__.get("last_traceback")
        if tb is not None:
            self.add(tb, -1, "sys.last_traceback")
        # The program's own modules, then (see scan) the libraries'. A module
        # is read through its own dict: a lazy module's __getattr__ would
        # import (transformers) or raise.
        prefixes = tuple({p for p in (sys.prefix, sys.base_prefix, sys.exec_prefix) if p})
        user, library = [], []
        for key, mod in list(_dict_items(sys.modules)):
            if mod is None or type(key) is not str:
                continue
            if not issubclass(type(mod), types.ModuleType):
                # Something a library put in sys.modules: a library root.
                self.odd_modules.append((key, mod))
                continue
            d = _module_dict(mod)
            name = d.get("__name__")
            name = name if type(name) is str else key
            f = _module_file(d)
            own = name == "__main__" or (f is not None and not f.startswith(prefixes))
            (user if own else library).append((name, d))
        user.sort(key=lambda m: m[0] != "__main__")
        self.module_roots(user, own_globals)
        return library

    def module_roots(self, mods, own_globals, user=True):
        for name, d in mods:
            if d is own_globals:
                continue
            if name == "__main__":
                # runpy drops __main__.__file__ once the script returns (exit scan).
                where = _basename(_module_file(d) or
                                  (sys.argv[0] if sys.argv and sys.argv[0] else "__main__"))
            else:
                where = name
            skip = self.skip
            for var, val in list(_dict_items(d)):
                is_class = issubclass(type(val), type)
                if type(val) in skip and not (user and is_class):
                    continue
                if type(var) is not str or var.startswith("__"):  # __builtins__, __spec__...
                    continue
                if is_class:
                    # Class attributes of the classes the program defines.
                    if user and _type_dict(val).get("__module__") == name:
                        self.guarded(self.add_class, val, where)
                    continue
                self.add(val, -1, ("global '%s' (%s) in %s", var, type(val), where))

    def add_class(self, cls, where):
        qual = _type_qualname(cls)
        for var, val in list(_dict_items(dict(_type_dict(cls)))):
            if type(var) is str and not var.startswith("__"):
                self.add(val, -1, ("class attribute %s.%s.%s (%s)", where, qual, var, type(val)))

    def saved_attrs(self, t):
        names = self.saved_names.get(t)
        if names is None:
            names = []
            for klass in _type_mro(t):
                names += [n for n in _type_dict(klass) if type(n) is str and
                          n.startswith("_saved_") and n not in names]
            self.saved_names[t] = names
        return names

    def mark(self, obj, role, module):
        m = self.marks.get(id(obj))
        if m is None or _ROLE_RANK[role] < _ROLE_RANK[m[0]]:
            self.marks[id(obj)] = (role, module)

    def module_id(self, name):
        m = self.module_ids.get(name)
        if m is None:
            m = self.module_ids[name] = len(self.module_names)
            self.module_names.append(name)
        return m

    def add_optimizer_state(self, d):
        # optimizer.state: {parameter: {"exp_avg": tensor, ...}}
        state = d.get("state")
        if not issubclass(type(state), dict):
            return
        tensor = self.tensor
        for p, st in list(_dict_items(state)):
            if issubclass(type(st), dict):
                for v in list(_dict_items(st)):
                    if tensor in _type_mro(type(v[1])):
                        self.state_of[id(v[1])] = id(p)
                        # Kept alive while the scan runs (ids stay unique).
                        self.keep.append((p, v[1]))

    def expand(self, i):
        o = self.objs[i]
        t = type(o)
        k = self.kinds[t]
        add = self.add
        self.from_node = k == _NODE
        if k == _TENSOR:
            if self.t_is_cuda(o):
                try:
                    s = self.t_storage(o)
                    ptr, nbytes = self.s_data_ptr(s), self.s_nbytes(s)
                except Exception:  # noqa: BLE001 - sparse, nested, fake tensors
                    ptr, nbytes = 0, 0
                if ptr and ptr not in self.storages:
                    self.storages[ptr] = (nbytes, i)
                if ptr:
                    self.cuda.append((i, ptr))
            g = self.t_grad(o) if self.t_is_leaf(o) else None
            if g is not None:
                add(g, i, ".grad")
                self.grad_of[id(g)] = id(o)
            fn = self.t_grad_fn(o)
            if fn is not None:
                add(fn, i, (".grad_fn (%s)", type(fn)))
        elif k == _NODE:
            names = self.saved_attrs(t)
            # Under the program's own profiler the guard cannot be set (and
            # a C profiler could not be put back): the saved tensors go
            # unread.
            if names and sys.getprofile() is None:
                saved = []
                for n in names:
                    # Set for each getter: a refusal unsets it.
                    sys.setprofile(_refuse_program_code)
                    try:
                        saved.append((n, getattr(o, n)))
                    except Exception:  # noqa: BLE001 - released after backward, hooked
                        pass
                    finally:
                        sys.setprofile(None)
                for n, v in saved:
                    if type(v) is tuple or type(v) is list:
                        for j, x in enumerate(v):
                            add(x, i, (".%s[%d]", n, j))
                    else:
                        add(v, i, "." + n)
            if _lookup(t, "variable") is not None:  # AccumulateGrad: the leaf
                var = o.variable
                if var is not None:
                    add(var, i, ".variable")
            for j, pair in enumerate(o.next_functions):
                f = pair[0]
                if f is not None:
                    add(f, i, (".next_functions[%d] (%s)", j, type(f)))
        elif k == _DICT:
            tensor = self.tensor
            skip = self.skip
            for key, val in list(_dict_items(o)):
                # Keys: only tensors (an optimizer's state is keyed by its
                # parameters); other keys are ops, types, names.
                if tensor in _type_mro(type(key)):
                    add(key, i, ("key <%s>", type(key)))
                if type(val) not in skip:
                    add(val, i, (_KEY, key))
            if t is not dict:
                # A dict subclass's attributes (transformers' ModelOutput).
                d = _instance_dict(o, t)
                if d:
                    self.add_items(list(_dict_items(d)), i,
                                   lambda n, v: (".%s (%s)", n, type(v)))
        elif k == _SEQ:
            if issubclass(t, list):
                vals = _list_copy(o)
            elif issubclass(t, tuple):
                vals = list(tuple.__iter__(o))
            else:
                vals = list(collections.deque.__iter__(o))
            skip = self.skip
            for j, val in enumerate(vals):
                if type(val) not in skip:
                    add(val, i, ("[%d]", j))
        elif k == _SET:
            vals = list(set.__iter__(o) if issubclass(t, set) else frozenset.__iter__(o))
            skip = self.skip
            for val in vals:
                if type(val) not in skip:
                    add(val, i, ("{<%s>}", type(val)))
        elif k == _NNMOD:
            d = _instance_dict(o, t) or {}
            # The top-level module this one belongs to (itself, reached first
            # from something other than a module).
            top = self.top_module.get(i)
            if top is None:
                top = self.top_module[i] = self.module_id(_type_qualname(t))
            for part in ("_parameters", "_buffers", "_modules"):
                sub = d.get(part)
                if issubclass(type(sub), dict):
                    for name, val in list(_dict_items(sub)):
                        if val is not None:
                            j = add(val, i, (".%s (%s)", name, type(val)))
                            if part == "_modules":
                                if j is not None and j not in self.top_module:
                                    self.top_module[j] = top
                            else:
                                self.mark(val, _PARAM if part == "_parameters" else _BUFFER,
                                          top)
            for name, val in list(_dict_items(d)):
                if name not in ("_parameters", "_buffers", "_modules"):
                    add(val, i, (".%s (%s)", name, type(val)))
        elif k == _OBJ:
            d = _instance_dict(o, t)
            if d and self.optimizer is not None and issubclass(t, self.optimizer):
                self.add_optimizer_state(d)
            if d:
                for name, val in list(_dict_items(d)):
                    add(val, i, (".%s (%s)", name, type(val)))
            # What lies outside the __dict__ (a C type's fields: a
            # functools.partial's arguments; __slots__); the attributes were
            # reached first, under their names.
            for v in gc.get_referents(o):
                if v is not d and type(v) not in self.skip:
                    add(v, i, ("<%s>", type(v)))
        elif k == _FRAME:
            self.add_frame_locals(o, i, " (in a traceback)")
        elif k == _TB:
            add(o.tb_frame, i, "frame")
            if o.tb_next is not None:
                add(o.tb_next, i, ".tb_next")
        elif k == _EXC:
            for name in ("__traceback__", "__context__", "__cause__"):
                v = _exc_get[name](o)
                if v is not None:
                    add(v, i, "." + name)
            for j, v in enumerate(_exc_get["args"](o)):
                add(v, i, (".args[%d]", j))
            d = _instance_dict(o, t)
            if d:
                for name, val in list(_dict_items(d)):
                    add(val, i, (".%s (%s)", name, type(val)))
        elif k == _REFS:
            for v in gc.get_referents(o):
                add(v, i, ("<%s>", type(v)))

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
                self.skipped += 1
        self.from_node = False  # the next roots are roots

    def text(self, label):
        if type(label) is str:
            return label
        if label[0] is _KEY:
            return _key_text(self, label[1])
        return label[0] % tuple(_name(a) if issubclass(type(a), type) else a for a in label[1:])

    def chain(self, i):
        steps = [_tensor_text(self, self.objs[i])]
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


def _shorten(steps):
    if len(steps) > _MAX_CHAIN:
        keep = _MAX_CHAIN // 2
        steps = steps[:keep] + ["... %d more" % (len(steps) - 2 * keep)] + steps[-keep:]
    return steps


def _group(search, roles):
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
        role, module = roles.get(ptr, (_USER, -1))
        out.append(_SEP.join(["S", "%x" % ptr, str(nbytes), str(g[0]), str(role), str(module)]))
    for gid, steps, ranges in groups.values():
        shown = list(steps)
        for pos, (lo, hi, before, after) in ranges.items():
            shown[pos] = before + ("%d" % lo if lo == hi else "%d..%d" % (lo, hi)) + after
        out.append(_SEP.join(["G", str(gid)] + [_clean(s) for s in _shorten(shown)]))
    for m, name in enumerate(search.module_names):
        out.append(_SEP.join(["D", str(m), _clean(name)]))
    return out


def _roles(search):
    # Each storage's role (the best-ranked of its tensors') and module, as
    # the S records' last two fields.
    best = {}
    marks, grad_of, state_of, direct = search.marks, search.grad_of, search.state_of, search.direct
    for i, ptr in search.cuda:
        o = search.objs[i]
        oid = id(o)
        m = marks.get(oid)
        if m is None:
            leaf = grad_of.get(oid)
            if leaf is not None:
                m = (_GRAD, marks.get(leaf, (0, -1))[1])
        if m is None:
            param = state_of.get(oid)
            if param is not None:
                m = (_OPTIM, marks.get(param, (0, -1))[1])
        if m is None and search.parameter is not None and search.parameter in _type_mro(type(o)):
            m = (_PARAM, -1)
        if m is None:
            m = (_USER, -1) if oid in direct else (_SAVED, -1)
        b = best.get(ptr)
        if b is None or _ROLE_RANK[m[0]] < _ROLE_RANK[b[0]]:
            best[ptr] = m
    return best


def _allocator(search):
    # PyTorch's caching allocator's own count (no CUDA call: it reads the
    # allocator's statistics), so the cache's free part is told from the
    # tensors the walk could not reach.
    cuda = sys.modules.get("torch.cuda")
    stats = getattr(search.torch._C, "_cuda_memoryStats", None)
    if cuda is None or stats is None:
        return []
    d = _module_dict(cuda)
    init = d.get("is_initialized")
    if init is None or not init():
        return []
    allocated = reserved = 0
    for dev in range(d["device_count"]()):
        s = stats(dev)
        allocated += s["allocated_bytes"]["all"]["current"]
        reserved += s["reserved_bytes"]["all"]["current"]
    return ["A%s%d%s%d" % (_SEP, allocated, _SEP, reserved)]


def _graphs(search):
    # The largest autograd graphs and who owns them (a growing one, step
    # after step, is a loss summed with its graph: docs/holders.md). The CUDA
    # bytes are those of the storages reached through the graph's nodes.
    owners = sorted(((n, i) for i, n in search.graph_nodes.items() if n >= _MIN_GRAPH_NODES),
                    reverse=True)[:_MAX_GRAPHS]
    if not owners:
        return []
    held = {i: 0 for _, i in owners}
    for nbytes, i in search.storages.values():
        owner = search.graph_of.get(i)
        if owner in held:
            held[owner] += nbytes
    out = []
    for n, i in owners:
        o = search.objs[i]
        ptr = 0
        if search.t_is_cuda(o):
            try:
                ptr = search.s_data_ptr(search.t_storage(o))
            except Exception:  # noqa: BLE001 - no storage of its own
                pass
        # The owner's chain, its tensor text replaced by the graph's first
        # step: `global 'total' (Tensor) in t.py -> .grad_fn (AddBackward0)`.
        steps, _ = _marked(search.chain(i)[:-1])
        steps.append(".grad_fn (%s)" % _name(type(search.t_grad_fn(o))))
        out.append(_SEP.join(["N", str(n), str(held[i]), "%x" % ptr] +
                             [_clean(s) for s in _shorten(steps)]))
    return out


def _failure(e, stage):
    # One line's worth: the exception, its type and where it was raised.
    tb = e.__traceback__
    where = "?"
    while tb is not None:
        code = tb.tb_frame.f_code
        where = "%s:%d in %s()" % (_basename(code.co_filename), tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    try:
        message = str(e)
    except Exception:  # noqa: BLE001
        message = "?"
    return _SEP.join(["E", _clean(_name(type(e))), _clean(message)[:300],
                      _clean("%s (while %s)" % (where, stage))])


class _DeferredSignals:
    """The program's Python signal handlers run in the program, not in the
    scan, where whatever they raise (SystemExit from a SIGTERM handler, a
    timeout's exception) would be the scan's to swallow: each signal with a
    Python handler is noted while the scan runs, and the shim raises it again
    once the scan has returned (the `signals` line), so its handler runs in
    the program. Only on the main thread, the one that may set handlers (and
    the only one that runs them)."""

    def __init__(self):
        self.sig = sys.modules.get("_signal")
        self.saved = {}
        self.pending = []
        self.caught = []
        if self.sig is None:
            return
        try:
            for s in self.sig.valid_signals():
                h = self.sig.getsignal(s)
                if callable(h):
                    self.sig.signal(s, self.note)  # ValueError off the main thread
                    self.saved[s] = h
        except (ValueError, OSError, RuntimeError):
            self.finish()

    def note(self, signum, frame):
        if signum not in self.pending:
            self.pending.append(signum)

    def finish(self):
        for s, h in self.saved.items():
            try:
                self.sig.signal(s, h)
            except Exception:  # noqa: BLE001
                pass
        self.saved = {}
        self.caught, self.pending = self.pending, []


_OWN_FILE = _Search.expand.__code__.co_filename


def scan(budget_seconds, libraries=True):
    t0 = time.monotonic()
    # Without a GIL other threads run on during the walk, mutating what it
    # reads: no scan (said once, as a failed one).
    gil_enabled = getattr(sys, "_is_gil_enabled", None)
    if gil_enabled is not None and not gil_enabled():
        return _SEP.join(["E", "FreeThreaded", "a free-threaded interpreter (no GIL) runs no "
                          "holder scan", "start (while starting)"]).encode()
    torch = sys.modules.get("torch")
    if torch is None or type(torch) is not types.ModuleType or "Tensor" not in _module_dict(torch):
        return ("M%storch%s0" % (_SEP, _SEP)).encode()
    search = None
    roles_ms = 0.0
    stage = "starting"
    # One uninterrupted pass: no other Python thread mutates the containers
    # being walked, and no object dies mid-walk.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(max(interval, 10.0))
    deferred = _DeferredSignals()
    try:
        search = _Search(torch, t0 + budget_seconds)
        # A tensor subclass's __torch_function__ would run for every getter.
        no_torch_function = getattr(torch._C, "DisableTorchFunction", None) or \
            torch._C.DisableTorchFunctionSubclass
        with warnings.catch_warnings(), no_torch_function():
            # Reading attributes of deprecated objects must not print.
            warnings.simplefilter("ignore")
            stage = "listing the roots"
            library_modules = search.roots(globals())
            stage = "walking the program's objects"
            search.run()
            if libraries:
                # Step scans leave them out: what grows across steps is held
                # by the program, and the libraries' modules are most of a
                # scan's time, which would space step scans far apart.
                stage = "walking the libraries' modules"
                search.root_depth = _LIBRARY_DEPTH
                search.module_roots(library_modules, globals(), user=False)
                for key, obj in search.odd_modules:
                    search.add(obj, -1, ("sys.modules[%r] (%s)", key, type(obj)))
                search.run()
            stage = "naming the holders"
            stage = "telling the roles"
            t_roles = time.monotonic()
            roles = _roles(search)
            roles_ms = (time.monotonic() - t_roles) * 1e3
            stage = "naming the holders"
            lines = _group(search, roles) + _graphs(search)
            try:
                lines += _allocator(search)
            except Exception:  # noqa: BLE001 - without them the cache is all free
                search.skipped += 1
    except KeyboardInterrupt:
        # The program's Ctrl-C, not the scan's: raised again in the program.
        import _thread
        _thread.interrupt_main()
        lines = [_SEP.join(["E", "KeyboardInterrupt", "interrupted", "(while %s)" % stage])]
    except Exception as e:  # noqa: BLE001 - said in one line by the shim
        lines = [_failure(e, stage)]
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
        if search is not None:
            for d in search.snapshots:
                d.clear()
            search.snapshots = []
        deferred.finish()
    if deferred.caught:
        lines.append("M%ssignals%s%s" % (_SEP, _SEP, ",".join(str(int(s)) for s in deferred.caught)))
    if search is not None:
        lines.append("M%svisited%s%d" % (_SEP, _SEP, len(search.objs)))
        lines.append("M%sskipped%s%d" % (_SEP, _SEP, search.skipped))
        lines.append("M%spartial%s%d" % (_SEP, _SEP, 1 if search.partial else 0))
        lines.append("M%sroles_ms%s%.3f" % (_SEP, _SEP, roles_ms))
    lines.append("M%sms%s%.3f" % (_SEP, _SEP, (time.monotonic() - t0) * 1e3))
    del search
    return "\n".join(lines).encode("utf-8", "replace")
