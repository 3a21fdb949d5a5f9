# Quotas across edges (issue 28): two edges (nginx + keyauth-syncd) on one
# etcd member share an account's 300-unit daily quota. Each syncd publishes
# its edge's use to etcd under <prefix>/quota/ and counts the other edge's
# into its ledger every --quota-interval (1 s); both edges are hammered at
# once, at a paced rate, until both refuse with QUOTA_EXCEEDED. The fleet may
# admit more than the quota, by at most what the other edge admits in one
# exchange delay (docs/scale-out.md, "Quotas across edges"): the total is
# printed and checked against that bound. Once the exchange has settled,
# each edge refuses, and keyauthd (on etcd) shows the fleet's use.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP ();
use MIME::Base64 ();
use POSIX ();
use Time::HiRes qw(time sleep);
use EtcdCluster;
use KeyauthTest qw(wait_until);

my $QUOTA = 300;
my $INTERVAL = 1.0;       # syncd's --quota-interval, seconds
my $CLIENTS = 4;          # per edge
my $CLIENT_RATE = 10;     # requests a second, each client
my $EDGE_RATE = $CLIENTS * $CLIENT_RATE;

# A day quota: a run across midnight UTC would start a new period midway.
my $to_midnight = 86400 - time % 86400;
sleep $to_midnight + 1 if $to_midnight < 90;

sub code_of { (KeyauthTest::json_body($_[0]) // {})->{error}{code} // '' }

my $etcd = EtcdCluster->new(members => 1);
my $ops = KeyauthTest->new(etcd => $etcd->endpoints);
my $acc = $ops->account(entitlement => 600000);
$ops->ctl('account', 'update', $acc->{id}, '--quota', "$QUOTA/day");
my $key = $ops->key(account => $acc->{id}, rate => 600000);

my @edges = map {
    my $e = KeyauthTest->new(etcd => $etcd->endpoints);
    $e->start_syncd(args => ['--usage-interval', '1', '--quota-interval', $INTERVAL * 1000]);
    $e->wait_synced or die "syncd did not sync:\n" . $e->syncd_log;
    $e->start_nginx(http => "keyauth_zone keys:1m;\nkeyauth_usage_interval 1s;", no_init => 1,
                    locations => 'location /t/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }');
    $e;
} 1 .. 2;
# each edge has its ledger and its edge id (made by nginx's first
# collection), and its syncd has exchanged once since
for my $e (@edges) {
    ok(wait_until(sub { -e $e->db . '.usage/quota.ledger' && -e $e->db . '.usage/data.mdb' }, 30,
                  'the ledger and the usage env'), 'the edge made its ledger and usage env');
}
my $since = time;
ok(wait_until(sub { ($_->syncd_metric('keyauth_syncd_quota_exchanged_timestamp_seconds') // 0) > $since }, 30,
              'an exchange round'), 'syncd exchanges quota use') for @edges;

# One client: paced at $CLIENT_RATE a second until its first QUOTA_EXCEEDED;
# writes "admitted quota_exceeded other".
sub client {
    my ($e, $n) = @_;
    my $out = $e->dir . "/hammer-$n.out";
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        my ($ok, $quota, $other) = (0, 0, 0);
        my $start = time;
        my $deadline = $start + 120;
        for (my $i = 0; time < $deadline; $i++) {
            my $wait = $start + $i / $CLIENT_RATE - time;
            sleep $wait if $wait > 0;
            my $res = eval { $e->request(GET => '/t/x', "Authorization: Bearer $key->{secret}") };
            my $st = $res ? $res->{status} : 0;
            if ($st == 200) { $ok++ }
            elsif ($st == 429 && code_of($res) eq 'QUOTA_EXCEEDED') { $quota++; last }
            else { $other++ }
        }
        open my $fh, '>', $out or die $!;
        print $fh "$ok $quota $other\n";
        close $fh;
        POSIX::_exit(0);
    }
    return [$pid, $out];
}

my $t0 = time;
my @kids = map { my $e = $_; map { client($edges[$e], "$e-$_") } 1 .. $CLIENTS } 0 .. 1;
my @admitted = (0, 0);
my @refused = (0, 0);
my $other = 0;
for my $i (0 .. $#kids) {
    my ($pid, $out) = @{ $kids[$i] };
    waitpid $pid, 0;
    open my $fh, '<', $out or die "no result from client $pid";
    my ($ok, $quota, $bad) = split ' ', <$fh>;
    my $edge = $i < $CLIENTS ? 0 : 1;
    $admitted[$edge] += $ok;
    $refused[$edge] += $quota;
    $other += $bad;
}
my $took = time - $t0;
my $total = $admitted[0] + $admitted[1];
is($other, 0, 'every answer was 200 or 429 QUOTA_EXCEEDED');
is($refused[$_], $CLIENTS, "edge $_: each client ended on QUOTA_EXCEEDED") for 0 .. 1;

# The bound: the quota, plus what the other edge admits in one exchange
# delay (its use is read by its syncd within an interval, put, and read by
# this edge's syncd within the next: 2 intervals + etcd's round trips, here
# 0.5 s), at its offered rate; each client may send one more at the edges.
my $delay = 2 * $INTERVAL + 0.5;
my $bound = $QUOTA + int($EDGE_RATE * $delay) + $CLIENTS;
diag(sprintf('quota %d, 2 edges at %d requests/s each, exchange interval %.1f s: admitted %d (%d + %d) in %.1f s, '
             . 'overshoot %d (%.1f%%); bound %d', $QUOTA, $EDGE_RATE, $INTERVAL, $total, @admitted, $took,
             $total - $QUOTA, 100 * ($total - $QUOTA) / $QUOTA, $bound));
cmp_ok($total, '>=', $QUOTA, 'the fleet admitted the whole quota');
cmp_ok($total, '<=', $bound, "the fleet admitted at most the quota + the other edge's use in one exchange delay");
cmp_ok($admitted[$_], '<', $QUOTA, "edge $_ alone admitted less than the quota: it counted the other's") for 0 .. 1;

# settled: etcd holds both edges' use, the whole fleet's, and each edge refuses
sub published {
    my ($rc, $out) = $etcd->etcdctl('get', '--prefix', '/keyauth/1/quota/', '-w', 'json');
    return -1 if $rc != 0;
    my $sum = 0;
    for my $kv (@{ JSON::PP::decode_json($out)->{kvs} // [] }) {
        my ($ver, $tag, $used) = unpack 'C x v Q<', MIME::Base64::decode_base64($kv->{value});
        $sum += $used if $ver == 1;
    }
    return $sum;
}
ok(wait_until(sub { published() == $total }, 30, 'both edges\' use in etcd'),
   "etcd holds the fleet's use: $total") or diag 'published: ' . published();
for my $i (0 .. 1) {
    my $res = $edges[$i]->request(GET => '/t/x', "Authorization: Bearer $key->{secret}");
    is($res->{status}, 429, "edge $i refuses once the exchange has settled");
    is(code_of($res), 'QUOTA_EXCEEDED', "edge $i: QUOTA_EXCEEDED");
}

# keyauthd on etcd: GET /v1/account shows the fleet's use
$ops->start_keyauthd;
my $quota;
ok(wait_until(sub {
    my $res = KeyauthTest::http_request($ops->keyauthd_port, GET => '/v1/account',
                                        "Authorization: Bearer $acc->{consoleToken}");
    $quota = (KeyauthTest::json_body($res) // {})->{quota};
    $quota && defined $quota->{used} && $quota->{used} == $total;
}, 30, 'GET /v1/account to show the fleet\'s use'), "GET /v1/account: used $total, both edges'")
    or diag explain $quota;
is($quota->{units}, $QUOTA, 'units');
is($quota->{remaining}, $QUOTA - $total, 'remaining: the quota less the fleet\'s use (below 0 by the overshoot)');

for my $e (@edges) {
    is($e->syncd_metric('keyauth_syncd_quota_exchange_errors_total'), 0, 'no exchange error');
    cmp_ok($e->syncd_metric('keyauth_syncd_quota_published_total'), '>=', 1, 'use published');
}

done_testing;
