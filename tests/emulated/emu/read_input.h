// Reading an emulator's serialised input (the *_main.cpp that take one): a value, or exactly
// `n` bytes into a vector of exactly that size (at least one byte), so that AddressSanitizer
// catches a kernel reading past what it was given.
#pragma once
#include <cstdio>
#include <vector>

template <typename T> static bool rd(FILE* f, T& v) { return std::fread(&v, sizeof v, 1, f) == 1; }

static bool rd_bytes(FILE* f, std::vector<u8>& v, u64 n) {
    v.assign(n ? n : 1, 0);
    return n == 0 || std::fread(v.data(), 1, n, f) == n;
}
