#!/usr/bin/python3
"""Request metrics and the access log of a real cairn-server (issue 16, item 6).

Rejected requests used to go uncounted (cairn_requests_failed_total stayed 0
after 40 INVALID_ARGUMENT / NOT_FOUND / RESOURCE_EXHAUSTED) and nothing was
logged per request. Starts cairn-server with --metrics-listen, makes accepted
and rejected calls over gRPC (through cairn-cli), then reads /metrics and the
server's stderr: every call is counted by method, model and status code, the
latency histograms have observations, the checkpoint counters are counters,
and each call has one access-log line; --log-level=warning silences them.
Needs only python3.
"""
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

# server_process.py is shared by the service tests in every folder.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import server_process  # noqa: E402

ARGS = None
PROC = PORT = METRICS = None
LINES = []


def cli(*args, stdin=None, port=None):
    return subprocess.run([ARGS.cli, "--server=127.0.0.1:%d" % (port or PORT), "--timeout=60"] + list(args),
                          input=stdin, capture_output=True, text=True, timeout=120)


def scrape():
    """{series (name and labels as exposed): value}."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % METRICS, timeout=15) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            out[series] = float(value)
    return out, text


def requests_total(m, method, model, code):
    return m.get('cairn_requests_total{code="%s",method="%s",model="%s"}' % (code, method, model), 0)


def access_lines(pattern, count):
    """The access-log lines matching `pattern`, once `count` have arrived
    (the server writes each before the call's status goes out; the reader
    thread may lag)."""
    for _ in range(600):
        found = [l for l in LINES if "cairn: access " in l and re.search(pattern, l)]
        if len(found) >= count:
            return found
        time.sleep(0.05)
    return [l for l in LINES if "cairn: access " in l and re.search(pattern, l)]


class ObservabilityTest(unittest.TestCase):
    def test_every_call_is_counted_and_logged(self):
        before, _ = scrape()
        for _ in range(3):
            self.assertEqual(cli("--model=no-such-model", "hi").returncode, 1)
        for _ in range(2):
            self.assertEqual(cli("--model=demo-chat", "--max-tokens=-1", "hi").returncode, 1)
        r = cli("--model=demo-chat", "--max-tokens=1", "word " * 5000)  # beyond the context
        self.assertIn("RESOURCE_EXHAUSTED", r.stderr)
        r = cli("--model=demo-chat", "--max-tokens=3", "--temperature=0", "Once upon")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = cli("--model=demo-chat", "--max-tokens=2", stdin="hello\n/rewind 9999\n")
        self.assertIn("FAILED_PRECONDITION", r.stderr)
        after, text = scrape()

        def delta(method, model, code):
            return requests_total(after, method, model, code) - requests_total(before, method, model, code)

        self.assertEqual(delta("Generate", "", "NOT_FOUND"), 3)  # unserved names are not labels
        self.assertEqual(delta("Generate", "demo-chat", "INVALID_ARGUMENT"), 2)
        self.assertEqual(delta("Generate", "demo-chat", "RESOURCE_EXHAUSTED"), 1)
        self.assertEqual(delta("Generate", "demo-chat", "OK"), 2)
        self.assertEqual(delta("SessionControl", "", "OK"), 1)  # the chat's create
        self.assertEqual(delta("SessionControl", "", "FAILED_PRECONDITION"), 1)
        self.assertEqual(after["cairn_requests_failed_total"] - before.get("cairn_requests_failed_total", 0), 6)
        self.assertEqual(after["cairn_requests_ok_total"] - before.get("cairn_requests_ok_total", 0), 2)
        # Histograms: every Generate call has a duration; the two that ran
        # have a queue wait and a prefill; 3 + 1 tokens give 2 + 0 gaps.
        count = lambda name: after[name + "_count"] - before.get(name + "_count", 0)  # noqa: E731
        self.assertEqual(count("cairn_request_duration_seconds"), 8)
        self.assertEqual(count("cairn_queue_wait_seconds"), 2)
        self.assertEqual(count("cairn_prefill_seconds"), 2)
        self.assertEqual(count("cairn_inter_token_latency_seconds"), 3)
        for name in ["cairn_checkpoints_captured_total", "cairn_checkpoints_restored_total",
                     "cairn_checkpoints_evicted_total", "cairn_requests_total"]:
            self.assertIn("# TYPE %s counter" % name, text)

        # The access log: one line per call, with its outcome.
        not_found = access_lines(r"method=Generate model=no-such-model session=- .*code=NOT_FOUND", 3)
        self.assertEqual(len(not_found), 3)
        self.assertIn('error="model \'no-such-model\' is not served', not_found[0])
        self.assertEqual(len(access_lines(r"method=Generate model=demo-chat .*code=INVALID_ARGUMENT", 2)), 2)
        ok = access_lines(r"method=Generate model=demo-chat session=- prompt=\d+ reused=\d+ recomputed=\d+ "
                          r"tokens=3 ttft_ms=[\d.]+ queue_ms=[\d.]+ prefill_ms=[\d.]+ code=OK duration_ms=[\d.]+$",
                          1)
        self.assertEqual(len(ok), 1, "".join(LINES[-10:]))
        turn = access_lines(r"method=Generate model=demo-chat session=[0-9a-f]{32} prompt=.* tokens=2 .*code=OK", 1)
        self.assertEqual(len(turn), 1)
        session = re.search(r"session=([0-9a-f]{32})", turn[0]).group(1)
        self.assertEqual(len(access_lines(r"method=SessionControl op=rewind session=%s code=FAILED_PRECONDITION "
                                          r"duration_ms=[\d.]+ error=\"cannot rewind" % session, 1)), 1)

    def test_log_level_warning_drops_the_access_log(self):
        lines = []
        proc, port, _ = server_process.start(ARGS.server, "--model=demo-chat", "--threads=1", "--log-level=warning",
                                             lines=lines)
        try:
            self.assertEqual(cli("--model=demo-chat", "--max-tokens=2", "hi", port=port).returncode, 0)
            self.assertEqual(cli("--model=nope", "hi", port=port).returncode, 1)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            proc.stderr_reader.join(timeout=30)
        self.assertFalse(proc.stderr_reader.is_alive())
        self.assertEqual([l for l in lines if "access" in l], [])
        self.assertTrue(any("listening on port" in l for l in lines))
        r = subprocess.run([ARGS.server, "--log-level=loud"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("expected error, warning, info or debug", r.stderr)

    def test_damaged_checkpoint_files_are_named_in_the_log(self):
        """Issue 16 item 6: damaged checkpoint files were deleted silently."""
        with tempfile.TemporaryDirectory() as disk:
            damaged = os.path.join(disk, "ckpt-7.bin")
            torn = os.path.join(disk, "ckpt-9.tmp")
            with open(damaged, "wb") as f:
                f.write(b"CAIRNCK1" + b"\x5a" * 200)
            with open(torn, "wb") as f:
                f.write(b"CAIRNCK1")
            lines = []
            proc, port, _ = server_process.start(ARGS.server, "--model=demo-chat", "--threads=1",
                                                 "--checkpoint-disk-dir=" + disk, lines=lines)
            try:
                self.assertEqual(cli("--model=demo-chat", "--max-tokens=2", "hi", port=port).returncode, 0)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
                proc.stderr_reader.join(timeout=30)
            warnings = [l for l in lines if "warning checkpoint_store" in l]
            self.assertTrue(any(damaged in l and "header is corrupt" in l for l in warnings), "".join(lines))
            self.assertTrue(any(torn in l and "never completed" in l for l in warnings), "".join(lines))
            self.assertFalse(os.path.exists(damaged))
            self.assertFalse(os.path.exists(torn))


def main():
    global ARGS, PROC, PORT, METRICS
    ARGS, rest, (PROC, PORT, METRICS) = server_process.parse_and_start(
        "--model=demo-chat", "--threads=1", "--metrics-listen=127.0.0.1:0", lines=LINES)
    return server_process.run_tests(PROC, [sys.argv[0]] + rest)


if __name__ == "__main__":
    sys.exit(main())
