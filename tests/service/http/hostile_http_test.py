#!/usr/bin/env python3
"""Hostile input on the HTTP port of a real cairn-server while a gRPC client
keeps being served: malformed JSON, a huge body, bodies that inflate when
parsed, random bytes, slowloris connections that trickle their headers, and
200 concurrent connections. The server must answer each with an error or a
reply (never crash, memory bounded), close the slow connections once a
request's time is up, keep serving gRPC, and exit cleanly on SIGTERM. Then
the same port over TLS (--tls-cert): plain HTTP, random bytes, handshakes
that trickle and 100 concurrent TLS completions.

    hostile_http_test.py --server cairn-server --proto-dir protos --protoc protoc
                         --plugin grpc_python_plugin
"""
import http.client
import json
import os
import re
import signal
import socket
import ssl
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import server_process  # noqa: E402


def post(port, path, body, timeout=60):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json", "Connection": "close"})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def peak_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^VmHWM:\s+(\d+) kB", f.read(), re.M).group(1))


def error_shape(body):
    try:
        e = json.loads(body)["error"]
        return all(k in e for k in ("message", "type", "param", "code"))
    except (ValueError, KeyError, TypeError):
        return False


class GrpcLoad(threading.Thread):
    """Generate calls one after another until stopped: the gRPC port must be
    served throughout."""

    def __init__(self, port, grpc, pb, pbg):
        super().__init__(daemon=True)
        self.stub = pbg.InferenceStub(grpc.insecure_channel("127.0.0.1:%d" % port))
        self.request = pb.GenerateRequest(model="demo-transformer", stop=pb.StopParams(max_tokens=4))
        self.request.parts.add(tokens=pb.TokenIds(ids=[300, 301, 302]))
        self.grpc = grpc
        self.ok = 0
        self.failed = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                for _ in self.stub.Generate(self.request, timeout=30):
                    pass
                self.ok += 1
            except self.grpc.RpcError as e:
                self.failed.append(str(e.code()))
            time.sleep(0.01)


def slowloris(port, n, seconds, start=b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"):
    """n connections sending `start`, then trickling one byte every 0.5 s;
    returns how many the server closed within `seconds`."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(start)
        socks.append(s)
    closed = set()
    end = time.time() + seconds
    while time.time() < end and len(closed) < n:
        for i, s in enumerate(socks):
            if i in closed:
                continue
            try:
                s.sendall(b"X")
            except OSError:
                closed.add(i)
        time.sleep(0.5)
    for s in socks:
        s.close()
    return len(closed)


def concurrently(n, call):
    """`call` on n threads at once: what each returned, or its error."""
    results = []

    def one():
        try:
            results.append(call())
        except (OSError, ssl.SSLError) as e:
            results.append(str(e))
    threads = [threading.Thread(target=one) for _ in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return results


def tls_round(args, tmp, expect):
    """The HTTP port over TLS, with a certificate made by openssl here."""
    cert, key = server_process.self_signed_certificate(tmp)
    lines = []
    proc, _, _ = server_process.start(args.server, "--threads=1", "--http-listen=127.0.0.1:0",
                                      "--tls-cert=" + cert, "--tls-key=" + key, lines=lines)
    http_port = server_process.wait_for_http_port(lines)
    context = ssl.create_default_context(cafile=cert)

    def post_tls(body):
        conn = http.client.HTTPSConnection("127.0.0.1", http_port, timeout=120, context=context)
        try:
            conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status
        finally:
            conn.close()
    # Plain HTTP and random bytes on the TLS port: closed, nothing served.
    for payload in [b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"] + [os.urandom(4096) for _ in range(20)]:
        s = socket.create_connection(("127.0.0.1", http_port), timeout=15)
        try:
            s.sendall(payload)
            reply = s.recv(4096)
            expect(b"HTTP/1.1 200" not in reply, "plain bytes on the TLS port answered: %r" % reply[:60])
        except OSError:
            pass
        s.close()
    # Handshakes that trickle (a record header, then a byte every 0.5 s).
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("closed", slowloris(http_port, 20, 20, b"\x16\x03\x01\x02\x00")))
    t.start()
    time.sleep(1)
    body = json.dumps({"model": "demo-transformer", "prompt": [300, 301, 302], "max_tokens": 2}).encode()
    expect(post_tls(body) == 200, "a TLS request during the slow handshakes")
    t.join()
    expect(result.get("closed") == 20, "trickling handshakes closed by the server: %s of 20" % result.get("closed"))
    statuses = concurrently(100, lambda: post_tls(body))
    expect(statuses.count(200) == 100, "100 concurrent over TLS: %s" % sorted(set(map(str, statuses))))
    print("over TLS: %d of 100 concurrent completions, %s of 20 trickling handshakes closed"
          % (statuses.count(200), result.get("closed")))
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=60)
    expect(rc == 0, "cairn-server (TLS) exited with %d" % rc)


def main():
    args, _ = server_process.parse_stub_arguments()
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        server_process.generate_stubs(args, tmp)
        import grpc
        import cairn.v1.inference_pb2 as pb
        import cairn.v1.inference_pb2_grpc as pbg
        lines = []
        proc, port, _ = server_process.start(args.server, "--threads=1", "--http-listen=127.0.0.1:0", lines=lines)
        http_port = server_process.wait_for_http_port(lines)
        load = GrpcLoad(port, grpc, pb, pbg)
        load.start()

        def expect(cond, what):
            if not cond:
                failures.append(what)

        # Malformed JSON and bodies of the wrong shape: 400 in OpenAI's shape.
        for body in [b"{", b"[]", b'{"model": 5}', b"\xff\xfe\x00garbage", b'{"model": "demo-chat", "messages": "x"}',
                     b'{"model": "demo-chat", "messages": [{"role": "user", "content": {"a": 1}}]}',
                     json.dumps({"model": "demo-transformer", "prompt": [2 ** 40]}).encode()]:
            status, reply = post(http_port, "/v1/chat/completions", body)
            expect(status == 400 and error_shape(reply), "malformed %r -> %d %r" % (body[:40], status, reply[:200]))
        # A body beyond the limit: 413 (announced, the server need not read it).
        status, reply = post(http_port, "/v1/chat/completions", b" " * (17 << 20))
        expect(status == 413, "huge body -> %d" % status)
        # Bodies that inflate when parsed: 16 at once of 16 MiB of nested
        # empty arrays (440 MB of JSON values each) are refused with 400, and
        # the server's peak memory grows by well under 16 x that (large
        # bodies are parsed two at a time and their memory given back).
        nested = b'{"model": "demo-transformer", "prompt": [' + b",".join([b"[]"] * ((16 << 20) // 3 - 100)) + b"]}"
        before = peak_rss_kib(proc.pid)
        statuses = concurrently(16, lambda: post(http_port, "/v1/completions", nested, timeout=120)[0])
        grown_mib = (peak_rss_kib(proc.pid) - before) // 1024
        expect(statuses.count(400) == 16, "16 nested-array bodies: %s" % sorted(set(map(str, statuses))))
        expect(grown_mib < 3072, "16 nested-array bodies grew the server's peak memory by %d MiB" % grown_mib)
        print("16 concurrent 16 MiB nested-array bodies: peak memory +%d MiB" % grown_mib)
        # Random bytes on fresh connections: an error or a closed connection.
        for i in range(50):
            s = socket.create_connection(("127.0.0.1", http_port), timeout=15)
            try:
                s.sendall(os.urandom(4096))
                s.recv(4096)
            except OSError:
                pass
            s.close()
        # Slowloris, while normal requests are still answered.
        result = {}
        t = threading.Thread(target=lambda: result.setdefault("closed", slowloris(http_port, 20, 20)))
        t.start()
        time.sleep(1)
        status, _ = post(http_port, "/v1/completions",
                         json.dumps({"model": "demo-transformer", "prompt": [300, 301], "max_tokens": 2}).encode())
        expect(status == 200, "a request during slowloris -> %d" % status)
        t.join()
        expect(result.get("closed") == 20, "slowloris connections closed by the server: %s of 20" % result.get("closed"))
        # 200 concurrent connections, each a small completion.
        body = json.dumps({"model": "demo-transformer", "prompt": [300, 301, 302], "max_tokens": 2}).encode()
        statuses = concurrently(200, lambda: post(http_port, "/v1/completions", body, timeout=120)[0])
        expect(statuses.count(200) == 200, "200 concurrent: %s" % sorted(set(map(str, statuses))))
        load.stop.set()
        load.join(timeout=60)
        expect(load.ok > 0 and not load.failed, "gRPC during the attack: %d ok, failed %s" % (load.ok, load.failed))
        conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=10)
        conn.request("GET", "/health")
        expect(conn.getresponse().status == 200, "health after the attack")
        conn.close()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
        expect(rc == 0, "cairn-server exited with %d" % rc)
        tls_round(args, tmp, expect)
    for f in failures:
        print("FAIL:", f)
    print("gRPC calls served during the attack:", load.ok)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
