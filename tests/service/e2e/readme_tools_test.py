#!/usr/bin/env python3
"""Runs README's Python example of a tool conversation (the code block after
<!-- readme-tools-example -->) against a real cairn-server serving the demo
chat model with Qwen3.5's template from ../shared/chat_templates, and checks
what it printed: the template in use and a finish reason.

    readme_tools_test.py --server cairn-server --proto-dir protos --protoc protoc
                         --plugin grpc_python_plugin --readme README.md --shared ../shared

Exits 77 (skipped) when ../shared is absent, unless CI is set.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import server_process  # noqa: E402


def example(readme):
    text = open(readme, encoding="utf-8").read()
    m = re.search(r"<!-- readme-tools-example -->\n```python\n(.*?)```", text, re.S)
    if not m:
        raise SystemExit("README has no tools example block")
    return m.group(1)


def main():
    parser = argparse.ArgumentParser()
    server_process.add_stub_arguments(parser)
    parser.add_argument("--readme", required=True)
    parser.add_argument("--shared", required=True)
    args = parser.parse_args()
    template = os.path.join(args.shared, "chat_templates/templates/Qwen3.5-4B.jinja")
    if not os.path.exists(template):
        print("shared data not present (%s)" % template)
        return 1 if os.environ.get("CI") else 77
    with tempfile.TemporaryDirectory() as out:
        server_process.generate_stubs(args, out)
        script = os.path.join(out, "example.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(example(args.readme))
        proc, port, _ = server_process.start(args.server, "--model=qwen=demo-chat", "--threads=1",
                                             "--chat-template=qwen=" + template)
        try:
            env = dict(os.environ, CAIRN_ADDR="127.0.0.1:%d" % port, CAIRN_MODEL="qwen",
                       PYTHONPATH=out + os.pathsep + os.environ.get("PYTHONPATH", ""))
            run = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=120)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(run.stdout, run.stderr)
    if run.returncode != 0:
        print("the README example failed")
        return 1
    lines = run.stdout.splitlines()
    ok = (len(lines) == 2 and lines[0].startswith("file:" + template) and
          re.match(r"FINISH_REASON_[A-Z_]+ reasoning: ", lines[1]) is not None)
    if not ok:
        print("unexpected output")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
