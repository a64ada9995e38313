#!/usr/bin/python3
"""Shutdown of a real cairn-server process (SIGTERM): it stops accepting,
lets in-flight requests finish within --shutdown-grace and then cancels them,
and exits; checkpoints taken inside replies are not spilled to the disk tier
under a small RAM budget (they serve one turn), so neither a long reply nor
the shutdown writes one file per reply checkpoint.
Needs Debian's python3-grpcio and python3-protobuf (stubs generated with
protoc and grpc_python_plugin at test time).
"""
import os
import signal
import sys
import tempfile
import threading
import time
import unittest

# server_process.py is shared by the service tests in every folder.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import server_process  # noqa: E402

ARGS = None


class ShutdownTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import grpc
        from cairn.v1 import inference_pb2 as pb
        from cairn.v1 import inference_pb2_grpc as pbg
        cls.grpc, cls.pb, cls.pbg = grpc, pb, pbg

    def start(self, *args):
        proc, port, _ = server_process.start(ARGS.server, "--threads=2", *args)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        channel = self.grpc.insecure_channel("127.0.0.1:%d" % port)
        self.addCleanup(channel.close)
        return proc, port, self.pbg.InferenceStub(channel)

    def req(self, max_tokens, model="demo-recurrent"):
        r = self.pb.GenerateRequest(model=model)
        r.parts.add().tokens.ids.extend([300 + i for i in range(8)])
        r.stop.max_tokens = max_tokens
        r.stop.ignore_eos = True
        r.sampling.temperature = 0.0
        return r

    def stream_in_background(self, stub, request):
        """Starts a Generate; returns (first token read event, result dict,
        thread). The result gets the token count, the finish reason and the
        status code."""
        started = threading.Event()
        result = {"tokens": 0, "reason": None, "code": self.grpc.StatusCode.OK}

        def run():
            try:
                for ev in stub.Generate(request):
                    if ev.HasField("token"):
                        result["tokens"] += 1
                        started.set()
                    elif ev.HasField("finished"):
                        result["reason"] = ev.finished.reason
            except self.grpc.RpcError as e:
                result["code"] = e.code()
            started.set()

        t = threading.Thread(target=run)
        t.start()
        return started, result, t

    def test_in_flight_request_finishes_within_the_grace(self):
        proc, port, stub = self.start("--shutdown-grace=120")
        n = 16000  # within --max-tokens-limit (16384)
        started, result, t = self.stream_in_background(stub, self.req(n))
        self.assertTrue(started.wait(60))
        proc.send_signal(signal.SIGTERM)
        # New calls are refused once the server stopped accepting (as soon
        # as its signal thread has run), while the running one goes on.
        code = self.grpc.StatusCode.OK
        for _ in range(600):
            code = server_process.generate_on_new_channel(self.grpc, self.pbg, port, self.req(5))
            if code != self.grpc.StatusCode.OK:
                break
            time.sleep(0.05)
        self.assertEqual(code, self.grpc.StatusCode.UNAVAILABLE)
        t.join(120)
        self.assertEqual(result["code"], self.grpc.StatusCode.OK)
        self.assertEqual(result["tokens"], n)
        self.assertEqual(result["reason"], self.pb.FINISH_REASON_LENGTH)
        self.assertEqual(proc.wait(timeout=120), 0)

    def test_requests_beyond_the_grace_are_cancelled(self):
        # A stream far longer than the grace: --max-tokens-limit raised so
        # that the default cap (16384, a second or two here) cannot end it
        # OK before the grace does.
        proc, _, stub = self.start("--shutdown-grace=1", "--max-tokens-limit=%d" % (1 << 20))
        started, result, t = self.stream_in_background(stub, self.req(1 << 20))
        self.assertTrue(started.wait(60))
        proc.send_signal(signal.SIGTERM)
        t.join(120)
        self.assertFalse(t.is_alive())
        self.assertNotEqual(result["code"], self.grpc.StatusCode.OK)
        self.assertLess(result["tokens"], 1 << 20)
        self.assertEqual(proc.wait(timeout=120), 0)

    def test_reply_checkpoints_are_not_spilled(self):
        with tempfile.TemporaryDirectory() as disk:
            # Room in RAM for a few hybrid states only: the reply's
            # checkpoints (one per 16 positions) push each other out.
            proc, _, stub = self.start("--checkpoint-ram=2MiB", "--checkpoint-disk-dir=" + disk,
                                       "--checkpoint-generation-every=16")
            n = 2000
            started, result, t = self.stream_in_background(stub, self.req(n, "demo-hybrid"))
            t.join(120)
            self.assertEqual(result["tokens"], n)
            during = len(os.listdir(disk))
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(timeout=120), 0)
            after = len(os.listdir(disk))
            print("files on the disk tier: %d after a %d-token reply, %d after shutdown" % (during, n, after))
            # The prompt's checkpoints and the reply's end may be kept, not
            # one per 16 generated positions (125 here).
            self.assertLess(during, 10)
            self.assertLess(after, 10)


def main():
    global ARGS
    ARGS, rest = server_process.parse_stub_arguments()
    return server_process.run_with_stubs(ARGS, rest)


if __name__ == "__main__":
    sys.exit(main())
