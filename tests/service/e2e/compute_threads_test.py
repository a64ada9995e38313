#!/usr/bin/python3
"""A real cairn-server process picks its compute threads from the CPUs it may
use (service/host/compute_threads.h): under `taskset -c 0` one thread, under
a cgroup CPU quota (a cgroup tree of the test's own, --cgroup-root) the
quota's CPUs, --threads as given. The count is read back from the start-up
log line and from the cairn_compute_threads gauge on /metrics.
Needs only python3 (and taskset, util-linux, for the affinity case).
"""
import os
import re
import shutil
import signal
import sys
import tempfile
import unittest
import urllib.request

# server_process.py is shared by the service tests in every folder.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import server_process  # noqa: E402

ARGS = None


class ComputeThreadsTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="cairn-cgroup-")
        self.addCleanup(shutil.rmtree, self.root)

    def serve(self, *args, wrapper=()):
        """Starts a server; returns (threads from the log line, its source,
        threads from /metrics) and stops it."""
        lines = []
        proc, _, metrics = server_process.start(
            ARGS.server, "--model=demo-recurrent", "--metrics-listen=127.0.0.1:0", "--cgroup-root=" + self.root,
            *args, lines=lines, wrapper=wrapper)
        try:
            body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % metrics, timeout=30).read().decode()
        finally:
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(timeout=60), 0)
            proc.stderr_reader.join(30)
            proc.stderr.close()
        logged = [re.search(r"compute threads per model: (\d+) \((.*)\)", line) for line in lines]
        logged = [m for m in logged if m]
        self.assertEqual(len(logged), 1, "".join(lines))
        gauge = re.search(r"^cairn_compute_threads (\S+)$", body, re.M)
        self.assertIsNotNone(gauge, body)
        print("%s %s: %s threads (%s)" % (" ".join(wrapper), " ".join(args), logged[0].group(1), logged[0].group(2)))
        return int(logged[0].group(1)), logged[0].group(2), int(float(gauge.group(1)))

    def write_quota(self, text):
        with open(os.path.join(self.root, "cpu.max"), "w") as f:
            f.write(text)

    def test_the_affinity_mask_bounds_the_threads(self):
        if shutil.which("taskset") is None:
            self.skipTest("no taskset (util-linux)")
        threads, source, gauge = self.serve(wrapper=("taskset", "-c", "0"))
        self.assertEqual((threads, gauge), (1, 1))
        self.assertIn("CPU affinity: 1 CPUs", source)
        cpus = len(os.sched_getaffinity(0))
        threads, _, gauge = self.serve()
        self.assertEqual((threads, gauge), (cpus, cpus))

    def test_the_cgroup_quota_bounds_the_threads(self):
        self.write_quota("50000 100000\n")
        threads, source, gauge = self.serve()
        self.assertEqual((threads, gauge), (1, 1))
        self.assertIn("cgroup CPU quota 50000 100000", source)
        self.write_quota("max 100000\n")
        cpus = len(os.sched_getaffinity(0))
        self.assertEqual(self.serve()[0], cpus)

    def test_threads_flag_wins(self):
        self.write_quota("50000 100000\n")
        threads, source, gauge = self.serve("--threads=3")
        self.assertEqual((threads, gauge, source), (3, 3, "--threads"))


def main():
    global ARGS
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--cli", required=True)
    ARGS, rest = p.parse_known_args()
    result = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
