# The console API under abuse, as an attacker on the network would try it:
# every limit keyauthd's HTTP server enforces answers in the JSON layout; idle
# and slow connections cost it no worker; one connection over its cap gets a
# fast 503; and while 200 slow-header connections, an unauthenticated flood
# and 12 MB of oversized headers run, through nginx and straight at keyauthd,
# a legitimate console client's calls all succeed and SIGTERM still exits.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use IO::Socket::INET;
use IO::Select;
use POSIX ();
use Time::HiRes qw(time sleep);
use JSON::PP;
use KeyauthTest;

my ($wrk) = grep { -x } map { "$_/wrk" } split /:/, $ENV{PATH};
BAIL_OUT('wrk is not installed: run make deps') unless $wrk;
my $ASAN = ($ENV{KEYAUTH_BUILD} // '') =~ /asan/;

my $t = KeyauthTest->new;
my $acc = $t->account(name => 'dev', entitlement => 120);
my $token = $acc->{consoleToken};
$t->start_keyauthd;
# where a slow answer spent its time: connecting to keyauthd, or waiting for it
my $timing_log = $t->dir . '/logs/timing.log';
$t->start_nginx(http => $t->console_http . "\nkeyauth_zone keys:1m;\n"
                        . 'log_format timing "$remote_addr $request_uri $status $request_time '
                        . 'connect=$upstream_connect_time header=$upstream_header_time";',
                locations => "access_log $timing_log timing;\n" . $t->console_locations);
my $kd = $t->keyauthd_port;

sub json_error_is {
    my ($res, $status, $code, $name) = @_;
    subtest $name => sub {
        is $res->{status}, $status, "status $status";
        like KeyauthTest::header($res, 'Content-Type') // '', qr{^application/json}, 'JSON';
        my $body = KeyauthTest::json_body($res) // {};
        is $body->{error}{code}, $code, $code;
        ok length($body->{error}{message} // ''), 'with a message';
    };
}

subtest 'every answer keyauthd makes itself is in the JSON layout' => sub {
    my $get = "GET /v1/keys HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
    json_error_is(KeyauthTest::raw_request($kd, "NOT HTTP AT ALL\r\n\r\n"),
                  400, 'BAD_REQUEST', 'garbage request line: 400');
    json_error_is(KeyauthTest::raw_request($kd, $get . join('', map { "X-F$_: v\r\n" } 1 .. 101) . "\r\n"),
                  431, 'HEADERS_TOO_LARGE', '101 header fields: 431');
    my $ok = KeyauthTest::raw_request($kd, $get . join('', map { "X-F$_: v\r\n" } 1 .. 90) . "\r\n");
    is $ok->{status}, 401, '90 header fields are judged (401 without a token)';
    json_error_is(KeyauthTest::raw_request($kd, $get . 'X-Big: ' . ('a' x 17000) . "\r\n\r\n"),
                  431, 'HEADERS_TOO_LARGE', '17 KB of one header: 431');
    json_error_is(KeyauthTest::raw_request($kd, 'GET /v1/keys?' . ('a' x 17000) . " HTTP/1.1\r\nHost: x\r\n\r\n"),
                  414, 'URI_TOO_LONG', '17 KB request target: 414');
    json_error_is(KeyauthTest::raw_request($kd, "POST /v1/keys HTTP/1.1\r\nHost: x\r\n"
                      . "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{}"),
                  413, 'PAYLOAD_TOO_LARGE', 'a 1 MB Content-Length: 413 before the body is read');
    json_error_is(KeyauthTest::raw_request($kd, "GET /v1/keys%zz HTTP/1.1\r\nHost: x\r\n\r\n"),
                  400, 'BAD_REQUEST', 'a malformed %-escape in the path: 400');
    json_error_is(KeyauthTest::raw_request($kd, "GET /v1/keys?limit=%G1 HTTP/1.1\r\nHost: x\r\n\r\n"),
                  400, 'BAD_REQUEST', 'a malformed %-escape in the query: 400');
    json_error_is(KeyauthTest::raw_request($kd, $get . "Authorization: Bearer $token\r\n"
                      . "Authorization: Bearer kac_other\r\n\r\n"),
                  400, 'BAD_REQUEST', 'two Authorization headers: 400');
    json_error_is(KeyauthTest::raw_request($kd, "GET /v1/keys HTTP/1.1\r\nHost: x\r\nBad Header: v\r\n\r\n"),
                  400, 'BAD_REQUEST', 'a space in a field name: 400');
    json_error_is(KeyauthTest::raw_request($kd, "DELETE /v1/keys HTTP/1.1\r\nHost: x\r\n\r\n"),
                  405, 'METHOD_NOT_ALLOWED', 'an unsupported method: 405');
    json_error_is(KeyauthTest::raw_request($kd, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"),
                  404, 'NOT_FOUND', 'an unknown path: 404');
    my $keys = KeyauthTest::http_request($kd, GET => '/v1/keys?limit=%35', "Authorization: Bearer $token");
    is $keys->{status}, 200, 'a %-encoded query value is decoded (limit=%35 is 5)';
    like $t->keyauthd_log, qr/"status":431/, 'server-made answers are logged too';
};

# Sends the head in pieces, as a slow network would.
sub in_pieces {
    my ($port, $text, $piece) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port) or die $!;
    local $SIG{PIPE} = 'IGNORE';
    for (my $i = 0; $i < length $text; $i += $piece) {
        syswrite($s, substr($text, $i, $piece)) or last;
    }
    my $raw = read_answer($s, 15);
    my ($head, $body) = split /\r\n\r\n/, $raw, 2;
    my ($status) = ($head // '') =~ m{^HTTP/1.1 (\d{3})};
    return ($status // 0, eval { decode_json($body) } // {});
}

subtest 'HTTP semantics: limits whatever the chunking, HEAD, Expect, pipelining' => sub {
    my $fields = join '', map { sprintf "X-F%03d: %s\r\n", $_, 'v' x 170 } 1 .. 95;  # 17.1 KB
    my ($st, $body) = in_pieces($kd, "GET /v1/keys HTTP/1.1\r\nHost: x\r\n$fields\r\n", 1000);
    is $st, 431, 'a 17 KB head of 96 fields sent in 1 KB pieces: 431 (the limit is the whole head)';
    $fields = join '', map { sprintf "X-F%03d: %s\r\n", $_, 'v' x 150 } 1 .. 95;  # 15.3 KB
    ($st) = in_pieces($kd, "GET /v1/keys HTTP/1.1\r\nHost: x\r\n$fields\r\n", 1000);
    is $st, 401, 'a 15.3 KB head in pieces is judged (401 without a token)';
    ($st, $body) = in_pieces($kd, 'GET /v1/keys?' . ('a' x 5000) . " HTTP/1.1\r\nHost: x\r\n"
                                  . ('X-Pad: ' . ('p' x 1000) . "\r\n") x 12 . "\r\n", 700);
    is $st, 431, 'a 5 KB target then 12 KB of fields, in pieces: 431, not 414';
    ($st, $body) = in_pieces($kd, 'GET /' . ('a' x 17000) . " HTTP/1.1\r\nHost: x\r\n\r\n", 3000);
    is $st, 414, 'a 17 KB request line in pieces: 414';
    my ($ok) = in_pieces($kd, "GET /v1/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer $token\r\n"
                            . "Connection: close\r\n\r\n", 1);
    is $ok, 200, 'a head sent one byte at a time (well inside 10 s) is served';

    my $head = KeyauthTest::raw_request($kd, "HEAD /v1/keys HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    is $head->{status}, 405, 'HEAD: 405 (GET and POST only)';
    ok KeyauthTest::header($head, 'Content-Length') > 0, '... with the length GET would have';
    is $head->{body}, '', '... and no body';

    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $kd) or die $!;
    my $json = qq({"name":"expect","scopes":["ip:read"],"rateLimitPerMinute":5});
    syswrite $s, "POST /v1/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer $token\r\n"
               . "Content-Type: application/json\r\nContent-Length: " . length($json)
               . "\r\nExpect: 100-continue\r\n\r\n";
    my $interim = '';
    IO::Select->new($s)->can_read(10) and sysread $s, $interim, 4096;
    like $interim, qr{^HTTP/1.1 100 Continue\r\n\r\n}, 'Expect: 100-continue is answered 100 before the body';
    syswrite $s, $json;
    like read_answer($s, 10), qr{^HTTP/1.1 201}, '... and the key is created';
    close $s;

    $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $kd) or die $!;
    syswrite $s, ("GET /v1/keys?limit=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer $token\r\n\r\n" x 3)
               . "GET /v1/keys HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    my $all = '';
    while (IO::Select->new($s)->can_read(10)) { sysread($s, $all, 65536, length $all) or last }
    my @statuses = $all =~ m{^HTTP/1.1 (\d{3})}mg;
    is_deeply \@statuses, [200, 200, 200, 401], 'four pipelined requests: four answers, in order';
};

# Reads one answer with a Content-Length from a kept-alive connection.
sub read_answer {
    my ($s, $timeout) = @_;
    my $buf = '';
    my $sel = IO::Select->new($s);
    my $deadline = time + $timeout;
    while (time < $deadline) {
        if ($buf =~ /\r\n\r\n/) {
            my ($head, $rest) = split /\r\n\r\n/, $buf, 2;
            my ($len) = $head =~ /Content-Length:\s*(\d+)/i;
            return $buf if defined $len && length($rest) >= $len;
        }
        $sel->can_read($deadline - time) or last;
        sysread($s, $buf, 65536, length $buf) or last;
    }
    return $buf;
}

# Seconds until the peer closes the connection, or undef at the deadline.
sub seconds_to_eof {
    my ($s, $timeout) = @_;
    my $start = time;
    my $sel = IO::Select->new($s);
    while (time - $start < $timeout) {
        $sel->can_read($timeout - (time - $start)) or last;
        my $n = sysread($s, my $junk, 65536);
        return time - $start if !$n;
    }
    return undef;
}

subtest 'an idle keep-alive connection is closed after 5 s' => sub {
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $kd) or die $!;
    syswrite $s, "GET /v1/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer $token\r\n\r\n";
    like read_answer($s, 10), qr{^HTTP/1.1 200}, 'answered, kept alive';
    my $idle = seconds_to_eof($s, 15);
    ok defined $idle, 'then closed by keyauthd';
    note sprintf 'closed after %.1f s idle', $idle // -1;
    cmp_ok $idle // 99, '<=', 7, 'within the 5 s idle timeout (with slack for a busy machine)';
};

subtest 'a request head still incomplete after 10 s gets 408' => sub {
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $kd) or die $!;
    my $start = time;
    syswrite $s, "GET /v1/keys HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    my $sel = IO::Select->new($s);
    my $got = '';
    # one byte every half second: every read succeeds, the head never ends
    while (time - $start < 20) {
        if ($sel->can_read(0.5)) {
            sysread($s, $got, 65536, length $got) or last;
            next;
        }
        local $SIG{PIPE} = 'IGNORE';
        syswrite($s, 'a') or last;
    }
    my $elapsed = time - $start;
    my ($head, $body) = split /\r\n\r\n/, $got, 2;
    like $head // '', qr{^HTTP/1.1 408}, 'status 408';
    is +(eval { decode_json($body) } // {})->{error}{code}, 'REQUEST_TIMEOUT', 'REQUEST_TIMEOUT';
    note sprintf 'answered after %.1f s', $elapsed;
    cmp_ok $elapsed, '>=', 9.5, 'not before the 10 s head deadline';
    cmp_ok $elapsed, '<', 16, 'and not long after it';
};

subtest 'one connection over --max-connections gets 503 at once' => sub {
    my $u = KeyauthTest->new;
    $u->account(name => 'x', entitlement => 10);
    $u->start_keyauthd(args => ['--max-connections', 3]);
    my $port = $u->keyauthd_port;
    my @held = map { IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port) or die $! } 1 .. 3;
    # the three are accepted (idle) before the fourth comes
    syswrite $_, "GET /v1/keys HTTP/1.1\r\nHost: x\r\n\r\n" for @held;
    read_answer($_, 10) for @held;
    my $start = time;
    my $res = KeyauthTest::raw_request($port, "GET /v1/keys HTTP/1.1\r\nHost: x\r\n\r\n");
    json_error_is($res, 503, 'SERVER_BUSY', 'the fourth connection: 503');
    note sprintf 'refused in %.3f s', time - $start;
    close $_ for @held;
    my $deadline = time + 10;
    my $st = 0;
    while (time < $deadline) {
        $st = KeyauthTest::raw_request($port, "GET /v1/keys HTTP/1.1\r\nHost: x\r\n\r\n")->{status};
        last if $st == 401;
        sleep 0.1;
    }
    is $st, 401, 'served again once the others closed';
};

# --- the attack -----------------------------------------------------------

sub vmrss_kb {
    my $pid = shift;
    open my $fh, '<', "/proc/$pid/status" or return 0;
    while (<$fh>) { return $1 if /^VmRSS:\s+(\d+)/ }
    return 0;
}

# N connections that send a request head one byte a second and never end it;
# a connection the server closes is opened again.
sub slow_headers {
    my ($port, $n) = @_;
    my $pid = fork // die "fork: $!";
    return $pid if $pid;
    $SIG{PIPE} = 'IGNORE';
    my $open = sub {
        my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port) or return;
        syswrite $c, "GET /v1/keys HTTP/1.1\r\nHost: x\r\nX-Slow: ";
        return $c;
    };
    my @c = map { $open->() } 1 .. $n;
    for (;;) {
        for my $i (0 .. $#c) {
            next if $c[$i] && syswrite($c[$i], 'a');
            $c[$i] = $open->();
        }
        sleep 1;
    }
}

# Connections that each send 120 KB of headers: 12 MB a round, a round a
# second. (An unpaced loop is a connection flood from this host: it fills
# keyauthd's accept queue, and then a proxy's new connection waits behind it;
# see docs/RELIABILITY.md.)
sub big_headers {
    my ($port, $n) = @_;
    my $pid = fork // die "fork: $!";
    return $pid if $pid;
    $SIG{PIPE} = 'IGNORE';
    my $head = "GET /v1/keys HTTP/1.1\r\nHost: x\r\n" . join('', map { "X-H$_: " . ('b' x 1000) . "\r\n" } 1 .. 120);
    for (;;) {
        my $next_round = time + 1;
        for (1 .. $n) {
            my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Timeout => 5) or next;
            syswrite $c, $head;
            close $c;
        }
        sleep $next_round - time if $next_round > time;
    }
}

sub flood {
    my ($port, $seconds) = @_;
    my $out = $t->dir . "/flood-$port.out";
    my $pid = fork // die "fork: $!";
    return ($pid, $out) if $pid;
    { exec "$wrk -t1 -c50 -d${seconds}s -s $FindBin::Bin/wrk/count_status.lua "
         . "http://127.0.0.1:$port -- kac_not_a_real_token /v1/keys > $out 2>&1" }
    POSIX::_exit(127);
}

# The legitimate client, from another loopback address than the attackers
# (nginx limits per client address).
sub legit {
    my ($method, $path, $body) = @_;
    my $c0 = time;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t->port,
                                  LocalAddr => '127.0.0.2', Timeout => 10) or return 0;
    note sprintf 'connect took %.2f s', time - $c0 if time - $c0 > 0.5;
    my $req = "$method $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer $token\r\n";
    $req .= "Content-Type: application/json\r\nContent-Length: " . length($body) . "\r\n" if defined $body;
    $req .= "\r\n" . ($body // '');
    syswrite $s, $req;
    my $raw = read_answer($s, 15);
    my ($st) = $raw =~ m{^HTTP/1.1 (\d{3})};
    return $st // 0;
}

subtest 'under attack, the console answers, memory stays bounded, SIGTERM exits' => sub {
    my $kd_pid = $t->keyauthd_pid;
    is legit(GET => '/v1/keys'), 200, 'the legitimate client before the attack';
    my $rss_before = vmrss_kb($kd_pid);
    # the attack outlasts what must hold during it: 2 s to build up, the
    # legitimate calls ($calls at 8 a second) and SIGTERM's 5.5 s at most
    my $calls = 56;
    my $attack_seconds = 2 + $calls / 8 + 6;
    my @attackers = (slow_headers($t->port, 200), slow_headers($kd, 200),
                     big_headers($kd, 100));
    my ($flood_nginx, $out_nginx) = flood($t->port, $attack_seconds);
    my ($flood_direct, $out_direct) = flood($kd, $attack_seconds);
    push @attackers, $flood_nginx, $flood_direct;
    sleep 2;  # let the attack build up: what follows must hold during it

    my (@lat, @bad);
    my $rss_peak = 0;
    my $t0 = time;
    for my $i (1 .. $calls) {
        # a busy console: 8 calls a second, inside nginx's per-address limit
        my $due = $t0 + ($i - 1) / 8;
        sleep $due - time if $due > time;
        my $start = time;
        my $st = $i % 10 == 0
            ? legit(POST => '/v1/keys', qq({"name":"during-attack-$i","scopes":["ip:read"],"rateLimitPerMinute":60}))
            : legit(GET => "/v1/keys?limit=5&call=$i");
        push @lat, time - $start;
        note sprintf 'call %d (%s) took %.2f s', $i, $i % 10 ? 'list' : 'create', $lat[-1] if $lat[-1] > 1;
        push @bad, "$i:$st" unless $st == 200 || $st == 201;
        my $rss = vmrss_kb($kd_pid);
        $rss_peak = $rss if $rss > $rss_peak;
    }
    # Availability is the plain build's to show (make test runs this file
    # against it too). Under ASan beside CPU-bound load (make test-stress)
    # keyauthd answers a few calls a second, so some legitimate calls
    # outlast nginx's proxy timeouts: there, each must still be answered,
    # by keyauthd or by nginx's 503/504, and most must succeed.
    if ($ASAN) {
        my @unanswered = grep { !/:(?:503|504)$/ } @bad;
        is_deeply \@unanswered, [], 'under ASan, every legitimate call was answered (2xx, or 503/504 from nginx)';
        cmp_ok scalar(@bad), '<=', $calls / 4, 'under ASan, most succeeded' or diag "refused: @bad";
    } else {
        is_deeply \@bad, [], 'every legitimate console call succeeded during the attack';
    }
    my @sorted = sort { $a <=> $b } @lat;
    my $p = sub { $sorted[int($_[0] * $#sorted)] * 1000 };
    diag sprintf 'legitimate console calls during the attack: %d, p50 %.1f ms, p99 %.1f ms, max %.1f ms',
        scalar @lat, $p->(0.5), $p->(0.99), $p->(1);
    diag sprintf 'keyauthd RSS: %d kB before, %d kB peak during the attack', $rss_before, $rss_peak;
    for (grep { /^127\.0\.0\.2 .* (\d+\.\d+) connect/ && $1 > 0.5 } do { open my $fh, '<', $timing_log; <$fh> }) {
        chomp;
        diag "a slow legitimate call, as nginx saw it: $_";
    }
    SKIP: {
        skip 'RSS under ASan is its shadow memory and quarantine', 1 if $ASAN;
        cmp_ok $rss_peak - $rss_before, '<', 32 * 1024, 'keyauthd RSS grew by less than 32 MB';
    }
    my $conns = () = glob("/proc/$kd_pid/fd/*");
    note "keyauthd has $conns descriptors open during the attack";

    # SIGTERM while the attack goes on
    my $start = time;
    kill TERM => $kd_pid;
    my $exited;
    while (time - $start < 10) {
        if (waitpid($kd_pid, POSIX::WNOHANG()) == $kd_pid) { $exited = $?; last }
        sleep 0.05;
    }
    my $took = time - $start;
    delete $t->{keyauthd_pid};
    ok defined $exited, 'keyauthd exited on SIGTERM during the attack';
    is $exited, 0, 'cleanly (status 0)';
    note sprintf 'exited %.2f s after SIGTERM', $took;
    cmp_ok $took, '<', 5.5, 'within 5 s';
    like $t->keyauthd_log, qr/"event":"stopped","allAnswered":true/, 'and says so in its log';

    my @slow = grep { $_ != $flood_nginx && $_ != $flood_direct } @attackers;
    kill KILL => @slow;
    waitpid $_, 0 for @attackers;  # the floods end by themselves
    for (['through nginx' => $out_nginx], ['straight at keyauthd' => $out_direct]) {
        my ($name, $file) = @$_;
        my $text = do { local (@ARGV, $/) = ($file); <> } // '';
        my ($ok, $limited, $other) = $text =~ /RESULT ok=(\d+) limited=(\d+) other=(\d+)/;
        diag sprintf 'unauthenticated flood %s: %s', $name,
            defined $ok ? "$limited answered 429, $other other (401, or refused once keyauthd stopped), $ok 200"
                        : "no summary: $text";
        is $ok, 0, "no flood request $name was let in" if defined $ok;
    }
};

done_testing;
