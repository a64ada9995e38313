#!/usr/bin/env python3
"""bench/server_speed: prompt and decode speed through cairn-server, as a
client sees the engine behind gRPC: what bench/forward measures in process,
plus the server's per-token path (scheduler hand-offs, sampling, stop
checks, detokenizing, stream writes).

Starts cairn-server on --model with --threads compute threads, then per
round sends one request of --prompt random token ids (new ids each round, so
nothing is reused) with a one-token reply, then one of a single random token
with a greedy reply of --decode tokens (EOS ignored): decode from an empty
context, as llama-bench's tg measures it (--decode-after-prompt: the reply of
the first request instead, decoding after --prompt tokens of context). It
reads the server's own Timings from Finished: prompt tokens/s =
--prompt / prefill_seconds (prompt processing without the queue), decode
tokens/s = decode_tokens_per_second ((tokens - 1) / decode_seconds, the steps
after the first token). Prints each round and
then, in bench/forward's format (which bench/vs_llamacpp.sh reads):

  median of N rounds: prompt (ppP) X tokens/s, decode (tgD) Y tokens/s

and one more line on the decode steps' per-token path (medians, from the
first token's arrival to the end): the tokens/s the client sees, and CPU
time per step from /proc (Linux, in clock ticks): the server's --threads busiest
threads (the compute threads, whose Forward the steps wait for), its other
threads (gRPC, the stream writers; also as a share of one compute thread's
time, about a step's) and the client's process. On a machine with no core to
spare, CPU taken by the other threads delays the compute threads by about as
much.

  python3 bench/server_speed.py --cairn-server build/service/cairn-server \
      --model path/to/model.gguf [--threads 2] [--prompt 512] [--decode 32] [--rounds 3]
"""
import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "service"))
import server_process  # noqa: E402  (the real cairn-server process helpers)
from serving import Cairn  # noqa: E402  (bench/serving.py: the server process and its gRPC client)


def thread_cpu_seconds(pid):
    """{thread id: user + system CPU seconds} of process `pid` ({} without /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended
        out[tid] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14, 15)
    return out


def split_cpu(before, after, compute_threads):
    """(compute, other): CPU seconds of the `compute_threads` busiest threads
    between two thread_cpu_seconds snapshots, and of the rest."""
    used = sorted((after[t] - before.get(t, 0.0) for t in after), reverse=True)
    return sum(used[:compute_threads]), sum(used[compute_threads:])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cairn-server", required=True, help="the cairn-server binary")
    p.add_argument("--model", required=True, help="the GGUF to serve")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prompt", type=int, default=512, help="prompt tokens per request")
    p.add_argument("--decode", type=int, default=32, help="greedy tokens per reply (at least 2)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--decode-after-prompt", action="store_true",
                   help="decode right after the --prompt tokens in the same request (by default the decode is a "
                   "second request with a one-token prompt, as llama-bench's tg starts from an empty context)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cairn-arg", action="append", default=[], help="an extra cairn-server flag (repeatable)")
    p.add_argument("--proto-dir", default=os.path.join(HERE, "..", "protos"))
    p.add_argument("--protoc", default=shutil.which("protoc"))
    p.add_argument("--plugin", default=shutil.which("grpc_python_plugin"))
    p.set_defaults(cairn_http=False, logprobs=False)  # what serving.Cairn reads besides the above
    args = p.parse_args()
    if args.prompt < 1 or args.decode < 2 or args.rounds < 1 or args.threads < 1:
        sys.exit("server_speed: --prompt, --rounds and --threads must be >= 1, --decode >= 2")
    if not args.protoc or not args.plugin:
        sys.exit("server_speed: protoc and grpc_python_plugin are needed (scripts/setup.sh installs them)")

    with tempfile.TemporaryDirectory() as stubs:
        server_process.generate_stubs(args, stubs)
        cairn = Cairn(args, stubs)
        pb = cairn.pb
        try:
            n_vocab = cairn.n_vocab()
            rng = random.Random(args.seed)
            prompt_tps, decode_tps = [], []
            client_tps, compute_ms, other_ms, client_ms = [], [], [], []

            def generate(r, ids, max_tokens):
                """The server's Timings; per decoded token, client-seen
                tokens/s and CPU figures are appended to the lists above."""
                req = pb.GenerateRequest(model="bench", parts=[pb.PromptPart(tokens=pb.TokenIds(ids=ids))],
                                         sampling=pb.SamplingParams(temperature=0.0),
                                         stop=pb.StopParams(max_tokens=max_tokens, ignore_eos=True))
                finished = None
                arrivals = []
                for ev in cairn.stub.Generate(req, timeout=3600):
                    kind = ev.WhichOneof("event")
                    if kind == "token":
                        arrivals.append(time.perf_counter())
                        if len(arrivals) == 1:  # the decode steps start: CPU from here
                            server_before = thread_cpu_seconds(cairn.proc.pid)
                            client_before = time.process_time()
                    elif kind == "finished":
                        finished = ev.finished
                if finished is None or finished.usage.completion_tokens != max_tokens:
                    sys.exit("server_speed: round %d ended without %d tokens: %s" % (r + 1, max_tokens, finished))
                if finished.usage.recomputed_tokens != len(ids):
                    sys.exit("server_speed: round %d recomputed %d of %d prompt tokens (a reuse would not measure "
                             "the prompt)" % (r + 1, finished.usage.recomputed_tokens, len(ids)))
                steps = len(arrivals) - 1
                if steps > 0 and arrivals[-1] > arrivals[0]:
                    client_cpu = time.process_time() - client_before
                    compute, other = split_cpu(server_before, thread_cpu_seconds(cairn.proc.pid), args.threads)
                    client_tps.append(steps / (arrivals[-1] - arrivals[0]))
                    compute_ms.append(1000 * compute / steps)
                    other_ms.append(1000 * other / steps)
                    client_ms.append(1000 * client_cpu / steps)
                return finished.timings

            first_ids = set()  # a prompt starting as an earlier one would reuse its first token

            def random_ids(n):
                while True:
                    ids = [rng.randrange(min(16, n_vocab // 2), n_vocab) for _ in range(n)]  # past control tokens
                    if ids[0] not in first_ids:
                        first_ids.add(ids[0])
                        return ids

            for r in range(args.rounds):
                if args.decode_after_prompt:
                    prompt_t = decode_t = generate(r, random_ids(args.prompt), args.decode)
                else:
                    prompt_t = generate(r, random_ids(args.prompt), 1)
                    decode_t = generate(r, random_ids(1), args.decode)
                prompt_tps.append(args.prompt / prompt_t.prefill_seconds)
                decode_tps.append(decode_t.decode_tokens_per_second)
                print("round %d: prompt %.1f tokens/s (%.3f s), decode %.2f tokens/s (%.3f s for %d tokens), "
                      "as the client sees it %.2f tokens/s" %
                      (r + 1, prompt_tps[-1], prompt_t.prefill_seconds, decode_tps[-1], decode_t.decode_seconds,
                       args.decode - 1, client_tps[-1] if client_tps else 0.0),
                      flush=True)
        finally:
            cairn.stop()
    print("median of %d rounds: prompt (pp%d) %.2f tokens/s, decode (tg%d) %.2f tokens/s" %
          (args.rounds, args.prompt, statistics.median(prompt_tps), args.decode, statistics.median(decode_tps)))
    if client_tps:
        med = statistics.median
        print("per decoded token (medians): the client sees %.2f tokens/s; CPU ms: server compute threads %.3f, "
              "server other threads %.3f (%.2f%% of a compute thread's), client %.3f" %
              (med(client_tps), med(compute_ms), med(other_ms),
               100 * med(other_ms) * args.threads / max(med(compute_ms), 1e-9), med(client_ms)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
