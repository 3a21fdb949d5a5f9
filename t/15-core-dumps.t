# No credential in a core dump. An nginx worker that has served API keys and
# console tokens over every path (accepted, refused, rate-limited, proxied
# with the header passed on, with a body, with headers too large for one
# buffer, pipelined, and the console API whose answer carries a new secret)
# holds none of them once those requests are over: the module wipes them when
# each request ends. A core is taken from the live worker (gcore) and from a
# real crash (SIGSEGV), and each is searched for every credential; a marker
# sent without credentials must still be found, so the search can fail.
# keyauthd, which holds console tokens and fresh secrets, writes no core at
# all when it crashes.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(sleep time);
use KeyauthTest;

# The sanitizer build still sends every request (ASan watches the wiping),
# but takes no core: ASan turns core dumps off, and its shadow memory would
# make them huge.
my $ASAN = ($ENV{KEYAUTH_BUILD} // '') =~ /asan/;
my $GCORE = (grep { -x } map { "$_/gcore" } split(/:/, $ENV{PATH} // ''), '/usr/bin')[0];

my $pattern = do { open my $fh, '<', '/proc/sys/kernel/core_pattern'; local $/; <$fh> // '' };
chomp $pattern;

my $t = KeyauthTest->new(workers => 1);
my $cores = $t->dir . '/cores';
mkdir $cores;
chmod 01777, $cores;
# a large answer, gzipped by the upstream to an HTTP/1.0 request: no
# Content-Length, it ends when the upstream closes (the event pipe then frees
# its raw buffers)
my $www = $t->dir . '/www';
mkdir $www;
open my $big, '>', "$www/big.txt" or die $!;
print {$big} join('', map { ('A' .. 'Z', 'a' .. 'z', 0 .. 9)[rand 62] } 1 .. 300_000);
close $big;

my $acc = $t->account(entitlement => 600000);
my %key = map { $_ => $t->key(account => $acc->{id}, name => $_, rate => ($_ eq 'limited' ? 1 : 60000)) }
    qw(ok revoked limited proxy body large pipe buffered unbuffered h2);
$t->ctl('key', 'revoke', $key{revoked}{id});

my $token = $acc->{consoleToken};
my $marker = 'ctl_' . join '', map { ('A' .. 'Z', 'a' .. 'z', 0 .. 9)[rand 62] } 1 .. 38;

# HTTP/2 (cleartext, prior knowledge) on a server of its own
my $h2_port = KeyauthTest::free_port();
my $h2_server = <<"H2";
    server {
        listen 127.0.0.1:$h2_port http2;
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; ip_lookup; }
    }
H2

$t->start_keyauthd;
$t->start_nginx(
    main  => "worker_rlimit_core 1g; working_directory $cores;",
    http  => "keyauth_zone keys:1m;\n"
           . "client_header_buffer_size 1k; large_client_header_buffers 4 8k;\n"
           . $t->console_http . $h2_server,
    locations => "root $www;\n" . <<'LOC' . $t->console_locations);
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; ip_lookup; }
        location /v1/other/ { keyauth on; keyauth_scope other:read; ip_lookup; }
        location /tool/ {
            keyauth on;
            keyauth_scope ip:read;
            proxy_http_version 1.1;
            proxy_pass http://127.0.0.1:$server_port/backend/;
        }
        location /backend/ { return 200 "backend\n"; }
        location /unbuffered/ {
            keyauth on;
            keyauth_scope ip:read;
            proxy_request_buffering off;
            proxy_http_version 1.1;
            proxy_pass http://127.0.0.1:$server_port/backend/;
        }
        location /buffered/ {
            keyauth on;
            keyauth_scope ip:read;
            proxy_buffers 4 4k;
            proxy_pass http://127.0.0.1:$server_port/big/;
        }
        location /big/ {
            gzip on;
            gzip_types *;
            gzip_http_version 1.0;
            gzip_min_length 1;
            try_files /big.txt =404;
        }
        location /plain/ { return 200 "plain\n"; }
LOC

# Keep-alive connections, all left open (idle) until the cores are taken:
# nothing else overwrites what they read.
my @open;

sub connection {
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t->port, Timeout => 10)
        or die "connect: $!";
    push @open, $s;
    return $s;
}

sub request_text {
    my ($method, $path, @headers) = @_;
    my $body = (@headers && ref $headers[-1] eq 'SCALAR') ? ${ pop @headers } : undef;
    push @headers, 'Content-Length: ' . length $body if defined $body;
    return "$method $path HTTP/1.1\r\nHost: localhost\r\n"
         . join('', map { "$_\r\n" } @headers) . "\r\n" . ($body // '');
}

# Reads one response (Content-Length framed); returns (status, body).
sub read_response {
    my $s = shift;
    my $head = '';
    while ($head !~ /\r\n\r\n/) {
        my $n = sysread $s, my $chunk, 1;
        die "connection closed after: $head" unless $n;
        $head .= $chunk;
    }
    my ($status) = $head =~ m{^HTTP/1\.1 (\d{3})} or die "bad response: $head";
    my ($len) = $head =~ /\r\nContent-Length: (\d+)/i;
    my $body = '';
    while (length $body < ($len // 0)) {
        my $n = sysread $s, my $chunk, $len - length $body;
        die 'connection closed in the body' unless $n;
        $body .= $chunk;
    }
    return ($status, $body);
}

# Reads a response whatever its framing (chunked here), to the close.
sub read_response_to_close {
    my $s = shift;
    my $all = '';
    1 while sysread $s, $all, 65536, length $all;
    my ($head, $rest) = split /\r\n\r\n/, $all, 2;
    my ($status) = ($head // '') =~ m{^HTTP/1\.1 (\d{3})};
    return ($status // 0, $rest // '');
}

sub exchange {
    my ($s, @request) = @_;
    print {$s} request_text(@request);
    return (read_response($s))[0];
}

sub bearer { "Authorization: Bearer $_[0]" }

my $c = connection();
is exchange($c, GET => '/v1/ip/8.8.8.8', bearer($key{ok}{secret})), 200, 'accepted key';
is exchange($c, GET => '/v1/other/', bearer($key{ok}{secret})), 403, 'same connection: scope missing';

is exchange(connection(), GET => '/v1/ip/8.8.8.8', bearer($key{revoked}{secret})), 401, 'revoked key';

$c = connection();
is exchange($c, GET => '/v1/ip/8.8.8.8', bearer($key{limited}{secret})), 200, 'rate-limited key: first';
is exchange($c, GET => '/v1/ip/8.8.8.8', bearer($key{limited}{secret})), 429, 'rate-limited key: over';

is exchange(connection(), GET => '/tool/a', bearer($key{proxy}{secret})), 200,
    'proxied with the Authorization header passed on';
is exchange(connection(), POST => '/tool/b', bearer($key{body}{secret}), 'Content-Type: text/plain',
            \('x' x 2000)), 200, 'proxied with a body';

is exchange(connection(), POST => '/unbuffered/c', bearer($key{unbuffered}{secret}),
            'Content-Type: text/plain', \('y' x 40000)), 200, 'proxied with an unbuffered body';
my ($status, $body);
$c = connection();
print {$c} request_text(GET => '/buffered/d', bearer($key{buffered}{secret}), 'Accept-Encoding: gzip');
($status, $body) = read_response_to_close($c);
is $status, 200, 'a large buffered answer that ends when the upstream closes';
ok length($body) > 100_000, 'all of it (' . length($body) . ' bytes, gzipped)';

my $h2 = `curl -s -o /dev/null -w '%{http_version} %{http_code}' --http2-prior-knowledge -H 'Authorization: Bearer $key{h2}{secret}' http://127.0.0.1:$h2_port/v1/ip/8.8.8.8`;
is $h2, '2 200', 'over HTTP/2';

# the first 1k buffer fills before the Authorization line ends; then two 8k
# buffers, the first of which keeps the whole line
is exchange(connection(), GET => '/v1/ip/8.8.8.8', 'X-Pad-1: ' . ('a' x 980),
            bearer($key{large}{secret}), 'X-Pad-2: ' . ('b' x 6000), 'X-Pad-3: ' . ('c' x 6000)),
    200, 'headers larger than one buffer';

$c = connection();
print {$c} request_text(GET => '/v1/ip/9.9.9.9', bearer($key{pipe}{secret})) x 2;
is +(read_response($c))[0], 200, 'pipelined: first';
is +(read_response($c))[0], 200, 'pipelined: second';

$c = connection();
print {$c} request_text(POST => '/v1/keys', bearer($token), 'Content-Type: application/json',
                        \'{"name":"console","scopes":["ip:read"],"rateLimitPerMinute":60}');
($status, $body) = read_response($c);
is $status, 201, 'a key made through the console API (proxied to keyauthd)';
my ($console_secret) = $body =~ /"secret":"(ka_[0-9A-Za-z]+)"/;
ok $console_secret, 'its secret came back';
is exchange($c, GET => '/v1/keys', bearer($token)), 200, 'console list on the same connection';

is exchange(connection(), GET => '/plain/', "X-Control: $marker"), 200,
    'the control marker, sent without Authorization';

# What must not be found: any 16 characters of a secret past its public
# prefix (the first 12 characters of an API key are shown in lists).
# Not the unbuffered body's key: nginx frees that request's upstream chain
# as it sends it, so its copy is not wiped (README: not covered).
my %secret = (map({ ("API key $_" => [$key{$_}{secret}, 12]) } grep { $_ ne 'unbuffered' } keys %key),
              'console-made API key' => [$console_secret // 'none', 12],
              'console token'        => [$token, 4]);

sub check_core {
    my ($file, $what) = @_;
    ok -s $file, "$what: a core was written" or return;
    open my $fh, '<:raw', $file or die "$file: $!";
    my $core = do { local $/; <$fh> };
    close $fh;
    diag sprintf '%s: %.1f MB', $what, length($core) / 1e6;
    ok index($core, $marker) >= 0, "$what: the control marker is there (the search works)";
    my $clean = 1;
    for my $name (sort keys %secret) {
        my ($s, $from) = @{ $secret{$name} };
        my @found = grep { index($core, substr($s, $_, 16)) >= 0 } $from .. length($s) - 16;
        ok !@found, "$what: no part of the $name" or diag "found from offsets @found";
        $clean &&= !@found;
    }
    unlink $file if $clean;  # else left for a look (with KEYAUTH_KEEP=1)
}

my ($worker) = $t->worker_pids;
ok $worker, 'the worker';
SKIP: {
    skip 'the sanitizer build takes no cores', 2 + keys %secret if $ASAN;
    skip 'no gcore (make deps installs gdb)', 2 + keys %secret unless $GCORE;
    skip 'not root, and ptrace is restricted (kernel.yama.ptrace_scope)', 2 + keys %secret
        unless $> == 0 || !-e '/proc/sys/kernel/yama/ptrace_scope'
            || `cat /proc/sys/kernel/yama/ptrace_scope` == 0;
    system("$GCORE -o $cores/gcore $worker >/dev/null 2>&1");
    check_core("$cores/gcore.$worker", 'gcore of the live worker');
}

SKIP: {
    skip 'the sanitizer build takes no cores', 3 + keys %secret if $ASAN;
    skip "core_pattern is \"$pattern\", not a file", 3 + keys %secret
        unless $pattern ne '' && $pattern !~ /^\|/;
    skip 'not root: worker_rlimit_core cannot raise the hard limit', 3 + keys %secret
        unless $> == 0;
    kill 'SEGV', $worker;
    my $deadline = time + 30;
    sleep 0.1 until $t->error_log =~ /\b$worker exited on signal 11/ || time > $deadline;
    like $t->error_log, qr/\b$worker exited on signal 11 \(core dumped\)/, 'the worker crashed and dumped';
    my ($file) = grep { -f } map { "$cores/$_" } ('core', "core.$worker");
    check_core($file // "$cores/core", 'core of the crashed worker');
}
close $_ for @open;

# keyauthd: a crash leaves no core, where a control process in the same
# place, with the same limit, leaves one.
my $kd_dir = $t->dir . '/keyauthd-cores';
mkdir $kd_dir;
SKIP: {
    skip 'the sanitizer build leaves core dumps to ASan', 3 if $ASAN;
    my $control = system('/bin/sh', '-c',
        'ulimit -c unlimited && cd "$0" && exec perl -e "kill SEGV => \$\$; sleep 5"', $kd_dir);
    skip 'this machine writes no core files (the control process left none)', 3
        unless ($control & 128) && grep { -f } glob "$kd_dir/core*";
    unlink glob "$kd_dir/core*";
    $t->stop_keyauthd;
    $t->start_keyauthd(core_dir => $kd_dir);
    my $res = KeyauthTest::http_request($t->keyauthd_port, POST => '/v1/keys', bearer($token),
        'Content-Type: application/json', \'{"name":"k","scopes":["ip:read"],"rateLimitPerMinute":60}');
    is $res->{status}, 201, 'keyauthd made a key (a secret in its memory)';
    my $wait = $t->stop_keyauthd('SEGV');
    ok !($wait & 128), 'keyauthd crashed without dumping core';
    ok !glob("$kd_dir/core*"), 'no core file';
}

done_testing;
