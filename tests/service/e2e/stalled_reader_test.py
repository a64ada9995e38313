#!/usr/bin/python3
"""Stalled readers with the default Python grpcio client: how many tokens a
real cairn-server process generates ahead of clients that stop reading, and
how much its memory grows meanwhile.

A default grpcio channel grows its HTTP/2 receive window while data flows
(BDP probing), so gRPC keeps completing the server's writes and the
server's backpressure (32 unwritten tokens) never engages: the server's own
bound is --max-tokens-limit, the most tokens one request generates (see
inference.proto, Inference.Generate). Each reader opens a session, asks for
2^20 tokens (ignore_eos), reads the PromptInfo message and then nothing.

As a test (the defaults): 2 readers on demo-recurrent with --checkpoints=off
and --max-tokens-limit=2000; once generation stops, each reader's stream
holds exactly 2000 tokens and a LENGTH finish, and the server's RSS grew
less than 16 MiB. As the measurement of issue 30 (tokens ahead and RSS
growth of 4 readers over 60 s):
  stalled_reader_test.py --server build/service/cairn-server --proto-dir protos \\
      --protoc $(which protoc) --plugin $(which grpc_python_plugin) \\
      --readers 4 --seconds 60 [--limit N | --limit 0 (the flag not given)] \\
      [--model PATH_OR_NAME]
prints the RSS every 5 s and, per reader, the tokens generated for it.
Needs Debian's python3-grpcio and python3-protobuf (/usr/bin/python3).
"""
import argparse
import os
import re
import signal
import sys
import tempfile
import time
import unittest
import urllib.request

# server_process.py is shared by the service tests in every folder.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import server_process  # noqa: E402

ARGS = None


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))


def generated_tokens(metrics_port):
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % metrics_port, timeout=10).read().decode()
    return sum(float(v) for v in re.findall(r"^cairn_generated_tokens_total(?:\{[^}]*\})? (\S+)$", body, re.M))


class StalledReaders:
    """`n` default-client streams on their own channels and sessions, each
    stalled after its PromptInfo message."""

    def __init__(self, port, model, n):
        import grpc
        from cairn.v1 import inference_pb2 as pb
        from cairn.v1 import inference_pb2_grpc as pbg
        self.grpc = grpc
        self.pb = pb
        self.channels = [grpc.insecure_channel("127.0.0.1:%d" % port) for _ in range(n)]
        self.stubs = [pbg.InferenceStub(c) for c in self.channels]
        self.sessions, self.calls = [], []
        for i, stub in enumerate(self.stubs):
            sid = stub.SessionControl(pb.SessionRequest(create=pb.CreateSession(model=model))).session.session_id
            r = pb.GenerateRequest(model=model, session_id=sid, append=True)
            r.parts.add().tokens.ids.extend([300 + i, 301, 302])
            r.stop.max_tokens = 1 << 20
            r.stop.ignore_eos = True
            call = stub.Generate(r)
            first = next(call)
            assert first.HasField("prompt"), first
            self.sessions.append(sid)
            self.calls.append(call)

    def ends(self):
        """Per reader, (tokens generated for it, how its stream ends): a
        stream still running is cancelled (its tokens are those its session
        reports written to the stream, SessionInfo.in_flight_tokens: all but
        at most 32 generated), a finished one read to its end (the tokens
        read, the finish reason's name)."""
        out = []
        for stub, sid, call in zip(self.stubs, self.sessions, self.calls):
            info = stub.SessionControl(self.pb.SessionRequest(get=self.pb.GetSession(session_id=sid))).session
            if info.busy:
                call.cancel()
                out.append((info.in_flight_tokens, "running"))
                continue
            tokens, end = 0, None
            try:
                for ev in call:
                    tokens += ev.HasField("token")
                    if ev.HasField("finished"):
                        end = self.pb.FinishReason.Name(ev.finished.reason)
            except self.grpc.RpcError as e:  # the status is the end
                end = str(e.code())
            out.append((tokens, end))
        return out

    def close(self):
        for c in self.calls:
            c.cancel()
        for c in self.channels:
            c.close()


def run(model, readers, seconds, limit, report=print):
    """Serves `model` with --checkpoints=off (and --max-tokens-limit=limit
    unless 0), stalls `readers` readers for `seconds` (until generation
    stops when 0); returns (RSS growth in KiB, [(tokens, end)] per reader)."""
    args = ["--model=" + model, "--checkpoints=off", "--metrics-listen=127.0.0.1:0", "--threads=2"]
    if limit:
        args.append("--max-tokens-limit=%d" % limit)
    proc, port, metrics = server_process.start(ARGS.server, *args)
    try:
        stalled = StalledReaders(port, model.split("=")[0], readers)
        try:
            start = rss_kib(proc.pid)
            t0, last, quiet = time.time(), -1, 0
            while True:
                time.sleep(1)
                now = generated_tokens(metrics)
                quiet = quiet + 1 if now == last else 0
                last = now
                elapsed = time.time() - t0
                if int(elapsed) % 5 == 0 or quiet == 3:
                    report("%5.0f s: RSS %+8d KiB, %9.0f tokens generated" % (elapsed, rss_kib(proc.pid) - start, now))
                if (seconds and elapsed >= seconds) or (not seconds and quiet >= 3) or elapsed > 600:
                    break
            grown = rss_kib(proc.pid) - start
            ends = stalled.ends()
        finally:
            stalled.close()
        for i, (tokens, end) in enumerate(ends):
            report("reader %d: %d tokens generated ahead of it (%s)" % (i, tokens, end))
        report("server RSS growth: %+d KiB (%.1f MiB)" % (grown, grown / 1024))
        return grown, ends
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        proc.stderr_reader.join(30)
        proc.stderr.close()


class StalledReaderTest(unittest.TestCase):
    def test_tokens_ahead_of_stalled_default_clients_stay_within_the_limit(self):
        grown, ends = run("demo-recurrent", 2, 0, 2000)
        self.assertEqual(ends, [(2000, "FINISH_REASON_LENGTH")] * 2)
        self.assertLess(grown, 16 * 1024)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    server_process.add_stub_arguments(p)
    p.add_argument("--readers", type=int, default=0, help="measure instead of testing")
    p.add_argument("--seconds", type=int, default=60)
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--model", default="demo-recurrent")
    ARGS, rest = p.parse_known_args()
    if not ARGS.readers:
        return server_process.run_with_stubs(ARGS, rest)
    with tempfile.TemporaryDirectory() as stubs:
        server_process.generate_stubs(ARGS, stubs)
        run(ARGS.model, ARGS.readers, ARGS.seconds, ARGS.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
