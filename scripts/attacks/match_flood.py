# match_flood.py PORT NMATCHERS PADBYTES : after `mkgroups.py PORT N PADBYTES`, one GET
# /api/v1/groups whose one selector has NMATCHERS `pad=~".*"` matchers and, one second into it, one
# remote write to the first group mkgroups made: prints how long each took. The write should not
# wait for the query.
import sys, threading, time, urllib.parse
sys.path.insert(0, __import__('os').path.dirname(__file__)); from rw import *
port, n, pad = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
selector = urllib.parse.quote('{' + ','.join(['pad=~".*"'] * n) + '}')
took = {}
def query():
    t = time.time()
    status = get(port, '/api/v1/groups?limit=1&match[]=' + selector, timeout=600)[0]
    took['query'] = (status, round(time.time() - t, 2))
thread = threading.Thread(target=query); thread.start(); time.sleep(1)
body = snappy(write_v1([([('__name__', 'vllm:generation_tokens_total'), ('engine', '0'),
                          ('model_name', 'g000000'), ('pad', 'p' * pad)], [(2.0, now_ms())])]))
t = time.time(); status = post(port, body, timeout=600)[0]
print('write', status, round(time.time() - t, 2), 's', flush=True)
thread.join(); print('query', *took['query'], 's')
