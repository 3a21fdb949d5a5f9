# keyauth_shared_limits: three edges (three nginx on one store) share one
# key's limit through a real redis-server. A 600/min key hammered on all
# three admits the key's rate plus a bounded overshoot, not three times it;
# with Redis gone each edge keeps its own limit and nothing fails; with Redis
# back the sharing resumes. A peer that is not Redis never hurts a worker.
#
# The bound (docs/shared-limits.md): what other edges admitted but this
# edge has not folded yet, at most their admissions over the lag, the lag
# being two intervals (theirs to publish, this edge's to read) plus the
# round trip. Here the interval is 250 ms; the lag allowed is 2 s, for a
# busy machine whose timers fire late.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use KeyauthTest qw(wait_until http_request);
use RedisServer;

my $RATE = 600;            # per minute
my $PER_S = $RATE / 60;    # 10 a second
my $LAG = 2;               # seconds of another edge's admissions not yet folded
my $SECONDS = 10;          # of each hammering phase

my $a = KeyauthTest->new;
my $redis = RedisServer->new(dir => $a->dir);
my $acc = $a->account(entitlement => 100000);
my $key = $a->key(account => $acc->{id}, rate => $RATE);
my $bystander = $a->key(account => $acc->{id}, rate => $RATE);

my $locations = $KeyauthTest::IP_AND_STATUS;

sub edge {
    my ($t, $url, %o) = @_;
    $t->start_nginx(
        no_init => $o{no_init}, db => $a->db,
        http => "keyauth_zone keys:1m;\n"
              . ($o{usage} ? '' : "keyauth_usage_db off;\n")
              . "keyauth_shared_limits $url interval=250ms timeout=1s;",
        locations => $locations);
    return $t;
}

my @edges = (edge($a, $redis->url, usage => 1),
             map { edge(KeyauthTest->new, $redis->url, no_init => 1) } 1 .. 2);

sub metric {
    my ($t, $name) = @_;
    my $body = $t->request(GET => '/status')->{body};
    return $body =~ /^\Q$name\E (\d+)$/m ? $1 : undef;
}

sub edge_id {
    my $t = shift;
    return $t->request(GET => '/status')->{body} =~ /^keyauth_shared_limits_edge_info\{edge="([0-9a-f]{16})"\} 1$/m
        ? $1 : undef;
}

sub get { my ($t, $secret) = @_; $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $secret") }

# Waits until the edge has read every entry there is: its folded count stays
# the same over three of its exchanges (nobody serves requests meanwhile, so
# nothing new is published).
sub read_all {
    my ($t) = @_;
    my $folded = metric($t, 'keyauth_shared_limits_folded_keys_total');
    my $at = metric($t, 'keyauth_shared_limits_exchanges_total');
    return wait_until(sub {
        my ($f, $x) = (metric($t, 'keyauth_shared_limits_folded_keys_total'),
                       metric($t, 'keyauth_shared_limits_exchanges_total'));
        ($folded, $at) = ($f, $x) if $f != $folded;
        return $x >= $at + 3;
    }, 30, 'the edge to have read the stream');
}

# Every edge says it shares, before anything is measured.
for my $i (0 .. 2) {
    ok wait_until(sub { (metric($edges[$i], 'keyauth_shared_limits_up') // 0) == 1 }, 30,
                  "edge $i exchanging"), "edge $i exchanges with Redis";
}

# Hammers each edge in a child of its own for $seconds; returns, per edge,
# { 200 => n, 429 => n, other => n }. $GAP is set to the time since the
# previous hammering ended: a key idle that long gets that much credit back
# at every edge, which the edges may spend before they hear of each other.
my ($LAST_END, $GAP) = (time, 0);
sub hammer {
    my ($seconds, $secret, @which) = @_;
    $GAP = time - $LAST_END;
    my @kids;
    for my $i (@which) {
        my $out = $a->dir . "/hammer-$i-" . time;
        my $pid = fork // die "fork: $!";
        if ($pid == 0) {
            my %n = (200 => 0, 429 => 0, other => 0);
            my $end = time + $seconds;
            while (time < $end) {
                my $st = eval { get($edges[$i], $secret)->{status} } // 0;
                $n{ $st == 200 || $st == 429 ? $st : 'other' }++;
                # a few hundred a second per edge, twenty times the key's
                # rate at least: a tight loop only burns the machine's CPU
                sleep 0.002;
            }
            open my $fh, '>', $out or POSIX::_exit(1);
            print $fh "$n{200} $n{429} $n{other}\n";
            close $fh;
            POSIX::_exit(0);
        }
        push @kids, [$pid, $out];
    }
    my @res;
    for my $k (@kids) {
        waitpid $k->[0], 0;
        open my $fh, '<', $k->[1] or die "no hammer result: $!";
        my @n = split ' ', <$fh>;
        push @res, { 200 => $n[0], 429 => $n[1], other => $n[2] };
    }
    $LAST_END = time;
    return @res;
}

sub total { my $s = 0; $s += $_->{200} for @_; $s }

subtest 'an edge learns of a key it has not served yet' => sub {
    my $admitted = 0;
    for (1 .. 2000) {
        my $st = get($edges[0], $key->{secret})->{status};
        last if $st == 429;
        $admitted++;
    }
    cmp_ok $admitted, '>=', $RATE, "edge 0 admits the burst of $RATE";
    cmp_ok $admitted, '<', 2000, '... then 429';
    # edge 1 never saw the key: once edge 0's spending reaches it, it refuses
    my $before = 0;
    my $refused = wait_until(sub {
        my $st = get($edges[1], $key->{secret})->{status};
        $before++ if $st == 200;
        return $st == 429;
    }, 30, 'edge 1 refusing the key');
    ok $refused, 'edge 1 refuses the key that edge 0 spent';
    cmp_ok $before, '<', $RATE / 4, "edge 1 admitted $before polls first, far from its own burst of $RATE";
    cmp_ok metric($edges[1], 'keyauth_shared_limits_folded_keys_total'), '>=', 1,
        'edge 1 counts the folded keys';
    is get($edges[1], $bystander->{secret})->{status}, 200, 'another key is untouched';
};

subtest 'hammered on three edges, the key admits its rate plus the bounded overshoot' => sub {
    my $start = time;
    my @r = hammer($SECONDS, $key->{secret}, 0 .. 2);
    my $took = time - $start;
    my $total = total(@r);
    my $bound = int($PER_S * ($took + 1) + 2 * $PER_S * $LAG + 3 * $PER_S * $GAP);
    my $floor = int(0.7 * $PER_S * ($SECONDS - 1));
    diag sprintf 'shared: %s admitted in %.1f s (edges %s), bound %d', $total, $took,
        join('/', map { $_->{200} } @r), $bound;
    is_deeply [map { $_->{other} } @r], [0, 0, 0], 'every answer is 200 or 429';
    cmp_ok $total, '<=', $bound, "at most rate x time + 2 edges x rate x ${LAG}s (3 x rate x time unshared)";
    cmp_ok $total, '>=', $floor, 'and no request is charged twice (at least 70% of the rate)';
};

subtest 'Redis stopped: each edge keeps its own limit, and nothing fails' => sub {
    $redis->stop;
    for my $i (0 .. 2) {
        ok wait_until(sub { (metric($edges[$i], 'keyauth_shared_limits_up') // 1) == 0 }, 30,
                      "edge $i noticing"), "edge $i reports keyauth_shared_limits_up 0";
    }
    my $start = time;
    my @r = hammer($SECONDS, $key->{secret}, 0 .. 2);
    my $took = time - $start;
    diag sprintf 'local: edges admitted %s in %.1f s', join('/', map { $_->{200} } @r), $took;
    is_deeply [map { $_->{other} } @r], [0, 0, 0], 'every answer is 200 or 429';
    for my $i (0 .. 2) {
        cmp_ok $r[$i]{200}, '<=', int($PER_S * ($took + 1 + $GAP)), "edge $i: no more than its own rate";
        cmp_ok $r[$i]{200}, '>=', int(0.7 * $PER_S * ($SECONDS - 1)), "edge $i: its own rate, not a share";
    }
    for my $i (0 .. 2) {
        my @said = $edges[$i]->error_log =~ /keyauth_shared_limits: redis:\/\/127\.0\.0\.1:\d+: [^;]+; every key's limit is this edge's alone/g;
        is scalar @said, 1, "edge $i said so once in its error log, whatever the retries";
        unlike $edges[$i]->error_log, qr/\[error\].*(connect|recv)\(\) .*failed/,
            "edge $i: nor do nginx's own lines repeat it on every try";
    }
    cmp_ok metric($edges[0], 'keyauth_shared_limits_failures_total'), '>=', 2, 'and counts each failed try';
};

subtest 'Redis back: sharing resumes' => sub {
    $redis->start;
    for my $i (0 .. 2) {
        ok wait_until(sub { (metric($edges[$i], 'keyauth_shared_limits_up') // 0) == 1 }, 30,
                      "edge $i back"), "edge $i reports keyauth_shared_limits_up 1";
        like $edges[$i]->error_log, qr/keyauth_shared_limits: sharing rate limits through redis:\/\/127\.0\.0\.1:\d+ again/,
            "edge $i says it shares again";
    }
    my $start = time;
    my @r = hammer($SECONDS, $key->{secret}, 0 .. 2);
    my $took = time - $start;
    my $total = total(@r);
    my $bound = int($PER_S * ($took + 1) + 2 * $PER_S * $LAG + 3 * $PER_S * $GAP);
    diag sprintf 'resumed: %s admitted in %.1f s (edges %s), bound %d', $total, $took,
        join('/', map { $_->{200} } @r), $bound;
    is_deeply [map { $_->{other} } @r], [0, 0, 0], 'every answer is 200 or 429';
    cmp_ok $total, '<=', $bound, 'the key is one limit across the edges again';
};

subtest 'Redis frozen (SIGSTOP): the exchange times out, requests are never held' => sub {
    kill 'STOP', $redis->{pid};
    for my $i (0 .. 2) {
        ok wait_until(sub { (metric($edges[$i], 'keyauth_shared_limits_up') // 1) == 0 }, 30,
                      "edge $i timing out"), "edge $i reports keyauth_shared_limits_up 0";
    }
    like $edges[0]->error_log, qr/keyauth_shared_limits: redis:\/\/127\.0\.0\.1:\d+: timed out waiting for the answer/,
        'the error log says it timed out';
    my @st = map { get($edges[$_], $bystander->{secret})->{status} } 0 .. 2;
    is_deeply \@st, [200, 200, 200], 'every edge answers meanwhile';
    kill 'CONT', $redis->{pid};
    for my $i (0 .. 2) {
        ok wait_until(sub { (metric($edges[$i], 'keyauth_shared_limits_up') // 0) == 1 }, 30,
                      "edge $i back"), "edge $i shares again once Redis answers";
    }
};

subtest 'a reload keeps the edge sharing, under the same edge id' => sub {
    my $id = edge_id($edges[1]);
    like $id, qr/^[0-9a-f]{16}$/, 'keyauth_status names the edge id';
    isnt $id, edge_id($edges[0]), 'each edge has its own';
    my $before = metric($edges[1], 'keyauth_shared_limits_exchanges_total');
    my @old = $edges[1]->worker_pids;
    ok $edges[1]->signal_nginx('reload'), 'nginx -s reload';
    ok wait_until(sub {
        my %old = map { $_ => 1 } @old;
        my @now = $edges[1]->worker_pids;
        return @now && !grep { $old{$_} } @now;
    }, 30, 'new workers'), 'new workers took over';
    ok wait_until(sub { (metric($edges[1], 'keyauth_shared_limits_exchanges_total') // 0) > $before + 4 }, 30,
                  'exchanges after the reload'), 'the new worker 0 exchanges';
    is metric($edges[1], 'keyauth_shared_limits_up'), 1, 'and shares';
    is edge_id($edges[1]), $id, 'under the same edge id';
    # its own entries are still its own: a key spent only at edge 1 is not
    # charged twice there (6 a minute: one refill in 10 s)
    my $solo = $a->key(account => $acc->{id}, rate => 6);
    my $n = 0;
    $n++ while $n < 20 && get($edges[1], $solo->{secret})->{status} == 200;
    is $n, 6, 'edge 1 admits the burst of 6';
    my $folded = metric($edges[0], 'keyauth_shared_limits_folded_keys_total');
    ok wait_until(sub { metric($edges[0], 'keyauth_shared_limits_folded_keys_total') > $folded }, 30,
                  'edge 0 folding'), 'edge 0 learns of it';
    # two more exchanges of edge 1 (reading its own entries back): what is
    # tested is that they charge nothing
    my $x = metric($edges[1], 'keyauth_shared_limits_exchanges_total');
    ok wait_until(sub { metric($edges[1], 'keyauth_shared_limits_exchanges_total') >= $x + 2 }, 30,
                  'edge 1 exchanging'), 'edge 1 read the stream again';
    is get($edges[1], $solo->{secret})->{status}, 429, 'edge 1 refuses the next';
    like KeyauthTest::header(get($edges[1], $solo->{secret}), 'RateLimit') // '', qr/^"per-key";r=0;t=(5\d|60)$/,
        'and its state holds its own spending once, not twice (t= a minute, not two)';
};

subtest 'the stream in Redis expires on its own' => sub {
    my $ttl = $redis->command('TTL', 'keyauth:spent') // '';
    like $ttl, qr/^:(\d+)\r\n$/, 'the stream has a time to live';
    my ($s) = $ttl =~ /^:(\d+)/;
    ok defined $s && $s > 0 && $s <= 60, "of at most 60 s ($ttl)";
};

# A batch (docs/shared-limits.md) naming a key $times times.
sub batch {
    my ($key_id, $count, $rate, $times) = @_;
    (my $hex = $key_id) =~ s/^key_//;
    return chr(1) . (pack('H*', $hex) . pack('VV', $count, $rate)) x $times;
}

subtest 'a hostile stream charges a key at most a burst per exchange, two in all' => sub {
    # whoever holds the ACL user writes well-formed entries: counts of 2^32-1
    # at a rate of 1 a minute (each request a minute), the key 1,024 times an
    # entry, under forged edge ids. Before the bound, a day of lockout.
    my $victim = $a->key(account => $acc->{id}, rate => $RATE);
    is get($edges[1], $victim->{secret})->{status}, 200, 'edge 1 serves the key';
    my @capped = map { metric($_, 'keyauth_shared_limits_capped_keys_total') } @edges;
    my $end = time + 2;    # entries over several exchanges
    my ($i, $written) = (0, 0);
    while (time < $end && $i < 40) {
        $written++ if ($redis->command('XADD', 'keyauth:spent', '*', 'e', sprintf('%016x', 0xbad00 + $i++),
                                       's', batch($victim->{id}, 0xffffffff, 1, 1024)) // '') =~ /^\$/;
        sleep 0.05;
    }
    is $written, $i, "$i hostile entries written over 2 s";
    for my $e (0 .. 2) {
        ok wait_until(sub { metric($edges[$e], 'keyauth_shared_limits_capped_keys_total') > $capped[$e] }, 30,
                      "edge $e capping"), "edge $e charged the bound, not what the entries said";
        my $r = get($edges[$e], $victim->{secret});
        is $r->{status}, 429, "edge $e refuses the key";
        my $retry = KeyauthTest::header($r, 'Retry-After') // 0;
        # two bursts ahead (120 s at its rate) less the burst tolerance
        # (59.9 s): about 60 s, rounded up
        cmp_ok $retry, '<=', 61, "edge $e: Retry-After $retry s, two bursts of debt at most (not a day)";
    }
    is get($edges[0], $bystander->{secret})->{status}, 200, 'another key is untouched';
};

subtest "Redis's ids go backwards: detected, counted, logged, and sharing resumes" => sub {
    # an entry an hour ahead of Redis's clock, read by every edge; then the
    # stream is lost (a failover to a host whose clock is behind, or expiry):
    # the new entries' ids are below what every edge read last. First every
    # edge reads what earlier subtests left (the last request's entry, say),
    # so that the fold awaited below is the entry from the future.
    ok read_all($edges[$_]), "edge $_ has read every entry before" for 0 .. 2;
    my @folded = map { metric($_, 'keyauth_shared_limits_folded_keys_total') } @edges;
    my $future_ms = int(time + 3600) * 1000;
    # entries added after it get ids after it (future_ms-1, ...), so an edge
    # may have read up to one of those
    my $future = "$future_ms-0";
    like $redis->command('XADD', 'keyauth:spent', $future, 'e', 'ffffffffffffffff',
                         's', batch('key_' . ('ab' x 12), 1, 600, 1)) // '', qr/^\$/, 'an entry an hour ahead';
    for my $e (0 .. 2) {
        ok wait_until(sub { metric($edges[$e], 'keyauth_shared_limits_folded_keys_total') > $folded[$e] }, 30,
                      "edge $e reading it"), "edge $e read past it";
    }
    like $redis->command('DEL', 'keyauth:spent') // '', qr/^:1/, 'the stream is lost';
    # every edge publishes (one request each): its entry's id tells
    for my $e (0 .. 2) {
        is get($edges[$e], $bystander->{secret})->{status}, 200, "edge $e serves a request";
        ok wait_until(sub { (metric($edges[$e], 'keyauth_shared_limits_resyncs_total') // 0) >= 1 }, 30,
                      "edge $e resyncing"), "edge $e counts the resync";
        like $edges[$e]->error_log, qr/keyauth_shared_limits: redis:\/\/127\.0\.0\.1:\d+: the ids of stream "keyauth:spent" went backwards \(read up to \Q$future_ms\E-\d+, now \d+-\d+\)/,
            "edge $e says so in its error log";
        ok wait_until(sub { (metric($edges[$e], 'keyauth_shared_limits_up') // 0) == 1 }, 30,
                      "edge $e up"), "edge $e shares again (keyauth_shared_limits_up 1)";
    }
    # and sharing works: a key spent at edge 0 is refused at edge 2
    my $fresh = $a->key(account => $acc->{id}, rate => $RATE);
    my $admitted = 0;
    for (1 .. 2000) {
        last if get($edges[0], $fresh->{secret})->{status} == 429;
        $admitted++;
    }
    cmp_ok $admitted, '>=', $RATE, "edge 0 admits the burst of $RATE";
    my $before = 0;
    ok wait_until(sub {
        my $st = get($edges[2], $fresh->{secret})->{status};
        $before++ if $st == 200;
        return $st == 429;
    }, 30, 'edge 2 refusing'), 'edge 2 refuses the key edge 0 spent';
    cmp_ok $before, '<', $RATE / 4, "edge 2 admitted $before polls first, far from its own burst";
};

subtest 'a peer that is not Redis: refused, logged, and no worker is hurt' => sub {
    # the edge's own HTTP port answers HTTP to the pipeline
    my $odd = KeyauthTest->new;
    my $port = KeyauthTest::free_port();
    $odd->start_nginx(
        no_init => 1, db => $a->db,
        http => "keyauth_zone keys:1m;\nkeyauth_usage_db off;\n"
              . "keyauth_shared_limits redis://127.0.0.1:$port interval=100ms;\n"
              . "server { listen 127.0.0.1:$port; return 400 \"no\"; }",
        locations => $locations);
    ok wait_until(sub { $odd->worker_pids == 2 }, 30, 'both workers'), 'both workers started';
    my @workers = sort $odd->worker_pids;
    ok wait_until(sub { (metric($odd, 'keyauth_shared_limits_failures_total') // 0) >= 3 }, 30,
                  'failed exchanges'), 'the exchanges fail';
    like $odd->error_log, qr/keyauth_shared_limits: redis:\/\/127\.0\.0\.1:$port: (unreadable Redis reply|Redis sent bytes nobody asked for|the connection was closed)/,
        'the error log says why';
    is get($odd, $bystander->{secret})->{status}, 200, 'keys are still served, on local limits';
    is_deeply [sort $odd->worker_pids], \@workers, 'the same workers: none crashed';
    unlike $odd->error_log, qr/signal \d+|\[alert\]/, 'no worker exited on a signal';
};

done_testing;
