// The few CPython C-API functions the shim calls at safe points (holders.h),
// resolved at run time: the shim links no libpython and must load into
// processes without one. Every pointer is null until load() succeeds.
#pragma once

#include <sys/types.h>

namespace torchseal::py {

// PyObject* and PyThreadState* stay opaque: only CPython dereferences them.
using Obj = void;

struct MethodDef {  // PyMethodDef, stable since Python 3.0
  const char *name;
  Obj *(*meth)(Obj *self, Obj *args);
  int flags;
  const char *doc;
};
constexpr int kMethNoArgs = 0x0004;  // METH_NOARGS
constexpr int kFileInput = 257;      // Py_file_input
constexpr int kEvalInput = 258;      // Py_eval_input

struct CApi {
  int (*is_initialized)() = nullptr;
  int (*is_finalizing)() = nullptr;
  void *(*this_thread_state)() = nullptr;  // PyGILState_GetThisThreadState
  int (*gil_ensure)() = nullptr;           // PyGILState_Ensure
  void (*gil_release)(int) = nullptr;      // PyGILState_Release
  int (*add_pending_call)(int (*)(void *), void *) = nullptr;
  Obj *(*run_string)(const char *, int, Obj *, Obj *, void *) = nullptr;  // PyRun_StringFlags
  Obj *(*dict_new)() = nullptr;
  Obj *(*eval_get_builtins)() = nullptr;  // borrowed
  int (*dict_set_item_string)(Obj *, const char *, Obj *) = nullptr;
  int (*bytes_as_string_and_size)(Obj *, char **, ssize_t *) = nullptr;
  void (*inc_ref)(Obj *) = nullptr;  // Py_IncRef
  void (*dec_ref)(Obj *) = nullptr;  // Py_DecRef
  void (*err_fetch)(Obj **, Obj **, Obj **) = nullptr;
  void (*err_restore)(Obj *, Obj *, Obj *) = nullptr;
  void (*err_clear)() = nullptr;
  Obj *(*cfunction_new)(MethodDef *, Obj *, Obj *) = nullptr;  // PyCFunction_NewEx
  Obj *(*object_repr)(Obj *) = nullptr;                        // PyObject_Repr
  const char *(*unicode_as_utf8)(Obj *) = nullptr;             // PyUnicode_AsUTF8
  Obj *none = nullptr;                                         // &_Py_NoneStruct

  // True when the interpreter can run code now (initialised, not finalizing).
  bool alive() const { return is_initialized() && !is_finalizing(); }
};

// Resolves every function; false (and `api` unusable) if one is missing.
bool load(CApi &api);

}  // namespace torchseal::py
