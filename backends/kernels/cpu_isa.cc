#include "backends/kernels/cpu_isa.h"

#include <cstdio>
#include <cstdlib>

namespace cairn {
namespace {

constexpr Isa kAllIsas[] = {Isa::kAvx512Vnni, Isa::kAvx2, Isa::kPortable};

Isa ReadCap() {
  const char* env = std::getenv("CAIRN_ISA");
  if (env == nullptr || *env == '\0') return Isa::kAvx512Vnni;
  for (Isa isa : kAllIsas) {
    if (IsaName(isa) == env) return isa;
  }
  std::fprintf(stderr, "cairn: CAIRN_ISA=%s is not one of avx512vnni, avx2, portable; ignored\n", env);
  return Isa::kAvx512Vnni;
}

}  // namespace

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAvx512Vnni:
      return "avx512vnni";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kPortable:
      return "portable";
  }
  return "portable";
}

bool CpuRuns(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  switch (isa) {
    case Isa::kAvx512Vnni:
      return CpuRunsAvx512Float() && __builtin_cpu_supports("avx512vnni");
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case Isa::kPortable:
      return true;
  }
  return false;
#else
  return isa == Isa::kPortable;
#endif
}

bool CpuRunsAvx512Float() {
#if defined(__x86_64__) || defined(__i386__)
  // libgcc also checks that the OS saves the AVX-512 state (XCR0).
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && CpuRuns(Isa::kAvx2);
#else
  return false;
#endif
}

Isa IsaCap() {
  static const Isa cap = ReadCap();
  return cap;
}

bool Avx2Allowed() {
  static const bool allowed = static_cast<int>(IsaCap()) <= static_cast<int>(Isa::kAvx2) && CpuRuns(Isa::kAvx2);
  return allowed;
}

Isa BestIsa() {
  for (Isa isa : kAllIsas) {
    if (static_cast<int>(isa) >= static_cast<int>(IsaCap()) && CpuRuns(isa)) return isa;
  }
  return Isa::kPortable;
}

}  // namespace cairn
