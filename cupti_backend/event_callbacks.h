// The CUPTI callback: turns driver/runtime/resource callbacks into recorder
// events. Runs synchronously on the application's thread, so the stack the
// recorder captures is the caller's.
#pragma once

#include <cupti_callbacks.h>  // the toolkit header (ours is event_callbacks.h)

#include "cupti_backend/cbid_map.h"

namespace torchseal::cupti {

// The one CUpti_CallbackFunc handed to cuptiSubscribe (userdata unused).
void CUPTIAPI on_cupti_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                const void *cbdata);

// CBID -> ApiId, filled by the subscriber (eagerly) or by the callback
// (lazily). Never destroyed: callbacks may still run while the process exits.
CbidMap &cbid_map();

// Callbacks are ignored until delivery is opened (after the subscription is
// complete) and again once it is closed (stop()).
void set_delivery(bool open);
bool delivery_open();

// pthread_atfork child handler: the child's first event is its own first.
void after_fork_child();

}  // namespace torchseal::cupti
