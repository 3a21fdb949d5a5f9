# Many edges (docs/scale-out.md): three real etcd members, two stateless
# keyauthd (A and B) and two edges, each a real nginx over its own LMDB
# mirror kept by its own keyauth-syncd. Keys made on one keyauthd work on
# every edge, revocations reach every edge, and no fault a user will meet
# (a member killed or cut off, the whole cluster down, syncd paused, killed
# or behind a compaction) loses a record or fails a request. Every subtest
# ends by comparing each edge's LMDB with etcd, record by record.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use POSIX ();
use Time::Local ();
use Time::HiRes qw(time);
use JSON::PP qw(decode_json encode_json);
use EtcdCluster;
use KeyauthTest qw(wait_until);
use Mirror;

my $OUTAGE = $ENV{KEYAUTH_OUTAGE_SECONDS} // 30;
my $LOCATION = 'location /t/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }';

my $etcd = EtcdCluster->new(members => 3);
my $endpoints = $etcd->endpoints;

# the writers: keyauthctl and two keyauthd, all on etcd
my $A = KeyauthTest->new(etcd => $endpoints);
my $B = KeyauthTest->new(etcd => $endpoints);
$A->start_keyauthd;
$B->start_keyauthd;
my $acc = $A->account(entitlement => 600000);

sub start_edge {
    my $e = KeyauthTest->new(etcd => $endpoints);
    $e->start_syncd;
    $e->wait_synced or die "syncd did not sync:\n" . $e->syncd_log;
    $e->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATION, no_init => 1);
    return $e;
}
my @edges = (start_edge(), start_edge());

sub status_at {
    my ($edge, $secret) = @_;
    return $edge->request(GET => '/t/x', "Authorization: Bearer $secret")->{status};
}

# Every edge answers $status to the key, within $timeout seconds.
sub everywhere {
    my ($secret, $status, $timeout) = @_;
    return wait_until(sub { !grep { status_at($_, $secret) != $status } @edges },
                      $timeout // 20, "every edge to answer $status");
}

sub console {
    my ($t, $method, $path, $body) = @_;
    my @h = ("Authorization: Bearer $acc->{consoleToken}");
    push @h, 'Content-Type: application/json', \$body if defined $body;
    my $res = KeyauthTest::http_request($t->keyauthd_port, $method, $path, @h);
    $res->{json} = eval { decode_json($res->{body}) };
    return $res;
}

# As a console would: a 503 (etcd electing a leader, say) is tried again
# after its Retry-After, for a while.
sub create_key {
    my ($t) = @_;
    my $res;
    wait_until(sub {
        $res = console($t, POST => '/v1/keys',
            encode_json({ name => 'k', scopes => ['ip:read'], rateLimitPerMinute => 600000 }));
        $res->{status} != 503;
    }, 30, 'keyauthd to take the create');
    die "create failed: $res->{status} $res->{body}" unless $res->{status} == 201;
    return $res->{json};
}

sub etcd_revision {
    my ($rc, $out) = $etcd->etcdctl('endpoint', 'status', '-w', 'json');
    return 0 if $rc != 0;
    my ($rev) = $out =~ /"revision":(\d+)/;
    return $rev // 0;
}

sub mirrors_equal_etcd {
    my ($what) = @_;
    my $rev = etcd_revision();
    $_->wait_synced($rev, 60) or diag $_->syncd_log for @edges;
    my $records = Mirror::etcd_records($etcd);   # nothing writes meanwhile
    for my $i (0 .. $#edges) {
        is_deeply [Mirror::differences($edges[$i]->db, $records)], [], "$what: edge $i equals etcd, record by record";
    }
}

sub percentile {
    my ($p, @sorted) = @_;
    return $sorted[ int($p / 100 * $#sorted + 0.5) ];
}

subtest 'a key made on keyauthd A works on both edges' => sub {
    my $k = create_key($A);
    ok everywhere($k->{secret}, 200), 'accepted on every edge';
    is status_at($_, 'ka_' . ('x' x 32)), 401, 'an unknown key is refused' for @edges;
    mirrors_equal_etcd('after a create');
};

# Issue 47: the edges need no list of a deployment's key prefixes; the prefix
# lives in etcd (never mirrored), and every keyauthd reads it there.
subtest 'a key prefix set on etcd: new keys take it, keys of both prefixes work on both edges' => sub {
    my $before = create_key($A);
    is $A->ctl('config', 'set', 'key-prefix', 'edge2')->{keyPrefix}, 'edge2', 'keyauthctl --etcd config set key-prefix';
    my $k = create_key($B);
    like $k->{secret}, qr/^edge2_[0-9A-Za-z]{38}$/, 'the other keyauthd makes edge2_ keys';
    ok everywhere($k->{secret}, 200), 'an edge2_ key is accepted on every edge';
    ok everywhere($before->{secret}, 200), 'and a ka_ key still is';
    mirrors_equal_etcd('after a prefix change');
};

subtest 'revocations on keyauthd B reach both edges' => sub {
    my $n = 200;
    my $made = $A->ctl('key', 'create', '--account', $acc->{id}, '--name', 'r', '--scope', 'ip:read',
                       '--rate', 600000, '--count', $n)->{keys};
    is scalar @$made, $n, "$n keys made (keyauthctl pages them by 40)";
    ok everywhere($made->[-1]{secret}, 200), 'the last of them works everywhere';
    my (@lat, $late);
    for my $k (@$made) {
        my $res = console($B, POST => "/v1/keys/$k->{id}/revoke");
        my $t0 = time;
        $res->{status} == 200 or die "revoke: $res->{status} $res->{body}";
        # polled without pause (wait_until's 50 ms steps would be the figure)
        my $ok;
        while (!($ok = !grep { status_at($_, $k->{secret}) != 401 } @edges) && time - $t0 < 10) {
            select undef, undef, undef, 0.001;
        }
        $late++ unless $ok;
        push @lat, (time - $t0) * 1000;
    }
    ok !$late, "every one of $n revocations reached both edges";
    @lat = sort { $a <=> $b } @lat;
    diag sprintf('[ figure ] revocation to 401 on both edges, %d revocations: p50 %.1f ms, p99 %.1f ms, max %.1f ms',
                 $n, percentile(50, @lat), percentile(99, @lat), $lat[-1]);
    mirrors_equal_etcd('after 200 revocations');
};

subtest 'syncd paused (SIGSTOP) during 2000 writes, then continued' => sub {
    my $e = $edges[1];
    kill 'STOP', $e->syncd_pid;
    my $made = $A->ctl('key', 'create', '--account', $acc->{id}, '--name', 'p', '--scope', 'ip:read',
                       '--rate', 600000, '--count', 2000)->{keys};
    is scalar @$made, 2000, '2000 keys written while it was paused';
    is status_at($e, $made->[-1]{secret}), 401, 'the paused edge does not know them yet';
    is status_at($e, $made->[0]{secret}), 401, 'nor the first';
    kill 'CONT', $e->syncd_pid;
    ok everywhere($made->[-1]{secret}, 200, 30), 'continued: it catches up';
    mirrors_equal_etcd('after the pause');
};

subtest 'syncd killed (SIGKILL) again and again during writes' => sub {
    my $e = $edges[0];
    my $writer = fork // die;
    if ($writer == 0) {
        for (1 .. 30) {
            system(KeyauthTest::build_dir() . "/keyauthctl --etcd $endpoints key create --account $acc->{id} "
                 . "--name w --scope ip:read --rate 60 --count 20 >/dev/null 2>&1");
        }
        POSIX::_exit(0);
    }
    my $kills = 0;
    while (waitpid($writer, POSIX::WNOHANG()) == 0) {
        $e->stop_syncd('KILL');
        $kills++;
        $e->start_syncd;
        wait_until(sub { ($e->syncd_health)[0] == 200 }, 30, 'syncd up again');
    }
    cmp_ok $kills, '>=', 2, "killed $kills times during the writes";
    mirrors_equal_etcd('after the kills');
};

subtest 'a member killed: writes and propagation go on' => sub {
    $etcd->kill_member(0);
    my $k = create_key($B);
    ok everywhere($k->{secret}, 200), 'a key made with one member gone works everywhere';
    my $res;
    wait_until(sub { ($res = console($A, POST => "/v1/keys/$k->{id}/revoke"))->{status} != 503 }, 30, 'the revoke');
    is $res->{status}, 200, 'and is revoked';
    ok everywhere($k->{secret}, 401), 'everywhere';
    $etcd->restart_member(0);
    mirrors_equal_etcd('with a member killed');
};

subtest 'a member cut off (SIGSTOP): syncd moves to a healthy one' => sub {
    $etcd->stop_member(1);
    my $k = create_key($A);
    ok everywhere($k->{secret}, 200, 30), 'the key arrives everywhere';
    is console($B, POST => "/v1/keys/$k->{id}/revoke")->{status}, 200, 'revoked';
    ok everywhere($k->{secret}, 401, 30), 'everywhere';
    $etcd->cont_member(1);
    mirrors_equal_etcd('with a member cut off');
};

subtest 'compaction past syncd\'s revision: a rebuild, and no request fails' => sub {
    my $e = $edges[1];
    my $stable = create_key($A);
    my $old = create_key($A);
    ok everywhere($old->{secret}, 200), 'keys every edge knows';
    $e->stop_syncd;
    my $new = create_key($A);
    is console($A, POST => "/v1/keys/$old->{id}/revoke")->{status}, 200, 'while syncd is stopped, a revocation';
    my $rev = etcd_revision();
    my ($rc, $out) = $etcd->etcdctl('compact', $rev, '--physical');
    is $rc, 0, "compacted at $rev" or diag $out;
    my $client = $e->background_client(120, '/t/x', "Authorization: Bearer $stable->{secret}");
    wait_until(sub { $client->successes > 0 }, 20, 'requests to flow');
    $e->start_syncd;
    # every answer 200 for 10 fresh connections in a row: both workers moved
    my ($in_a_row, $took) = (0);
    my $t0 = time;
    while ($in_a_row < 10 && time - $t0 < 30) {
        if (status_at($e, $new->{secret}) == 200) { $took //= time; $in_a_row++ }
        else { ($took, $in_a_row) = (undef, 0); select undef, undef, undef, 0.001 }
    }
    ok $in_a_row >= 10, 'the key made meanwhile works on the rebuilt edge, on every worker';
    my ($swapped) = reverse($e->syncd_log =~ /"ts":"([^"]+)","event":"rebuild finished"/g);  # the last
    if ($swapped && $took) {
        my ($y, $mo, $d, $h, $mi, $sec) = $swapped =~ /^(\d+)-(\d+)-(\d+)T(\d+):(\d+):([\d.]+)Z$/;
        my $at = Time::Local::timegm(0, $mi, $h, $d, $mo - 1, $y) + $sec;
        my $delay = $took - $at;
        diag sprintf('[ figure ] the swapped store in use by the workers %.0f ms after syncd swapped it', $delay * 1000);
        cmp_ok $delay, '<', 5, 'the workers pick the swapped store up at their next check (once a second)';
    }
    ok wait_until(sub { status_at($e, $old->{secret}) == 401 }, 5, 'the revocation'),
        'the revocation made meanwhile holds';
    cmp_ok $e->syncd_metric('keyauth_syncd_rebuilds_total') // 0, '>', 0, 'syncd counted a rebuild';
    wait_until(sub { $client->successes > 0 }, 5, 'more requests');
    my ($okays, $fails) = $client->stop;
    is $fails, 0, "no request failed before, during or after the swap ($okays answered 200)";
    mirrors_equal_etcd('after the rebuild');
};

subtest "every member down for $OUTAGE s: the edges keep serving" => sub {
    my $k = create_key($A);
    ok everywhere($k->{secret}, 200), 'a key every edge knows';
    # fifty requests a second on each edge for the whole outage
    my @clients = map { $_->background_client({ seconds => $OUTAGE + 120, pause => 0.02 }, '/t/x',
                                              "Authorization: Bearer $k->{secret}") } @edges;
    $etcd->stop_member($_) for 0 .. 2;
    my $t0 = time;
    my $res = console($A, POST => '/v1/keys', encode_json({ name => 'x', scopes => ['ip:read'], rateLimitPerMinute => 60 }));
    is $res->{status}, 503, 'keyauthd answers 503';
    is $res->{json}{error}{code}, 'STORE_UNAVAILABLE', 'with the JSON error STORE_UNAVAILABLE';
    cmp_ok time - $t0, '<', 10, 'within the request deadline';
    wait_until(sub { time - $t0 >= $OUTAGE }, $OUTAGE + 5, 'the outage to last');
    cmp_ok $edges[0]->syncd_metric('keyauth_syncd_lag_seconds'), '>=', $OUTAGE / 2, 'syncd shows its lag growing';
    is $edges[0]->syncd_metric('keyauth_syncd_etcd_up'), 0, 'and etcd down';
    $etcd->cont_member($_) for 0 .. 2;
    for my $i (0 .. $#clients) {
        my ($okays, $fails) = $clients[$i]->stop;
        is $fails, 0, "edge $i: no request failed during the outage ($okays answered)";
        cmp_ok $okays, '>', 0, "edge $i answered";
    }
    my $after = create_key($B);
    ok everywhere($after->{secret}, 200, 60), 'after the outage a new key reaches every edge';
    mirrors_equal_etcd('after the outage');
};

subtest 'a new edge bootstraps from empty' => sub {
    my $keys = Mirror::count($edges[0]->db, 'keys_by_hash');
    my $e = KeyauthTest->new(etcd => $endpoints);
    my $t0 = time;
    $e->start_syncd;
    ok $e->wait_synced(etcd_revision(), 120), 'the new edge is complete';
    my $secs = time - $t0;
    diag sprintf('[ figure ] bootstrap of an empty edge: %d keys in %.2f s, %.0f keys/s', $keys, $secs, $keys / $secs);
    is_deeply [Mirror::differences($e->db, $etcd)], [], 'the new edge equals etcd, record by record';
    $e->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATION, no_init => 1);
    my $k = create_key($A);
    ok wait_until(sub { status_at($e, $k->{secret}) == 200 }, 20, 'a new key on the new edge'), 'and it follows new writes';
};

done_testing;
