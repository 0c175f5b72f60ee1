# heads.py PORT NCONN HEADBYTES SECONDS : N connections each sending an incomplete request head of HEADBYTES
# (one long header line, never finished); reconnects when closed.
import socket, sys, time, select
port, n, size, secs = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
payload = b"POST /api/v1/write HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * size
conns = {}
def open_one():
    s = socket.socket(); s.setblocking(False)
    try: s.connect(('127.0.0.1', port))
    except BlockingIOError: pass
    conns[s] = 0
end = time.time() + secs
opened = closed = 0
last = 0
while time.time() < end:
    while len(conns) < n:
        open_one(); opened += 1
    _, w, _ = select.select([], list(conns)[:1000], [], 0.2) if conns else ([], [], [])
    for s in list(conns):
        sent = conns[s]
        if sent >= len(payload):
            continue
        try:
            k = s.send(payload[sent:sent + 65536])
            conns[s] = sent + k
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            s.close(); del conns[s]; closed += 1
    # detect closed by server
    done = [s for s in conns if conns[s] >= len(payload)]
    if done:
        r, _, _ = select.select(done[:1000], [], [], 0)
        for s in r:
            try:
                d = s.recv(100)
                if not d: raise OSError
            except BlockingIOError: continue
            except OSError: pass
            s.close(); del conns[s]; closed += 1
    if time.time() - last > 5:
        last = time.time()
        print(time.strftime('%X'), 'open', len(conns), 'opened', opened, 'closed', closed, 'fully_sent', sum(1 for v in conns.values() if v >= len(payload)), flush=True)
