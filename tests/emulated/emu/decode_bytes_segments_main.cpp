// The byte-array emulator (decode_bytes_main.cpp) with DELTA_BYTE_ARRAY segments of 3 values,
// so that test pages spread over many blocks and prefixes reach across segments.
#define DBA_SEGMENT 3
#include "decode_bytes_main.cpp"
