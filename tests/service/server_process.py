"""A real cairn-server process for the Python end-to-end tests.

start() launches the binary on 127.0.0.1 port 0 and reads the ports it
reports; run_tests() runs a unittest suite against a started server and stops
it with SIGTERM, failing when the server does not exit cleanly.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest


def add_stub_arguments(parser):
    """The flags of a test that starts cairn-server and talks to it through
    generated Python stubs."""
    for name in ("server", "proto-dir", "protoc", "plugin"):
        parser.add_argument("--" + name, required=True)


def generate_stubs(args, out_dir):
    """Generates the stubs of cairn/v1/inference.proto into out_dir (with
    protoc and grpc_python_plugin, as add_stub_arguments named them) and makes
    them importable."""
    subprocess.check_call([
        args.protoc, "-I", args.proto_dir, "--python_out=" + out_dir,
        "--grpc_python_out=" + out_dir,
        "--plugin=protoc-gen-grpc_python=" + args.plugin,
        os.path.join(args.proto_dir, "cairn/v1/inference.proto")])
    sys.path.insert(0, out_dir)


def parse_stub_arguments(*flags):
    """Parses add_stub_arguments' flags and `flags` (names of further
    required flags, e.g. "cli"); returns (args, the rest of argv for
    unittest)."""
    p = argparse.ArgumentParser()
    add_stub_arguments(p)
    for name in flags:
        p.add_argument("--" + name, required=True)
    return p.parse_known_args()


def run_with_stubs(args, rest):
    """Generates the stubs (generate_stubs) into a temporary directory and
    runs the unittest suite of __main__ with `rest`; returns an exit code."""
    with tempfile.TemporaryDirectory() as stubs:
        generate_stubs(args, stubs)
        result = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2).result
    return 0 if result.wasSuccessful() else 1


def generate_on_new_channel(grpc, pbg, port, request):
    """The status code of one Generate read to its end over a new channel
    (a new connection) to 127.0.0.1:port; `grpc` and `pbg` are the grpc
    module and the generated inference_pb2_grpc."""
    channel = grpc.insecure_channel("127.0.0.1:%d" % port)
    try:
        for _ in pbg.InferenceStub(channel).Generate(request, timeout=30):
            pass
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()
    finally:
        channel.close()


def start(server_binary, *args, lines=None, wrapper=()):
    """Returns (process, port, metrics_port or None). With `lines` (a list),
    every stderr line is appended to it as it arrives; the thread reading
    them is process.stderr_reader (it ends after the process has exited).
    `wrapper` is a command that runs the server (e.g. taskset -c 0)."""
    args = list(args)
    want_metrics = any(a.startswith("--metrics-listen") for a in args)
    proc = subprocess.Popen(list(wrapper) + [server_binary, "--listen=127.0.0.1:0"] + args, stderr=subprocess.PIPE,
                            text=True)
    port = metrics = None
    if lines is None:
        lines = []
    for line in proc.stderr:
        lines.append(line)
        m = re.search(r"listening on port (\d+)", line)
        if m:
            port = int(m.group(1))
        m = re.search(r"metrics on port (\d+)", line)
        if m:
            metrics = int(m.group(1))
        if port is not None and (metrics is not None or not want_metrics):
            break
    if port is None or (want_metrics and metrics is None):
        proc.kill()
        raise RuntimeError("server did not start:\n" + "".join(lines))
    # Keep draining stderr so the server never blocks on a full pipe.
    proc.stderr_reader = threading.Thread(target=lambda: [lines.append(line) for line in proc.stderr], daemon=True)
    proc.stderr_reader.start()
    return proc, port, metrics


def wait_for_http_port(lines, seconds=10):
    """The HTTP API's port a server started with --http-listen reported in
    its stderr `lines` (start(..., lines=lines)); None when it did not
    within `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        for line in list(lines):
            m = re.search(r"HTTP API on port (\d+)", line)
            if m:
                return int(m.group(1))
        time.sleep(0.01)
    return None


def self_signed_certificate(out_dir):
    """A certificate for 127.0.0.1 and localhost, made by openssl in
    out_dir: (cert.pem, key.pem) paths. Clients trust the certificate
    itself."""
    cert, key = os.path.join(out_dir, "server.pem"), os.path.join(out_dir, "server.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return cert, key


def readme_block(readme, marker, language):
    """The code block of `language` right after `<!-- marker -->` in the
    README at path `readme` (a test runs it as it is written)."""
    text = open(readme, encoding="utf-8").read()
    m = re.search(r"<!-- %s -->\n```%s\n(.*?)```" % (re.escape(marker), language), text, re.S)
    if not m:
        raise SystemExit("%s has no %s block after <!-- %s -->" % (readme, language, marker))
    return m.group(1)


def run_tests(proc, argv):
    """Runs the unittest suite of __main__ (argv as unittest.main takes it),
    then stops `proc`; returns a process exit code."""
    try:
        result = unittest.main(argv=argv, exit=False, verbosity=2).result
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    if rc != 0:
        print("cairn-server exited with %d after SIGTERM" % rc)
        return 1
    return 0 if result.wasSuccessful() else 1


def parse_and_start(*server_args, lines=None):
    """For a test script taking --server and --cli (the binaries): parses
    them, starts the server with `server_args` (see start()); returns
    (args, the rest of argv for unittest, (process, port, metrics_port))."""
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--cli", required=True)
    args, rest = p.parse_known_args()
    return args, rest, start(args.server, *server_args, lines=lines)
