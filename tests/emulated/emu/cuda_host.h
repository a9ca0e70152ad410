// Runs CUDA C++ kernels on the host, for tests without a GPU (tests/emulated/kernels.rs).
//
// Every CUDA thread of a block is a fiber (its own stack, switched to and from in user space)
// on one host thread; blocks run one after another, so a function-local `__shared__` variable
// (made `static` here) is the block's shared memory. __syncthreads is a barrier over the
// block, __syncwarp and the warp intrinsics (__shfl_sync, __ballot_sync) barriers over the
// thread's warp of 32: a thread reaching one yields to the next runnable fiber until every
// thread still running has arrived; a thread that returns from the kernel leaves its barriers
// (as exited threads stop counting on the device). If no fiber can run while some wait, the
// kernel would hang on the device: the run stops with a message naming the block. Device
// pointers are host pointers. Only the subset our kernels use is here; semantics, not speed,
// are the point — but fibers instead of one OS thread per CUDA thread make the emulated tests
// ~10x faster on a 2-core machine (no futex round trip per barrier and thread).
//
// The switch is a few instructions of x86-64 assembly (callee-saved registers, MXCSR and the
// x87 control word); AddressSanitizer is told of every stack switch (its fiber API).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

#if !defined(__x86_64__)
#error "the kernel emulator's fibers switch stacks with x86-64 assembly"
#endif

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

inline thread_local dim3 threadIdx;
inline thread_local dim3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;

struct EmuFiber;
struct EmuBlock;
inline thread_local EmuBlock* emu_block = nullptr;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__ static
#define __constant__

inline void emu_sync_block();
inline void emu_sync_warp();
inline unsigned long long* emu_warp_slots();

inline void __syncthreads() { emu_sync_block(); }
inline double __longlong_as_double(long long x) {
    double d;
    std::memcpy(&d, &x, sizeof d);
    return d;
}
inline void __syncwarp(unsigned = 0xffffffffu) { emu_sync_warp(); }

template <typename T>
inline T __shfl_sync(unsigned, T v, int src) {
    static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
    unsigned lane = threadIdx.x % 32;
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    emu_warp_slots()[lane] = bits;
    __syncwarp();
    unsigned long long got = emu_warp_slots()[(unsigned)src % 32];
    __syncwarp();
    T r;
    std::memcpy(&r, &got, sizeof(T));
    return r;
}

inline unsigned __ballot_sync(unsigned, int pred) {
    unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
    emu_warp_slots()[lane] = pred ? 1 : 0;
    __syncwarp();
    unsigned m = 0;
    unsigned width = blockDim.x - w * 32 < 32 ? blockDim.x - w * 32 : 32;
    for (unsigned i = 0; i < width; i++)
        if (emu_warp_slots()[i]) m |= 1u << i;
    __syncwarp();
    return m;
}

// the lanes of the warp whose `v` equals this lane's
template <typename T>
inline unsigned __match_any_sync(unsigned, T v) {
    static_assert(sizeof(T) <= 8, "match of at most 8 bytes");
    unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    emu_warp_slots()[lane] = bits;
    __syncwarp();
    unsigned m = 0;
    unsigned width = blockDim.x - w * 32 < 32 ? blockDim.x - w * 32 : 32;
    for (unsigned i = 0; i < width; i++)
        if (emu_warp_slots()[i] == bits) m |= 1u << i;
    __syncwarp();
    return m;
}

inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __ffs(unsigned v) { return __builtin_ffs((int)v); }
inline long long __double_as_longlong(double x) {
    long long b;
    std::memcpy(&b, &x, sizeof b);
    return b;
}
inline unsigned __brev(unsigned v) {
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= ((v >> i) & 1u) << (31 - i);
    return r;
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)((((unsigned long long)hi << 32) | lo) >> (shift & 31));
}
template <typename T>
inline T __ldg(const T* p) { return *p; }
// CUDA's integer min/max overloads
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }

template <typename T>
inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline double atomicAdd(double* p, double v) {
    double cur, next;
    __atomic_load(p, &cur, __ATOMIC_SEQ_CST);
    do {
        next = cur + v;
    } while (!__atomic_compare_exchange(p, &cur, &next, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    return cur;
}
template <typename T>
inline T atomicCAS(T* p, T expected, T desired) {
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}
template <typename T>
inline T atomicMax(T* p, T v) {
    T cur = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v > cur && !__atomic_compare_exchange_n(p, &cur, v, false, __ATOMIC_SEQ_CST,
                                                   __ATOMIC_SEQ_CST)) {
    }
    return cur;
}
template <typename T>
inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
template <typename T>
inline T atomicMin(T* p, T v) {
    T cur = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v < cur && !__atomic_compare_exchange_n(p, &cur, v, false, __ATOMIC_SEQ_CST,
                                                   __ATOMIC_SEQ_CST)) {
    }
    return cur;
}

// ---- fibers ----

// emu_switch(&save, to): saves the running context's stack pointer in *save (after pushing its
// callee-saved registers, MXCSR and the x87 control word) and resumes the context whose stack
// pointer is `to`.
extern "C" void emu_switch(void** save, void* to);
asm(R"(
    .text
    .globl emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
)");

// A barrier: threads still running, arrivals in this generation, and the generation.
struct EmuBarrier {
    unsigned alive = 0, arrived = 0, gen = 0;
    // one arrival; true when it completes the generation
    bool arrive() {
        if (++arrived < alive) return false;
        arrived = 0;
        gen++;
        return true;
    }
    // a thread leaves for good
    void drop() {
        alive--;
        if (alive > 0 && arrived >= alive) {
            arrived = 0;
            gen++;
        }
    }
};

constexpr size_t EMU_STACK = 1 << 20;  // bytes of stack per fiber (ASan's redzones need room)
constexpr size_t EMU_TOP = 64 << 10;    // the top of a fiber's stack, unpoisoned between blocks

struct EmuFiber {
    void* sp = nullptr;
    char* stack = nullptr;  // the mapping; its lowest page is a guard
    unsigned tid = 0;
    bool done = false;
    const unsigned* wait_gen = nullptr;  // waiting until *wait_gen != wait_for
    unsigned wait_for = 0;
    void* fake_stack = nullptr;  // ASan's, while switched away
};

struct EmuBlock {
    std::vector<EmuFiber> fibers;
    EmuBarrier block;
    std::vector<EmuBarrier> warps;
    std::vector<std::array<unsigned long long, 32>> slots;
    void* sched_sp = nullptr;
    const void* sched_bottom = nullptr;  // the scheduler's stack, for ASan
    size_t sched_size = 0;
    EmuFiber* current = nullptr;
    const std::function<void()>* kernel = nullptr;
};

inline unsigned long long* emu_warp_slots() {
    return emu_block->slots[threadIdx.x / 32].data();
}

// The running fiber gives the host thread back to the scheduler until it is resumed.
inline void emu_yield() {
    EmuBlock* eb = emu_block;
    EmuFiber* f = eb->current;
#if EMU_ASAN
    __sanitizer_start_switch_fiber(&f->fake_stack, eb->sched_bottom, eb->sched_size);
#endif
    emu_switch(&f->sp, eb->sched_sp);
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(f->fake_stack, &eb->sched_bottom, &eb->sched_size);
#endif
}

inline void emu_wait(EmuBarrier& b) {
    if (b.arrive()) return;
    EmuFiber* f = emu_block->current;
    f->wait_gen = &b.gen;
    f->wait_for = b.gen;
    emu_yield();
}

inline void emu_sync_block() { emu_wait(emu_block->block); }
inline void emu_sync_warp() { emu_wait(emu_block->warps[threadIdx.x / 32]); }

// A fiber's first frame: runs the kernel as its thread, leaves the barriers, and returns to
// the scheduler for good.
extern "C" inline void emu_fiber_main() {
    EmuBlock* eb = emu_block;
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &eb->sched_bottom, &eb->sched_size);
#endif
    (*eb->kernel)();
    EmuFiber* f = eb->current;
    f->done = true;
    eb->warps[f->tid / 32].drop();
    eb->block.drop();
#if EMU_ASAN
    __sanitizer_start_switch_fiber(nullptr, eb->sched_bottom, eb->sched_size);
#endif
    void* unused;
    emu_switch(&unused, eb->sched_sp);
    __builtin_unreachable();
}

// A fresh context on fiber f's stack that starts in emu_fiber_main.
inline void emu_fiber_reset(EmuFiber& f, size_t guard) {
#if EMU_ASAN
    // the one frame of the block before that never returned (emu_fiber_main's, at the top of
    // the stack: every frame under it returned, unpoisoning its redzones) is still poisoned;
    // unpoisoning the whole megabyte per fiber and block was most of the emulated tests' time
    (void)guard;
    __asan_unpoison_memory_region(f.stack + EMU_STACK - EMU_TOP, EMU_TOP);
#endif
    uintptr_t top = ((uintptr_t)f.stack + EMU_STACK) & ~(uintptr_t)15;
    // emu_switch pops 8 bytes (MXCSR, x87 control word), six registers, then returns: the
    // return address sits 16-byte aligned, so emu_fiber_main starts as if called
    uint64_t* p = (uint64_t*)(top - 16);
    p[0] = (uint64_t)(uintptr_t)&emu_fiber_main;
    p[1] = 0;
    uint64_t* regs = p - 6;
    for (int i = 0; i < 6; i++) regs[i] = 0;
    uint32_t* ctl = (uint32_t*)(regs - 1);
    ctl[0] = 0x1F80;  // MXCSR default
    ctl[1] = 0x037F;  // x87 control word default
    f.sp = (void*)ctl;
    f.done = false;
    f.wait_gen = nullptr;
    f.fake_stack = nullptr;
}

// Runs `kernel` (a callable taking no arguments) over `grid` blocks of `block` threads: one
// fiber per CUDA thread of a block, block after block, on the calling thread.
inline void emu_launch(unsigned grid, unsigned block, const std::function<void()>& kernel) {
    gridDim = dim3{grid, 1, 1};
    blockDim = dim3{block, 1, 1};
    EmuBlock eb;
    eb.kernel = &kernel;
    eb.fibers.resize(block);
    long page = sysconf(_SC_PAGESIZE);
    for (unsigned t = 0; t < block; t++) {
        void* m = mmap(nullptr, EMU_STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            std::perror("emulator: mmap of a fiber stack");
            std::abort();
        }
        mprotect(m, page, PROT_NONE);  // a stack overflow faults instead of corrupting
        eb.fibers[t].stack = (char*)m;
        eb.fibers[t].tid = t;
    }
    unsigned nwarps = (block + 31) / 32;
    EmuBlock* saved = emu_block;
    emu_block = &eb;
    for (unsigned b = 0; b < grid; b++) {
        blockIdx = dim3{b, 1, 1};
        eb.block = EmuBarrier{block, 0, 0};
        eb.warps.assign(nwarps, EmuBarrier{});
        for (unsigned w = 0; w < nwarps; w++)
            eb.warps[w].alive = block - w * 32 < 32 ? block - w * 32 : 32;
        eb.slots.assign(nwarps, {});
        for (auto& f : eb.fibers) emu_fiber_reset(f, (size_t)page);
        unsigned running = block;
        while (running > 0) {
            bool progressed = false;
            for (auto& f : eb.fibers) {
                if (f.done) continue;
                if (f.wait_gen && *f.wait_gen == f.wait_for) continue;  // still waiting
                f.wait_gen = nullptr;
                threadIdx = dim3{f.tid, 1, 1};
                eb.current = &f;
                progressed = true;
#if EMU_ASAN
                void* fake = nullptr;
                __sanitizer_start_switch_fiber(&fake, f.stack, EMU_STACK);
#endif
                emu_switch(&eb.sched_sp, f.sp);
#if EMU_ASAN
                __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
                if (f.done) running--;
            }
            if (!progressed) {
                std::fprintf(stderr,
                             "emulator: block %u of %u hangs: %u threads wait at a barrier "
                             "the others never reach\n",
                             b, grid, running);
                std::abort();
            }
        }
    }
    emu_block = saved;
    for (auto& f : eb.fibers) munmap(f.stack, EMU_STACK);
}
