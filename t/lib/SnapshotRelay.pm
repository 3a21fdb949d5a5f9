package SnapshotRelay;

# A loopback relay between a bootstrapping keyauth-syncd and a peer's
# GET /snapshot (issue 49) that misbehaves on purpose, as a network or a
# dying peer would: it holds the answer part-way until the test releases it
# (a copy in progress: a revocation made meanwhile, a peer killed
# meanwhile), cuts it short, flips one byte of the body (re-chunked, the
# peer's trailer kept), or replays an answer recorded earlier. One child
# process listens; each connection gets a child of its own; all die with the
# test process (PR_SET_PDEATHSIG) or the object. Also the client side of the
# snapshot endpoint: a whole GET /snapshot with its trailer, and a client
# that asks and never reads. Core Perl only.
#
#   my $r = SnapshotRelay->new(upstream => $port, hold_after => 256 * 1024);
#   $r->url;                    # http://127.0.0.1:PORT/snapshot
#   $r->wait_held(30); ...; $r->release;
#   SnapshotRelay->new(upstream => $port, cut_after => 1 << 20);
#   SnapshotRelay->new(upstream => $port, flip => 1);
#   SnapshotRelay->new(replay => $raw_answer);
#   my $s = SnapshotRelay::get($port);  # { status, headers, body, trailers, raw }
#   my $sock = SnapshotRelay::stalled_get($port);

use strict;
use warnings;

use Config;
use File::Temp qw(tempdir);
use IO::Select;
use IO::Socket::INET;
use POSIX ();
use Socket qw(SOL_SOCKET SO_RCVBUF SOCK_STREAM inet_aton sockaddr_in);
use Time::HiRes qw(sleep time);
use KeyauthTest ();

# prctl(2) by number, as EtcdCluster: PR_SET_PDEATHSIG is 1.
my %SYS_PRCTL = (x86_64 => 157, aarch64 => 167, i686 => 172, i386 => 172);
my ($ARCH) = $Config{archname} =~ /^([^-]+)/;
sub _die_with_parent {
    my ($parent) = @_;
    syscall($SYS_PRCTL{$ARCH}, 1, 9) if $SYS_PRCTL{$ARCH};
    POSIX::_exit(0) if getppid() != $parent;
}

# A receive buffer this small (the kernel doubles it) keeps the sender's
# kernel from absorbing the rest of a multi-MB answer: what the reader does
# not read, the peer cannot send.
my $SMALL_RCVBUF = 4096;

# Options (one of): upstream => PORT with hold_after => BYTES (of the
# answer, head included), cut_after => BYTES or flip => 1; or replay => RAW.
sub new {
    my ($class, %o) = @_;
    my $dir = tempdir('keyauth-relay-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{KEYAUTH_KEEP});
    my ($listen, $port);
    for (1 .. 5) {
        $port = KeyauthTest::free_port();
        $listen = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port, Listen => 16,
                                        ReuseAddr => 1) and last;
    }
    die "relay: cannot listen: $!" unless $listen;
    my $parent = $$;
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        _die_with_parent($parent);
        $SIG{$_} = 'DEFAULT' for qw(TERM ALRM);
        _serve($listen, $dir, \%o);
        POSIX::_exit(0);
    }
    close $listen;
    return bless { pid => $pid, port => $port, dir => $dir, owner => $$ }, $class;
}

sub port { $_[0]{port} }
sub url  { "http://127.0.0.1:$_[0]{port}/snapshot" }

# What the latest connection did: (bytes of the answer sent on, state), the
# state one of connected, held, released, cut, ended, refused (no upstream).
sub progress {
    my $self = shift;
    open my $fh, '<', "$self->{dir}/state" or return (0, '');
    my ($bytes, $state) = (<$fh> // '') =~ /^(\d+) (\w+)\n/ or return (0, '');
    return ($bytes, $state);
}

# How many connections the relay took.
sub connections {
    my $self = shift;
    return -s "$self->{dir}/connections" // 0;
}

sub wait_held {
    my ($self, $timeout) = @_;
    return KeyauthTest::wait_until(sub { ($self->progress)[1] eq 'held' }, $timeout, 'the relay to hold a copy');
}

sub release {
    my $self = shift;
    open my $fh, '>', "$self->{dir}/release" or die $!;
    close $fh;
}

sub DESTROY {
    my $self = shift;
    local $?;
    return unless ($self->{owner} // 0) == $$ && $self->{pid};
    kill 'KILL', $self->{pid};
    waitpid $self->{pid}, 0;
    delete $self->{pid};
}

# --- the relay's child processes --------------------------------------------

sub _serve {
    my ($listen, $dir, $o) = @_;
    $SIG{CHLD} = 'IGNORE';  # connection children reap themselves
    my $parent = $$;
    while (1) {
        my $client = $listen->accept or next;
        open my $c, '>>', "$dir/connections" or die $!;
        syswrite $c, '.';
        close $c;
        my $pid = fork;
        if (defined $pid && $pid == 0) {
            _die_with_parent($parent);
            close $listen;
            _relay($client, $dir, $o);
            POSIX::_exit(0);
        }
        close $client;
    }
}

sub _state {
    my ($dir, $bytes, $state) = @_;
    open my $fh, '>', "$dir/state.tmp" or return;
    print $fh "$bytes $state\n";
    close $fh;
    rename "$dir/state.tmp", "$dir/state";
}

sub _write_all {
    my ($fh, $data) = @_;
    my $off = 0;
    while ($off < length $data) {
        my $n = syswrite $fh, $data, length($data) - $off, $off;
        return 0 unless defined $n;  # the other side went away
        $off += $n;
    }
    return 1;
}

# The request's head (a GET has no body), or undef.
sub _read_head {
    my ($fh) = @_;
    my $buf = '';
    while (index($buf, "\r\n\r\n") < 0) {
        my $n = sysread $fh, $buf, 16384, length $buf;
        return undef unless $n;
        return undef if length $buf > 65536;
    }
    return $buf;
}

sub _connect_upstream {
    my ($port, $small) = @_;
    socket(my $s, Socket::PF_INET(), SOCK_STREAM, 0) or return undef;
    setsockopt($s, SOL_SOCKET, SO_RCVBUF, $SMALL_RCVBUF) if $small;
    connect($s, sockaddr_in($port, inet_aton('127.0.0.1'))) or return undef;
    binmode $s;
    return $s;
}

sub _relay {
    my ($client, $dir, $o) = @_;
    binmode $client;
    _state($dir, 0, 'connected');
    my $request = _read_head($client) // return;
    if (defined $o->{replay}) {
        _write_all($client, $o->{replay});
        _state($dir, length $o->{replay}, 'ended');
        shutdown $client, 1;
        return;
    }
    my $up = _connect_upstream($o->{upstream}, defined $o->{hold_after}) or do {
        _state($dir, 0, 'refused');
        return;  # the client sees its connection closed without an answer
    };
    _write_all($up, $request) or return;
    return _flip($client, $up, $dir) if $o->{flip};

    my ($sent, $held) = (0, 0);
    my $sel = IO::Select->new($up, $client);
    while (1) {
        my @ready = $sel->can_read(120) or return;  # neither side moves: give up
        for my $fh (@ready) {
            my $n = sysread $fh, my $data, 65536;
            if ($fh == $client) {
                return unless $n;  # the client is done (or gone)
                _write_all($up, $data) or return;
                next;
            }
            if (!$n) {  # the peer ended its side (or died): so does the relay
                _state($dir, $sent, 'ended');
                shutdown $client, 1;
                # the client's own close ends this child
                1 while sysread $client, my $ignored, 65536;
                return;
            }
            if (defined $o->{cut_after} && $sent + $n >= $o->{cut_after}) {
                _write_all($client, substr($data, 0, $o->{cut_after} - $sent));
                _state($dir, $o->{cut_after}, 'cut');
                close $up;
                close $client;
                return;
            }
            if (defined $o->{hold_after} && !$held && $sent + $n >= $o->{hold_after}) {
                my $first = $o->{hold_after} - $sent;
                _write_all($client, substr($data, 0, $first)) or return;
                $sent += $first;
                $data = substr($data, $first);
                $n -= $first;
                $held = 1;
                _state($dir, $sent, 'held');
                my $deadline = time + 300;
                sleep 0.01 until -e "$dir/release" || time > $deadline;
                _state($dir, $sent, 'released');
            }
            _write_all($client, $data) or return;
            $sent += $n;
            _state($dir, $sent, $held ? 'released' : 'connected');
        }
    }
}

# Reads the whole answer, flips the body's middle byte, and sends it on in
# chunks of its own, with the peer's head and trailer as they were.
sub _flip {
    my ($client, $up, $dir) = @_;
    my ($raw, $done) = ('', 0);
    while (!$done) {
        my $n = sysread $up, $raw, 65536, length $raw;
        last unless $n;
        my $end = chunked_end($raw);
        $done = defined $end;
    }
    my $answer = parse_answer($raw);
    my $out = $raw;
    if ($answer->{status} == 200 && defined $answer->{body} && length $answer->{body}) {
        my $body = $answer->{body};
        my $at = int(length($body) / 2);
        substr($body, $at, 1) = chr(ord(substr($body, $at, 1)) ^ 0xff);
        $out = $answer->{head} . "\r\n\r\n";
        for (my $i = 0; $i < length $body; $i += 50_000) {
            my $piece = substr($body, $i, 50_000);
            $out .= sprintf("%x\r\n", length $piece) . $piece . "\r\n";
        }
        $out .= "0\r\n" . $answer->{trailer_text} . "\r\n";
    }
    _write_all($client, $out);
    _state($dir, length $out, 'ended');
    shutdown $client, 1;
    1 while sysread $client, my $ignored, 65536;
}

# --- the client side --------------------------------------------------------

# Where a chunked answer (head included) ends, or undef while it is
# incomplete.
sub chunked_end {
    my ($raw) = @_;
    my $pos = index($raw, "\r\n\r\n");
    return undef if $pos < 0;
    $pos += 4;
    while (1) {
        my $eol = index($raw, "\r\n", $pos);
        return undef if $eol < 0;
        my ($size) = substr($raw, $pos, $eol - $pos) =~ /^([0-9A-Fa-f]+)/ or return undef;
        $pos = $eol + 2;
        if (hex $size == 0) {
            return $pos + 2 if substr($raw, $pos, 2) eq "\r\n";
            my $end = index($raw, "\r\n\r\n", $pos);
            return $end < 0 ? undef : $end + 4;
        }
        $pos += hex($size) + 2;
        return undef if $pos > length $raw;
    }
}

# A raw HTTP answer: { status, head, headers => { lc name => value }, body
# (undef when a chunked one is cut short), trailers => { lc name => value },
# trailer_text (its lines as sent) }.
sub parse_answer {
    my ($raw) = @_;
    my ($head, $rest) = split /\r\n\r\n/, $raw // '', 2;
    $head //= '';
    my ($status) = $head =~ m{^HTTP/\d\.\d (\d{3})};
    my %h;
    for (split /\r\n/, $head) {
        my ($k, $v) = /^([^:]+):\s*(.*)$/ or next;
        $h{lc $k} = $v;
    }
    my $a = { status => $status // 0, head => $head, headers => \%h, trailers => {}, trailer_text => '',
              raw => $raw };
    $rest //= '';
    if (($h{'transfer-encoding'} // '') !~ /chunked/i) {
        $a->{body} = $rest;
        return $a;
    }
    my $body = '';
    while ($rest =~ s/\A([0-9A-Fa-f]+)[^\r\n]*\r\n//) {
        my $n = hex $1;
        if ($n == 0) {
            # no end of the trailer section: cut short
            $rest =~ /\A((?:[^\r\n]+\r\n)*)\r\n/ or return $a;
            $a->{trailer_text} = $1;
            for (split /\r\n/, $a->{trailer_text}) {
                my ($k, $v) = /^([^:]+):\s*(.*)$/ or next;
                $a->{trailers}{lc $k} = $v;
            }
            $a->{body} = $body;
            return $a;
        }
        return $a if length $rest < $n + 2;
        $body .= substr($rest, 0, $n);
        $rest = substr($rest, $n + 2);
    }
    return $a;  # no last chunk: body stays undef
}

# GET (or another method) on a snapshot listener, read to the end.
sub get {
    my ($port, $method, $path) = @_;
    my $res = KeyauthTest::raw_request($port,
        KeyauthTest::request_text($method // 'GET', $path // '/snapshot'));
    return parse_answer($res->{raw});
}

# A client that sends GET /snapshot and reads nothing, with a receive
# buffer so small that the peer's copy blocks at once.
sub stalled_get {
    my ($port) = @_;
    my $s = _connect_upstream($port, 1) or die "connect: $!";
    _write_all($s, KeyauthTest::request_text(GET => '/snapshot')) or die "send: $!";
    return $s;
}

# What such a client reads once it reads again: the answer as far as the
# peer sent it before it closed (or $timeout seconds passed).
sub read_rest {
    my ($s, $timeout) = @_;
    my ($raw, $deadline) = ('', time + ($timeout // 30));
    my $sel = IO::Select->new($s);
    while (time < $deadline) {
        next unless $sel->can_read(0.5);
        my $n = sysread $s, $raw, 65536, length $raw;
        last unless $n;
    }
    close $s;
    return parse_answer($raw);
}

1;
