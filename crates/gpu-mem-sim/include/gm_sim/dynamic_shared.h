/*
 * gm_sim/dynamic_shared.h — `extern __shared__ T name[];`, the launch's dynamic shared memory,
 * on the host compiler. The simulator rewrites such a declaration (on its own line, so lines
 * stay where they were): inside a function into `T* const name = gm_dynamic_shared<T>();`, at
 * namespace scope into `static gm_sim_dynamic_shared<T> name;`, an object that behaves as the
 * array (indexing, arithmetic, conversion to T* and casts to other pointers) and finds the
 * running block's memory at each use.
 */
#ifndef GM_SIM_DYNAMIC_SHARED_H
#define GM_SIM_DYNAMIC_SHARED_H

template <typename T>
struct gm_sim_dynamic_shared {
    T* get() const { return gm_dynamic_shared<T>(); }
    operator T*() const { return get(); }
    template <typename U>
    explicit operator U*() const {
        return reinterpret_cast<U*>(get());
    }
    T& operator[](long long i) const { return get()[i]; }
    T* operator+(long long i) const { return get() + i; }
    T& operator*() const { return *get(); }
};

#endif /* GM_SIM_DYNAMIC_SHARED_H */
