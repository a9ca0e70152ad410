/*
 * cuparquet's C API: Parquet files read into GPU (or host) memory, handed over as an
 * Arrow C Device Data Interface stream, without a copy.
 *
 * Build the shared library from the repository root:
 *     cargo rustc --release --lib --features capi --crate-type cdylib
 * and link against it:
 *     cc app.c -Iinclude -Ltarget/release -lcuparquet -Wl,-rpath,$PWD/target/release
 *
 * Every function returns CUPARQUET_OK (0) or an error code; cuparquet_last_error() then gives
 * the failing call's message (per thread). Strings are UTF-8 and NUL-terminated. The arrays
 * and streams follow the Arrow C Data and C Device Data Interface specifications
 * (https://arrow.apache.org/docs/format/CDeviceDataInterface.html): release what you are
 * given, wait on an array's sync_event (a pointer to a CUevent) before reading it on a stream
 * of your own.
 */
#ifndef CUPARQUET_H
#define CUPARQUET_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The Arrow C Data Interface, as the specification defines it ---- */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
  const char* format;
  const char* name;
  const char* metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema** children;
  struct ArrowSchema* dictionary;
  void (*release)(struct ArrowSchema*);
  void* private_data;
};

struct ArrowArray {
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* dictionary;
  void (*release)(struct ArrowArray*);
  void* private_data;
};

#endif /* ARROW_C_DATA_INTERFACE */

/* ---- The Arrow C Device Data Interface ---- */
#ifndef ARROW_C_DEVICE_DATA_INTERFACE
#define ARROW_C_DEVICE_DATA_INTERFACE

typedef int32_t ArrowDeviceType;

#define ARROW_DEVICE_CPU 1
#define ARROW_DEVICE_CUDA 2
#define ARROW_DEVICE_CUDA_HOST 3
#define ARROW_DEVICE_OPENCL 4
#define ARROW_DEVICE_VULKAN 7
#define ARROW_DEVICE_METAL 8
#define ARROW_DEVICE_VPI 9
#define ARROW_DEVICE_ROCM 10
#define ARROW_DEVICE_ROCM_HOST 11
#define ARROW_DEVICE_EXT_DEV 12
#define ARROW_DEVICE_CUDA_MANAGED 13
#define ARROW_DEVICE_ONEAPI 14
#define ARROW_DEVICE_WEBGPU 15
#define ARROW_DEVICE_HEXAGON 16

struct ArrowDeviceArray {
  struct ArrowArray array;
  int64_t device_id;
  ArrowDeviceType device_type;
  void* sync_event;
  int64_t reserved[3];
};

#endif /* ARROW_C_DEVICE_DATA_INTERFACE */

#ifndef ARROW_C_DEVICE_STREAM_INTERFACE
#define ARROW_C_DEVICE_STREAM_INTERFACE

struct ArrowDeviceArrayStream {
  ArrowDeviceType device_type;
  int (*get_schema)(struct ArrowDeviceArrayStream* self, struct ArrowSchema* out);
  int (*get_next)(struct ArrowDeviceArrayStream* self, struct ArrowDeviceArray* out);
  const char* (*get_last_error)(struct ArrowDeviceArrayStream* self);
  void (*release)(struct ArrowDeviceArrayStream* self);
  void* private_data;
};

#endif /* ARROW_C_DEVICE_STREAM_INTERFACE */

/* ---- cuparquet ---- */

/* Error codes. */
#define CUPARQUET_OK 0
/* a null pointer, a string that is not UTF-8, an unknown column or device, a bad filter */
#define CUPARQUET_ERROR_INVALID_ARGUMENT 1
/* the file could not be opened or read */
#define CUPARQUET_ERROR_IO 2
/* the file is not valid Parquet, or files read together differ */
#define CUPARQUET_ERROR_FORMAT 3
/* the file uses something cuparquet does not read (encryption, ...) */
#define CUPARQUET_ERROR_UNSUPPORTED 4
/* the device cannot be used (no GPU, a CUDA or cuFile call failed) */
#define CUPARQUET_ERROR_DEVICE 5
/* a row group does not fit the memory budget */
#define CUPARQUET_ERROR_MEMORY 6
/* a bug in cuparquet (a panic, caught at the boundary) */
#define CUPARQUET_ERROR_INTERNAL 7

/* A reader: one file, or the *.parquet files of a directory read as one stream. */
typedef struct CuparquetReader cuparquet_reader;

/*
 * Opens `path` (a Parquet file; a directory whose *.parquet files, at any depth, are read
 * as one, in path order, hive `key=value` directories giving columns; or a glob) to read `columns` (comma-separated names or dotted paths, e.g. "a, s.b";
 * NULL: every column) of the rows where `filter` is true (SQL's WHERE in cuparquet's
 * predicate language, e.g. "x > 5 AND s = 'a'"; NULL: every row) onto `device` ("auto",
 * "host", "cuda:N"; NULL: "auto"). Footers are read and the load planned here. On success
 * *out is the reader; close it with cuparquet_close.
 */
int cuparquet_open(const char* path, const char* columns, const char* filter,
                   const char* device, cuparquet_reader** out);

/* The schema of the reader's batches (a struct, one child per column); release it. */
int cuparquet_reader_schema(const cuparquet_reader* reader, struct ArrowSchema* out);

/* Where the batches will live: ARROW_DEVICE_CUDA and the ordinal, or ARROW_DEVICE_CPU and -1.
 * Either pointer may be NULL. */
int cuparquet_reader_device(const cuparquet_reader* reader, ArrowDeviceType* device_type,
                            int64_t* device_id);

/* Starts reading: *out becomes a stream of the reader's batches (about 2^20 rows each, on the
 * reader's device, without a copy); release it. A reader may be streamed more than once and
 * closed while its streams are in use. */
int cuparquet_reader_stream(const cuparquet_reader* reader, struct ArrowDeviceArrayStream* out);

/* Closes a reader (NULL: nothing). */
void cuparquet_close(cuparquet_reader* reader);

/* cuparquet_open and cuparquet_reader_stream in one call. */
int cuparquet_stream(const char* path, const char* columns, const char* filter,
                     const char* device, struct ArrowDeviceArrayStream* out);

/* The bytes of device memory cuparquet's allocations on CUDA device `device` hold now (loads in
 * flight, batches not yet released by cuparquet or by the consumers they were exported to) and
 * the most they held at once. Either pointer may be NULL. 0 live bytes once every stream and
 * array is released: a leak check. */
int cuparquet_device_memory(int device, int64_t* live, int64_t* peak);

/* The message of the last call that failed on this thread (valid until the next failing call
 * on it), or NULL. */
const char* cuparquet_last_error(void);

/* The library's version, e.g. "0.1.0". */
const char* cuparquet_version(void);

#ifdef __cplusplus
}
#endif

#endif /* CUPARQUET_H */
