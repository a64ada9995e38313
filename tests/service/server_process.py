"""A real cairn-server process for the Python end-to-end tests.

start() launches the binary on 127.0.0.1 port 0 and reads the ports it
reports; run_tests() runs a unittest suite against a started server and stops
it with SIGTERM, failing when the server does not exit cleanly.
"""
import os
import re
import signal
import subprocess
import sys
import threading
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


def start(server_binary, *args):
    """Returns (process, port, metrics_port or None)."""
    args = list(args)
    want_metrics = any(a.startswith("--metrics-listen") for a in args)
    proc = subprocess.Popen([server_binary, "--listen=127.0.0.1:0"] + args, stderr=subprocess.PIPE, text=True)
    port = metrics = None
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
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc, port, metrics


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
