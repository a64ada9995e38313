#!/usr/bin/python3
"""The metrics port of a real cairn-server against hostile HTTP (issue 16).

Any request other than GET /metrics used to crash the whole server (SIGSEGV in
the civetweb that prometheus-cpp embeds). Starts cairn-server with
--metrics-listen on 127.0.0.1 port 0 and sends, over real sockets: the
documented replies (GET/HEAD /metrics 200, other paths 404, other methods 405,
malformed 400, oversized 431), then a seeded fuzz of methods, paths, headers,
mutated, truncated and random byte requests, concurrent bursts, and slow and
half-open connections. Afterwards the process is still running and answers
GET /metrics and a gRPC Generate (through cairn-cli). Needs only python3.
"""
import os
import random
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.request

# server_process.py is shared by the service tests in every folder.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import server_process  # noqa: E402

ARGS = None
PROC = None
PORT = None
METRICS = None
SEED = int(os.environ.get("CAIRN_FUZZ_SEED", "16"))
ALLOWED = {b"200", b"400", b"404", b"405", b"431"}


def exchange(data, half_close=True, timeout=15):
    """Sends `data`, (optionally) closes the sending side, returns every byte
    the server sent until it closed. A reset counts as the end."""
    with socket.create_connection(("127.0.0.1", METRICS), timeout=timeout) as s:
        try:
            s.sendall(data)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except ConnectionResetError:
            pass
        return out


def status_of(reply):
    if not reply.startswith(b"HTTP/1.1 "):
        return None
    return reply[9:12]


def get_metrics():
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % METRICS, timeout=15) as r:
        return r.status, r.read().decode()


def grpc_generate():
    return subprocess.run([ARGS.cli, "--server=127.0.0.1:%d" % PORT, "--timeout=60", "--model=demo-chat",
                           "--temperature=0", "--max-tokens=3", "--ids", "hello"],
                          capture_output=True, text=True, timeout=120)


class MetricsHttpTest(unittest.TestCase):
    def assert_server_serves(self):
        self.assertIsNone(PROC.poll(), "cairn-server exited")
        status, body = get_metrics()
        self.assertEqual(status, 200)
        self.assertIn("cairn_requests_ok_total", body)
        r = grpc_generate()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.split()), 3, r.stdout)

    def test_documented_replies(self):
        cases = [
            (b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", b"200"),
            (b"GET /metrics?name[]=x HTTP/1.0\r\n\r\n", b"200"),
            (b"GET /metrics HTTP/1.1\n\n", b"200"),
            (b"HEAD /metrics HTTP/1.1\r\n\r\n", b"200"),
            (b"GET / HTTP/1.1\r\n\r\n", b"404"),
            (b"GET /favicon.ico HTTP/1.1\r\n\r\n", b"404"),
            (b"GET /metrics/ HTTP/1.1\r\n\r\n", b"404"),
            (b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", b"405"),
            (b"PUT /metrics HTTP/1.1\r\n\r\n", b"405"),
            (b"DELETE /metrics HTTP/1.1\r\n\r\n", b"405"),
            (b"OPTIONS /metrics HTTP/1.1\r\n\r\n", b"405"),
            (b"BREW /metrics HTTP/1.1\r\n\r\n", b"405"),
            (b"POST / HTTP/1.1\r\n\r\n", b"404"),
            (b"GET /metrics HTTP/2.0\r\n\r\n", b"400"),
            (b"GET /metrics\r\n\r\n", b"400"),
            (b"GET  /metrics HTTP/1.1\r\n\r\n", b"400"),
            (b"GET http://x/metrics HTTP/1.1\r\n\r\n", b"400"),
            (b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n", b"400"),
            (b"GET /metrics HTTP/1.1\r\nX: a\x01b\r\n\r\n", b"400"),
            (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", b"400"),  # a TLS ClientHello
            (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", b"400"),  # HTTP/2 preface
            (b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", b"431"),
            (b"GET /" + b"m" * 20000 + b" HTTP/1.1\r\n\r\n", b"431"),
        ]
        for request, want in cases:
            reply = exchange(request)
            self.assertEqual(status_of(reply), want, (request[:80], reply[:200]))
            self.assertIn(b"\r\nConnection: close\r\n", reply)
        head = exchange(b"HEAD /metrics HTTP/1.1\r\n\r\n")
        self.assertTrue(head.endswith(b"\r\n\r\n"), head)  # no body
        self.assertIn(b"Content-Length: ", head)
        get = exchange(b"GET /metrics HTTP/1.1\r\n\r\n")
        self.assertIn(b"# TYPE cairn_requests_ok_total counter", get)
        self.assertIn(b"Allow: GET, HEAD", exchange(b"POST /metrics HTTP/1.1\r\n\r\n"))
        self.assert_server_serves()

    def test_fuzz(self):
        rng = random.Random(SEED)
        methods = [b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"PATCH", b"OPTIONS", b"TRACE", b"CONNECT",
                   b"get", b"G\x00T", b"", b"X" * 100]
        paths = [b"/metrics", b"/", b"/favicon.ico", b"/metrics?x=1", b"/../../etc/passwd", b"/%00", b"*",
                 b"/" + b"a" * 3000, b"/metrics#f", b"/\xff\xfe", b""]
        versions = [b"HTTP/1.1", b"HTTP/1.0", b"HTTP/0.9", b"HTTP/2", b"HTTP/1.1 extra", b""]
        headers = [b"Host: localhost", b"Accept: */*", b"Content-Length: 10", b"Content-Length: -1",
                   b"Transfer-Encoding: chunked", b"Connection: keep-alive", b"Expect: 100-continue",
                   b": empty", b"X: " + b"v" * 5000, b"\x00\x01\x02", b"Upgrade: h2c", b"X:\ty"]

        def request():
            kind = rng.random()
            if kind < 0.15:  # random bytes
                return bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 2000)))
            line = b" ".join([rng.choice(methods), rng.choice(paths), rng.choice(versions)])
            hs = [rng.choice(headers) for _ in range(rng.randrange(0, 6))]
            data = line + b"\r\n" + b"".join(h + b"\r\n" for h in hs) + b"\r\n" + b"x" * rng.randrange(0, 50)
            if kind < 0.45:  # mutate some bytes
                data = bytearray(data)
                for _ in range(rng.randrange(1, 8)):
                    data[rng.randrange(len(data))] = rng.getrandbits(8)
                data = bytes(data)
            if kind > 0.85:  # truncated
                data = data[:rng.randrange(len(data) + 1)]
            return data

        for i in range(400):
            data = request()
            reply = exchange(data, half_close=rng.random() < 0.95, timeout=15)
            if reply:
                self.assertIn(status_of(reply), ALLOWED, (i, data[:120], reply[:200]))
            self.assertIsNone(PROC.poll(), "cairn-server exited on request %d: %r" % (i, data[:200]))
        self.assert_server_serves()

    def test_concurrent_burst(self):
        rng = random.Random(SEED + 1)
        requests = [rng.choice([b"GET /metrics HTTP/1.1\r\n\r\n", b"GET / HTTP/1.1\r\n\r\n",
                                b"POST /metrics HTTP/1.1\r\n\r\n", b"\x00" * 100,
                                b"GET /metrics HTTP/1.1\r\nX: " + b"y" * 9000 + b"\r\n\r\n"])
                    for _ in range(200)]
        errors = []

        def worker(chunk):
            for data in chunk:
                try:
                    reply = exchange(data)
                    if reply and status_of(reply) not in ALLOWED:
                        errors.append(reply[:100])
                except OSError as e:  # a connection closed as the oldest of too many
                    if not isinstance(e, (ConnectionResetError, BrokenPipeError)):
                        errors.append(repr(e))

        threads = [threading.Thread(target=worker, args=(requests[i::8],)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assert_server_serves()

    def test_slow_and_half_open_connections(self):
        # Many connections that send half a request and then nothing: the
        # oldest are closed to make room, so a scrape still gets through.
        idle = []
        try:
            for _ in range(64):
                s = socket.create_connection(("127.0.0.1", METRICS), timeout=15)
                s.sendall(b"GET /met")
                idle.append(s)
            # Connections that never send anything at all.
            for _ in range(16):
                idle.append(socket.create_connection(("127.0.0.1", METRICS), timeout=15))
            status, _ = get_metrics()
            self.assertEqual(status, 200)
            # A slow client: a valid request a few bytes at a time.
            with socket.create_connection(("127.0.0.1", METRICS), timeout=15) as s:
                for b in [b"GE", b"T /me", b"trics HT", b"TP/1.1\r", b"\nHost: a\r\n", b"\r\n"]:
                    s.sendall(b)
                    time.sleep(0.05)
                reply = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    reply += chunk
                self.assertEqual(status_of(reply), b"200", reply[:200])
            # A client that sends a request and never reads its reply.
            lazy = socket.create_connection(("127.0.0.1", METRICS), timeout=15)
            lazy.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
            idle.append(lazy)
            self.assert_server_serves()
        finally:
            for s in idle:
                s.close()
        # A request started and abandoned mid-way (reset, not closed).
        s = socket.create_connection(("127.0.0.1", METRICS), timeout=15)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()
        self.assert_server_serves()


def main():
    global ARGS, PROC, PORT, METRICS
    print("fuzz seed %d (set CAIRN_FUZZ_SEED to change)" % SEED)
    ARGS, rest, (PROC, PORT, METRICS) = server_process.parse_and_start(
        "--model=demo-chat", "--threads=1", "--metrics-listen=127.0.0.1:0")
    return server_process.run_tests(PROC, [sys.argv[0]] + rest)


if __name__ == "__main__":
    sys.exit(main())
