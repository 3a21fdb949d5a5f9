#!/usr/bin/env perl
# make bench-edges: many-edge mode's figures (bench/RESULTS.md, "Many
# edges"): propagation of a revocation to two edges (p50/p99), syncd's apply
# rate while it catches up, and the bootstrap of an empty edge at
# BENCH_KEYS keys (1,000,000 by default). Real etcd (one member; its data on
# tmpfs so that the disk's fsync is not what is measured), real keyauthd,
# keyauthctl, keyauth-syncd and nginx, as t/61-many-edges.t runs them.
use strict;
use warnings;
use FindBin;
$| = 1;
use lib "$FindBin::Bin/../t/lib";
# a benchmark at millions of keys runs longer than a test may
BEGIN { $ENV{KEYAUTH_TEST_DEADLINE} //= 7200 }
BEGIN { $ENV{TMPDIR} = '/dev/shm' if -d '/dev/shm' && !$ENV{BENCH_TMPDIR}; $ENV{TMPDIR} = $ENV{BENCH_TMPDIR} if $ENV{BENCH_TMPDIR} }
use POSIX ();
use Time::HiRes qw(time);
use JSON::PP qw(decode_json encode_json);
use EtcdCluster;
use KeyauthTest qw(wait_until);

my $KEYS = $ENV{BENCH_KEYS} // 1_000_000;
my $REVOCATIONS = $ENV{BENCH_REVOCATIONS} // 500;
my $CATCHUP = $ENV{BENCH_CATCHUP_KEYS} // 20_000;
my $CATCHUP_ROUNDS = $ENV{BENCH_CATCHUP_ROUNDS} // 3;  # the small store's line: a median
my $LOCATION = 'location /t/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }';

my $etcd = EtcdCluster->new(members => 1);
my $endpoints = $etcd->endpoints;
my $w = KeyauthTest->new(etcd => $endpoints);
$w->start_keyauthd;
my $acc = $w->account(entitlement => 600000);

sub edge {
    my (@args) = @_;
    my $e = KeyauthTest->new(etcd => $endpoints);
    $e->start_syncd(args => \@args);
    $e->wait_synced(undef, 3600) or die "syncd did not sync:\n" . $e->syncd_log;
    $e->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATION, no_init => 1);
    return $e;
}
sub status_at { $_[0]->request(GET => '/t/x', "Authorization: Bearer $_[1]")->{status} }
sub pct { my ($p, @s) = @_; $s[ int($p / 100 * $#s + 0.5) ] }
sub etcd_revision {
    my (undef, $out) = $etcd->etcdctl('endpoint', 'status', '-w', 'json');
    return ($out =~ /"revision":(\d+)/)[0] // 0;
}
# CPU seconds (user + system) a process has used so far: where a phase's
# time went, syncd's own work or etcd's answering it.
sub cpu_seconds {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/stat" or return 0;
    my @f = split ' ', (<$fh> =~ s/^.*\) //r);
    return ($f[11] + $f[12]) / POSIX::sysconf(POSIX::_SC_CLK_TCK());
}
sub make_keys {
    my ($n) = @_;
    my $t0 = time;
    my $made = 0;
    while ($made < $n) {  # keyauthctl pages by 40; 10,000 a call keeps its output small
        my $batch = $n - $made < 10_000 ? $n - $made : 10_000;
        system(KeyauthTest::build_dir() . "/keyauthctl --etcd $endpoints key create --account $acc->{id} "
             . "--name bench --scope ip:read --rate 60 --count $batch >/dev/null") == 0 or die "keyauthctl failed";
        $made += $batch;
    }
    return time - $t0;
}

# the first edge serves snapshots for the bootstrap of section 5
my $snapshot_port = KeyauthTest::free_port();
my @edges = (edge('--snapshot-listen', "127.0.0.1:$snapshot_port"), edge());

# 1. a revocation, from keyauthd's answer to 401 on both edges
my @lat;
for (1 .. $REVOCATIONS) {
    my $res = KeyauthTest::http_request($w->keyauthd_port, POST => '/v1/keys',
        "Authorization: Bearer $acc->{consoleToken}", 'Content-Type: application/json',
        \encode_json({ name => 'r', scopes => ['ip:read'], rateLimitPerMinute => 60000 }));
    my $k = decode_json($res->{body});
    wait_until(sub { !grep { status_at($_, $k->{secret}) != 200 } @edges }, 30, 'the key everywhere') or die;
    my $rv = KeyauthTest::http_request($w->keyauthd_port, POST => "/v1/keys/$k->{id}/revoke",
        "Authorization: Bearer $acc->{consoleToken}");
    my $t0 = time;
    until (!grep { status_at($_, $k->{secret}) != 401 } @edges) { die 'revocation lost' if time - $t0 > 30 }
    push @lat, (time - $t0) * 1000;
}
@lat = sort { $a <=> $b } @lat;
printf "revocation to 401 on 2 edges (%d):  p50 %.2f ms  p99 %.2f ms  max %.2f ms\n",
    scalar @lat, pct(50, @lat), pct(99, @lat), $lat[-1];

# 2. syncd's apply rate: paused while CATCHUP keys are written, then let go
# (here with a small store; again at KEYS keys after the bootstrap, below)
sub catch_up {
    my ($edge, $what) = @_;
    my $events0 = $edge->syncd_metric('keyauth_syncd_events_total') // 0;  # not while it is stopped
    kill 'STOP', $edge->syncd_pid;
    make_keys($CATCHUP);
    my $target = etcd_revision();
    my ($syncd_cpu, $etcd_cpu) = (cpu_seconds($edge->syncd_pid), cpu_seconds($etcd->pid(0)));
    my $t0 = time;
    kill 'CONT', $edge->syncd_pid;
    # polled every 10 ms (wait_synced's 50 ms would add up to 50 ms to half
    # a second); each poll costs the machine a little CPU
    until (do { my ($st, $h) = $edge->syncd_health; $st == 200 && $h && $h->{revision} >= $target }) {
        die 'no catch-up' if time - $t0 > 600;
        Time::HiRes::sleep(0.01);
    }
    my $secs = time - $t0;
    my $events = ($edge->syncd_metric('keyauth_syncd_events_total') // 0) - $events0;
    printf "syncd catch-up %s: %d events (%d keys) in %.2f s = %.0f events/s, %.0f keys/s (CPU: syncd %.2f s, etcd %.2f s)\n",
        $what, $events, $CATCHUP, $secs, $events / $secs, $CATCHUP / $secs,
        cpu_seconds($edge->syncd_pid) - $syncd_cpu, cpu_seconds($etcd->pid(0)) - $etcd_cpu;
    return $events / $secs;
}
my @rates = sort { $a <=> $b }
    map { catch_up($edges[1], sprintf('at %d keys', $REVOCATIONS + 1 + ($_ - 1) * $CATCHUP)) } 1 .. $CATCHUP_ROUNDS;
printf "syncd catch-up, small store: median %.0f events/s [%.0f-%.0f] of %d rounds\n",
    pct(50, @rates), $rates[0], $rates[-1], scalar @rates;

# 3. bootstrap of an empty edge at KEYS keys
my $have = $REVOCATIONS + $CATCHUP * $CATCHUP_ROUNDS + 1;
my $fill = make_keys($KEYS > $have ? $KEYS - $have : 0);
printf "loaded %d keys through keyauthctl --etcd in %.0f s (%.0f keys/s, 40 a txn)\n", $KEYS - $have, $fill, ($KEYS - $have) / ($fill || 1);
my $e = KeyauthTest->new(etcd => $endpoints);
my $etcd_cpu = cpu_seconds($etcd->pid(0));
my $t0 = time;
$e->start_syncd;
$e->wait_synced(etcd_revision(), 3600) or die 'no bootstrap';
my $secs = time - $t0;
printf "bootstrap CPU: syncd %.1f s, etcd %.1f s\n", cpu_seconds($e->syncd_pid), cpu_seconds($etcd->pid(0)) - $etcd_cpu;
my $bytes = -s $e->db . '/data.mdb';
my $used = `mdb_stat -e @{[ $e->db ]}` =~ /Number of pages used: (\d+)/ ? $1 * 4096 : 0;
printf "bootstrap of an empty edge: %d keys in %.1f s = %.0f keys/s; LMDB %.0f bytes/key in use\n",
    $KEYS, $secs, $KEYS / $secs, $used / $KEYS;

# 4. the catch-up again, at KEYS keys: each LMDB write of it now rewrites
# key_slots chunks of a large table
catch_up($e, sprintf('at %d keys', $KEYS));

# 5. the same empty edge, bootstrapped from a peer's snapshot instead
# (--bootstrap-from): from syncd's start to the newest key answering 200 at
# its nginx, beside the disk's own sequential write rate (the copy's bound)
$edges[0]->wait_synced(etcd_revision(), 600) or die 'the peer is behind';
my $newest = $w->key(account => $acc->{id}, scopes => ['ip:read']);
$edges[0]->wait_synced(etcd_revision(), 600) or die 'the peer is behind';
my $dd_file = $edges[0]->dir . '/dd.bin';
my $dd = `dd if=/dev/zero of=$dd_file bs=1M count=1024 conv=fdatasync 2>&1`;
unlink $dd_file;
my $dd_rate = $dd =~ /, ([\d.]+) ([GM])B\/s/ ? $1 * ($2 eq 'G' ? 1000 : 1) : 0;
my $n = KeyauthTest->new(etcd => $endpoints);
$n->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATION, no_init => 1);
$t0 = time;
$n->start_syncd(args => ['--bootstrap-from', "http://127.0.0.1:$snapshot_port/snapshot"]);
my $healthy;
until (status_at($n, $newest->{secret}) == 200) {
    die 'no bootstrap from the peer: ' . $n->syncd_log if time - $t0 > 600;
    $healthy //= time - $t0 if ($n->syncd_health)[0] == 200;
    Time::HiRes::sleep(0.01);
}
my $ready = time - $t0;
$healthy //= $ready;
my ($copied) = $n->syncd_log =~ /"event":"bootstrap finished".*?"bytes":(\d+)/;
my ($copy_ms) = $n->syncd_log =~ /"event":"bootstrap finished".*?"ms":(\d+)/;
die 'the edge did not come up from the snapshot: ' . $n->syncd_log unless defined $copied;
printf "bootstrap from a peer's snapshot: %d keys, newest key 200 %.1f s after syncd's start (healthy %.1f s; copy %.0f MB in %.1f s = %.0f MB/s; the disk's dd: %.0f MB/s)\n",
    $KEYS, $ready, $healthy, $copied / 1e6, $copy_ms / 1000, $copied / 1e6 / (($copy_ms || 1) / 1000), $dd_rate;
printf "bootstrap from etcd at the same size, above: %.1f s (%.1fx the snapshot's)\n", $secs, $secs / $ready;
