# statefile.py: writes an oversized state file (docs/RELIABILITY.md, "State across restarts") of
# GROUPS retired groups into DIR/acceptance-state.json, to measure what a restore holds.
#
#   python3 scripts/attacks/statefile.py DIR [GROUPS] [FORMAT] [TEMPLATE]
#
# GROUPS defaults to 350 000. FORMAT is 3 (the default: JSON lines, one record per group, about
# 100 MB at 350 000 groups with the built-in record) or 1 (the first format: one JSON document of
# acceptance-corrected states on one line, about 89 MB). Each group is TEMPLATE's state (the
# first record of an existing state file of format 3, e.g. one written after
# `soak_attack --only churn`; the built-in ones hold one family's hold, or for format 1 an
# acceptance-corrected state of three buckets) under new labels (engine="r<n>",
# model_name="restore") and a newest sample time spread over the last 10 minutes in shuffled
# order, so keeping the newest is a choice. The state is copied as text: the script knows
# nothing of its shape beyond where its timestamps are.
import json, os, random, sys, time

SMALL = ('{"states":{},"holds":{"vllm_corrected_tokens_per_output":{"served":{"SumCount":'
         '{"sum":227264.0,"count":110468.0}},"served_ts":TS,"inputs":[[{"input":"GenTotal",'
         '"le_bits":0},229200.0]]}},"newest_sample_ms":TS}')
ACCEPTANCE = ('{"acc":[160156.2,224303.7,227264.0],"bounds":[0.01,0.05],"point":{"count":'
              '110468.0,"finite":[0.0,104584.0],"first_outputs":1936.0,"generated":229200.0,'
              '"per_pos":[69472.0,48540.0],"sum":2305.38},"ts":TS}')
ACCEPTANCE_NAME = 'vllm_corrected_acceptance_corrected_itl_seconds'


def template(path, fmt):
    with open(path) as f:
        f.readline()
        state = json.loads(f.readline())['state']
    ts = state['newest_sample_ms']
    if fmt == 1:
        state = state['states'][ACCEPTANCE_NAME]
    return json.dumps(state, separators=(',', ':')).replace(str(ts), 'TS')


def main():
    out = sys.argv[1]
    groups = int(sys.argv[2]) if len(sys.argv) > 2 else 350_000
    fmt = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    if len(sys.argv) > 4:
        state = template(sys.argv[4], fmt)
    else:
        state = ACCEPTANCE if fmt == 1 else SMALL
    now = int(time.time() * 1000)
    times = [now - 600_000 + (600_000 * i) // groups for i in range(groups)]
    random.seed(32)
    random.shuffle(times)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, 'acceptance-state.json')
    with open(path, 'w') as f:
        if fmt == 1:
            f.write('{"version":1,"groups":[')
        else:
            f.write('{"version":3}\n')
        for n, ts in enumerate(times):
            labels = f'[["engine","r{n:07d}"],["model_name","restore"]]'
            body = state.replace('TS', str(ts))
            if fmt == 1:
                f.write((',' if n else '') + '{"labels":' + labels + ',"acceptance":' + body + '}')
            else:
                f.write('{"labels":' + labels + ',"state":' + body + '}\n')
        if fmt == 1:
            f.write(']}\n')
    print(f'{path}: {groups} groups, format {fmt}, {os.path.getsize(path)} bytes, newest sample {now}')


main()
