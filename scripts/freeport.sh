#!/usr/bin/env bash
# Prints a free TCP port on 127.0.0.1 (asks the kernel for one).
exec python3 - <<'PY' 2>/dev/null || exec perl -MIO::Socket::INET -e 'my $s=IO::Socket::INET->new(LocalAddr=>"127.0.0.1",LocalPort=>0,Listen=>1) or die; print $s->sockport(),"\n"'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
PY
