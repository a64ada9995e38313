#!/usr/bin/env python3
"""The official openai Node SDK (tests/service/http/package.json, installed
by scripts/setup.sh with npm ci) against a real cairn-server's HTTP API:
openai_sdk_test.mjs streams a chat, makes a tool round trip, a completion
from token ids, lists the models, fails to authenticate with a wrong key and
aborts a stream; this checks what it printed against the same server's gRPC
API (greedy replies equal, usage and cached tokens) and that the aborted
stream was cancelled on the server. Then it runs README's SDK example, in
the clear and over HTTPS (NODE_EXTRA_CA_CERTS).

    openai_sdk_test.py --server cairn-server --proto-dir protos --protoc protoc
                       --plugin grpc_python_plugin --shared ../shared --readme README.md

The tool round trip runs on the demo chat model with Qwen3.5's template from
../shared/chat_templates. Exits 77 (skipped) without node, the installed SDK
or ../shared, unless CI is set.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import server_process  # noqa: E402

TOKEN = "sdk-test-token"
CONVERSATION = [{"role": "system", "content": "You answer briefly."},
                {"role": "user", "content": "What is a cairn?"}]
PROMPT_IDS = [300, 301, 302, 303, 304, 305]


def grpc_reference(port, pb, pbg, grpc):
    """The greedy replies of the SDK's requests, through gRPC."""
    channel = grpc.insecure_channel("127.0.0.1:%d" % port)
    stub = pbg.InferenceStub(channel)
    md = [("authorization", "Bearer " + TOKEN)]
    chat = pb.GenerateRequest(model="demo-chat", sampling=pb.SamplingParams(temperature=0),
                              stop=pb.StopParams(max_tokens=12))
    for m in CONVERSATION:
        chat.messages.add(role=m["role"], content=m["content"])
    content, finished = "", None
    for ev in stub.Generate(chat, metadata=md, timeout=60):
        pieces = ev.token.pieces if ev.HasField("token") else ev.finished.pieces if ev.HasField("finished") else []
        content += "".join(p.text for p in pieces if p.kind == pb.OUTPUT_KIND_CONTENT)
        if ev.HasField("finished"):
            finished = ev.finished
    ids = pb.GenerateRequest(model="demo-transformer", sampling=pb.SamplingParams(temperature=0),
                             stop=pb.StopParams(max_tokens=5))
    ids.parts.add(tokens=pb.TokenIds(ids=PROMPT_IDS))
    text = ""
    for ev in stub.Generate(ids, metadata=md, timeout=60):
        text += ev.token.text if ev.HasField("token") else ev.finished.text if ev.HasField("finished") else ""
    channel.close()
    return content, finished, text


def check(out, reference, lines):
    content, finished, text = reference
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(what)

    expect("demo-chat" in out["models"], "models: %s" % out["models"])
    expect(out["stream"]["content"] == content, "streamed %r != gRPC %r" % (out["stream"]["content"], content))
    expect(out["whole"]["content"] == content, "whole %r != gRPC %r" % (out["whole"]["content"], content))
    usage = out["stream"]["usage"]
    expect(usage is not None and usage["prompt_tokens"] == finished.usage.prompt_tokens and
           usage["completion_tokens"] == finished.usage.completion_tokens, "stream usage %s" % usage)
    # The gRPC request ran first: the SDK's requests reused its prompt.
    expect(usage is not None and 0 < usage["prompt_tokens_details"]["cached_tokens"] <= usage["prompt_tokens"],
           "cached tokens %s" % usage)
    expect(out["tools"]["second_finish"] in ("stop", "length", "tool_calls"), "tools: %s" % out["tools"])
    expect(out["tools"]["second_prompt_tokens"] > 0, "tools: %s" % out["tools"])
    expect(out["completion"]["text"] == text, "completion %r != gRPC %r" % (out["completion"]["text"], text))
    expect(out["auth"] == 401, "auth: %s" % out["auth"])
    # The SDK ends the iteration of an aborted stream quietly (or with
    # APIUserAbortError) after the chunks it already had.
    expect(out["abort"] in ("aborted", "ended") and 3 <= out["abort_received"] < 100000,
           "abort: %s after %d chunks" % (out["abort"], out["abort_received"]))
    # The aborted stream ends on the server as cancelled, logged and counted.
    deadline = time.time() + 10
    while time.time() < deadline and not any("code=CANCELLED" in l and "/v1/chat/completions" in l for l in lines):
        time.sleep(0.05)
    expect(any("code=CANCELLED" in l and "/v1/chat/completions" in l for l in lines), "no cancelled access line")
    return failures


def run_readme_example(node, readme, env):
    """Runs README's example as it is written (beside node_modules, so that
    it finds the SDK); returns its output, or None when it failed."""
    script = os.path.join(HERE, ".readme_example_%d.mjs" % os.getpid())
    with open(script, "w", encoding="utf-8") as f:
        f.write(server_process.readme_block(readme, "readme-openai-example", "js"))
    try:
        run = subprocess.run([node, script], env=env, capture_output=True, text=True, timeout=120)
    finally:
        os.remove(script)
    print("README example:", run.stdout, run.stderr)
    return run.stdout if run.returncode == 0 else None


def main():
    args, _ = server_process.parse_stub_arguments("shared", "readme")
    template = os.path.join(args.shared, "chat_templates/templates/Qwen3.5-4B.jinja")
    if not os.path.exists(template):
        print("shared data not present (%s)" % template)
        return 1 if os.environ.get("CI") else 77
    node = shutil.which("node")
    sdk = os.path.join(HERE, "node_modules", "openai", "package.json")
    if node is None or not os.path.exists(sdk):
        print("skipped: needs node and the openai SDK (scripts/setup.sh runs npm ci in %s)" % HERE)
        return 1 if os.environ.get("CI") else 77
    with tempfile.TemporaryDirectory() as tmp:
        server_process.generate_stubs(args, tmp)
        import grpc
        import cairn.v1.inference_pb2 as pb
        import cairn.v1.inference_pb2_grpc as pbg
        tokens = os.path.join(tmp, "tokens")
        with open(tokens, "w") as f:
            f.write(TOKEN + "\n")
        lines = []
        # The tool round trip needs a template that renders tool calls: the
        # demo chat model with Qwen3.5's, as "qwen".
        proc, port, _ = server_process.start(args.server, "--threads=1", "--http-listen=127.0.0.1:0",
                                             "--model=demo-chat=demo-chat", "--model=demo-transformer=demo-transformer",
                                             "--model=qwen=demo-chat", "--chat-template=qwen=" + template,
                                             "--auth-token-file=" + tokens, "--log-level=info", lines=lines)
        try:
            http_port = server_process.wait_for_http_port(lines)
            reference = grpc_reference(port, pb, pbg, grpc)
            env = dict(os.environ, CAIRN_HTTP="http://127.0.0.1:%d/v1" % http_port, CAIRN_TOKEN=TOKEN,
                       CAIRN_CONVERSATION=json.dumps(CONVERSATION), CAIRN_PROMPT_IDS=json.dumps(PROMPT_IDS))
            run = subprocess.run([node, os.path.join(HERE, "openai_sdk_test.mjs")], env=env, capture_output=True,
                                 text=True, timeout=120)
            print(run.stdout, run.stderr)
            if run.returncode != 0:
                print("the SDK script failed")
                return 1
            failures = check(json.loads(run.stdout.strip().splitlines()[-1]), reference, lines)
            example = run_readme_example(node, args.readme, env)
            if example is None or not re.search(r'usage: \{"completion_tokens":\d+', example):
                failures.append("README's example failed or printed no usage")
        finally:
            proc.terminate()
            rc = proc.wait(timeout=30)
        # The same example over HTTPS, the SDK trusting the certificate
        # through NODE_EXTRA_CA_CERTS as README says.
        cert, key = server_process.self_signed_certificate(tmp)
        lines = []
        proc, _, _ = server_process.start(args.server, "--threads=1", "--http-listen=127.0.0.1:0",
                                          "--model=demo-chat=demo-chat", "--tls-cert=" + cert, "--tls-key=" + key,
                                          lines=lines)
        try:
            env = dict(os.environ, NODE_EXTRA_CA_CERTS=cert,
                       CAIRN_HTTP="https://127.0.0.1:%d/v1" % server_process.wait_for_http_port(lines))
            example = run_readme_example(node, args.readme, env)
            if example is None or not re.search(r'usage: \{"completion_tokens":\d+', example):
                failures.append("README's example over HTTPS failed or printed no usage")
        finally:
            proc.terminate()
            rc = rc or proc.wait(timeout=30)
    for f in failures:
        print("FAIL:", f)
    if rc != 0:
        print("cairn-server exited with %d" % rc)
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
