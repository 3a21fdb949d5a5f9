#!/usr/bin/env perl
# make bench-shared: keyauth_shared_limits' figures (bench/RESULTS.md), on
# loopback, with a real redis-server and nginx edges (worker_processes 1,
# keyauth_shared_limits ... interval=250ms) on one store, as
# t/70-shared-limits.t runs them:
#   a. Redis traffic at BENCH_KEYS (10,000) active keys: two edges, wrk on
#      edge 1 only (1 thread, 32 connections, BENCH_TRAFFIC_SECONDS = 15 s)
#      over every key uniformly at random; bytes a second the busy edge sends
#      and the idle one receives, keys published and exchanges a second, from
#      both edges' keyauth_status before and after.
#   b. Overshoot of one 600/min key on three edges: each edge in turn
#      hammered until 429 (the key saturated everywhere), then one wrk per
#      edge (1 thread, 8 connections) for BENCH_OVERSHOOT_SECONDS (60) at
#      once; admitted = requests - non-2xx over the three, against 600/min x
#      the time since the last edge's 429. Then the same on three independent
#      edges (no keyauth_shared_limits), for comparison (about 3 x).
# Environment: BENCH_KEYS, BENCH_TRAFFIC_SECONDS, BENCH_OVERSHOOT_SECONDS,
# BENCH_TMPDIR (/dev/shm).
# Whole run: about 3 minutes. Everything it starts is stopped at exit, on
# failure and on Ctrl-C too.
use strict;
use warnings;
use FindBin;
$| = 1;
use lib "$FindBin::Bin/../t/lib";
BEGIN { $ENV{TMPDIR} = $ENV{BENCH_TMPDIR} // (-d '/dev/shm' ? '/dev/shm' : '/tmp') }
use POSIX ();
use Time::HiRes qw(time sleep);
use KeyauthTest qw(wait_until);
use RedisServer;

my $KEYS = $ENV{BENCH_KEYS} // 10_000;
my $TRAFFIC_SECONDS = $ENV{BENCH_TRAFFIC_SECONDS} // 15;
my $OVERSHOOT_SECONDS = $ENV{BENCH_OVERSHOOT_SECONDS} // 60;
my $RATE = 600;           # per minute, the overshoot key's
my $INTERVAL = '250ms';
my $PATH = '/v1/ip/1.1.1.1';
my $WRK_SCRIPT = "$FindBin::Bin/wrk/random_key.lua";

# wrk children: killed at exit whatever happened; END blocks (KeyauthTest's,
# RedisServer's destructors) stop nginx and redis-server, also after a die
# or a signal (turned into an exit so that they run).
my %WRK;
$SIG{INT} = $SIG{TERM} = $SIG{HUP} = sub { print STDERR "\ninterrupted: cleaning up\n"; exit 130 };
END {
    local $?;
    kill 'TERM', keys %WRK if %WRK;
    waitpid $_, 0 for keys %WRK;
}

for my $tool (qw(wrk redis-server)) {
    grep { -x "$_/$tool" } split /:/, $ENV{PATH} or die "$tool is not installed (make deps)\n";
}

my $LOCATIONS = <<"LOC";
        location /v1/ip/ {
            access_log off;
            keyauth on;
            keyauth_scope ip:read;
            empty_gif;
        }
        location = /status { access_log off; keyauth_status; }
LOC

# An edge: one nginx, one worker, on the store $db (made by $init's keyauthctl).
sub edge {
    my (%o) = @_;
    my $t = $o{t} // KeyauthTest->new(workers => 1);
    $t->start_nginx(
        no_init => !$o{init}, db => $o{db},
        log_level => 'notice',
        http => "keyauth_zone keys:16m;\nkeyauth_usage_db off;\n"
              . ($o{redis} ? "keyauth_shared_limits $o{redis} interval=$INTERVAL timeout=1s;" : ''),
        locations => $LOCATIONS);
    return $t;
}

sub metrics {
    my ($t) = @_;
    my $body = $t->request(GET => '/status')->{body};
    my %m = $body =~ /^keyauth_shared_limits_(\w+) (\d+)$/mg;
    return { %m, at => time };
}

sub wait_up {
    my @edges = @_;
    for my $i (0 .. $#edges) {
        wait_until(sub { (metrics($edges[$i])->{up} // 0) == 1 }, 30, "edge " . ($i + 1) . " exchanging")
            or die "edge " . ($i + 1) . " does not exchange with Redis:\n" . $edges[$i]->error_log;
    }
}

# Starts wrk in a child; its output goes to a file. Returns the pid.
sub start_wrk {
    my ($out, @args) = @_;
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open STDOUT, '>', $out or POSIX::_exit(127);
        open STDERR, '>&', \*STDOUT;
        exec 'wrk', @args or POSIX::_exit(127);
    }
    $WRK{$pid} = 1;
    return $pid;
}

# Waits for a wrk; returns { requests, non2xx, seconds, errors, text }.
sub finish_wrk {
    my ($pid, $out) = @_;
    waitpid $pid, 0;
    delete $WRK{$pid};
    my $rc = $? >> 8;
    my $text = do { local (@ARGV, $/) = ($out); <> } // '';
    die "wrk failed ($rc):\n$text" if $rc != 0;
    my ($n, $secs, $unit) = $text =~ /^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h),/m
        or die "no request count in wrk's output:\n$text";
    $secs *= { us => 1e-6, ms => 1e-3, s => 1, m => 60, h => 3600 }->{$unit};
    my ($non2xx) = $text =~ /Non-2xx or 3xx responses: (\d+)/;
    my ($errors) = $text =~ /Socket errors: (.*)$/m;
    return { requests => $n, non2xx => $non2xx // 0, seconds => $secs, errors => $errors, text => $text };
}

sub get { my ($t, $secret) = @_; $t->request(GET => $PATH, "Authorization: Bearer $secret")->{status} }

# ---------------------------------------------------------------- a. traffic
my $store = KeyauthTest->new(workers => 1);
my $redis = RedisServer->new(dir => $store->dir);
printf "redis-server %s on 127.0.0.1:%d; nginx edges: worker_processes 1, keyauth_shared_limits interval=%s\n",
    (`redis-server --version` =~ /v=(\S+)/)[0] // '?', $redis->port, $INTERVAL;

my $acc = $store->account(entitlement => 10_000_000);
my $keys_file = $store->dir . '/keys.txt';
{
    my $t0 = time;
    open my $in, '-|', KeyauthTest::build_dir() . '/keyauthctl', '--db', $store->db, 'key', 'create',
        '--account', $acc->{id}, '--name', 'bench', '--scope', 'ip:read', '--rate', 10_000_000,
        '--count', $KEYS or die "keyauthctl: $!";
    open my $out, '>', $keys_file or die $!;
    my $n = 0;
    while (<$in>) { if (/^secret \(shown once\): (\S+)/) { print $out "$1\n"; $n++ } }
    close $in or die "keyauthctl key create --count $KEYS failed\n";
    close $out;
    $n == $KEYS or die "keyauthctl made $n keys, not $KEYS\n";
    printf "%d keys created in %.1f s\n", $KEYS, time - $t0;
}

my @pair = (edge(t => $store, db => $store->db, init => 1, redis => $redis->url),
            edge(db => $store->db, redis => $redis->url));
wait_up(@pair);
# a first round of every key on edge 1, so that the measured window starts
# in the steady state (every key known to both zones)
{
    my $warm = start_wrk($store->dir . '/wrk-warm.out', '-t1', '-c32', '-d3s', '-s', $WRK_SCRIPT,
                         'http://127.0.0.1:' . $pair[0]->port . $PATH, '--', $keys_file, $PATH);
    finish_wrk($warm, $store->dir . '/wrk-warm.out');
    sleep 1;
}
my @before = map { metrics($_) } @pair;
my $pid = start_wrk($store->dir . '/wrk-traffic.out', '-t1', '-c32', "-d${TRAFFIC_SECONDS}s", '-s', $WRK_SCRIPT,
                    'http://127.0.0.1:' . $pair[0]->port . $PATH, '--', $keys_file, $PATH);
my $w = finish_wrk($pid, $store->dir . '/wrk-traffic.out');
my @after = map { metrics($_) } @pair;
my @d = map { my $i = $_; +{ map { $_ => $after[$i]{$_} - $before[$i]{$_} } keys %{ $after[$i] } } } 0, 1;
$_->{at} ||= 1e-9 for @d;
my $rate = sub { my ($i, $name) = @_; $d[$i]{$name} / $d[$i]{at} };

printf "\na. Redis traffic, %d active keys, wrk on edge 1 only (1 thread, 32 connections, %d s, keys uniformly at random):\n",
    $KEYS, $TRAFFIC_SECONDS;
printf "  edge 1 served %.0f req/s (%d requests, %d non-2xx%s) over %.1f s of counters\n",
    $w->{requests} / $w->{seconds}, $w->{requests}, $w->{non2xx},
    $w->{errors} ? ", socket errors: $w->{errors}" : '', $d[0]{at};
printf "  busy edge (1): sent %8.0f bytes/s, received %8.0f bytes/s, published %6.0f keys/s, %5.2f exchanges/s (%.0f keys an exchange)\n",
    $rate->(0, 'sent_bytes_total'), $rate->(0, 'received_bytes_total'), $rate->(0, 'published_keys_total'),
    $rate->(0, 'exchanges_total'), $d[0]{published_keys_total} / ($d[0]{exchanges_total} || 1);
printf "  idle edge (2): sent %8.0f bytes/s, received %8.0f bytes/s, folded    %6.0f keys/s, %5.2f exchanges/s\n",
    $rate->(1, 'sent_bytes_total'), $rate->(1, 'received_bytes_total'), $rate->(1, 'folded_keys_total'),
    $rate->(1, 'exchanges_total');
printf "  failures: edge 1 %d, edge 2 %d; edge 2 folded %.1f%% of the keys edge 1 published\n",
    $d[0]{failures_total}, $d[1]{failures_total},
    100 * $d[1]{folded_keys_total} / ($d[0]{published_keys_total} || 1);
$_->stop_nginx for @pair;

# -------------------------------------------------------------- b. overshoot
my $key = $store->key(account => $acc->{id}, rate => $RATE, name => 'overshoot shared');
my $key_local = $store->key(account => $acc->{id}, rate => $RATE, name => 'overshoot local');

# Saturates the key on every edge in turn: each hammered until 429. Shared,
# an edge is hammered only once it has folded everything the edges before
# it admitted (they exchanged once since, then it did), so that it adds
# only what the key earned meanwhile. Returns the time of the last 429 and
# what each edge admitted.
sub saturate {
    my ($shared, $secret, @edges) = @_;
    my @admitted;
    for my $i (0 .. $#edges) {
        if ($shared && $i > 0) {
            for my $round ([@edges[0 .. $i - 1]], [$edges[$i]]) {
                my @ex = map { metrics($_)->{exchanges_total} } @$round;
                wait_until(sub { !grep { metrics($round->[$_])->{exchanges_total} < $ex[$_] + 1 } 0 .. $#$round },
                           30, 'an exchange of every edge') or die "the edges stopped exchanging\n";
            }
        }
        my $n = 0;
        while (1) {
            my $st = get($edges[$i], $secret);
            last if $st == 429;
            die "edge " . ($i + 1) . " answered $st\n" if $st != 200;
            die "edge " . ($i + 1) . " never refused the key\n" if ++$n > 20 * $RATE;
        }
        push @admitted, $n;
    }
    return (time, @admitted);
}

sub overshoot {
    my ($label, $shared, $secret) = @_;
    my @edges = map { edge(db => $store->db, $shared ? (redis => $redis->url) : ()) } 1 .. 3;
    wait_up(@edges) if $shared;
    my ($saturated_at, @sat) = saturate($shared, $secret, @edges);
    my @runs;
    for my $i (0 .. 2) {
        my $out = $store->dir . "/wrk-over-$shared-$i.out";
        push @runs, [start_wrk($out, '-t1', '-c8', "-d${OVERSHOOT_SECONDS}s", '-H', "Authorization: Bearer $secret",
                               'http://127.0.0.1:' . $edges[$i]->port . $PATH), $out];
    }
    my $started = time;
    my @w = map { finish_wrk(@$_) } @runs;
    my $ended = time;
    my @adm = map { $_->{requests} - $_->{non2xx} } @w;
    my $admitted = 0;
    $admitted += $_ for @adm;
    my $elapsed = $ended - $saturated_at;
    my $ideal = $RATE / 60 * $elapsed;
    my $m = $shared ? [map { metrics($_) } @edges] : undef;
    my $sent_rate = 0;
    $sent_rate += $_->{requests} / $_->{seconds} for @w;
    printf "  %s: admitted %d (edges %s) in %.1f s of wrk; ideal %d/min x %.1f s since saturation = %.0f; overshoot %+.1f%% (%.2f x)\n",
        $label, $admitted, join('/', @adm), $w[0]{seconds}, $RATE, $elapsed, $ideal,
        100 * ($admitted - $ideal) / $ideal, $admitted / $ideal;
    printf "      saturation admitted %s; %s requests sent (%.0f req/s over the 3 edges); wrk started %.2f s after saturation%s\n",
        join('/', @sat), join('/', map { $_->{requests} } @w),
        $sent_rate, $started - $saturated_at,
        (grep { $_->{errors} } @w) ? '; socket errors: ' . join(' | ', map { $_->{errors} // '-' } @w) : '';
    if ($m) {
        printf "      exchanges %s, failures %s\n", join('/', map { $_->{exchanges_total} } @$m),
            join('/', map { $_->{failures_total} } @$m);
    }
    $_->stop_nginx for @edges;
    return ($admitted, $ideal);
}

printf "\nb. Overshoot of one %d/min key on 3 edges, saturated on each first, then wrk on all 3 at once (1 thread, 8 connections each, %d s):\n",
    $RATE, $OVERSHOOT_SECONDS;
overshoot('shared (keyauth_shared_limits)', 1, $key->{secret});
overshoot('independent (no sharing)      ', 0, $key_local->{secret});
