#!/usr/bin/env python3
"""serve_constrained.py - a constrained stream's decode speed beside an
unconstrained one's in `loom serve`: N client threads each stream
POST /v1/chat/completions back to back, with or without a response_format
json_schema, and the tokens that arrive inside the measurement window are
counted (one SSE chunk with text is one token).

  serve_constrained.py --port 8080 [--clients 16] [--window 30] [--warmup 5]
                       [--max-tokens 64] [--schema FILE]

Prints: clients, constrained or not, generated tok/s, requests, errors.
Stdlib only."""
import argparse
import http.client
import json
import threading
import time


LOCK = threading.Lock()


def add(counts, key):
    with LOCK:
        counts[key] += 1


def run_client(args, schema, stop_at, counts, idx):
    body = {"messages": [{"role": "user", "content": f"Describe person number {idx} as JSON."}],
            "max_tokens": args.max_tokens, "temperature": 1.0, "stream": True, "seed": idx}
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}
    payload = json.dumps(body)
    while time.time() < stop_at:
        conn = http.client.HTTPConnection(args.host, args.port, timeout=600)
        try:
            conn.request("POST", "/v1/chat/completions", payload, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                add(counts, "errors")
                resp.read()
                continue
            for raw in resp:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                for choice in chunk.get("choices", []):
                    if choice.get("delta", {}).get("content") and counts["start"] <= time.time() < stop_at:
                        add(counts, "tokens")
            add(counts, "requests")
        except (OSError, http.client.HTTPException):
            add(counts, "errors")
        finally:
            conn.close()


def measure(args, schema):
    now = time.time()
    counts = {"tokens": 0, "requests": 0, "errors": 0, "start": now + args.warmup}
    stop_at = counts["start"] + args.window
    threads = [threading.Thread(target=run_client, args=(args, schema, stop_at, counts, i))
               for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts["tokens"] / args.window, counts["requests"], counts["errors"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--window", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=5)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--schema")
    args = ap.parse_args()
    schema = json.load(open(args.schema)) if args.schema else None
    tps, requests, errors = measure(args, schema)
    print(f"{args.clients}\t{'constrained' if schema else 'free'}\t{tps:.1f}\t{requests}\t{errors}")


if __name__ == "__main__":
    main()
