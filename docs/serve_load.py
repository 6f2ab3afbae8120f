#!/usr/bin/env python3
"""Serve throughput and latency under concurrent clients: C clients each send
R streaming completions (greedy, N tokens) back to back; measured on the
client side: TTFT (request sent to first text chunk) and per-token latency
(gaps between chunks), p50/p99 over all requests, and aggregate tok/s.
Usage: docs/serve_load.py URL CLIENTS [REQUESTS_PER_CLIENT] [N]"""
import json, sys, threading, time, urllib.request

url, C = sys.argv[1], int(sys.argv[2])
R = int(sys.argv[3]) if len(sys.argv) > 3 else 4
N = int(sys.argv[4]) if len(sys.argv) > 4 else 32
ttft, gaps, tokens, errors = [], [], [0], [0]
lock = threading.Lock()

def client(i):
    for r in range(R):
        body = json.dumps({"prompt": f"Once upon a time {i} {r}", "max_tokens": N, "temperature": 0, "stream": True}).encode()
        req = urllib.request.Request(url + "/v1/completions", body, {"Content-Type": "application/json"})
        t0 = time.monotonic(); last = None; my_gaps = []; n = 0; first = None
        try:
            with urllib.request.urlopen(req, timeout=600) as resp:
                for line in resp:
                    if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                        continue
                    c = json.loads(line[6:])
                    if "error" in c:
                        raise RuntimeError(c["error"]["message"])
                    if not c.get("choices") or not c["choices"][0].get("text"):
                        continue
                    now = time.monotonic()
                    if first is None:
                        first = now - t0
                    else:
                        my_gaps.append(now - last)
                    last = now; n += 1
        except Exception as e:
            with lock:
                errors[0] += 1
            continue
        with lock:
            if first is not None:
                ttft.append(first)
            gaps.extend(my_gaps); tokens[0] += n

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1000 if xs else float("nan")

start = time.monotonic()
ts = [threading.Thread(target=client, args=(i,)) for i in range(C)]
for t in ts: t.start()
for t in ts: t.join()
wall = time.monotonic() - start
print(f"clients {C} x {R} requests x {N} tokens: {tokens[0]} chunks in {wall:.1f} s = {tokens[0]/wall:.1f} tok/s aggregate; "
      f"TTFT p50 {pct(ttft,50):.0f} ms p99 {pct(ttft,99):.0f} ms; per-token p50 {pct(gaps,50):.1f} ms p99 {pct(gaps,99):.1f} ms; errors {errors[0]}")
