#!/usr/bin/python3
"""End-to-end test of cairn-server through a Python client.

Starts the real cairn-server binary on 127.0.0.1 port 0 (built-in synthetic
models), generates Python stubs from the .proto with protoc and
grpc_python_plugin, and drives every RPC. Needs Debian's python3-grpcio and
python3-protobuf, so it runs under /usr/bin/python3.
"""
import argparse
import os
import re
import signal
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

# server_process.py is shared by the service tests in every folder.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import server_process  # noqa: E402

ARGS = None
SERVER = None  # (process, port, metrics_port)


def pbg_stub(channel):
    from cairn.v1 import inference_pb2_grpc as pbg
    return pbg.InferenceStub(channel)


def server_rss_kib():
    with open("/proc/%d/status" % SERVER[0].pid) as f:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))


def server_peak_rss_kib():
    with open("/proc/%d/status" % SERVER[0].pid) as f:
        return int(re.search(r"^VmHWM:\s+(\d+) kB", f.read(), re.M).group(1))


def start_server(*extra):
    return server_process.start(ARGS.server, "--metrics-listen=127.0.0.1:0", "--threads=2", *extra)


class InferenceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import grpc
        from cairn.v1 import inference_pb2 as pb
        from cairn.v1 import inference_pb2_grpc as pbg
        cls.grpc = grpc
        cls.pb = pb
        cls.channel = grpc.insecure_channel("127.0.0.1:%d" % SERVER[1])
        cls.stub = pbg.InferenceStub(cls.channel)

    def req(self, model, ids, max_tokens, temperature=0.0, **kw):
        pb = self.pb
        r = pb.GenerateRequest(model=model, **kw)
        r.parts.add().tokens.ids.extend(ids)
        r.stop.max_tokens = max_tokens
        r.stop.ignore_eos = True
        r.sampling.temperature = temperature
        r.sampling.seed = 11
        return r

    def run_stream(self, req, timeout=None, cancel_after=None):
        call = self.stub.Generate(req, timeout=timeout)
        events = []
        try:
            for ev in call:
                events.append(ev)
                if cancel_after is not None and sum(e.HasField("token") for e in events) == cancel_after:
                    call.cancel()
        except self.grpc.RpcError as e:
            return events, e.code()
        return events, self.grpc.StatusCode.OK

    def session(self, **op):
        return self.stub.SessionControl(self.pb.SessionRequest(**op))

    def code_of(self, fn):
        try:
            fn()
        except self.grpc.RpcError as e:
            return e.code()
        return self.grpc.StatusCode.OK

    def test_list_models(self):
        models = {m.name: m for m in self.stub.ListModels(self.pb.ListModelsRequest()).models}
        self.assertEqual(models["demo-transformer"].arch, "llama")
        self.assertEqual(models["demo-recurrent"].family, "recurrent")
        self.assertEqual(models["demo-hybrid"].family, "hybrid")
        self.assertTrue(all(m.synthetic and m.has_tokenizer for m in models.values()))

    def test_stream_shape_and_text(self):
        pb = self.pb
        r = pb.GenerateRequest(model="demo-transformer")
        r.parts.add().text = "Once upon a time"
        r.stop.max_tokens = 12
        r.stop.ignore_eos = True
        r.sampling.seed = 3
        events, code = self.run_stream(r)
        self.assertEqual(code, self.grpc.StatusCode.OK)
        self.assertTrue(events[0].HasField("prompt"))
        self.assertTrue(events[-1].HasField("finished"))
        tokens = [e.token for e in events if e.HasField("token")]
        self.assertEqual(len(tokens), 12)
        fin = events[-1].finished
        self.assertEqual(fin.reason, pb.FINISH_REASON_LENGTH)
        self.assertEqual(fin.usage.completion_tokens, 12)
        text = "".join(t.text for t in tokens) + fin.text
        self.assertGreater(len(text), 0)
        text.encode("utf-8")  # valid UTF-8 by construction of str

    def test_sessions_every_operation(self):
        pb = self.pb
        for model in ("demo-transformer", "demo-recurrent", "demo-hybrid"):
            sid = self.session(create=pb.CreateSession(model=model)).session.session_id
            self.assertEqual(len(sid), 32)
            t1 = self.req(model, list(range(300, 320)), 6, session_id=sid, append=True)
            ev, code = self.run_stream(t1)
            self.assertEqual(code, self.grpc.StatusCode.OK)
            info = self.session(get=pb.GetSession(session_id=sid, include_tokens=True)).session
            self.assertEqual(info.tokens, 26)
            hist = list(info.token_ids)
            # Continue on the session == fresh computation of the full prompt.
            ev2, _ = self.run_stream(self.req(model, [401, 402], 5, session_id=sid, append=True))
            fresh, _ = self.run_stream(self.req(model, hist + [401, 402], 5))
            ids = lambda evs: [e.token.id for e in evs if e.HasField("token")]
            self.assertEqual(ids(ev2), ids(fresh))
            self.assertGreaterEqual(ev2[0].prompt.reused_tokens, 25)
            # Fork, rewind, list, export/import, delete.
            fork = self.session(fork=pb.ForkSession(session_id=sid)).session
            self.assertEqual(fork.tokens, 33)
            self.assertEqual(self.session(rewind=pb.RewindSession(session_id=fork.session_id, tokens=10)).session.tokens, 10)
            self.assertEqual(self.code_of(lambda: self.session(rewind=pb.RewindSession(session_id=fork.session_id, tokens=11))),
                             self.grpc.StatusCode.FAILED_PRECONDITION)
            listed = {s.session_id for s in self.session(list=pb.ListSessions()).sessions.sessions}
            self.assertTrue({sid, fork.session_id} <= listed)
            snap = self.session(export=pb.ExportSession(session_id=sid)).snapshot
            imported = self.session(**{"import": pb.ImportSession(snapshot=snap)}).session
            self.assertEqual(imported.tokens, 33)
            a, _ = self.run_stream(self.req(model, [450], 4, session_id=imported.session_id, append=True))
            b, _ = self.run_stream(self.req(model, [450], 4, session_id=sid, append=True))
            self.assertEqual(ids(a), ids(b))
            other = "demo-recurrent" if model == "demo-transformer" else "demo-transformer"
            self.assertEqual(self.code_of(lambda: self.session(**{"import": pb.ImportSession(snapshot=snap, model=other)})),
                             self.grpc.StatusCode.FAILED_PRECONDITION)
            for s in (sid, fork.session_id, imported.session_id):
                self.assertTrue(self.session(delete=pb.DeleteSession(session_id=s)).deleted)
            self.assertEqual(self.code_of(lambda: self.session(get=pb.GetSession(session_id=sid))),
                             self.grpc.StatusCode.NOT_FOUND)

    def test_errors(self):
        pb = self.pb
        SC = self.grpc.StatusCode
        def gen(r):
            return self.run_stream(r)[1]
        self.assertEqual(gen(self.req("nope", [5], 2)), SC.NOT_FOUND)
        self.assertEqual(gen(self.req("demo-transformer", [], 2)), SC.INVALID_ARGUMENT)
        self.assertEqual(gen(self.req("demo-transformer", [10 ** 6], 2)), SC.INVALID_ARGUMENT)
        self.assertEqual(gen(self.req("demo-transformer", [5], 2, temperature=-1)), SC.INVALID_ARGUMENT)
        self.assertEqual(gen(self.req("demo-transformer", [7] * 5000, 2)), SC.RESOURCE_EXHAUSTED)
        self.assertEqual(gen(self.req("demo-transformer", [5], 2, session_id="00" * 16)), SC.NOT_FOUND)
        self.assertEqual(self.code_of(lambda: self.session()), SC.INVALID_ARGUMENT)
        self.assertEqual(self.code_of(lambda: self.session(**{"import": pb.ImportSession(snapshot=b"junk")})),
                         SC.INVALID_ARGUMENT)

    def test_cancel_and_deadline(self):
        pb = self.pb
        sid = self.session(create=pb.CreateSession(model="demo-recurrent")).session.session_id
        events, code = self.run_stream(self.req("demo-recurrent", [300] * 8, 100000, session_id=sid, append=True),
                                       cancel_after=4)
        self.assertEqual(code, self.grpc.StatusCode.CANCELLED)
        events, code = self.run_stream(self.req("demo-transformer", [301] * 8, 4000), timeout=0.3)
        self.assertEqual(code, self.grpc.StatusCode.DEADLINE_EXCEEDED)
        # The session is released and unchanged (a cancelled turn changes
        # nothing): it accepts the next turn.
        while True:
            info = self.session(get=pb.GetSession(session_id=sid)).session
            if not info.busy:
                break
            time.sleep(0.005)
        self.assertEqual(info.tokens, 0)
        _, code = self.run_stream(self.req("demo-recurrent", [302], 2, session_id=sid, append=True))
        self.assertEqual(code, self.grpc.StatusCode.OK)

    def test_health_and_metrics(self):
        check = self.channel.unary_unary("/grpc.health.v1.Health/Check",
                                         request_serializer=lambda x: x,
                                         response_deserializer=lambda x: x)
        self.assertEqual(check(b""), b"\x08\x01")  # status: SERVING
        self.run_stream(self.req("demo-transformer", [5, 6], 3))
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % SERVER[2], timeout=10).read().decode()
        m = re.search(r"^cairn_generated_tokens_total (\S+)$", body, re.M)
        self.assertIsNotNone(m, body[:500])
        self.assertGreater(float(m.group(1)), 0)
        self.assertIn("cairn_time_to_first_token_seconds_bucket", body)

    def generated_tokens(self):
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % SERVER[2], timeout=10).read().decode()
        found = re.findall(r"^cairn_generated_tokens_total(?:\{[^}]*\})? (\S+)$", body, re.M)
        self.assertTrue(found, body[:500])
        return sum(float(v) for v in found)

    def test_large_prompts_are_built_a_few_at_a_time(self):
        # 16 requests at once, each with 4 MiB of tools JSON (nested empty
        # arrays: tens of times that in parsed values while the template
        # renders them): the server builds large prompts two at a time and
        # gives their memory back, so its peak grows far less than 16 x that
        # (5.4 GB when all were built at once).
        r = self.pb.GenerateRequest(model="demo-chat", tools="[" + ",".join(["[]"] * (((4 << 20) - 100) // 3)) + "]")
        r.messages.add(role="user", content="hi")
        r.stop.max_tokens = 1
        before = server_peak_rss_kib()
        results = []

        def one():
            channel = self.grpc.insecure_channel("127.0.0.1:%d" % SERVER[1])
            try:
                for _ in pbg_stub(channel).Generate(r, timeout=120):
                    pass
                results.append("ok")
            except self.grpc.RpcError as e:
                results.append(str(e.code()))
            finally:
                channel.close()
        threads = [threading.Thread(target=one) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        grown_mib = (server_peak_rss_kib() - before) // 1024
        print("16 prompts with 4 MiB of tools JSON at once: peak memory +%d MiB" % grown_mib)
        self.assertEqual(results, ["ok"] * 16)
        self.assertLess(grown_mib, 3072)

    def test_stalled_readers_keep_generation_and_memory_bounded(self):
        # Four clients that read nothing (small HTTP/2 windows, so that the
        # transport fills quickly): their requests pause, the server stops
        # generating for them and its memory stays put while others are served.
        options = [("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 4096)]
        channels = [self.grpc.insecure_channel("127.0.0.1:%d" % SERVER[1], options=options) for _ in range(4)]
        calls = [pbg_stub(c).Generate(self.req("demo-recurrent", [300 + i, 301], 1 << 20)) for i, c in
                 enumerate(channels)]
        try:
            last, quiet = -1, 0
            for _ in range(600):  # until nothing was generated for a second (at most a minute)
                now = self.generated_tokens()
                quiet = quiet + 1 if now == last else 0
                last = now
                if quiet >= 10:
                    break
                time.sleep(0.1)
            self.assertGreaterEqual(quiet, 10)
            rss = server_rss_kib()
            for i in range(16):
                ids = [e.token.id for e in self.stub.Generate(self.req("demo-recurrent", [310 + i], 20))
                       if e.HasField("token")]
                self.assertEqual(len(ids), 20)
            self.assertEqual(self.generated_tokens(), last + 16 * 20)
            grown = server_rss_kib() - rss
            print("stalled: generation stopped at %d tokens; RSS %d KiB, %+d KiB after 16 more requests"
                  % (last, rss, grown))
            self.assertLess(grown, 64 * 1024)
        finally:
            for c in calls:
                c.cancel()
            for c in channels:
                c.close()


class MemoryBudgetTest(unittest.TestCase):
    """A second server with --memory-budget=96KiB: demo-transformer's KV
    cache takes 512 bytes a position, and the server charges 160 more per
    token (its history and bookkeeping), so about 146 positions fit."""

    @classmethod
    def setUpClass(cls):
        import grpc
        from cairn.v1 import inference_pb2 as pb
        from cairn.v1 import inference_pb2_grpc as pbg
        cls.grpc, cls.pb = grpc, pb
        cls.server = start_server("--model=demo-transformer", "--memory-budget=96KiB")
        cls.channel = grpc.insecure_channel("127.0.0.1:%d" % cls.server[1])
        cls.stub = pbg.InferenceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server[0].send_signal(signal.SIGTERM)
        cls.server[0].wait(timeout=30)

    def generate(self, n_prompt, max_tokens, **kw):
        r = self.pb.GenerateRequest(model="demo-transformer", **kw)
        r.parts.add().tokens.ids.extend([300 + i % 200 for i in range(n_prompt)])
        r.stop.max_tokens = max_tokens
        r.stop.ignore_eos = True
        r.sampling.temperature = 0
        try:
            return [e.token.id for e in self.stub.Generate(r) if e.HasField("token")], None
        except self.grpc.RpcError as e:
            return None, e

    def test_over_budget_is_resource_exhausted_and_changes_nothing(self):
        pb = self.pb
        sid = self.stub.SessionControl(pb.SessionRequest(create=pb.CreateSession(model="demo-transformer"))).session.session_id
        ids, err = self.generate(40, 8, session_id=sid, append=True)
        self.assertIsNone(err)
        info = self.stub.SessionControl(pb.SessionRequest(get=pb.GetSession(session_id=sid, include_tokens=True))).session
        self.assertEqual(info.tokens, 48)
        # 48 + 100 positions + 50 new tokens do not fit 96 KiB.
        _, err = self.generate(100, 50, session_id=sid, append=True)
        self.assertEqual(err.code(), self.grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn("memory budget exceeded", err.details())
        self.assertIn("the budget is 98304 bytes", err.details())
        _, err = self.generate(200, 4)  # sessionless, too big on its own
        self.assertEqual(err.code(), self.grpc.StatusCode.RESOURCE_EXHAUSTED)
        again = self.stub.SessionControl(pb.SessionRequest(get=pb.GetSession(session_id=sid, include_tokens=True))).session
        self.assertEqual(list(again.token_ids), list(info.token_ids))
        # The session continues as a fresh computation of its history does.
        nxt, err = self.generate(2, 4, session_id=sid, append=True)
        self.assertIsNone(err)
        r = pb.GenerateRequest(model="demo-transformer")
        r.parts.add().tokens.ids.extend(list(info.token_ids) + [300, 301])
        r.stop.max_tokens = 4
        r.stop.ignore_eos = True
        r.sampling.temperature = 0
        fresh = [e.token.id for e in self.stub.Generate(r) if e.HasField("token")]
        self.assertEqual(nxt, fresh)


class ExactActivationsTest(unittest.TestCase):
    """--exact-activations reaches the backend: a Q8_0 golden model served
    with and without it gives close but different log-probabilities (8-bit
    activations by default), and each server is deterministic; served with
    --no-pack-weights, the same log-probabilities as packed."""

    MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "shared", "golden",
                         "models", "llama-q8.gguf")

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(cls.MODEL):
            if os.environ.get("CI") == "true":
                raise AssertionError("shared data missing under CI: " + cls.MODEL)
            raise unittest.SkipTest("shared data not present: " + cls.MODEL)
        import grpc
        from cairn.v1 import inference_pb2 as pb
        cls.grpc, cls.pb = grpc, pb
        cls.servers = [start_server("--model=q8=" + cls.MODEL),
                       start_server("--model=q8=" + cls.MODEL, "--exact-activations"),
                       start_server("--model=q8=" + cls.MODEL, "--no-pack-weights")]
        cls.channels = [grpc.insecure_channel("127.0.0.1:%d" % s[1]) for s in cls.servers]
        cls.stubs = [pbg_stub(c) for c in cls.channels]

    @classmethod
    def tearDownClass(cls):
        for c in cls.channels:
            c.close()
        for s in cls.servers:
            s[0].send_signal(signal.SIGTERM)
            s[0].wait(timeout=30)

    def logprobs(self, stub):
        r = self.pb.GenerateRequest(model="q8", logprobs=True, top_logprobs=5)
        r.parts.add().tokens.ids.extend([1] + [3 + (i * 37) % 500 for i in range(40)])
        r.stop.max_tokens = 4
        r.stop.ignore_eos = True
        r.sampling.temperature = 0
        return [[(t.id, t.logprob) for t in e.token.top_logprobs] for e in stub.Generate(r) if e.HasField("token")]

    def test_default_is_eight_bit_and_the_flag_is_exact(self):
        fast, exact = self.logprobs(self.stubs[0]), self.logprobs(self.stubs[1])
        self.assertEqual(len(fast), 4)
        # The same request again (its prompt now comes from the prefix
        # cache) on the same server: equal to rounding; across the servers
        # 8-bit rounding apart.
        for mine, again in ((fast, self.logprobs(self.stubs[0])), (exact, self.logprobs(self.stubs[1]))):
            for step, step_again in zip(mine, again):
                for (i, a), (j, b) in zip(step, step_again):
                    self.assertEqual(i, j)
                    self.assertAlmostEqual(a, b, delta=1e-3 * (1 + abs(b)))
        worst = 0.0
        for step_fast, step_exact in zip(fast, exact):
            self.assertEqual(len(step_fast), 5)
            self.assertEqual(step_fast[0][0], step_exact[0][0])  # the same greedy token
            for (_, a), (_, b) in zip(step_fast, step_exact):
                worst = max(worst, abs(a - b))
        print("fast vs exact: max |logprob difference| %.4f" % worst)
        self.assertGreater(worst, 1e-3)  # the default path is the 8-bit one
        # 0.15 x std of these logits is about 0.5; a log-probability moves by
        # at most twice a logit's move (measured 0.23).
        self.assertLess(worst, 1.0)

    def test_packed_weights_give_the_bits_of_the_file_rows(self):
        # --no-pack-weights reaches the backend and changes nothing but speed.
        # A first request on each server puts the prompt in its prefix cache,
        # so the compared ones take the same path (this file's F16 output
        # rounds by call shape).
        self.logprobs(self.stubs[0])
        self.logprobs(self.stubs[2])
        self.assertEqual(self.logprobs(self.stubs[0]), self.logprobs(self.stubs[2]))


def main():
    global ARGS, SERVER
    p = argparse.ArgumentParser()
    server_process.add_stub_arguments(p)
    ARGS, rest = p.parse_known_args()
    with tempfile.TemporaryDirectory() as tmp:
        server_process.generate_stubs(ARGS, tmp)
        SERVER = start_server()
        return server_process.run_tests(SERVER[0], [sys.argv[0]] + rest)


if __name__ == "__main__":
    sys.exit(main())
