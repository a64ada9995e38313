#!/usr/bin/env python3
"""bench/serving: many agent users at once against cairn-server, and
optionally against llama-server on the same GGUF.

Each of --users users runs a multi-turn agent conversation and resends the
WHOLE conversation every turn (no sessions), as an OpenAI-style client does:
a system prompt shared by every user (--system-tokens), then per turn a tool
result of --tool-tokens random ids and a greedy reply of --reply-tokens
tokens (EOS ignored), which the next turn's prompt carries. Prompts are token
ids, with no message-boundary marks, so both servers see the same thing and
neither gets a hint. The users start together, which is the hard case for a
shared prefix.

Printed per server: completion tokens/s over the run, time to first token
p50/p90/p99, prompt tokens processed (recomputed) against the minimum (the
system prompt once, plus each turn's new tokens: the tool result and the
previous reply's last token, which a server samples but never feeds), and
the wall time. cairn's processed figure is the sum of PromptInfo's
recomputed_tokens; llama-server's the sum of timings.prompt_n.

With --cairn-http, cairn is driven through its OpenAI HTTP door instead
(/v1/completions with token-id prompts and return_token_ids, streamed with
the usage): processed is prompt_tokens - cached_tokens, and the sum must
equal the server's cairn_recomputed_positions_total (the run fails
otherwise).

Then, unless --no-check, every user's conversation is replayed alone on a
fresh cairn-server: the replies under load must equal the single-user
replies token for token (the run fails otherwise). With --logprobs (gRPC),
cairn also returns each token's log-probability and the check compares
them bit for bit too: a numeric difference batching made shows even where
it does not flip a token.

  python3 bench/serving.py --cairn-server build/service/cairn-server \
      --model path/to/model.gguf [--llama-server path/to/llama-server]

Both servers get --threads compute threads; llama-server gets one slot per
user (-np USERS, each user's requests pinned to its slot with id_slot) and a
context of USERS x the longest conversation. Times are what a client sees
over a real socket on whatever else the machine does: compare figures of one
run only.
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "service"))
import server_process  # noqa: E402  (the real cairn-server process helpers)


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


_GGUF_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_TOKEN_TYPE_BYTE, _TOKEN_TYPE_NORMAL = 6, 1


def copy_with_byte_tokens_normal(src, dst):
    """Copies the GGUF `src` to `dst` with every byte token (type 6) retyped
    as a normal piece, in place in tokenizer.ggml.token_type (same size, so
    nothing else moves). Why: llama-server 7e743c3 fails a request (HTTP 500,
    "does not match the expected Content-only format") when a reply holds a
    lone byte token (invalid UTF-8), which random-weight bench models emit;
    served as a normal piece the token's text is its name, valid UTF-8. Both
    servers serve the copy. Returns the number of tokens retyped."""
    import struct
    shutil.copyfile(src, dst)
    with open(dst, "r+b") as f:
        read = lambda fmt: struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]
        if f.read(4) != b"GGUF":
            raise RuntimeError("%s is not a GGUF file" % src)
        read("I")
        read("Q")
        n_kv = read("Q")

        def skip(vtype):
            if vtype == 8:
                f.seek(read("Q"), 1)
            elif vtype == 9:
                etype, count = read("I"), read("Q")
                if etype in _GGUF_SCALAR:
                    f.seek(_GGUF_SCALAR[etype] * count, 1)
                else:
                    for _ in range(count):
                        skip(etype)
            else:
                f.seek(_GGUF_SCALAR[vtype], 1)

        for _ in range(n_kv):
            key = f.read(read("Q")).decode()
            vtype = read("I")
            if key == "tokenizer.ggml.token_type" and vtype == 9:
                etype, count = read("I"), read("Q")
                if etype != 5:
                    raise RuntimeError("token_type array of type %d" % etype)
                start = f.tell()
                types = list(struct.unpack("<%di" % count, f.read(4 * count)))
                n = sum(1 for t in types if t == _TOKEN_TYPE_BYTE)
                types = [_TOKEN_TYPE_NORMAL if t == _TOKEN_TYPE_BYTE else t for t in types]
                f.seek(start)
                f.write(struct.pack("<%di" % count, *types))
                return n
            skip(vtype)
    return 0


class Workload:
    """The conversations: the shared system prompt and each user's tool
    results, drawn from one seed, so every server sees the same ids."""

    def __init__(self, args, n_vocab):
        rng = random.Random(args.seed)
        low = min(16, n_vocab // 2)  # past the control tokens of small vocabularies
        draw = lambda n: [rng.randrange(low, n_vocab) for _ in range(n)]
        self.system = draw(args.system_tokens)
        lo, hi = args.tool_tokens
        self.tools = [[draw(rng.randint(lo, hi)) for _ in range(args.turns)] for _ in range(args.users)]
        self.reply_tokens = args.reply_tokens

    def minimum(self):
        """Prompt tokens no server can avoid computing."""
        total = len(self.system)
        for tools in self.tools:
            total += sum(len(t) for t in tools) + (len(tools) - 1)
        return total

    def longest(self):
        return len(self.system) + max(sum(len(t) for t in tools) for tools in self.tools) + \
            len(self.tools[0]) * self.reply_tokens


def post_events(port, path, body, who):
    """POSTs `body` (a dict, as JSON) to 127.0.0.1:port`path` and yields
    each server-sent event's data as a dict, until `data: [DONE]` or the
    end of the response; a non-200 status or an error event raises,
    naming `who`."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    try:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = c.getresponse()
        if resp.status != 200:
            raise RuntimeError("%s: HTTP %d %s" % (who, resp.status, resp.read()[:300]))
        for raw in resp:
            line = raw.decode().strip()
            if line == "data: [DONE]":
                return
            if not line.startswith("data: "):
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                raise RuntimeError("%s: %s" % (who, chunk["error"].get("message")))
            yield chunk
    finally:
        c.close()


class Result:
    def __init__(self):
        self.lock = threading.Lock()
        self.ttft = []
        self.completion = 0
        self.processed = 0
        self.replies = {}  # user -> [reply ids per turn]
        self.logprobs = {}  # user -> [the reply's log-probabilities per turn] (--logprobs)
        self.errors = []


def run_users(workload, send, users, result):
    """Runs `users` (indices) concurrently, one thread each; `send(user,
    prompt)` returns (ttft seconds, reply ids, processed prompt tokens[,
    the reply's log-probabilities])."""

    def user(u):
        prompt = list(workload.system)
        replies = []
        logprobs = []
        try:
            for tool in workload.tools[u]:
                prompt += tool
                ttft, reply, processed, *rest = send(u, prompt)
                if rest:
                    logprobs.append(rest[0])
                if len(reply) != workload.reply_tokens:
                    raise RuntimeError("user %d: %d reply tokens, expected %d" % (u, len(reply),
                                                                                   workload.reply_tokens))
                replies.append(reply)
                prompt += reply
                with result.lock:
                    result.ttft.append(ttft)
                    result.completion += len(reply)
                    result.processed += processed
        except Exception as e:  # reported, and the run fails
            with result.lock:
                result.errors.append("user %d: %s" % (u, e))
        with result.lock:
            result.replies[u] = replies
            result.logprobs[u] = logprobs

    threads = [threading.Thread(target=user, args=(u,)) for u in users]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - start


class Cairn:
    """A cairn-server process and a gRPC client of it."""

    def __init__(self, args, stubs_dir):
        import grpc
        self.grpc = grpc
        from cairn.v1 import inference_pb2 as pb
        from cairn.v1 import inference_pb2_grpc as pbg
        self.pb = pb
        self.usage_lock = threading.Lock()
        self.cached_tokens = 0
        self.lines = []
        extra = ["--http-listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0"] if args.cairn_http else []
        self.proc, port, self.metrics_port = server_process.start(args.cairn_server, "--model=bench=" + args.model,
                                                                  "--threads=%d" % args.threads,
                                                                  "--log-level=warning", *extra, *args.cairn_arg,
                                                                  lines=self.lines)
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % port)
        self.stub = pbg.InferenceStub(self.channel)
        self.http_port = server_process.wait_for_http_port(self.lines) if args.cairn_http else None
        if args.cairn_http and self.http_port is None:
            raise RuntimeError("cairn-server reported no HTTP port:\n" + "".join(self.lines))
        self.send = self.send_http if args.cairn_http else self.send_grpc
        self.logprobs = args.logprobs

    def n_vocab(self):
        for m in self.stub.ListModels(self.pb.ListModelsRequest(), timeout=60).models:
            if m.name == "bench":
                return m.n_vocab
        raise RuntimeError("cairn-server does not serve 'bench'")

    def send_grpc(self, user, prompt):
        pb = self.pb
        req = pb.GenerateRequest(model="bench", parts=[pb.PromptPart(tokens=pb.TokenIds(ids=prompt))],
                                 sampling=pb.SamplingParams(temperature=0.0), logprobs=self.logprobs,
                                 stop=pb.StopParams(max_tokens=REPLY_TOKENS, ignore_eos=True))
        start = time.monotonic()
        ttft = None
        reply = []
        logprobs = []
        processed = 0
        for ev in self.stub.Generate(req, timeout=3600):
            kind = ev.WhichOneof("event")
            if kind == "prompt":
                processed = ev.prompt.recomputed_tokens
            elif kind == "token":
                if ttft is None:
                    ttft = time.monotonic() - start
                reply.append(ev.token.id)
                logprobs.append(ev.token.logprob)
        return (ttft, reply, processed, logprobs) if self.logprobs else (ttft, reply, processed)

    def send_http(self, user, prompt):
        """Through the OpenAI door: /v1/completions with token ids, streamed,
        with the ids of the reply (return_token_ids) and the usage; the
        prompt tokens processed are prompt_tokens - cached_tokens."""
        body = {"model": "bench", "prompt": prompt, "max_tokens": REPLY_TOKENS, "temperature": 0, "ignore_eos": True,
                "stream": True, "stream_options": {"include_usage": True}, "return_token_ids": True}
        start = time.monotonic()
        ttft = None
        reply = []
        usage = None
        for chunk in post_events(self.http_port, "/v1/completions", body, "cairn HTTP"):
            for choice in chunk.get("choices", []):
                if choice.get("token_ids"):
                    if ttft is None:
                        ttft = time.monotonic() - start
                    reply += choice["token_ids"]
            if chunk.get("usage"):
                usage = chunk["usage"]
        if usage is None:
            raise RuntimeError("cairn HTTP: no usage chunk")
        with self.usage_lock:
            self.cached_tokens += usage["prompt_tokens_details"]["cached_tokens"]
        return ttft, reply, usage["prompt_tokens"] - usage["prompt_tokens_details"]["cached_tokens"]

    def server_recomputed(self):
        """cairn_recomputed_positions_total from /metrics (all models)."""
        c = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=30)
        c.request("GET", "/metrics")
        total = 0.0
        for line in c.getresponse().read().decode().splitlines():
            if line.startswith("cairn_recomputed_positions_total"):
                total += float(line.rsplit(" ", 1)[1])
        return int(total)

    def stop(self):
        self.channel.close()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """A llama-server process (one slot per user) and an HTTP client of its
    /completion endpoint, streaming."""

    def __init__(self, args, workload):
        self.port = free_port()
        ctx = args.users * (workload.longest() + 64)
        cmd = [args.llama_server, "-m", args.model, "--host", "127.0.0.1", "--port", str(self.port), "-t",
               str(args.threads), "-tb", str(args.threads), "-np", str(args.users), "-c", str(ctx),
               "--no-warmup"] + args.llama_arg
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError("llama-server exited:\n" + self.log.read()[-4000:])
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError("llama-server did not become healthy in 300 s")

    def send(self, user, prompt):
        body = {"prompt": prompt, "n_predict": REPLY_TOKENS, "temperature": 0, "top_k": 1, "ignore_eos": True,
                "cache_prompt": True, "stream": True, "return_tokens": True, "id_slot": user}
        start = time.monotonic()
        ttft = None
        reply = []
        processed = 0
        for chunk in post_events(self.port, "/completion", body, "llama-server"):
            if chunk.get("tokens"):
                if ttft is None:
                    ttft = time.monotonic() - start
                reply += chunk["tokens"]
            if chunk.get("stop"):
                processed = chunk.get("timings", {}).get("prompt_n", 0)
        return ttft, reply, processed

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def report(name, result, seconds, minimum):
    ttft = result.ttft
    print("%-12s completion %6.2f tok/s  TTFT p50 %7.2f s  p90 %7.2f s  p99 %7.2f s  prompt processed %6d "
          "(min %d, %.3fx)  wall %.1f s" %
          (name, result.completion / seconds, percentile(ttft, 50), percentile(ttft, 90), percentile(ttft, 99),
           result.processed, minimum, result.processed / minimum, seconds), flush=True)


REPLY_TOKENS = 32


def main():
    global REPLY_TOKENS
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cairn-server", required=True, help="the cairn-server binary")
    p.add_argument("--model", required=True, help="the GGUF both servers serve")
    p.add_argument("--llama-server", help="a llama-server binary to compare with (optional)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--users", type=int, default=8)
    p.add_argument("--turns", type=int, default=6)
    p.add_argument("--system-tokens", type=int, default=600)
    p.add_argument("--tool-tokens", default="60:250", help="LOW:HIGH tokens of a tool result")
    p.add_argument("--reply-tokens", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-check", action="store_true", help="skip the single-user replay of cairn")
    p.add_argument("--logprobs", action="store_true",
                   help="cairn returns each token's log-probability and the single-user check compares them bit for "
                   "bit (gRPC only)")
    p.add_argument("--cairn-http", action="store_true",
                   help="drive cairn through its OpenAI HTTP door (/v1/completions with token ids) instead of gRPC, "
                   "and check the usage's cached_tokens against the server's own reuse counter")
    p.add_argument("--cairn-arg", action="append", default=[], help="an extra cairn-server flag (repeatable)")
    p.add_argument("--llama-arg", action="append", default=[], help="an extra llama-server flag (repeatable)")
    p.add_argument("--proto-dir", default=os.path.join(HERE, "..", "protos"))
    p.add_argument("--protoc", default=shutil.which("protoc"))
    p.add_argument("--plugin", default=shutil.which("grpc_python_plugin"))
    args = p.parse_args()
    if args.logprobs and args.cairn_http:
        sys.exit("serving: --logprobs is for gRPC (without --cairn-http)")
    lo, hi = (int(x) for x in args.tool_tokens.split(":"))
    args.tool_tokens = (lo, hi)
    REPLY_TOKENS = args.reply_tokens
    if not args.protoc or not args.plugin:
        sys.exit("serving: protoc and grpc_python_plugin are needed (scripts/setup.sh installs them)")

    with tempfile.TemporaryDirectory() as stubs:
        server_process.generate_stubs(args, stubs)
        if args.llama_server:
            served = os.path.join(stubs, "model.gguf")
            n = copy_with_byte_tokens_normal(args.model, served)
            print("serving: both servers serve a copy with %d byte tokens as normal pieces (see "
                  "copy_with_byte_tokens_normal)" % n, flush=True)
            args.model = served
        cairn = Cairn(args, stubs)
        try:
            workload = Workload(args, cairn.n_vocab())
            minimum = workload.minimum()
            print("serving: %d users x %d turns, system prompt %d, tool results %d-%d, replies %d, threads %d, "
                  "model %s" % (args.users, args.turns, args.system_tokens, lo, hi, args.reply_tokens, args.threads,
                                os.path.basename(args.model)), flush=True)
            loaded = Result()
            seconds = run_users(workload, cairn.send, range(args.users), loaded)
            failed = list(loaded.errors)
            if args.cairn_http:
                counted = cairn.server_recomputed()
                print("cairn HTTP usage: prompt tokens processed (prompt_tokens - cached_tokens) %d, cached_tokens "
                      "%d; server's cairn_recomputed_positions_total %d" %
                      (loaded.processed, cairn.cached_tokens, counted), flush=True)
                if counted != loaded.processed:
                    failed.append("cached_tokens disagree with the server's reuse figures")
        finally:
            cairn.stop()
        report("cairn-http" if args.cairn_http else "cairn", loaded, seconds, minimum)

        if args.llama_server:
            llama = LlamaServer(args, workload)
            try:
                theirs = Result()
                seconds = run_users(workload, llama.send, range(args.users), theirs)
            finally:
                llama.stop()
            report("llama-server", theirs, seconds, minimum)
            failed += ["llama-server " + e for e in theirs.errors]

        if not args.no_check:
            alone = Result()
            cairn = Cairn(args, stubs)
            try:
                for u in range(args.users):
                    run_users(workload, cairn.send, [u], alone)
            finally:
                cairn.stop()
            failed += alone.errors
            same = sum(1 for u in range(args.users) if alone.replies.get(u) == loaded.replies.get(u) and
                       alone.logprobs.get(u) == loaded.logprobs.get(u))
            print("cairn replies under load equal single-user replies%s: %d of %d users" %
                  (" (tokens and log-probabilities)" if args.logprobs else "", same, args.users))
            if same != args.users:
                failed.append("replies under load differ from single-user replies")

    for e in failed:
        print("serving: FAILED: " + e, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
