/*
 * Reads a Parquet file (or a directory of them) through cuparquet's C API and walks the
 * Arrow C Device Data Interface stream it returns: the schema, then every batch with the
 * device it lives on; for batches in host memory, the sum of every 64-bit integer column
 * (read in place, honouring offsets and nulls) to show the buffers are plain Arrow.
 *
 * Build (from the repository root):
 *   cargo rustc --release --lib --features capi --crate-type cdylib
 *   cc -std=c11 -Wall -Wextra -Iinclude examples/c/stream.c -Ltarget/release -lcuparquet \
 *      -Wl,-rpath,"$PWD/target/release" -o target/stream
 * Run:
 *   target/stream FILE [COLUMNS|-] [FILTER|-] [DEVICE]
 *   target/stream testdata/lineitem-sample.parquet - "l_quantity < 10" host
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuparquet.h"

static const char* arg(int argc, char** argv, int i) {
  return (argc > i && strcmp(argv[i], "-") != 0) ? argv[i] : NULL;
}

/* The sum of the valid values of an int64 array in host memory. */
static int64_t sum_int64(const struct ArrowArray* a) {
  const uint8_t* valid = (const uint8_t*)a->buffers[0];
  const int64_t* values = (const int64_t*)a->buffers[1];
  int64_t sum = 0;
  for (int64_t i = a->offset; i < a->offset + a->length; i++) {
    if (valid == NULL || (valid[i / 8] >> (i % 8)) & 1) sum += values[i];
  }
  return sum;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE [COLUMNS|-] [FILTER|-] [DEVICE]\n", argv[0]);
    return 2;
  }
  struct ArrowDeviceArrayStream stream;
  if (cuparquet_stream(argv[1], arg(argc, argv, 2), arg(argc, argv, 3), arg(argc, argv, 4),
                       &stream) != CUPARQUET_OK) {
    fprintf(stderr, "error: %s\n", cuparquet_last_error());
    return 1;
  }
  struct ArrowSchema schema;
  if (stream.get_schema(&stream, &schema) != 0) {
    fprintf(stderr, "error: %s\n", stream.get_last_error(&stream));
    stream.release(&stream);
    return 1;
  }
  printf("cuparquet %s, %s, %" PRId64 " columns:", cuparquet_version(),
         stream.device_type == ARROW_DEVICE_CUDA ? "CUDA device memory" : "host memory",
         schema.n_children);
  for (int64_t c = 0; c < schema.n_children; c++)
    printf(" %s (%s)", schema.children[c]->name, schema.children[c]->format);
  printf("\n");

  int64_t* sums = calloc((size_t)schema.n_children + 1, sizeof(int64_t));
  int64_t rows = 0, batches = 0;
  int rc = 0;
  for (;;) {
    struct ArrowDeviceArray batch;
    if (stream.get_next(&stream, &batch) != 0) {
      fprintf(stderr, "error: %s\n", stream.get_last_error(&stream));
      rc = 1;
      break;
    }
    if (batch.array.release == NULL) break; /* the end */
    printf("batch %" PRId64 ": %" PRId64 " rows on %s %" PRId64 "%s\n", batches,
           batch.array.length, batch.device_type == ARROW_DEVICE_CUDA ? "cuda" : "cpu",
           batch.device_id, batch.sync_event ? " (sync_event set)" : "");
    if (batch.device_type == ARROW_DEVICE_CPU) {
      for (int64_t c = 0; c < batch.array.n_children; c++)
        if (strcmp(schema.children[c]->format, "l") == 0)
          sums[c] += sum_int64(batch.array.children[c]);
    }
    rows += batch.array.length;
    batches++;
    batch.array.release(&batch.array);
  }
  printf("rows: %" PRId64 " in %" PRId64 " batches\n", rows, batches);
  if (stream.device_type == ARROW_DEVICE_CPU) {
    for (int64_t c = 0; c < schema.n_children; c++)
      if (strcmp(schema.children[c]->format, "l") == 0)
        printf("sum(%s) = %" PRId64 "\n", schema.children[c]->name, sums[c]);
  }
  free(sums);
  schema.release(&schema);
  stream.release(&stream);
  return rc;
}
