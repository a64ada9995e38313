#!/usr/bin/python3
"""Three cairn-server replicas behind a real nginx (grpc_pass, consistent
hashing on the x-cairn-session header), on 127.0.0.1.

A conversation workload (sessions with client-chosen ids, the whole
conversation sent with every request, greedy replies) runs
1. on one server alone: the reference recomputed / minimum;
2. through the proxy: every conversation must stay on one replica, the
   replies must equal the single server's, and recomputed / minimum must
   equal the single server's (minimum: per replica, the part of each prompt
   no earlier request on that replica computed);
3. through the proxy with a session directory the replicas share, killing
   (SIGKILL) the replica that serves the most conversations halfway, one
   request in flight to it: every conversation goes on (at most one client
   retry per request), and the conversations it held resume on other
   replicas from their persisted state;
4. through the proxy without a session directory, killing a replica the same
   way (its conversations are re-created from the whole conversation the
   client sends: create_session), then draining a second one as planned
   (taken out of nginx, `cairn-cli --drain-to` moves its sessions with their
   ids through the proxy) so that the last replica serves everything.
Every reply of phases 3 and 4 must equal a fresh computation: the same prompt
on a server with checkpoints off, without a session.

Needs nginx (scripts/setup.sh installs it) and python3-grpcio. Exits 77
(skipped) without nginx, unless CI=true.
"""
import argparse
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

# server_process.py is shared by the service tests in every folder.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import server_process  # noqa: E402

ARGS = None
MODEL = "demo-hybrid"
CONVERSATIONS = 12
TURNS = 6
REPLY = 12
SYSTEM = list(range(200, 232))  # a system prompt every conversation shares
HEADER = "x-cairn-session"
STARTED = []  # every process this test started, killed at the end whatever happens


def generate_stubs(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    subprocess.check_call([
        ARGS.protoc, "-I", ARGS.proto_dir, "--python_out=" + out_dir, "--grpc_python_out=" + out_dir,
        "--plugin=protoc-gen-grpc_python=" + ARGS.plugin, os.path.join(ARGS.proto_dir, "cairn/v1/inference.proto")])
    sys.path.insert(0, out_dir)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, seconds=20):
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError("%s exited with %d" % (what, proc.returncode))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("%s did not listen on %d" % (what, port))


class Nginx:
    """A real nginx in front of the replicas: HTTP/2 cleartext, grpc_pass,
    `hash $http_x_cairn_session consistent`; a failed replica is skipped
    (grpc_next_upstream) for the rest of the test."""

    def __init__(self, work, ports):
        self.work = work
        os.makedirs(work, exist_ok=True)
        self.conf = os.path.join(work, "nginx.conf")
        self.port = None
        self.write(ports)
        for _ in range(3):  # the port may be taken between probe and bind
            self.port = free_port()
            self.write(ports)
            self.proc = subprocess.Popen([ARGS.nginx, "-p", work, "-e", os.path.join(work, "error.log"),
                                          "-c", self.conf], stderr=subprocess.DEVNULL)
            STARTED.append(self.proc)
            try:
                wait_port(self.port, self.proc, "nginx")
                return
            except RuntimeError:
                self.proc.kill()
                self.proc.wait()
        raise RuntimeError("nginx did not start:\n" + self.log())

    def write(self, ports):
        servers = "".join("    server 127.0.0.1:%d max_fails=1 fail_timeout=600s;\n" % p for p in ports)
        with open(self.conf, "w") as f:
            f.write("""daemon off;
worker_processes 1;
pid %(w)s/nginx.pid;
events { worker_connections 512; }
http {
  access_log off;
  client_body_temp_path %(w)s/body;
  proxy_temp_path %(w)s/proxy;
  fastcgi_temp_path %(w)s/fastcgi;
  uwsgi_temp_path %(w)s/uwsgi;
  scgi_temp_path %(w)s/scgi;
  upstream cairn {
    hash $http_x_cairn_session consistent;
%(servers)s  }
  server {
    listen 127.0.0.1:%(port)d http2;
    client_max_body_size 64m;
    location / {
      grpc_pass grpc://cairn;
      grpc_next_upstream error timeout;
      grpc_read_timeout 120s;
      grpc_send_timeout 120s;
    }
  }
}
""" % {"w": self.work, "servers": servers, "port": self.port or 0})

    def reload(self, ports):
        """New upstreams; nginx's new workers take over within a moment."""
        self.write(ports)
        self.proc.send_signal(signal.SIGHUP)
        time.sleep(1.0)

    def log(self):
        try:
            with open(os.path.join(self.work, "error.log")) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Replicas:
    def __init__(self, n, *extra):
        self.procs, self.ports, self.names = [], [], []
        for i in range(n):
            name = "replica-%d" % i
            proc, port, _ = server_process.start(ARGS.server, "--threads=1", "--replica-name=" + name, *extra)
            STARTED.append(proc)
            self.procs.append(proc)
            self.ports.append(port)
            self.names.append(name)

    def kill(self, name):
        i = self.names.index(name)
        self.procs[i].kill()
        self.procs[i].wait()

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def common_prefix(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def workload(seed):
    """Per conversation, the user messages of every turn (token ids)."""
    rng = random.Random(seed)
    return [[[rng.randrange(300, 850) for _ in range(rng.randrange(6, 20))] for _ in range(TURNS)]
            for _ in range(CONVERSATIONS)]


class Client:
    """Sends turns; keeps each conversation's messages and what each
    replica computed (for the minimum)."""

    def __init__(self, address, users, run):
        import grpc
        from cairn.v1 import inference_pb2 as pb
        from cairn.v1 import inference_pb2_grpc as pbg
        self.grpc, self.pb = grpc, pb
        self.channel = grpc.insecure_channel(address)
        self.stub = pbg.InferenceStub(self.channel)
        self.users = users
        self.ids = ["%s-%02d-%s" % (run, c, os.urandom(8).hex()) for c in range(len(users))]
        self.replies = [[] for _ in users]
        self.prompts = [[] for _ in users]       # token ids of each turn's prompt
        self.replica_of = [[] for _ in users]    # replica of each turn
        self.infos = [[] for _ in users]         # PromptInfo of each turn
        self.computed = {}                       # replica -> list of computed token paths
        self.recomputed = 0
        self.minimum = 0
        self.retries = 0

    def request(self, c, t, max_tokens=REPLY):
        pb = self.pb
        r = pb.GenerateRequest(model=MODEL, session_id=self.ids[c], create_session=True)
        prompt = []

        def message(ids):
            r.parts.add().tokens.ids.extend(ids)
            r.parts.add().message_boundary = True
            prompt.extend(ids)
        message(SYSTEM)
        for k in range(t):
            message(self.users[c][k])
            message(self.replies[c][k])
        message(self.users[c][t])
        r.stop.max_tokens = max_tokens
        r.stop.ignore_eos = True
        r.sampling.temperature = 0
        r.sampling.seed = 5
        r.stream_text = False
        return r, prompt

    def stream(self, req, key, on_prompt=None):
        """(replica, PromptInfo, ids) or raises grpc.RpcError."""
        call = self.stub.Generate(req, metadata=[(HEADER, key)], timeout=120)
        info, ids = None, []
        for ev in call:
            if ev.HasField("prompt"):
                info = ev.prompt
                if on_prompt is not None:
                    on_prompt()
            elif ev.HasField("token"):
                ids.append(ev.token.id)
        replica = dict(call.initial_metadata()).get("x-cairn-replica", "?")
        return replica, info, ids

    def turn(self, c, t, before_send=None):
        req, prompt = self.request(c, t)
        try:
            if before_send is not None:
                before_send()
            replica, info, ids = self.stream(req, self.ids[c])
        except self.grpc.RpcError as e:
            # Its replica went away mid-request (nginx answers UNAVAILABLE,
            # or INTERNAL/UNKNOWN for a stream cut short): exactly one retry.
            if e.code() not in (self.grpc.StatusCode.UNAVAILABLE, self.grpc.StatusCode.INTERNAL,
                                self.grpc.StatusCode.UNKNOWN):
                raise
            print("  conversation %d turn %d: %s (%s); retrying once" % (c, t, e.code(), e.details()))
            self.retries += 1
            replica, info, ids = self.stream(req, self.ids[c])
        assert len(ids) == REPLY, (c, t, len(ids))
        assert info.prompt_positions == len(prompt), (info.prompt_positions, len(prompt))
        done = self.computed.setdefault(replica, [])
        best = max([common_prefix(p, prompt) for p in done] + [0])
        self.minimum += len(prompt) - best
        self.recomputed += info.recomputed_tokens
        # Computed: the prompt and every reply token but the last (sampled,
        # never run through the model).
        done.append(prompt + ids[:-1])
        self.replies[c].append(ids)
        self.prompts[c].append(prompt)
        self.replica_of[c].append(replica)
        self.infos[c].append(info)

    def run(self, turns, hook=None):
        for t in turns:
            for c in range(len(self.users)):
                self.turn(c, t, before_send=(hook(c, t) if hook else None))

    def ratio(self):
        return self.recomputed / self.minimum

    def history(self, c):
        pb = self.pb
        resp = self.stub.SessionControl(
            pb.SessionRequest(get=pb.GetSession(session_id=self.ids[c], include_tokens=True)),
            metadata=[(HEADER, self.ids[c])], timeout=60)
        return list(resp.session.token_ids)


def fresh_replies(client):
    """Every prompt of `client` computed from scratch (checkpoints off, no
    session) on a new server."""
    proc, port, _ = server_process.start(ARGS.server, "--threads=1", "--checkpoints=off")
    STARTED.append(proc)
    try:
        fresh = Client("127.0.0.1:%d" % port, client.users, "fresh")
        out = []
        for c in range(len(client.users)):
            row = []
            for prompt in client.prompts[c]:
                r = fresh.pb.GenerateRequest(model=MODEL)
                r.parts.add().tokens.ids.extend(prompt)
                r.stop.max_tokens = REPLY
                r.stop.ignore_eos = True
                r.sampling.temperature = 0
                r.stream_text = False
                row.append([ev.token.id for ev in fresh.stub.Generate(r, timeout=120) if ev.HasField("token")])
            out.append(row)
        fresh.channel.close()
        return out
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def check_whole(client, label):
    """No lost conversation: each session's history on the proxy is the
    whole conversation, and every reply equals a fresh computation."""
    fresh = fresh_replies(client)
    for c in range(len(client.users)):
        check(client.replies[c] == fresh[c], "%s: conversation %d differs from a fresh computation" % (label, c))
        want = client.prompts[c][-1] + client.replies[c][-1]
        check(client.history(c) == want, "%s: conversation %d's session lost turns" % (label, c))
    print("%s: %d conversations x %d turns complete; every reply equals a fresh computation" %
          (label, len(client.users), TURNS))


def kill_halfway(client, replicas, nginx_log):
    """Runs the first half, then kills the replica holding the most
    conversations while one request to it is in flight (the replica frozen
    with SIGSTOP when the request is sent, killed 0.5 s later); then the
    second half. Returns the victim's name and its conversations."""
    half = TURNS // 2
    client.run(range(half))
    counts = {}
    for c in range(len(client.users)):
        counts.setdefault(client.replica_of[c][-1], []).append(c)
    victim = max(counts, key=lambda r: len(counts[r]))
    victims = counts[victim]
    pid = replicas.procs[replicas.names.index(victim)].pid
    print("  killing %s (%d conversations: %s) with a request in flight" % (victim, len(victims), victims))

    def freeze_then_kill():
        os.kill(pid, signal.SIGSTOP)
        threading.Timer(0.5, lambda: (os.kill(pid, signal.SIGKILL))).start()
    client.run([half], hook=lambda c, t: freeze_then_kill if c == victims[0] else None)
    replicas.kill(victim)
    client.run(range(half + 1, TURNS))
    for c in range(len(client.users)):
        check(victim not in client.replica_of[c][half + 1:], "conversation %d still routed to the dead replica" % c)
    check(client.retries <= 1, "more than one retry: %d" % client.retries)
    return victim, victims


def main():
    global TURNS
    tmp = tempfile.mkdtemp(prefix="cairn-replicas-")
    generate_stubs(os.path.join(tmp, "stubs"))
    users = workload(17)
    ok = False
    try:
        # 1. One server alone.
        proc, port, _ = server_process.start(ARGS.server, "--threads=1")
        STARTED.append(proc)
        single = Client("127.0.0.1:%d" % port, users, "single")
        single.run(range(TURNS))
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=30) == 0, "the single server did not exit cleanly")

        # 2. Three replicas behind nginx.
        replicas = Replicas(3)
        nginx = Nginx(os.path.join(tmp, "nginx-affinity"), replicas.ports)
        proxied = Client("127.0.0.1:%d" % nginx.port, users, "proxied")
        proxied.run(range(TURNS))
        spread = {}
        for c in range(CONVERSATIONS):
            check(len(set(proxied.replica_of[c])) == 1,
                  "conversation %d moved between replicas: %s" % (c, proxied.replica_of[c]))
            spread[proxied.replica_of[c][0]] = spread.get(proxied.replica_of[c][0], 0) + 1
        check(proxied.replies == single.replies, "proxied replies differ from the single server's")
        print("single server: recomputed %d, minimum %d, recomputed/minimum %.3f" %
              (single.recomputed, single.minimum, single.ratio()))
        print("3 replicas behind nginx: recomputed %d, minimum %d (per replica), recomputed/minimum %.3f; "
              "conversations per replica %s" % (proxied.recomputed, proxied.minimum, proxied.ratio(),
                                                 dict(sorted(spread.items()))))
        check(len(spread) >= 2, "every conversation hashed to one replica: nothing was spread")
        check(abs(proxied.ratio() - single.ratio()) < 1e-9,
              "recomputed/minimum %.4f through the proxy != %.4f on one server" % (proxied.ratio(), single.ratio()))
        nginx.stop()
        replicas.stop()

        # 3. A shared session directory; a replica killed halfway.
        session_dir = os.path.join(tmp, "sessions")
        replicas = Replicas(3, "--session-dir=" + session_dir)
        nginx = Nginx(os.path.join(tmp, "nginx-dir"), replicas.ports)
        failover = Client("127.0.0.1:%d" % nginx.port, users, "dir")
        victim, victims = kill_halfway(failover, replicas, nginx.log)
        half = TURNS // 2
        # Restored from the directory: the first request elsewhere reused
        # the persisted state of every turn before the one that was cut.
        for c in victims:
            info = failover.infos[c][half]
            check(info.reused_tokens >= len(failover.prompts[c][half - 1]) + REPLY - 1,
                  "conversation %d did not resume from its persisted state (reused %d of %d)" %
                  (c, info.reused_tokens, info.prompt_positions))
        print("session directory: after killing %s, its %d conversations resumed elsewhere from their persisted "
              "state (first request there: reused %s of %s positions); %d client retries" %
              (victim, len(victims), [failover.infos[c][half].reused_tokens for c in victims],
               [failover.infos[c][half].prompt_positions for c in victims], failover.retries))
        check_whole(failover, "session directory, one replica killed")
        nginx.stop()
        replicas.stop()

        # 4. No session directory: re-created from the conversation; then a
        # planned drain of a second replica.
        replicas = Replicas(3)
        nginx = Nginx(os.path.join(tmp, "nginx-resend"), replicas.ports)
        resend = Client("127.0.0.1:%d" % nginx.port, users, "resend")
        victim, victims = kill_halfway(resend, replicas, nginx.log)
        for c in victims:
            info = resend.infos[c][half]
            check(info.reused_tokens < info.prompt_positions, "conversation %d: nothing recomputed?" % c)
        print("no session directory: after killing %s, its %d conversations were re-created from the whole "
              "conversation (first request there recomputed %s of %s positions); %d client retries" %
              (victim, len(victims), [resend.infos[c][half].recomputed_tokens for c in victims],
               [resend.infos[c][half].prompt_positions for c in victims], resend.retries))
        alive = [n for n in replicas.names if n != victim]
        drained = alive[0]
        last = alive[1]
        ports = [replicas.ports[replicas.names.index(last)]]
        nginx.reload(ports)  # out of rotation first, then its sessions move
        drain = subprocess.run([ARGS.cli, "--server=127.0.0.1:%d" % replicas.ports[replicas.names.index(drained)],
                                "--drain-to=127.0.0.1:%d" % nginx.port], capture_output=True, text=True, timeout=120)
        print("drain of %s: %s" % (drained, drain.stdout.strip()))
        check(drain.returncode == 0, "drain failed:\n" + drain.stdout + drain.stderr)
        moved = int(re.search(r"drained (\d+) of", drain.stdout).group(1))
        before = len(resend.replies[0])
        # Two more turns for every conversation, all on the last replica.
        TURNS += 2
        rng = random.Random(18)
        for u in users:
            while len(u) < TURNS:
                u.append([rng.randrange(300, 850) for _ in range(9)])
        resend.run(range(before, TURNS))
        for c in range(CONVERSATIONS):
            check(set(resend.replica_of[c][before:]) == {last}, "conversation %d not on %s" % (c, last))
        drained_infos = [resend.infos[c][before] for c in range(CONVERSATIONS)
                         if resend.replica_of[c][before - 1] == drained]
        for info in drained_infos:
            check(info.reused_tokens > 0, "a drained session was recomputed from scratch")
        print("after the drain (%d sessions moved), the next turn of those conversations on %s reused %s positions" %
              (moved, last, [i.reused_tokens for i in drained_infos]))
        check_whole(resend, "no session directory, one replica killed, one drained")
        nginx.stop()
        replicas.stop()
        ok = True
    finally:
        for p in STARTED:
            if p.poll() is None:
                p.kill()
                p.wait()
        if not ok:
            for d in os.listdir(tmp):
                p = os.path.join(tmp, d, "error.log")
                if os.path.exists(p):
                    print("--- %s\n%s" % (p, open(p).read()[-3000:]))
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for a in ("server", "cli", "proto-dir", "protoc", "plugin"):
        parser.add_argument("--" + a, required=True)
    parser.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ARGS = parser.parse_args()
    if not os.path.exists(ARGS.nginx):
        if os.environ.get("CI") == "true":
            print("nginx is missing (scripts/setup.sh installs it)")
            sys.exit(1)
        print("SKIPPED: nginx is missing (scripts/setup.sh installs it)")
        sys.exit(77)
    sys.exit(main())
