# rw.py: a minimal remote-write 1.0 encoder (protobuf by hand, snappy as literal blocks only)
# and a POST helper, shared by the attack scripts here (loopback only).
import struct, socket, time, http.client, os, sys, threading
STALE = struct.unpack('<d', struct.pack('<Q', 0x7ff0000000000002))[0]
def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7f; n >>= 7
        if n: out.append(b | 0x80)
        else: out.append(b); return bytes(out)
def fld(no, wt, payload):
    key = varint((no << 3) | wt)
    if wt == 2: return key + varint(len(payload)) + payload
    return key + payload
def s(no, b):
    if isinstance(b, str): b = b.encode()
    return fld(no, 2, b)
def zig(n): return (n << 1) ^ (n >> 63)
def sample(v, ts):
    return fld(1, 1, struct.pack('<d', v)) + fld(2, 0, varint(ts & ((1<<64)-1)))
def series_v1(labels, samples):
    out = b''.join(s(1, s(1, k) + s(2, v)) for k, v in sorted(labels))
    out += b''.join(s(2, sample(v, t)) for v, t in samples)
    return out
def write_v1(series):
    return b''.join(s(1, series_v1(l, sm)) for l, sm in series)
def snappy(data):
    out = bytearray(varint(len(data)))
    i = 0
    while i < len(data):
        chunk = data[i:i+65536]; n = len(chunk) - 1
        if n < 60: out.append(n << 2)
        elif n < 256: out += bytes([60 << 2, n])
        else: out += bytes([61 << 2]) + struct.pack('<H', n)
        out += chunk; i += len(chunk)
    return bytes(out)
V1H = {'Content-Type': 'application/x-protobuf', 'Content-Encoding': 'snappy',
       'X-Prometheus-Remote-Write-Version': '0.1.0'}
V2H = {'Content-Type': 'application/x-protobuf;proto=io.prometheus.write.v2.Request',
       'Content-Encoding': 'snappy', 'X-Prometheus-Remote-Write-Version': '2.0.0'}
def post(port, body, headers=V1H, timeout=30):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)
    c.request('POST', '/api/v1/write', body=body, headers=headers)
    r = c.getresponse(); data = r.read(); c.close()
    return r.status, data
def get(port, path, timeout=30):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)
    c.request('GET', path); r = c.getresponse(); d = r.read(); c.close(); return r.status, d
def now_ms(): return int(time.time() * 1000)
def self_metrics(port):
    st, d = get(port, '/metrics')
    out = {}
    for line in d.decode(errors='replace').splitlines():
        if line.startswith('vllm_corrector_') and not line.startswith('#'):
            k, _, v = line.rpartition(' ')
            out[k] = v
    return out
