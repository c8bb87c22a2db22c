#include "shim/runtime/holder_scan/cpython_api.h"

#include "shim/core/python/python_runtime.h"

namespace torchseal::py {
namespace {

template <typename T>
bool get(T &out, const char *name) {
  out = reinterpret_cast<T>(python_symbol(name));
  return out != nullptr;
}

}  // namespace

bool load(CApi &api) {
  api = CApi{};
  unsigned minor = 0;
  if (auto *v = static_cast<const unsigned long *>(python_symbol("Py_Version")))
    minor = (*v >> 16) & 0xff;
  return get(api.is_initialized, "Py_IsInitialized") &&
         get(api.is_finalizing, minor >= 13 ? "Py_IsFinalizing" : "_Py_IsFinalizing") &&
         get(api.this_thread_state, "PyGILState_GetThisThreadState") &&
         get(api.gil_ensure, "PyGILState_Ensure") && get(api.gil_release, "PyGILState_Release") &&
         get(api.add_pending_call, "Py_AddPendingCall") &&
         get(api.run_string, "PyRun_StringFlags") && get(api.dict_new, "PyDict_New") &&
         get(api.eval_get_builtins, "PyEval_GetBuiltins") &&
         get(api.dict_set_item_string, "PyDict_SetItemString") &&
         get(api.bytes_as_string_and_size, "PyBytes_AsStringAndSize") &&
         get(api.inc_ref, "Py_IncRef") && get(api.dec_ref, "Py_DecRef") &&
         get(api.err_fetch, "PyErr_Fetch") && get(api.err_restore, "PyErr_Restore") &&
         get(api.err_clear, "PyErr_Clear") && get(api.cfunction_new, "PyCFunction_NewEx") &&
         get(api.object_repr, "PyObject_Repr") && get(api.unicode_as_utf8, "PyUnicode_AsUTF8") &&
         get(api.none, "_Py_NoneStruct");
}

}  // namespace torchseal::py
