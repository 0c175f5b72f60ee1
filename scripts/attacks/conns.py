# conns.py PORT NCONN SECONDS : hold NCONN connections open, each sent one byte of a request head; reopen as soon as closed
import socket, sys, time, selectors
port, n, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
sel = selectors.DefaultSelector()
count = 0; opened = closed = 0; end = time.time() + secs; last = 0
while time.time() < end:
    while count < n:
        s = socket.socket()
        try:
            s.connect(('127.0.0.1', port)); s.send(b"G"); s.setblocking(False)
            sel.register(s, selectors.EVENT_READ); count += 1; opened += 1
        except OSError:
            s.close(); closed += 1
    for key, _ in sel.select(0.05):
        s = key.fileobj
        try: d = s.recv(100)
        except OSError: d = b''
        if not d:
            sel.unregister(s); s.close(); count -= 1; closed += 1
    if time.time() - last > 5:
        last = time.time(); print(time.strftime('%X'), 'open', count, 'opened', opened, 'closed', closed, flush=True)
