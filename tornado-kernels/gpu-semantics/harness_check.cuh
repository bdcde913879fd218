// The semantics programs' comparison of a GPU output with the JVM's (every gpu-semantics/<kernel>.cu includes it):
// equal bits, or for float/double outputs within ulp units in the last place, or any NaN for any NaN with anyNan.
#pragma once
#include <cstdio>

static int check(const char* name, int i, unsigned long long got, unsigned long long want, int width, int fp, int ulp, int anyNan) {
  if (got == want) return 0;
  if (fp && (ulp > 0 || anyNan)) {
    unsigned long long sign = 1ull << (width - 1), expMask = width == 32 ? 0x7f800000ull : 0x7ff0000000000000ull;
    unsigned long long mant = width == 32 ? 0x7fffffull : 0xfffffffffffffull;
    bool gotNan = (got & expMask) == expMask && (got & mant) != 0, wantNan = (want & expMask) == expMask && (want & mant) != 0;
    if (gotNan && wantNan && anyNan) return 0;
    long long og = (got & sign) ? -(long long)(got & ~sign) : (long long)got;
    long long ow = (want & sign) ? -(long long)(want & ~sign) : (long long)want;
    if (!gotNan && !wantNan && (og - ow <= ulp && ow - og <= ulp)) return 0;
  }
  fprintf(stderr, "MISMATCH %s[%d]: gpu 0x%llx, jvm 0x%llx\n", name, i, got, want);
  return 1;
}
