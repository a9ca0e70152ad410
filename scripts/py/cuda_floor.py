#!/usr/bin/env python3
"""The floor of a device load's fixed cost: cuInit plus the device's primary context, timed
through ctypes after Python has started (nothing else loaded). Prints one line of milliseconds.
Run it in a fresh process each time: python3 scripts/py/cuda_floor.py"""
import ctypes
import time

t0 = time.perf_counter()
cuda = ctypes.CDLL("libcuda.so.1")
t1 = time.perf_counter()
assert cuda.cuInit(0) == 0
t2 = time.perf_counter()
dev = ctypes.c_int()
assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
ctx = ctypes.c_void_p()
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cuda.cuCtxSetCurrent(ctx) == 0
free, total = ctypes.c_size_t(), ctypes.c_size_t()
assert cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
t3 = time.perf_counter()
ms = lambda a, b: (b - a) * 1e3
print(
    f"floor {ms(t0, t3):.1f} ms: dlopen libcuda {ms(t0, t1):.1f}, cuInit {ms(t1, t2):.1f}, "
    f"primary context {ms(t2, t3):.1f}"
)
