#!/usr/bin/python3
"""End-to-end test of cairn-cli against a real cairn-server.

Starts cairn-server on 127.0.0.1 port 0 with the built-in ChatML model
demo-chat and runs cairn-cli as a user would: --list-models, a one-shot chat
turn (--chat --system), the same turn through interactive mode (stdin), and
a plain completion. Needs only python3 (no gRPC module).
"""
import argparse
import os
import re
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_process  # noqa: E402

ARGS = None
PORT = None


def cli(*args, stdin=None):
    return subprocess.run([ARGS.cli, "--server=127.0.0.1:%d" % PORT, "--timeout=60"] + list(args),
                          input=stdin, capture_output=True, text=True, timeout=120)


SYSTEM = "You tell stories."
USER = "Tell me about a dog."


class CliTest(unittest.TestCase):
    def test_list_models_names_the_chatml_template(self):
        r = cli("--list-models")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"demo-chat\tllama\ttransformer\tctx \d+\ttemplate chatml")

    def test_one_shot_chat_with_messages(self):
        r = cli("--model=demo-chat", "--chat", "--system=" + SYSTEM, "--temperature=0", "--max-tokens=12",
                "--stats", USER)
        self.assertEqual(r.returncode, 0, r.stderr)
        # The reply alone (a chat turn does not echo the prompt).
        self.assertNotIn(USER, r.stdout)
        self.assertGreater(len(r.stdout.strip()), 0)
        m = re.search(r"\[prompt (\d+) tokens", r.stderr)
        self.assertIsNotNone(m, r.stderr)
        chat_tokens = int(m.group(1))
        self.assertRegex(r.stderr, r"generated \d+ tokens, finish FINISH_REASON_(LENGTH|END_OF_GENERATION)")
        # The same text as a plain completion is shorter: no ChatML markers,
        # no system message.
        plain = cli("--model=demo-chat", "--temperature=0", "--max-tokens=1", "--stats", USER)
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertTrue(plain.stdout.startswith(USER))
        n_plain = int(re.search(r"\[prompt (\d+) tokens", plain.stderr).group(1))
        self.assertLess(n_plain, chat_tokens)
        # Interactive mode sends the same messages (system, then the line as
        # a user message) and, greedy, gets the same reply.
        inter = cli("--model=demo-chat", "--system=" + SYSTEM, "--temperature=0", "--max-tokens=12",
                    stdin=USER + "\n/stats\n")
        self.assertEqual(inter.returncode, 0, inter.stderr)
        self.assertEqual(inter.stdout.strip(), r.stdout.strip())
        self.assertIn("[prompt %d tokens" % chat_tokens, inter.stderr)

    def test_one_shot_chat_ids(self):
        r = cli("--model=demo-chat", "--chat", "--ids", "--temperature=0", "--max-tokens=5", USER)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.split()), 5)
        self.assertTrue(all(t.isdigit() for t in r.stdout.split()))

    def test_health(self):
        r = cli("--health")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "SERVING"), r.stderr)
        r = cli("--health=cairn.v1.Inference")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "SERVING"), r.stderr)
        r = cli("--health=no.such.Service")
        self.assertEqual(r.returncode, 1)
        self.assertIn("service name unknown", r.stderr)

    def test_chat_sends_the_whole_conversation_again_when_its_session_is_gone(self):
        # A server of its own whose sessions expire after a second of idleness
        # stands for a replica that went away with the session.
        proc, port, _ = server_process.start(ARGS.server, "--model=demo-chat", "--threads=1",
                                             "--session-idle-seconds=1")
        try:
            chat = subprocess.Popen([ARGS.cli, "--server=127.0.0.1:%d" % port, "--timeout=60", "--temperature=0",
                                     "--max-tokens=6"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            chat.stdin.write("Hello there.\n")
            chat.stdin.flush()
            time.sleep(3.5)  # idle past the limit; swept within a second
            out, err = chat.communicate("How are you?\n/stats\n", timeout=60)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        self.assertEqual(chat.returncode, 0, err)
        self.assertIn("sending the whole conversation again", err)
        self.assertEqual(len([l for l in out.splitlines() if l.strip()]), 2, out)
        # The re-created session holds the whole conversation: both turns.
        first = int(re.findall(r"\[prompt (\d+) tokens", err)[-1])
        self.assertRegex(err, r"session holds %d tokens" % (first + 6))
        self.assertGreater(first, 20)


def main():
    global ARGS, PORT
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--cli", required=True)
    ARGS, rest = p.parse_known_args()
    proc, PORT, _ = server_process.start(ARGS.server, "--model=demo-chat", "--threads=2")
    return server_process.run_tests(proc, [sys.argv[0]] + rest)


if __name__ == "__main__":
    sys.exit(main())
