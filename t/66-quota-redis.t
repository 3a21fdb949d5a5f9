# Quotas across edges through Redis (issue 28, keyauth-syncd --quota-redis):
# two edges (nginx + keyauth-syncd) on one etcd member and one redis-server
# share an account's 300-unit daily quota, both hammered at 40 requests/s.
#  1. syncd's etcd exchange slowed to every 30 s, no Redis: the edges barely
#     hear each other, and the fleet admits far more than the quota;
#  2. the same with --quota-redis (every 200 ms): the fleet admits at most
#     the quota + what the other edge admits in one Redis exchange delay
#     (docs/scale-out.md, "Quotas across edges"); both totals are printed;
#  3. etcd's exchange every 1 s, Redis killed mid-run: within etcd's bound,
#     syncd alive and counting the failures;
#  4. Redis back: syncd reconnects, and the bound is Redis's again.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use EtcdCluster;
use KeyauthTest qw(wait_until);
use QuotaHammer;
use RedisServer;

my $QUOTA = 300;
my $CLIENTS = 4;          # per edge
my $CLIENT_RATE = 10;     # requests a second, each client
my $EDGE_RATE = $CLIENTS * $CLIENT_RATE;
my $REDIS_INTERVAL = 0.2;  # --quota-redis-interval, seconds

# A day quota: a run across midnight UTC would start a new period midway.
my $to_midnight = 86400 - time % 86400;
sleep $to_midnight + 1 if $to_midnight < 120;

my $etcd = EtcdCluster->new(members => 1);
my $ops = KeyauthTest->new(etcd => $etcd->endpoints);
my $redis = RedisServer->new(dir => $ops->dir);

my @edges = map { KeyauthTest->new(etcd => $etcd->endpoints) } 1 .. 2;

# (Re)starts each edge's syncd with these exchange options; waits until it
# has exchanged through etcd (and Redis, if on) since.
sub syncds {
    my ($etcd_ms, $with_redis) = @_;
    my @args = ('--usage-interval', '1', '--quota-interval', $etcd_ms);
    push @args, '--quota-redis', $redis->url, '--quota-redis-interval', $REDIS_INTERVAL * 1000 if $with_redis;
    for my $e (@edges) {
        $e->stop_syncd if $e->syncd_pid;
        $e->start_syncd(args => \@args);
        $e->wait_synced or die "syncd did not sync:\n" . $e->syncd_log;
    }
}

# A new account with the quota and a key, once both edges have it.
sub account_with_quota {
    my $acc = $ops->account(entitlement => 600000);
    $ops->ctl('account', 'update', $acc->{id}, '--quota', "$QUOTA/day");
    my $key = $ops->key(account => $acc->{id}, rate => 600000);
    my (undef, $status) = $etcd->etcdctl('endpoint', 'status', '-w', 'json');
    my ($rev) = $status =~ /"revision":(\d+)/;
    $_->wait_synced($rev) or die 'the edge did not get the new key' for @edges;
    return $key->{secret};
}

sub redis_up {
    my $want = shift;
    return wait_until(sub { !grep { ($_->syncd_metric('keyauth_syncd_quota_redis_up') // -1) != $want } @edges },
                      30, "every syncd's Redis connection " . ($want ? 'up' : 'down'));
}

# Hammers both edges; checks every client ended on QUOTA_EXCEEDED and prints
# the figures. Returns the total admitted.
sub run {
    my ($what, $secret, $bound, %o) = @_;
    my $r = QuotaHammer::hammer(\@edges, $secret, clients => $CLIENTS, rate => $CLIENT_RATE, %o);
    is($r->{other}, 0, "$what: every answer was 200 or 429 QUOTA_EXCEEDED");
    is($r->{refused}[$_], $CLIENTS, "$what: edge $_: each client ended on QUOTA_EXCEEDED") for 0 .. 1;
    diag(sprintf('%s: quota %d, 2 edges at %d requests/s each: admitted %d (%d + %d) in %.1f s, '
                 . 'overshoot %d (%.1f%%); the Redis bound %d', $what, $QUOTA, $EDGE_RATE, $r->{total},
                 @{ $r->{admitted} }, $r->{took}, $r->{total} - $QUOTA, 100 * ($r->{total} - $QUOTA) / $QUOTA,
                 $bound));
    cmp_ok($r->{total}, '>=', $QUOTA, "$what: the fleet admitted the whole quota");
    return $r->{total};
}

# The bounds (docs/scale-out.md): the quota, plus what the other edge admits
# at its offered rate in one exchange delay (its syncd publishes within an
# interval, this edge's reads within the next: 2 intervals + round trips,
# here 0.5 s for etcd's, 0.3 s for Redis's), plus one call from each client
# in flight at the edges.
my $redis_bound = $QUOTA + int($EDGE_RATE * (2 * $REDIS_INTERVAL + 0.3)) + $CLIENTS;
my $etcd_bound = $QUOTA + int($EDGE_RATE * (2 * 1.0 + 0.5)) + $CLIENTS;

# 1. etcd every 30 s, no Redis
syncds(30000, 0);
for my $e (@edges) {
    $e->start_nginx(http => "keyauth_zone keys:1m;\nkeyauth_usage_interval 1s;", no_init => 1,
                    locations => 'location /t/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }');
}
for my $e (@edges) {
    ok(wait_until(sub { -e $e->db . '.usage/quota.ledger' && -e $e->db . '.usage/data.mdb' }, 30,
                  'the ledger and the usage env'), 'the edge made its ledger and usage env');
}
syncds(30000, 0);  # its first etcd round now has the ledger and the edge id; the next in 30 s
my $slow = run('etcd every 30 s, no Redis', account_with_quota(), $redis_bound);
cmp_ok($slow, '>', $redis_bound, 'without Redis, the fleet admits more than the Redis bound allows');

# 2. the same with Redis
syncds(30000, 1);
ok(redis_up(1), 'syncd connected to Redis');
my $fast = run('etcd every 30 s, Redis every 200 ms', account_with_quota(), $redis_bound);
cmp_ok($fast, '<=', $redis_bound, 'with Redis, the fleet admitted at most the quota + one Redis exchange delay');
cmp_ok($fast, '<', $slow, 'Redis tightens the bound');
for my $e (@edges) {
    cmp_ok($e->syncd_metric('keyauth_syncd_quota_redis_published_total'), '>=', 1, 'use published to Redis');
    is($e->syncd_metric('keyauth_syncd_quota_redis_errors_total'), 0, 'no Redis error');
}

# 3. etcd every 1 s, Redis killed mid-run: etcd's bound, syncd alive
syncds(1000, 1);
ok(redis_up(1), 'syncd connected to Redis');
my $secret = account_with_quota();
my $down = run('Redis killed mid-run, etcd every 1 s', $secret, $redis_bound,
               after => 2, during => sub { $redis->stop });
diag("the etcd bound (1 s): $etcd_bound");
cmp_ok($down, '<=', $etcd_bound, 'Redis down: the fleet admitted at most etcd\'s bound');
for my $e (@edges) {
    ok(kill(0, $e->syncd_pid), 'syncd alive');
    cmp_ok($e->syncd_metric('keyauth_syncd_quota_redis_errors_total'), '>=', 1, 'the failed rounds counted');
    is($e->syncd_metric('keyauth_syncd_quota_redis_up'), 0, 'keyauth_syncd_quota_redis_up 0');
    my ($st) = $e->syncd_health;
    is($st, 200, 'syncd healthy: it mirrors on');
    like($e->syncd_log, qr/"quota redis failed"/, 'the failure logged');
}

# 4. Redis back: tight again
$redis->start;
ok(redis_up(1), 'syncd reconnected to Redis');
for my $e (@edges) {
    # the gauge is up once the connection is, the log line once its first
    # round has gone through: a moment later
    ok(wait_until(sub { $e->syncd_log =~ /"quota redis recovered"/ }, 30, 'the recovery in the log'),
       'the recovery logged') or diag $e->syncd_log;
    my $fails = () = $e->syncd_log =~ /"quota redis failed"/g;
    is($fails, 1, 'the failure logged once');
}
my $back = run('Redis back, etcd every 1 s', account_with_quota(), $redis_bound);
cmp_ok($back, '<=', $redis_bound, 'Redis back: the fleet admitted at most the Redis bound again');

done_testing;
