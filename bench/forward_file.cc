// bench/forward_file: the same measurement as `bench/forward --model ...`
// (bench/file_speed.h), under the name earlier notes and scripts use.
//
//   forward_file --model PATH.gguf|NAME [--threads 2] [--prompt 512]
//                [--decode 32] [--rounds 3] [--batch 1]
#include "bench/file_speed.h"

int main(int argc, char** argv) { return cairn::bench::FileSpeedMain(argc, argv, "forward_file"); }
