# mkgroups.py PORT NGROUPS PADBYTES : creates lone groups (vllm:generation_tokens_total) with a PADBYTES label
import sys; sys.path.insert(0, __import__('os').path.dirname(__file__)); from rw import *
port, n, pad = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
ts = now_ms(); batch = []
for i in range(n):
    batch.append(([('__name__', 'vllm:generation_tokens_total'), ('engine', '0'), ('model_name', f'g{i:06d}'), ('pad', 'p' * pad)], [(1.0, ts)]))
    if len(batch) == 200:
        print(post(port, snappy(write_v1(batch)))[0], end=' '); batch = []
if batch: print(post(port, snappy(write_v1(batch)))[0])
