// Immortal<T>: a T constructed in static storage and never destroyed.
//
// A real driver's state outlives everything else in the process: tools call
// it from atexit handlers and ELF destructors, and other threads may still be
// inside it while the process exits. simcuda's state must behave the same, so
// static destructors may not tear it down. The storage is static, so whatever
// the T points to stays reachable and LeakSanitizer does not call it a leak.
#pragma once

#include <new>
#include <utility>

namespace simcuda {

template <class T>
class Immortal {
public:
    template <class... Args>
    explicit Immortal(Args &&...args)
    {
        new (storage_) T(std::forward<Args>(args)...);
    }
    Immortal(const Immortal &) = delete;
    Immortal &operator=(const Immortal &) = delete;

    T &operator*() { return *get(); }
    T *operator->() { return get(); }
    T *get() { return std::launder(reinterpret_cast<T *>(storage_)); }

private:
    alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace simcuda
