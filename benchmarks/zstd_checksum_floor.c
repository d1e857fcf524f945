// The floor under the overhead of zstd's content checksum (issue 51 §1):
// what libzstd itself spends verifying a frame's checksum (XXH64 of the
// decoded bytes) when it decodes a 1 KiB record, with no reader around it.
// benchmarks/record_checks.py measures the same through sackli; this is
// the part no reader can remove while it verifies the checksum.
//
// It compresses N records of 1 KiB (half random bytes, half a phrase, as
// record_checks.py makes them) twice, with and without the checksum flag,
// then decodes every frame of each kind into a reused buffer with one
// ZSTD_DCtx, alternating the two kinds, and prints the best of 40 passes
// (the least disturbed by other work on the machine) per record.
//
//   gcc -O2 -Ithird_party/zstd benchmarks/zstd_checksum_floor.c
//       third_party/zstd/zstd.c -o /tmp/zstd_checksum_floor -lpthread
// (one command, from the repository root)
//   /tmp/zstd_checksum_floor

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "zstd.h"

enum { kRecords = 20000, kSize = 1024, kPasses = 40 };

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// Decodes every frame of `frames` (kRecords of them, `bound` bytes apart,
// sizes in `sizes`) into `out`; returns the seconds it took.
static double DecodeAll(ZSTD_DCtx* dctx, const char* frames, const size_t* sizes,
                        size_t bound, char* out) {
  const double start = Now();
  for (size_t i = 0; i < kRecords; i++) {
    if (ZSTD_isError(ZSTD_decompressDCtx(dctx, out, kSize, frames + i * bound, sizes[i]))) {
      fprintf(stderr, "frame %zu does not decode\n", i);
      exit(1);
    }
  }
  return Now() - start;
}

int main(void) {
  const char phrase[] = "a record of a training set ";
  const size_t bound = ZSTD_compressBound(kSize);
  char* records = malloc((size_t)kRecords * kSize);
  char* frames[2] = {malloc(kRecords * bound), malloc(kRecords * bound)};
  size_t* sizes[2] = {malloc(kRecords * sizeof(size_t)), malloc(kRecords * sizeof(size_t))};
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  srand(1);
  for (size_t i = 0; i < kRecords; i++) {
    char* record = records + i * kSize;
    for (size_t k = 0; k < kSize; k++) {
      record[k] = k < kSize / 2 ? (char)rand() : phrase[k % (sizeof(phrase) - 1)];
    }
    for (int checked = 0; checked < 2; checked++) {
      ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, checked);
      sizes[checked][i] = ZSTD_compress2(cctx, frames[checked] + i * bound, bound, record, kSize);
    }
  }
  char out[kSize];
  double best[2] = {1e9, 1e9};
  for (int pass = 0; pass < kPasses; pass++) {
    for (int checked = 0; checked < 2; checked++) {
      const double took = DecodeAll(dctx, frames[checked], sizes[checked], bound, out);
      if (took < best[checked]) best[checked] = took;
    }
  }
  printf("1 KiB frame, best of %d passes: %.0f ns to decode without the checksum, %.0f ns with "
         "(%.0f ns to verify it)\n", kPasses, best[0] / kRecords * 1e9, best[1] / kRecords * 1e9,
         (best[1] - best[0]) / kRecords * 1e9);
  return 0;
}
