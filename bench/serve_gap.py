#!/usr/bin/env python3
"""How long a running stream stalls while a long prompt arrives (stdlib only).

One client streams a greedy completion; once its tokens flow, a second client sends a prompt of about
--long-tokens tokens (max_tokens 1, not streamed). The script records the gaps between the stream's
token chunks while the long request is in flight and prints the largest, with the stream's median gap
before the long request arrived.

  serve_gap.py --port 8080 [--long-tokens 2000] [--stream-tokens 400] [--json out.json]

Works against any OpenAI-compatible server (loom serve, llama-server).
"""
import argparse, http.client, json, statistics, threading, time

WORDS = 'the little dog ran over the green hill and saw a big red ball near the old tree'.split()


def stream(port, n, arrivals, started):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=600)
    body = {'prompt': 'Once upon a time there was a little girl who', 'max_tokens': n, 'temperature': 0,
            'stream': True, 'cache_prompt': False}
    c.request('POST', '/v1/completions', json.dumps(body), {'Content-Type': 'application/json'})
    r = c.getresponse()
    while True:
        line = r.readline()
        if not line:
            break
        if line.startswith(b'data:'):
            if line.strip() == b'data: [DONE]':
                break
            arrivals.append(time.perf_counter())
            if len(arrivals) == 8:
                started.set()
    c.close()


def post(port, path, body):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=600)
    c.request('POST', path, json.dumps(body), {'Content-Type': 'application/json'})
    j = json.loads(c.getresponse().read())
    c.close()
    return j


def long_text(port, n_tokens):
    # As many words as the server's own tokenizer (POST /tokenize, which both loom and llama-server
    # have) makes n_tokens tokens of, give or take one word. It starts with a number of its own, so no
    # server finds it in a cache from an earlier run.
    head = 'Story %d:' % (time.time_ns() % 1000000)
    words = lambda n: head + ' ' + ' '.join(WORDS[i % len(WORDS)] for i in range(n))
    per_word = len(post(port, '/tokenize', {'content': words(400)})['tokens']) / 400
    n = int(n_tokens / per_word)
    while len(post(port, '/tokenize', {'content': words(n)})['tokens']) > n_tokens:
        n -= 1
    return words(n)


def long_request(port, text):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=600)
    t0 = time.perf_counter()
    c.request('POST', '/v1/completions', json.dumps({'prompt': text, 'max_tokens': 1, 'temperature': 0,
                                                     'cache_prompt': False}),
              {'Content-Type': 'application/json'})
    j = json.loads(c.getresponse().read())
    t1 = time.perf_counter()
    c.close()
    return t0, t1, j.get('usage', {}).get('prompt_tokens')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--long-tokens', type=int, default=2000)
    ap.add_argument('--stream-tokens', type=int, default=400)
    ap.add_argument('--json')
    a = ap.parse_args()
    text = long_text(a.port, a.long_tokens)
    arrivals, started = [], threading.Event()
    t = threading.Thread(target=stream, args=(a.port, a.stream_tokens, arrivals, started))
    t.start()
    started.wait(120)
    time.sleep(0.2)
    t0, t1, n_prompt = long_request(a.port, text)
    t.join()
    before = [b - a_ for a_, b in zip(arrivals, arrivals[1:]) if b <= t0]
    during = [b - a_ for a_, b in zip(arrivals, arrivals[1:]) if b > t0 and a_ < t1]
    res = {'long_prompt_tokens': n_prompt, 'long_request_ms': (t1 - t0) * 1e3,
           'gap_median_before_ms': statistics.median(before) * 1e3 if before else None,
           'gap_max_during_ms': max(during) * 1e3 if during else None,
           'stream_chunks_during': sum(1 for x in arrivals if t0 < x < t1)}
    print('| long prompt tokens | long request ms | stream gap before (median) ms | largest gap during ms |'
          ' stream chunks during |')
    print('| ---: | ---: | ---: | ---: | ---: |')
    print('| %s | %.0f | %.1f | %.0f | %d |' % (n_prompt, res['long_request_ms'], res['gap_median_before_ms'] or 0,
                                               res['gap_max_during_ms'] or 0, res['stream_chunks_during']))
    if a.json:
        json.dump(res, open(a.json, 'w'), indent=1)


if __name__ == '__main__':
    main()
