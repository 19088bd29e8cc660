#!/usr/bin/env python3
"""serve_same_text.py - `loom serve` on a backend, N greedy completions at
once, against `loom run` on the same backend, each prompt alone: the same
text, prompt by prompt.

    serve_same_text.py LOOM MODEL BACKEND [N] [PORT]

The server decodes the N sequences together (continuous batching), so the
check holds only if a sequence's tokens do not depend on the others beside
it. Prints one line per prompt and exits 1 if any text differs."""
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

PROMPTS = ["Once upon a time", "The little dog", "One day, a girl named", "The sun was", "Tom and his friend",
           "In the park there was", "She wanted to", "The big red ball"]
TOKENS = 32


def run_alone(loom, model, backend, prompt):
    out = subprocess.run([loom, "run", "-m", model, "--backend", backend, "-p", prompt, "-n", str(TOKENS),
                          "--temp", "0"], capture_output=True, text=True, timeout=120, check=True).stdout
    return out.rstrip("\n")


def request(port, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def wait_ready(port, server):
    deadline = time.time() + 120
    while time.time() < deadline:
        if server.poll() is not None:
            raise RuntimeError("loom serve exited with %d" % server.returncode)
        try:
            request(port, "/v1/models")
            return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.5)
    raise RuntimeError("loom serve did not answer in 120 s")


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    loom, model, backend = sys.argv[1:4]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    port = int(sys.argv[5]) if len(sys.argv) > 5 else 8093
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(n)]
    want = {p: run_alone(loom, model, backend, p) for p in set(prompts)}

    server = subprocess.Popen([loom, "serve", "-m", model, "--backend", backend, "-np", str(n), "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    got = [None] * n
    try:
        wait_ready(port, server)

        def complete(i):
            try:
                r = request(port, "/v1/completions", {"model": model, "prompt": prompts[i], "max_tokens": TOKENS,
                                                      "temperature": 0})
                got[i] = r["choices"][0]["text"].rstrip("\n")
            except Exception as e:  # reported as a difference below
                got[i] = "<%s: %s>" % (type(e).__name__, e)

        threads = [threading.Thread(target=complete, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    bad = 0
    for i, p in enumerate(prompts):
        same = got[i] == want[p]
        bad += not same
        print("%-24s %s" % (p, "same" if same else "differs:\n  run:   %r\n  serve: %r" % (want[p], got[i])))
    print("%s: %d of %d concurrent completions as loom run gives them alone" % (backend, n - bad, n))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
