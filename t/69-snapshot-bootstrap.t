# A new edge bootstraps from a peer's LMDB snapshot (issue 49): real etcd
# members, real keyauth-syncd processes, a 20,000-key fleet. A peer edge P
# serves GET /snapshot (--snapshot-listen); new edges start empty with
# --bootstrap-from and come up complete: every key works, a revocation made
# during the copy arrives through the watch, and the store equals etcd record
# by record. Every fault of a snapshot (a peer killed mid-copy, an answer
# truncated, a byte flipped, another cluster's peer, a revision etcd has
# compacted) is refused with its reason and falls back to the next URL, then
# to etcd; nginx never opens a partial store. A stale peer does not serve;
# the endpoint keeps its limits (one copy at a time, a stalled client
# dropped while the peer keeps applying, an allow list, 404/405). The faults
# come from a loopback relay (t/lib/SnapshotRelay.pm).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Digest::SHA qw(sha256_hex);
use File::Temp qw(tempdir);
use JSON::PP qw(decode_json);
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(time sleep);
use EtcdCluster;
use KeyauthTest qw(wait_until);
use Mirror;
use SnapshotRelay;

my $KEYS = $ENV{KEYAUTH_SNAPSHOT_KEYS} // 20_000;
my $SAMPLE = 300;
my $LOCATION = 'location /t/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }';
my $STARTED = time;

my $etcd = EtcdCluster->new(members => 3);
my $endpoints = $etcd->endpoints;
my $ops = KeyauthTest->new(etcd => $endpoints);  # keyauthctl, as an operator
my $acc = $ops->account(entitlement => 600000);

# (revision, cluster id) of a cluster, as etcd reports them.
sub etcd_status {
    my ($cluster) = @_;
    my ($rc, $out) = $cluster->etcdctl('endpoint', 'status', '-w', 'json');
    return (0, '') if $rc != 0;
    my ($rev) = $out =~ /"revision":(\d+)/;
    my ($id) = $out =~ /"cluster_id":(\d+)/;
    return ($rev // 0, $id // '');
}
sub etcd_revision { (etcd_status($_[0] // $etcd))[0] }

# $n keys of $acc through keyauthctl --etcd, one process (40 keys a
# transaction, as bench/many-edges.pl makes them; writers at once only
# conflict on the key index and retry). Returns [ { id, secret } ] in the
# order made, the text output parsed (JSON::PP would take seconds on it).
sub make_keys {
    my ($n) = @_;
    my ($rc, $text, $err) = $ops->ctl_text('key', 'create', '--account', $acc->{id}, '--name', 'fleet',
                                           '--scope', 'ip:read', '--rate', 600000, '--count', $n);
    die "keyauthctl key create failed ($rc): $err" if $rc != 0;
    my @keys;
    push @keys, { id => $1, secret => $2 } while $text =~ /^key (key_\S+) created\nsecret \(shown once\): (\S+)$/mg;
    return \@keys;
}

sub status_at {
    my ($edge, $secret) = @_;
    return $edge->request(GET => '/t/x', "Authorization: Bearer $secret")->{status};
}

# The log lines of an edge's syncd with this event, decoded.
sub events {
    my ($edge, $event) = @_;
    return grep { ref $_ && ($_->{event} // '') eq $event }
           map { eval { decode_json($_) } } split /\n/, $edge->syncd_log;
}

# A sample of the metric with these labels ('' for none) on syncd's
# /metrics, or undef.
sub metric {
    my ($edge, $name, $labels) = @_;
    my $body = KeyauthTest::http_request($edge->syncd_port, GET => '/metrics')->{body};
    my $l = defined $labels && length $labels ? "\\{\Q$labels\E\\}" : '(?:\{[^}]*\})?';
    return $body =~ /^\Q$name\E$l (\S+)$/m ? $1 + 0 : undef;
}

# A keyauth-syncd that serves snapshots (and, with nginx => 1, an nginx in
# front of its store). args: more of syncd's arguments.
my %SNAPSHOT_PORT;
sub snapshot_url { "http://127.0.0.1:$SNAPSHOT_PORT{$_[0]}/snapshot" }
sub start_edge {
    my (%o) = @_;
    my $e = KeyauthTest->new(etcd => $o{etcd} // $endpoints);
    $SNAPSHOT_PORT{$e} = KeyauthTest::free_port();
    mkdir $e->db if $o{empty_dir};
    $e->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATION, no_init => 1) if $o{nginx};
    $e->start_syncd(args => ['--snapshot-listen', "127.0.0.1:$SNAPSHOT_PORT{$e}", @{ $o{args} // [] }]);
    wait_listener($e);
    return $e;
}
sub restart_syncd {
    my ($e, @args) = @_;
    $e->stop_syncd;
    $e->start_syncd(args => ['--snapshot-listen', "127.0.0.1:$SNAPSHOT_PORT{$e}", @args]);
    wait_listener($e);
}
sub wait_listener {
    my ($e) = @_;
    wait_until(sub { IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $SNAPSHOT_PORT{$e}) },
               30, 'the snapshot listener') or die "no snapshot listener:\n" . $e->syncd_log;
}

# Watches an edge's --db while it is built, every 2 ms, as nginx would look:
# the first time data.mdb is there, mdb_stat reads it (a partial store
# would fail to open or hold fewer records), and whether PATH.rebuild was
# seen being written before. Returns a sub that waits for the watcher (at
# most 180 s) and answers { entries, error, rebuild_seen }.
sub watch_store {
    my ($db) = @_;
    my $out = "$db.watch";
    unlink $out;
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        $SIG{$_} = 'DEFAULT' for qw(TERM ALRM);
        my ($rebuild_seen, $deadline) = (0, time + 180);
        until (-e "$db/data.mdb" || time > $deadline) {
            $rebuild_seen ||= -e "$db.rebuild/data.mdb" ? 1 : 0;
            sleep 0.002;
        }
        my $stat = `mdb_stat -s key_records '$db' 2>&1`;
        open my $fh, '>', "$out.tmp" or POSIX::_exit(1);
        my ($entries) = $stat =~ /Entries: (\d+)/;
        print $fh ($entries // -1), " $rebuild_seen\n", $entries ? '' : $stat;
        close $fh;
        rename "$out.tmp", $out;
        POSIX::_exit(0);
    }
    return sub {
        waitpid $pid, 0;
        open my $fh, '<', $out or return { entries => -1, error => 'no result', rebuild_seen => 0 };
        local $/;
        my ($entries, $seen, $error) = (<$fh> // '') =~ /^(-?\d+) (\d)\n(.*)/s;
        return { entries => $entries, rebuild_seen => $seen, error => $error };
    };
}

# The checks every bootstrapped edge passes: complete, healthy, and how it
# came up.
sub complete_ok {
    my ($e, $what, $built_from, $peer) = @_;
    ok $e->wait_synced(etcd_revision(), 120), "$what: synced with etcd" or diag $e->syncd_log;
    my ($st, $h) = $e->syncd_health;
    is $st, 200, "$what: /healthz 200";
    is $h->{builtFrom}, $built_from, "$what: /healthz builtFrom $built_from";
    ok defined $h->{buildSeconds} && $h->{buildSeconds} > 0, "$what: /healthz buildSeconds ("
        . ($h->{buildSeconds} // 'null') . ')';
    is $h->{bootstrapPeer}, $peer, "$what: /healthz bootstrapPeer " . ($peer // 'absent');
    is metric($e, 'keyauth_syncd_built_from_snapshot'), $built_from eq 'snapshot' ? 1 : 0,
        "$what: keyauth_syncd_built_from_snapshot";
    cmp_ok metric($e, 'keyauth_syncd_build_seconds') // 0, '>', 0, "$what: keyauth_syncd_build_seconds";
    return $h;
}

# Each refused snapshot: a "bootstrap refused" line with its URL and a
# reason naming the fault, in the order tried.
sub refused_ok {
    my ($e, $what, @expect) = @_;
    my @refused = events($e, 'bootstrap refused');
    is scalar @refused, scalar @expect, "$what: " . scalar(@expect) . ' snapshot(s) refused'
        or diag explain \@refused;
    for my $i (0 .. $#expect) {
        my ($url, $reason, $fault) = @{ $expect[$i] };
        is $refused[$i]{url}, $url, "$what: refused $fault ($url)";
        like $refused[$i]{reason} // '', $reason, "$what: the reason names the fault ($fault)";
    }
    is metric($e, 'keyauth_syncd_bootstrap_refused_total'), scalar @expect,
        "$what: keyauth_syncd_bootstrap_refused_total";
}

my $CUT_SHORT = qr/cut short|truncat|incomplete|short|closed|ended|reset|died|unexpected end|eof/i;

# --- the fleet and its peer --------------------------------------------------

my $t_keys = time;
my $fleet = make_keys($KEYS);
is scalar @$fleet, $KEYS, "a fleet of $KEYS keys";
my $newest = make_keys(1)->[0];
diag sprintf('[ figure ] %d keys made through keyauthctl --etcd in %.1f s', $KEYS + 1, time - $t_keys);
my @sample = (@$fleet[map { int($_ * @$fleet / $SAMPLE) } 0 .. $SAMPLE - 1], $newest);
my $revoked = $sample[1];

my $P = start_edge(nginx => 1);
ok $P->wait_synced(etcd_revision(), 120), 'peer P is synced' or BAIL_OUT($P->syncd_log);
ok wait_until(sub { status_at($P, $newest->{secret}) == 200 }, 30, 'the newest key at P'), 'the newest key works at P';

# --- 1. a new edge bootstraps from the peer ----------------------------------

my $N1;
subtest 'a new edge bootstraps from P: every key, a revocation made mid-copy, equal to etcd' => sub {
    # through a relay that holds the copy after 256 KiB: "during the copy" is
    # then a fact, not a race
    my $hold = SnapshotRelay->new(upstream => $SNAPSHOT_PORT{$P}, hold_after => 256 * 1024);
    $N1 = start_edge(empty_dir => 1, nginx => 1, args => ['--bootstrap-from', $hold->url]);
    my $watched = watch_store($N1->db);
    ok $hold->wait_held(60), 'the copy is under way' or diag $N1->syncd_log;
    ok !-e $N1->db . '/data.mdb', 'mid-copy: no data.mdb at --db';
    ok -e $N1->db . '.rebuild', 'mid-copy: PATH.rebuild is what is written';
    my ($st, $h) = $N1->syncd_health;
    is $st, 503, 'mid-copy: /healthz 503';
    is status_at($N1, $sample[0]{secret}), 503, 'mid-copy: nginx fails closed (no store yet)';
    is $ops->ctl('key', 'revoke', $revoked->{id})->{status}, 'revoked', 'a key revoked during the copy';
    my $revoked_at = etcd_revision();
    $hold->release;

    ok $N1->wait_synced($revoked_at, 120), 'N synced past the revocation' or diag $N1->syncd_log;
    my ($started) = events($N1, 'bootstrap started');
    is $started->{url}, $hold->url, 'log: bootstrap started, from the peer';
    my ($finished) = events($N1, 'bootstrap finished');
    ok $finished, 'log: bootstrap finished' or diag $N1->syncd_log;
    is $finished->{url}, $hold->url, 'bootstrap finished: the URL';
    cmp_ok $finished->{bytes} // 0, '>', 1 << 20, "bootstrap finished: $finished->{bytes} bytes";
    cmp_ok $finished->{revision} // 0, '<', $revoked_at, 'the snapshot is older than the revocation';
    ok !events($N1, 'rebuild started'), 'no rebuild from etcd';
    complete_ok($N1, 'N', 'snapshot', $hold->url);
    refused_ok($N1, 'N');
    my $seen = $watched->();
    cmp_ok $seen->{entries}, '>=', $KEYS, 'the first data.mdb at --db was complete (mdb_stat: '
        . "$seen->{entries} key records)" or diag $seen->{error};
    ok $seen->{rebuild_seen}, 'PATH.rebuild/data.mdb was written first';
    ok scalar(events($N1, 'watch established')), 'log: watch established';

    my @bad = grep { status_at($N1, $_->{secret}) != 200 } grep { $_ != $revoked } @sample;
    is scalar @bad, 0, scalar(@sample) - 1 . ' sampled keys (the newest among them) answer 200 at N';
    is status_at($N1, $revoked->{secret}), 401, 'the key revoked mid-copy is refused at N (through the watch)';
    my @errors = grep { /cannot open key store/ && !/No such file or directory/ } split /\n/, $N1->error_log;
    is_deeply \@errors, [], 'nginx never failed to open a store it found (no partial store)';
    diag sprintf('[ figure ] %d keys bootstrapped from a snapshot: %d bytes, %s ms (build %.3f s)',
                 $KEYS, $finished->{bytes} // 0, $finished->{ms} // '?', ($N1->syncd_health)[1]{buildSeconds} // 0);
};

# --- 2. faults: each refused, the next URL, then etcd --------------------------

my $N2;
subtest 'the peer killed mid-copy: refused, the next URL serves' => sub {
    my $dying = SnapshotRelay->new(upstream => $SNAPSHOT_PORT{$P}, hold_after => 256 * 1024);
    $N2 = start_edge(args => ['--bootstrap-from', join(',', $dying->url, snapshot_url($N1))]);
    my $watched = watch_store($N2->db);
    ok $dying->wait_held(60), 'the copy from P is under way' or diag $N2->syncd_log;
    ok !-e $N2->db . '/data.mdb', 'mid-copy: no data.mdb at --db';
    $P->stop_syncd('KILL');
    $dying->release;  # what P sent before it died goes on; then the end
    complete_ok($N2, 'N2', 'snapshot', snapshot_url($N1));
    refused_ok($N2, 'N2', [$dying->url, $CUT_SHORT, 'the peer killed mid-copy']);
    my ($bytes, $state) = $dying->progress;
    is $state, 'ended', "the relay saw P's side end after $bytes bytes";
    my $seen = $watched->();
    cmp_ok $seen->{entries}, '>=', $KEYS, 'the first data.mdb at --db was complete' or diag $seen->{error};
    ok $seen->{rebuild_seen}, 'PATH.rebuild/data.mdb was written first';
    ok !events($N2, 'rebuild started'), 'no rebuild from etcd';

    # P again, from its own store on disk, with a short write timeout (4 s)
    restart_syncd($P, '--snapshot-timeout', 4);
    ok $P->wait_synced(etcd_revision(), 60), 'P restarted and synced';
};

# A snapshot recorded now, replayed once etcd has compacted past it.
my $recorded = SnapshotRelay::get($SNAPSHOT_PORT{$N1});
is $recorded->{status}, 200, 'a snapshot of N1 recorded for the compaction case';
my $recorded_rev = $recorded->{headers}{'keyauth-revision'} // 0;

# A second cluster (one member) and its own peer edge.
my $etcd2 = EtcdCluster->new(members => 1);
my $ops2 = KeyauthTest->new(etcd => $etcd2->endpoints);
$ops2->key(account => $ops2->account->{id});
my $P2 = start_edge(etcd => $etcd2->endpoints);
ok $P2->wait_synced(etcd_revision($etcd2), 60), 'P2, a peer of another cluster, is synced';
isnt +(etcd_status($etcd2))[1], (etcd_status($etcd))[1], 'the two clusters have different ids';

my $N3;
subtest 'truncated, flipped, another cluster, compacted: each refused, then etcd' => sub {
    # compaction past the recorded snapshot: a write, then compact at the newest
    my $later = make_keys(1)->[0];
    my $rev = etcd_revision();
    cmp_ok $recorded_rev, '<', $rev, "the recorded snapshot ($recorded_rev) is behind etcd ($rev)";
    my ($rc, $out) = $etcd->etcdctl('compact', $rev, '--physical');
    is $rc, 0, "etcd compacted at $rev" or diag $out;

    # the cut and the flipped copy from two peers: a peer serves one copy at
    # a time, and N1 may still be ending the cut one (its next write fails)
    # when N3 asks for the next (429, seen under ASan beside busy loops)
    my $cut = SnapshotRelay->new(upstream => $SNAPSHOT_PORT{$N1}, cut_after => 1 << 20);
    my $flip = SnapshotRelay->new(upstream => $SNAPSHOT_PORT{$P}, flip => 1);
    my $replay = SnapshotRelay->new(replay => $recorded->{raw});
    my @urls = ($cut->url, $flip->url, snapshot_url($P2), $replay->url);
    my $t0 = time;
    $N3 = start_edge(args => ['--bootstrap-from', join(',', @urls)]);
    my $watched = watch_store($N3->db);
    complete_ok($N3, 'N3', 'etcd', undef);
    diag sprintf('[ figure ] four refusals, then etcd: complete %.1f s after the start', time - $t0);
    refused_ok($N3, 'N3',
        [$cut->url, $CUT_SHORT, 'a truncated snapshot'],
        [$flip->url, qr/checksum|sha-?256|digest|hash/i, 'a flipped byte'],
        [snapshot_url($P2), qr/cluster/i, "another cluster's peer"],
        [$replay->url, qr/compact/i, 'a compacted revision']);
    is +($cut->progress)[1], 'cut', 'the truncating relay did cut the answer';
    is $flip->connections, 1, 'the flipping relay served one copy';
    is $replay->connections, 1, 'the recorded snapshot was replayed once';
    ok scalar(events($N3, 'rebuild finished')), 'log: the rebuild from etcd finished';
    ok !events($N3, 'bootstrap finished'), 'no snapshot was taken';
    my $seen = $watched->();
    cmp_ok $seen->{entries}, '>=', $KEYS, 'the first data.mdb at --db was complete' or diag $seen->{error};
    ok wait_until(sub { status_at($P, $later->{secret}) == 200 }, 30, 'the key made before the compaction at P'),
        'P (watching) serves the key made before the compaction';
};

# --- 3. a stale peer ----------------------------------------------------------

subtest 'a stale peer (its etcd cut off) answers 503 NOT_READY' => sub {
    # 2 s: above the 1 s progress notifications a current edge gets
    restart_syncd($P2, '--max-lag', 2);
    ok $P2->wait_synced(undef, 60), 'P2 is healthy';
    $etcd2->stop_member(0);
    my $res;
    ok wait_until(sub { ($res = SnapshotRelay::get($SNAPSHOT_PORT{$P2}))->{status} == 503 }, 30, 'P2 to refuse'),
        'GET /snapshot: 503 once P2 is behind';
    is eval { decode_json($res->{body})->{error}{code} }, 'NOT_READY', 'error NOT_READY';
    ok $res->{headers}{'retry-after'}, 'with Retry-After';
    is +($P2->syncd_health)[0], 503, 'as its /healthz';
    cmp_ok metric($P2, 'keyauth_syncd_snapshot_refusals_total', 'reason="not_ready"') // 0, '>=', 1,
        'refusals_total{reason="not_ready"}';
    $etcd2->cont_member(0);
    ok $P2->wait_synced(undef, 60), 'etcd back: P2 healthy again';
};

# --- 4. the endpoint's limits ---------------------------------------------------

subtest 'limits: one copy at a time, a stalled client dropped, the peer applying meanwhile' => sub {
    is SnapshotRelay::get($SNAPSHOT_PORT{$P}, 'GET', '/other')->{status}, 404, 'GET /other: 404';
    is SnapshotRelay::get($SNAPSHOT_PORT{$P}, 'POST', '/snapshot')->{status}, 405, 'POST /snapshot: 405';

    # a copy cut short: a "snapshot cut short" log line, and the counter
    my $failed0 = metric($P, 'keyauth_syncd_snapshots_failed_total') // 0;
    my $cut0 = () = events($P, 'snapshot cut short');
    my $stalled = SnapshotRelay::stalled_get($SNAPSHOT_PORT{$P});
    my $t_stall = time;
    my $busy;
    ok wait_until(sub { ($busy = SnapshotRelay::get($SNAPSHOT_PORT{$P}))->{status} == 429 }, 30, '429'),
        'a second GET /snapshot while a client holds a copy: 429';
    is eval { decode_json($busy->{body})->{error}{code} }, 'SNAPSHOT_BUSY', 'error SNAPSHOT_BUSY';
    ok $busy->{headers}{'retry-after'}, 'with Retry-After';
    cmp_ok metric($P, 'keyauth_syncd_snapshot_refusals_total', 'reason="busy"') // 0, '>=', 1,
        'refusals_total{reason="busy"}';

    # P applies events while the copy is stuck
    my $before_k = etcd_revision();
    my $k = make_keys(1)->[0];
    ok $P->wait_synced(etcd_revision(), 30), 'P applied a key made meanwhile';
    is status_at($P, $k->{secret}), 200, 'which works at P';
    is scalar(() = events($P, 'snapshot cut short')), $cut0, 'before the stalled copy was dropped';

    ok wait_until(sub { (() = events($P, 'snapshot cut short')) > $cut0 }, 60, 'the drop'),
        'the stalled client is dropped (log: snapshot cut short)';
    my $dropped_after = time - $t_stall;
    ok $dropped_after >= 3 && $dropped_after < 20,
        sprintf('at the write timeout (4 s): after %.1f s', $dropped_after);
    is metric($P, 'keyauth_syncd_snapshots_failed_total'), $failed0 + 1, 'snapshots_failed_total +1';
    my $rest = SnapshotRelay::read_rest($stalled, 30);
    ok !defined $rest->{body}, 'the stalled client got no complete answer';

    my $s = SnapshotRelay::get($SNAPSHOT_PORT{$P});
    is $s->{status}, 200, 'then a new GET /snapshot: 200';
    like $s->{headers}{'content-type'} // '', qr{^application/octet-stream}, 'application/octet-stream';
    like $s->{headers}{'transfer-encoding'} // '', qr/chunked/i, 'chunked';
    is $s->{headers}{'keyauth-cluster-id'}, (etcd_status($etcd))[1], "Keyauth-Cluster-Id: etcd's cluster id";
    my $rev = $s->{headers}{'keyauth-revision'} // 0;
    ok $rev > $before_k && $rev <= etcd_revision(), "Keyauth-Revision $rev: past the key made meanwhile";
    like $s->{headers}{'keyauth-schema-version'} // '', qr/^\d+$/, 'Keyauth-Schema-Version';
    like $s->{headers}{trailer} // '', qr/Keyauth-Snapshot-Sha256/i, 'Trailer: Keyauth-Snapshot-Sha256';
    ok defined $s->{body}, 'the whole body arrived' or return;
    my $size = length $s->{body};
    cmp_ok $size, '>', 1 << 20, "$size bytes: more than any kernel buffers the stalled client had";
    is $s->{trailers}{'keyauth-snapshot-sha256'}, sha256_hex($s->{body}), 'the trailer is the body\'s SHA-256';
    cmp_ok metric($P, 'keyauth_syncd_snapshots_served_total') // 0, '>=', 1, 'snapshots_served_total';

    # the body is a store: keep it for the comparison with etcd below
    my $copy = tempdir('keyauth-snapcopy-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{KEYAUTH_KEEP});
    open my $fh, '>:raw', "$copy/data.mdb" or die $!;
    print $fh $s->{body};
    close $fh;
    $P->{served_copy} = $copy;
};

subtest 'a peer outside --snapshot-allow: 403' => sub {
    restart_syncd($P2, '--snapshot-allow', '10.0.0.0/8');
    ok $P2->wait_synced(undef, 60), 'P2 is healthy';
    my $res = SnapshotRelay::get($SNAPSHOT_PORT{$P2});
    is $res->{status}, 403, 'GET /snapshot from 127.0.0.1: 403';
    is eval { decode_json($res->{body})->{error}{code} }, 'FORBIDDEN', 'error FORBIDDEN';
    cmp_ok metric($P2, 'keyauth_syncd_snapshot_refusals_total', 'reason="forbidden"') // 0, '>=', 1,
        'refusals_total{reason="forbidden"}';
};

# --- every store equals etcd, record by record ---------------------------------

subtest 'every edge, and the snapshot P served, equal etcd record by record' => sub {
    my $rev = etcd_revision();
    for my $e ($P, $N1, $N2, $N3) {
        $e->wait_synced($rev, 60) or diag $e->syncd_log;
    }
    my $records = Mirror::etcd_records($etcd);  # nothing writes from here on
    my %edges = (P => $P, N1 => $N1, N2 => $N2, N3 => $N3);
    for my $name (sort keys %edges) {
        is_deeply [Mirror::differences($edges{$name}->db, $records)], [], "$name equals etcd";
    }
    is_deeply [Mirror::differences($P->{served_copy}, $records)], [], 'the snapshot P served equals etcd'
        if $P->{served_copy};
};

diag sprintf('[ figure ] t/69 wall time %.0f s', time - $STARTED);
done_testing;
