#!/usr/bin/python3
"""End-to-end test of cairn-cli and cairn-load against a real cairn-server.

Starts cairn-server on 127.0.0.1 port 0 with the built-in ChatML model
demo-chat and runs cairn-cli as a user would: --list-models, a one-shot chat
turn (--chat --system), the same turn through interactive mode (stdin), and
a plain completion; errors by status name, /help, unknown commands refused
locally, output ending with a newline, mutual TLS with a client certificate.
cairn-load: --help, a bearer token with mutual TLS, and its backoff against
a port nobody serves. Needs only python3 and openssl (no gRPC module).
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

# server_process.py is shared by the service tests in every folder.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import server_process  # noqa: E402

ARGS = None
PORT = None


def cli(*args, stdin=None):
    return subprocess.run([ARGS.cli, "--server=127.0.0.1:%d" % PORT, "--timeout=60"] + list(args),
                          input=stdin, capture_output=True, text=True, timeout=120)


SYSTEM = "You tell stories."
USER = "Tell me about a dog."


class CliTest(unittest.TestCase):
    def test_list_models_names_the_models_own_template(self):
        r = cli("--list-models")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"demo-chat\tllama\ttransformer\tctx \d+\ttemplate gguf:tokenizer.chat_template")

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


class CliUsabilityTest(unittest.TestCase):
    def test_errors_are_printed_with_the_status_name(self):
        r = cli("--model=no-such-model", "hello")
        self.assertEqual(r.returncode, 1)
        self.assertIn("cairn-cli: NOT_FOUND: model 'no-such-model'", r.stderr)
        r = cli("--model=demo-chat", "--max-tokens=2", stdin="hello\n/rewind 9999\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r"cairn-cli: FAILED_PRECONDITION: cannot rewind")
        self.assertNotRegex(r.stderr, r"cairn-cli: \d+ ")

    def test_help_and_unknown_commands_stay_local(self):
        r = cli("--model=demo-chat", "--temperature=0", "--max-tokens=3",
                stdin="/help\n/frobnicate now\n/rewindx\n//not a command\n/sessions\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("/rewind N", r.stderr)
        self.assertIn("/quit", r.stderr)
        self.assertIn("unknown command '/frobnicate'", r.stderr)
        self.assertIn("unknown command '/rewindx'", r.stderr)
        # Only the escaped line reached the model: one reply, and the session
        # holds that one turn.
        self.assertEqual(len([l for l in r.stdout.splitlines() if l.strip()]), 1, r.stdout)
        m = re.search(r"demo-chat (\d+) tokens, idle \d+s\s+\(current\)", r.stderr)
        self.assertIsNotNone(m, r.stderr)
        alone = cli("--model=demo-chat", "--temperature=0", "--max-tokens=3", stdin="//not a command\n/sessions\n")
        m2 = re.search(r"demo-chat (\d+) tokens, idle \d+s\s+\(current\)", alone.stderr)
        self.assertEqual(m.group(1), m2.group(1), alone.stderr)

    def test_output_ends_with_a_newline(self):
        r = cli("--model=demo-chat", "--temperature=0", "--max-tokens=3", "Once")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("Once") and r.stdout.endswith("\n"), repr(r.stdout))
        self.assertEqual(r.stdout.count("\n"), 1, repr(r.stdout))
        r = cli("--model=demo-chat", "--temperature=0", "--max-tokens=3", "--ids", "Once")
        self.assertRegex(r.stdout, r"^\d+ \d+ \d+\n$")
        r = cli("--model=demo-chat", "--max-tokens=2", stdin="hello\n")
        self.assertTrue(r.stdout.endswith("\n") and r.stderr.endswith("\n"), (r.stdout, r.stderr))
        # A request that fails after the prompt was echoed still ends its line.
        r = cli("--model=demo-chat", "--max-tokens=-1", "Once")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout, "Once\n")
        self.assertIn("cairn-cli: INVALID_ARGUMENT: ", r.stderr)


def make_certificates(d):
    """A server certificate for localhost, a CA and a client certificate it signed."""
    cmds = [
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout server.key -out server.pem -days 1 "
        "-subj /CN=localhost -addext subjectAltName=DNS:localhost",
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=cairn-test-ca",
        "openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=client",
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 1",
    ]
    for c in cmds:
        subprocess.run(c.split(), cwd=d, check=True, capture_output=True)


class MutualTlsAndTokenTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if shutil.which("openssl") is None:
            raise unittest.SkipTest("no openssl command")
        cls.dir = tempfile.mkdtemp(prefix="cairn-cli-tls-")
        make_certificates(cls.dir)
        with open(os.path.join(cls.dir, "tokens"), "w") as f:
            f.write("secret-token\n")
        f = lambda name: os.path.join(cls.dir, name)  # noqa: E731
        cls.proc, cls.port, _ = server_process.start(
            ARGS.server, "--model=demo-chat", "--threads=1", "--tls-cert=" + f("server.pem"),
            "--tls-key=" + f("server.key"), "--tls-client-ca=" + f("ca.pem"),
            "--auth-token-file=" + f("tokens"))
        cls.tls = ["--tls-ca=" + f("server.pem"), "--tls-server-name=localhost"]
        cls.client_cert = ["--tls-cert=" + f("client.pem"), "--tls-key=" + f("client.key")]

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait(timeout=30)
        shutil.rmtree(cls.dir)

    def run_cli(self, *args):
        return subprocess.run([ARGS.cli, "--server=127.0.0.1:%d" % self.port, "--timeout=60"] + list(args),
                              capture_output=True, text=True, timeout=120)

    def run_load(self, *args):
        return subprocess.run([ARGS.load, "--server=127.0.0.1:%d" % self.port, "--model=demo-chat",
                               "--clients=2", "--seconds=1", "--prompt-tokens=4", "--max-tokens=2"] + list(args),
                              capture_output=True, text=True, timeout=120)

    def test_cli_presents_a_client_certificate(self):
        args = self.tls + self.client_cert + ["--token=secret-token", "--model=demo-chat", "--max-tokens=2", "--ids",
                                              "hi"]
        r = self.run_cli(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^\d+ \d+\n$")
        # Without the client certificate the handshake fails.
        r = self.run_cli(*(self.tls + ["--token=secret-token", "--model=demo-chat", "--max-tokens=2", "hi"]))
        self.assertEqual(r.returncode, 1)
        self.assertIn("cairn-cli: UNAVAILABLE: ", r.stderr)
        # A certificate without its key is refused before connecting.
        r = self.run_cli(*(self.tls + [self.client_cert[0], "hi"]))
        self.assertEqual(r.returncode, 2)
        self.assertIn("--tls-cert and --tls-key go together", r.stderr)

    def test_load_with_token_and_client_certificate(self):
        r = self.run_load(*(self.tls + self.client_cert + ["--token=secret-token"]))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        m = re.search(r"load\s+clients\s+2: (\d+) requests, 0 errors", r.stdout)
        self.assertIsNotNone(m, r.stdout)
        self.assertGreater(int(m.group(1)), 0)
        r = self.run_load(*(self.tls + self.client_cert + ["--token=wrong", "--max-backoff=0.2"]))
        self.assertEqual(r.returncode, 1)
        self.assertIn("first error: UNAUTHENTICATED: ", r.stderr)


class LoadTest(unittest.TestCase):
    def test_help(self):
        r = subprocess.run([ARGS.load, "--help"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        for flag in ["--server", "--clients", "--max-backoff", "--token", "--tls-ca", "--tls-cert", "--tls-key"]:
            self.assertIn(flag, r.stdout)
        r = subprocess.run([ARGS.load, "--no-such-flag"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("see --help", r.stderr)

    def test_backs_off_from_a_server_that_is_gone(self):
        # A port nobody listens on (bound, then closed): every request fails
        # at once. Without backoff one client made hundreds of thousands of
        # requests a minute; with a 0.2 s cap and a jitter of at least half,
        # waits are 0.025+, 0.05+, 0.1+, then 0.1+ s each, so 2 s hold at
        # most 3 + 2 / 0.1 = 23 failed requests, however fast the machine.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        r = subprocess.run([ARGS.load, "--server=127.0.0.1:%d" % port, "--clients=1", "--seconds=2",
                            "--max-backoff=0.2"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        m = re.search(r"clients\s+1: (\d+) requests, (\d+) errors", r.stdout)
        self.assertIsNotNone(m, r.stdout)
        self.assertEqual(m.group(1), m.group(2))
        self.assertGreaterEqual(int(m.group(2)), 2)
        self.assertLessEqual(int(m.group(2)), 24)
        self.assertIn("first error: UNAVAILABLE: ", r.stderr)


def main():
    global ARGS, PORT
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--cli", required=True)
    p.add_argument("--load", required=True)
    ARGS, rest = p.parse_known_args()
    proc, PORT, _ = server_process.start(ARGS.server, "--model=demo-chat", "--threads=2")
    return server_process.run_tests(proc, [sys.argv[0]] + rest)


if __name__ == "__main__":
    sys.exit(main())
