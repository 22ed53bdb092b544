#!/usr/bin/env bash
# Prints a free TCP port on 127.0.0.1 (asks the kernel for one), with python3
# when it is there, else with Perl (perl-base is Essential on Debian, so a
# minimal Debian 12 has it; scripts/deps.sh's run set brings no python3).
# The interpreter is picked before the exec: a failed `exec` ends a
# non-interactive bash at once, so `exec python3 ... || exec perl ...`
# never reaches its fallback.
if command -v python3 >/dev/null 2>&1; then
    exec python3 - <<'PY'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
PY
fi
exec perl -MIO::Socket::INET -e 'my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0, Listen => 1) or die "freeport: $!\n"; print $s->sockport(), "\n"'
