// Runs CUDA C++ kernels on the host, for tests without a GPU (tests/emulated.rs).
//
// Every CUDA thread of a block is a host thread; blocks run one after another, so a
// function-local `__shared__` variable (made `static` here) is the block's shared memory.
// __syncthreads is a barrier over the block, __syncwarp and the warp intrinsics (__shfl_sync,
// __ballot_sync) barriers over the thread's warp of 32; a thread that returns from the kernel
// leaves its barriers (as exited threads stop counting on the device). Device pointers are host
// pointers. Only the subset our kernels use is here; semantics, not speed, are the point.
#pragma once
#include <array>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

inline thread_local dim3 threadIdx;
inline thread_local dim3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;

struct EmuBlock {
    std::unique_ptr<std::barrier<>> block;
    std::vector<std::unique_ptr<std::barrier<>>> warps;
    std::vector<std::array<unsigned long long, 32>> slots;
};
inline thread_local EmuBlock* emu_block = nullptr;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

inline void __syncthreads() { emu_block->block->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) {
    emu_block->warps[threadIdx.x / 32]->arrive_and_wait();
}

template <typename T>
inline T __shfl_sync(unsigned, T v, int src) {
    static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
    unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    emu_block->slots[w][lane] = bits;
    __syncwarp();
    unsigned long long got = emu_block->slots[w][(unsigned)src % 32];
    __syncwarp();
    T r;
    std::memcpy(&r, &got, sizeof(T));
    return r;
}

inline unsigned __ballot_sync(unsigned, int pred) {
    unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
    emu_block->slots[w][lane] = pred ? 1 : 0;
    __syncwarp();
    unsigned m = 0;
    unsigned width = blockDim.x - w * 32 < 32 ? blockDim.x - w * 32 : 32;
    for (unsigned i = 0; i < width; i++)
        if (emu_block->slots[w][i]) m |= 1u << i;
    __syncwarp();
    return m;
}

inline int __popc(unsigned v) { return __builtin_popcount(v); }
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

// Runs `kernel` (a callable taking no arguments) over `grid` blocks of `block` threads: one
// host thread per CUDA thread of a block, reused block after block.
struct EmuNextBlock {
    EmuBlock* eb;
    unsigned block;
    void operator()() noexcept {
        eb->block = std::make_unique<std::barrier<>>(block);
        eb->warps.clear();
        unsigned nwarps = (block + 31) / 32;
        for (unsigned w = 0; w < nwarps; w++) {
            unsigned width = block - w * 32 < 32 ? block - w * 32 : 32;
            eb->warps.push_back(std::make_unique<std::barrier<>>(width));
        }
        eb->slots.assign(nwarps, {});
    }
};

inline void emu_launch(unsigned grid, unsigned block, const std::function<void()>& kernel) {
    gridDim = dim3{grid, 1, 1};
    blockDim = dim3{block, 1, 1};
    EmuBlock eb;
    // every thread waits here before each block; the last to arrive sets up the block's barriers
    std::barrier<EmuNextBlock> start(block, EmuNextBlock{&eb, block});
    std::vector<std::thread> threads;
    threads.reserve(block);
    for (unsigned t = 0; t < block; t++) {
        threads.emplace_back([&, t] {
            for (unsigned b = 0; b < grid; b++) {
                start.arrive_and_wait();
                threadIdx = dim3{t, 1, 1};
                blockIdx = dim3{b, 1, 1};
                emu_block = &eb;
                kernel();
                // an exited thread no longer counts at the block's barriers
                eb.warps[t / 32]->arrive_and_drop();
                eb.block->arrive_and_drop();
            }
        });
    }
    for (auto& th : threads) th.join();
}
