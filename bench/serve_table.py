#!/usr/bin/env python3
"""Markdown tables from bench/serve_bench.sh's JSON: loom serve against llama-server.

  serve_table.py OUT_DIR

Each cell is the median [min-max] over the repetitions. serve_load.py counts a streamed request's tokens
as max(usage tokens, chunks that arrived); loom sends usage in a chunk of its own (OpenAI's layout, with
"choices": []) where llama-server puts it in the finish chunk, so loom's streamed gen tok/s is scaled by
max_tokens / (max_tokens + 1) = 64/65 to count the same tokens.
"""
import glob, json, os, statistics, sys

out = sys.argv[1]
MAX_TOKENS = 64


def load(pattern):
    rows = []
    for f in sorted(glob.glob(os.path.join(out, pattern))):
        data = json.load(open(f))
        rows.extend(data if isinstance(data, list) else [data])
    return rows


def cell(values, fmt='%.1f'):
    values = [v for v in values if v == v]
    if not values:
        return '-'
    if len(values) == 1:
        return fmt % values[0]
    return (fmt + ' [' + fmt + '–' + fmt + ']') % (statistics.median(values), min(values), max(values))


def med(values):
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float('nan')


def tok_s(server, r):
    scale = MAX_TOKENS / (MAX_TOKENS + 1) if server == 'loom' and r['stream'] else 1.0
    return r['gen_tok_s'] * scale


def models(kind):
    """The models OUT has files of this kind for, in name order."""
    names = set()
    for f in glob.glob(os.path.join(out, 'loom-*-%s-*.json' % kind)):
        names.add(os.path.basename(f)[len('loom-'):].split('-%s-' % kind)[0])
    return sorted(names)


for model in models('stream'):
    print('\n### %s, `-t 2 -np 16 -c 4096`, 64 tokens per request\n' % model)
    print('| clients | stream | server | gen tok/s | TTFT p50 ms | TTFT p95 ms | ITL mean ms | errors | loom ÷ llama tok/s |')
    print('| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |')
    for clients, stream in ((1, True), (4, True), (16, True), (4, False)):
        kind = 'stream' if stream else 'nostream'
        got = {}
        for server in ('loom', 'llama'):
            rows = [r for r in load('%s-%s-%s-*.json' % (server, model, kind)) if r['clients'] == clients]
            got[server] = rows
        ratio = med([tok_s('loom', r) for r in got['loom']]) / med([tok_s('llama', r) for r in got['llama']])
        for server in ('loom', 'llama'):
            rows = got[server]
            name = 'loom serve' if server == 'loom' else 'llama-server'
            print('| %d | %s | %s | %s | %s | %s | %s | %d | %s |' % (
                clients, 'yes' if stream else 'no', name, cell([tok_s(server, r) for r in rows]),
                cell([r['ttft_p50_ms'] for r in rows], '%.0f') if stream else '-',
                cell([r['ttft_p95_ms'] for r in rows], '%.0f') if stream else '-',
                cell([r['itl_mean_ms'] for r in rows]) if stream else '-', sum(r['errors'] for r in rows),
                '×%.2f' % ratio if server == 'loom' else ''))

print('\n### One client: `-np 1` (fresh server) against `-np 16` (after the 16-client pre-warm)\n')
print('| model | server | np 1 tok/s | np 16 tok/s | np 16 ÷ np 1 | TTFT p50 np 1 / np 16 ms |')
print('| --- | --- | ---: | ---: | ---: | --- |')
for model in models('np1'):
    for server in ('loom', 'llama'):
        one = load('%s-%s-np1-*.json' % (server, model))
        many = [r for r in load('%s-%s-stream-*.json' % (server, model)) if r['clients'] == 1]
        a, b = med([tok_s(server, r) for r in one]), med([tok_s(server, r) for r in many])
        print('| %s | %s | %s | %s | %.2f | %.0f / %.0f |' % (
            model, 'loom serve' if server == 'loom' else 'llama-server', cell([tok_s(server, r) for r in one]),
            cell([tok_s(server, r) for r in many]), b / a, med([r['ttft_p50_ms'] for r in one]),
            med([r['ttft_p50_ms'] for r in many])))

print('\n### A stream while a 2,000-token prompt arrives (`bench/serve_gap.py`, `-np 2 -c 8192`)\n')
print('| model | server | long prompt tokens | long request ms | stream gap before ms | largest gap during ms | stream chunks during |')
print('| --- | --- | ---: | ---: | ---: | ---: | ---: |')
for model in models('gap'):
    for server in ('loom', 'llama'):
        for r in load('%s-%s-gap-*.json' % (server, model)):
            print('| %s | %s | %s | %.0f | %.1f | %.0f | %d |' % (
                model, 'loom serve' if server == 'loom' else 'llama-server', r['long_prompt_tokens'],
                r['long_request_ms'], r['gap_median_before_ms'] or 0, r['gap_max_during_ms'] or 0,
                r['stream_chunks_during']))

SAMPLING = (('greedy', 'greedy'), ('t1', 'temperature 1 (OpenAI\'s defaults)'), ('t0.8-p0.95', 'temperature 0.8, top-p 0.95'))
print('\n### 16 streaming clients as they sample (`-t 2 -np 16 -c 4096`, 64 tokens per request)\n')
print('| model | sampling | loom serve gen tok/s | llama-server gen tok/s | loom ÷ llama | loom ÷ its greedy |')
print('| --- | --- | ---: | ---: | ---: | ---: |')
for model in models('sample'):
    greedy = med([tok_s('loom', r) for r in load('loom-%s-sample-greedy-*.json' % model)])
    for name, label in SAMPLING:
        got = {server: load('%s-%s-sample-%s-*.json' % (server, model, name)) for server in ('loom', 'llama')}
        a, b = med([tok_s('loom', r) for r in got['loom']]), med([tok_s('llama', r) for r in got['llama']])
        print('| %s | %s | %s | %s | ×%.2f | %.2f |' % (model, label, cell([tok_s('loom', r) for r in got['loom']]),
                                                     cell([tok_s('llama', r) for r in got['llama']]), a / b,
                                                     a / greedy))
