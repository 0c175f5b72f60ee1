# noread.py PORT NCONN PATH SECONDS [RCVBUF] : NCONN connections (opened over ~NCONN/100 s) each send one
# GET PATH and never read the answer (SO_RCVBUF small); held for SECONDS.
import socket, sys, time
port, n, path, secs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
rcv = int(sys.argv[5]) if len(sys.argv) > 5 else 4096
req = f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
conns = []; t0 = time.time()
for i in range(n):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcv)
    s.connect(('127.0.0.1', port)); s.send(req); conns.append(s)
    if i % 100 == 99: time.sleep(0.3); print(time.strftime('%X'), 'opened', i + 1, flush=True)
time.sleep(max(0, secs - (time.time() - t0)))
