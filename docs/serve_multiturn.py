#!/usr/bin/env python3
"""Prefill saved by KV prefix reuse on a multi-turn chat through `edgellm serve`:
each turn resends the conversation so far (as chat clients do); the server
reports the prompt tokens it kept (edgellm.reused_prompt_tokens).
Usage: docs/serve_multiturn.py URL [TURNS] [MAX_TOKENS]"""
import json, sys, urllib.request
url, turns = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 6
MAXTOK = int(sys.argv[3]) if len(sys.argv) > 3 else 24
msgs = [{"role": "system", "content": "You tell short stories."}]
tot_p = tot_r = 0
for t in range(turns):
    msgs.append({"role": "user", "content": f"Turn {t}: and then what happened to the dog?"})
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(
        {"messages": msgs, "max_tokens": MAXTOK, "temperature": 0}).encode(), {"Content-Type": "application/json"})
    r = json.load(urllib.request.urlopen(req))
    p, e = r["usage"]["prompt_tokens"], r["edgellm"]
    tot_p += p; tot_r += e["reused_prompt_tokens"]
    print(f"turn {t}: prompt {p} tokens, reused {e['reused_prompt_tokens']}, ttft {e['ttft_ms']:.2f} ms")
    msgs.append({"role": "assistant", "content": r["choices"][0]["message"]["content"]})
print(f"total: {tot_r} of {tot_p} prompt tokens reused ({100*tot_r/tot_p:.1f}% of prefill saved)")
