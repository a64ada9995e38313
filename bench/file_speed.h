// Prompt and decode tokens/s of any GGUF file (or built-in demo model) on the
// backend the registry picks for it, measured the way `llama-bench -p P -n D
// -t T` measures, so that the two can run on the same file side by side:
//   prompt  one Forward of P tokens on a fresh sequence (logits of the last
//           row only), tokens/s;
//   decode  D Forwards of one token each on a fresh sequence from position 0
//           (llama-bench's tg runs without the prompt), tokens/s;
//   batch   with --batch N > 1, also D Forwards of N fresh sequences stepped
//           together (one token each, logits of each): total tokens/s and
//           the gain over one sequence measured in the same round.
// Each round runs them after one untimed warm-up Forward; the medians over
// --rounds are printed last, on one line starting "median of" (scripts such
// as bench/vs_llamacpp.sh read it). Also printed: the weight bytes the
// backend reads per forward token (ModelInfo::weight_bytes: for a mixture of
// experts, the router, the chosen experts and the shared expert) beside the
// bytes of all the file's tensors and of its expert tensors (*_exps).
//
// `bench/forward --model ...` and `bench/forward_file` both run it.
#ifndef CAIRN_BENCH_FILE_SPEED_H_
#define CAIRN_BENCH_FILE_SPEED_H_

namespace cairn::bench {

// Parses the flags (--model PATH.gguf|NAME, --threads 2, --prompt 512,
// --decode 32, --rounds 3, --batch 1, --exact-activations: F32 activations
// everywhere, or --vs-exact: also the exact path, rounds alternating, and the
// ratio of the medians) in argv[1..argc), runs the measurement
// and returns the process exit status: 2 with the usage (naming `program`)
// on a bad or missing flag, 1 with the status when the model cannot be
// loaded or run, 0 otherwise.
int FileSpeedMain(int argc, char** argv, const char* program);

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_FILE_SPEED_H_
