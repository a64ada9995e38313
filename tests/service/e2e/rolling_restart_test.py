#!/usr/bin/python3
"""A rolling restart of a real server started as the container starts it: the
image's entrypoint (scripts/container/entrypoint.sh, with the built binaries on
PATH) and CAIRN_SHUTDOWN_GRACE, the variable the chart sets from the pod's
terminationGracePeriodSeconds. A long stream (read slowly) runs when SIGTERM comes: it
completes, longer after the signal than the server's default grace (5 s), while
health answers NOT_SERVING and new calls get UNAVAILABLE; the process exits 0.
Needs Debian's python3-grpcio and python3-protobuf (stubs generated with protoc
and grpc_python_plugin at test time).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

# server_process.py is shared by the service tests in every folder.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import server_process  # noqa: E402

ARGS = None
DEFAULT_GRACE = 5  # cairn-server's --shutdown-grace default
GRACE = 60  # what the test configures


class RollingRestartTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import grpc
        from cairn.v1 import inference_pb2 as pb
        from cairn.v1 import inference_pb2_grpc as pbg
        cls.grpc, cls.pb, cls.pbg = grpc, pb, pbg

    def container_env(self, grace):
        """The CAIRN_* variables of the chart's pod, the built server on PATH."""
        bin_dir = tempfile.mkdtemp(prefix="cairn-bin-")
        self.addCleanup(shutil.rmtree, bin_dir)
        os.symlink(os.path.abspath(ARGS.server), os.path.join(bin_dir, "cairn-server"))
        return dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""), CAIRN_PORT="0",
                    CAIRN_METRICS_PORT="", CAIRN_BACKENDS="all", CAIRN_SHUTDOWN_GRACE=grace)

    def test_the_entrypoint_refuses_a_bad_or_second_grace(self):
        for grace, args, message in (("abc", [], "CAIRN_SHUTDOWN_GRACE='abc' is not a number of seconds"),
                                     ("30", ["--shutdown-grace=5"], "CAIRN_SHUTDOWN_GRACE sets it already")):
            out = subprocess.run(["sh", ARGS.entrypoint, "--model=demo-recurrent"] + args,
                                 env=self.container_env(grace), capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 2, out.stderr)
            self.assertIn(message, out.stderr)

    def start_container_style(self):
        """The entrypoint with CAIRN_* variables, as the chart's pod runs it."""
        lines = []
        proc = subprocess.Popen(["sh", ARGS.entrypoint, "--model=demo-recurrent", "--threads=1"],
                                env=self.container_env(str(GRACE)), stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        port = None
        for line in proc.stderr:
            lines.append(line)
            m = re.search(r"listening on port (\d+)", line)
            if m:
                port = int(m.group(1))
                break
        self.assertIsNotNone(port, "".join(lines))
        threading.Thread(target=lambda: [lines.append(x) for x in proc.stderr], daemon=True).start()
        channel = self.grpc.insecure_channel("127.0.0.1:%d" % port)
        self.addCleanup(channel.close)
        return proc, port, self.pbg.InferenceStub(channel), lines

    def req(self, max_tokens):
        r = self.pb.GenerateRequest(model="demo-recurrent")
        r.parts.add().tokens.ids.extend([300 + i for i in range(8)])
        r.stop.max_tokens = max_tokens
        r.stop.ignore_eos = True
        r.sampling.temperature = 0.0
        return r

    def health(self, port):
        out = subprocess.run([ARGS.cli, "--server=127.0.0.1:%d" % port, "--health=cairn.v1.Inference",
                              "--timeout=10"], capture_output=True, text=True)
        return out.returncode, out.stdout.strip()

    def test_a_long_stream_completes_within_the_configured_grace(self):
        proc, port, stub, lines = self.start_container_style()
        self.assertEqual(self.health(port), (0, "SERVING"))
        # A stream that lasts at least 10 s, twice the default grace, whatever
        # the machine's speed: the client reads a token every 5 ms (the server
        # waits for it: backpressure).
        n, pause = 2000, 0.005
        started = threading.Event()
        result = {"tokens": 0, "reason": None, "code": self.grpc.StatusCode.OK, "end": None}

        def run():
            try:
                for ev in stub.Generate(self.req(n)):
                    if ev.HasField("token"):
                        result["tokens"] += 1
                        started.set()
                        time.sleep(pause)
                    elif ev.HasField("finished"):
                        result["reason"] = ev.finished.reason
            except self.grpc.RpcError as e:
                result["code"] = e.code()
            result["end"] = time.monotonic()
            started.set()

        reader = threading.Thread(target=run)
        reader.start()
        self.assertTrue(started.wait(60))
        proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        # The replica leaves the rotation: health NOT_SERVING, new calls
        # UNAVAILABLE, while the stream goes on.
        health = refused = None
        for _ in range(200):
            if health is None:
                code, status = self.health(port)
                if status == "NOT_SERVING":
                    health = (code, status)
            if refused is None:
                code = server_process.generate_on_new_channel(self.grpc, self.pbg, port, self.req(2))
                refused = None if code == self.grpc.StatusCode.OK else code
            if health is not None and refused is not None:
                break
            time.sleep(0.05)
        self.assertEqual(health, (1, "NOT_SERVING"))
        self.assertEqual(refused, self.grpc.StatusCode.UNAVAILABLE)
        self.assertTrue(reader.is_alive(), "the stream ended before the refusals were seen")
        reader.join(GRACE + 30)
        self.assertEqual(result["code"], self.grpc.StatusCode.OK)
        self.assertEqual(result["tokens"], n)
        self.assertEqual(result["reason"], self.pb.FINISH_REASON_LENGTH)
        self.assertEqual(proc.wait(timeout=GRACE + 30), 0, "".join(lines))
        after = result["end"] - signalled
        print("%d tokens: the stream ended %.1f s after SIGTERM; exit 0 %.1f s after it" %
              (n, after, time.monotonic() - signalled))
        # Longer than the default grace: the configured one let it finish.
        self.assertGreater(after, DEFAULT_GRACE)
        self.assertTrue(any("running calls get up to %d s" % GRACE in line for line in lines), "".join(lines))


def main():
    global ARGS
    ARGS, rest = server_process.parse_stub_arguments("cli", "entrypoint")
    return server_process.run_with_stubs(ARGS, rest)


if __name__ == "__main__":
    sys.exit(main())
