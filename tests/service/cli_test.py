#!/usr/bin/python3
"""End-to-end test of cairn-cli against a real cairn-server.

Starts cairn-server on 127.0.0.1 port 0 with the built-in ChatML model
demo-chat and runs cairn-cli as a user would: --list-models, a one-shot chat
turn (--chat --system), the same turn through interactive mode (stdin), and
a plain completion. Needs only python3 (no gRPC module).
"""
import argparse
import re
import signal
import subprocess
import sys
import threading
import unittest

ARGS = None
PORT = None


def start_server():
    proc = subprocess.Popen([ARGS.server, "--listen=127.0.0.1:0", "--model=demo-chat", "--threads=2"],
                            stderr=subprocess.PIPE, text=True)
    port = None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        m = re.search(r"listening on port (\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        proc.kill()
        raise RuntimeError("server did not start:\n" + "".join(lines))
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc, port


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


def main():
    global ARGS, PORT
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--cli", required=True)
    ARGS, rest = p.parse_known_args()
    proc, PORT = start_server()
    try:
        result = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2).result
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    if rc != 0:
        print("cairn-server exited with %d after SIGTERM" % rc)
        return 1
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
