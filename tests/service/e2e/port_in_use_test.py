#!/usr/bin/python3
"""A cairn-server whose port is taken must not start (issue 16, item 3).

gRPC sets SO_REUSEPORT by default, so a second server on a port in use used to
start, say "listening" and split the calls with the first. Starts a real
cairn-server, then a second one on its gRPC port, and one on its metrics
port, and one on a port a plain socket holds: each exits non-zero at start-up
with a message naming the port, and the first server keeps serving.
"""
import os
import socket
import subprocess
import sys
import unittest

# server_process.py is shared by the service tests in every folder.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import server_process  # noqa: E402

ARGS = None
PROC = PORT = METRICS = None


def second_server(*args):
    return subprocess.run([ARGS.server, "--model=demo-chat", "--threads=1"] + list(args),
                          capture_output=True, text=True, timeout=120)


class PortInUseTest(unittest.TestCase):
    def assert_refused(self, r, port, flag):
        self.assertNotEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("listening on port", r.stderr)
        self.assertIn("%s 127.0.0.1:%d: cannot listen on port %d: Address already in use" % (flag, port, port),
                      r.stderr)

    def assert_first_serves(self):
        self.assertIsNone(PROC.poll())
        r = subprocess.run([ARGS.cli, "--server=127.0.0.1:%d" % PORT, "--timeout=60", "--model=demo-chat",
                            "--temperature=0", "--max-tokens=2", "--ids", "hi"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_grpc_port_of_another_server(self):
        self.assert_refused(second_server("--listen=127.0.0.1:%d" % PORT), PORT, "--listen")
        self.assert_first_serves()

    def test_metrics_port_of_another_server(self):
        r = second_server("--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:%d" % METRICS)
        self.assert_refused(r, METRICS, "--metrics-listen")
        self.assert_first_serves()

    def test_port_held_by_another_program(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            port = s.getsockname()[1]
            self.assert_refused(second_server("--listen=127.0.0.1:%d" % port), port, "--listen")
            r = second_server("--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:%d" % port)
            self.assert_refused(r, port, "--metrics-listen")

    def test_malformed_address_is_named(self):
        r = second_server("--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:http")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--metrics-listen '127.0.0.1:http': expected HOST:PORT", r.stderr)


def main():
    global ARGS, PROC, PORT, METRICS
    ARGS, rest, (PROC, PORT, METRICS) = server_process.parse_and_start(
        "--model=demo-chat", "--threads=1", "--metrics-listen=127.0.0.1:0")
    return server_process.run_tests(PROC, [sys.argv[0]] + rest)


if __name__ == "__main__":
    sys.exit(main())
