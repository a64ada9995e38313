#!/usr/bin/python3
"""cairn-server-core, which links no backend family, serving families loaded
from their plugins, end to end over gRPC (cairn-cli as the client); and the
refusals to start: a missing plugin, a library that is not one, another ABI
version, a family registered twice.
"""
import argparse
import os
import json
import subprocess
import sys
import unittest

# server_process.py is shared by the service tests in every folder.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import server_process  # noqa: E402

ARGS = None


def shared_path(relative):
    base = os.environ.get("CAIRN_SHARED_DIR") or os.path.join(ARGS.source_dir, "..", "shared")
    return os.path.join(base, relative)


def plugin(family):
    return os.path.join(ARGS.plugin_dir, family, "libcairn_%s_plugin.so" % family)


class Served:
    """A started server; stopped (and checked to exit cleanly) on exit."""

    def __init__(self, binary, *args):
        self.proc, self.port, _ = server_process.start(binary, "--threads=2", *args)

    def cli(self, *args):
        return subprocess.run([ARGS.cli, "--server=127.0.0.1:%d" % self.port, "--timeout=60"] + list(args),
                              capture_output=True, text=True, timeout=120)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        rc = self.proc.wait(timeout=30)
        self.proc.stderr.close()
        assert rc == 0, "server exited with %d" % rc


def greedy_ids(server, model, prompt, n):
    r = server.cli("--model=" + model, "--ids", "--temperature=0", "--max-tokens=%d" % n, prompt)
    assert r.returncode == 0, r.stderr
    return [int(t) for t in r.stdout.split()]


class PluginServesTest(unittest.TestCase):
    def test_a_real_model_of_a_plugin_family_matches_the_reference(self):
        model = shared_path("models/stories260K.gguf")
        if not os.path.exists(model):
            if os.environ.get("CI") == "true":
                self.fail("shared data missing under CI: " + model)
            self.skipTest("shared data not present (%s); clone the project beside ../shared" % model)
        with open(shared_path("models/stories260K_greedy.json")) as f:
            reference = json.load(f)[0]
        with Served(ARGS.core, "--backend-plugin=" + plugin("transformer"), "--model=stories=" + model) as s:
            listed = s.cli("--list-models")
            self.assertEqual(listed.returncode, 0, listed.stderr)
            self.assertRegex(listed.stdout, r"stories\tllama\ttransformer")
            ids = greedy_ids(s, "stories", reference["prompt"], 24)
        self.assertEqual(ids, reference["tokens"][:24])

    def test_a_plugin_family_computes_what_the_built_in_one_does(self):
        prompt = "the cat sat on the mat"
        with Served(ARGS.core, "--backend-plugin=" + plugin("recurrent")) as s:
            listed = s.cli("--list-models")
            self.assertEqual(listed.returncode, 0, listed.stderr)
            # Only the built-in demo models of the families it has.
            self.assertEqual([line.split("\t")[0] for line in listed.stdout.split("\n") if line],
                             ["demo-recurrent"])
            from_plugin = greedy_ids(s, "demo-recurrent", prompt, 16)
        with Served(ARGS.server, "--model=demo-recurrent=demo-recurrent") as s:
            built_in = greedy_ids(s, "demo-recurrent", prompt, 16)
        self.assertEqual(len(from_plugin), 16)
        self.assertEqual(from_plugin, built_in)


class RefusedTest(unittest.TestCase):
    def refused(self, binary, words, *args):
        r = subprocess.run([binary, "--listen=127.0.0.1:0", "--threads=1"] + list(args),
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("listening", r.stderr)
        self.assertIn(words, r.stderr)

    def test_missing_plugin(self):
        self.refused(ARGS.core, "backend plugin '/nonexistent/libx.so': no such file",
                     "--backend-plugin=/nonexistent/libx.so")

    def test_a_library_without_the_entry_point(self):
        self.refused(ARGS.core, "no entry point 'cairn_backend_plugin'", "--backend-plugin=" + ARGS.no_entry)

    def test_another_abi_version(self):
        self.refused(ARGS.core, "plugin ABI version 999", "--backend-plugin=" + ARGS.wrong_abi)

    def test_a_family_given_twice(self):
        self.refused(ARGS.core, "backend family 'swa' is already registered",
                     "--backend-plugin=" + plugin("swa"), "--backend-plugin=" + plugin("swa"))

    def test_a_plugin_for_a_built_in_family(self):
        self.refused(ARGS.server, "backend family 'hybrid' is already registered",
                     "--backend-plugin=" + plugin("hybrid"))


def main():
    global ARGS
    p = argparse.ArgumentParser()
    for flag in ("server", "core", "cli", "plugin-dir", "no-entry", "wrong-abi", "source-dir"):
        p.add_argument("--" + flag, required=True)
    ARGS, rest = p.parse_known_args()
    result = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
