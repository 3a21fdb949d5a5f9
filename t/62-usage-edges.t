# Usage on many edges: each edge's nginx collects its counts into its own
# usage env, its keyauth-syncd publishes the totals to etcd under
# <prefix>/usage/<account><key>/<edge id>, and the sum over the edges is the
# key's usage. One etcd member, two edges (nginx + syncd), short intervals.
# Usage over time (issue 29): each syncd also publishes its edge's hour and
# day buckets under <prefix>/usage_hours|usage_days/<period>/<account><key>/
# <edge id>, and GET /v1/usage on keyauthd (etcd mode) is the exact sum.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time);
use JSON::PP qw(decode_json);
use MIME::Base64 qw(decode_base64);
use POSIX qw(strftime floor);
use EtcdCluster;
use KeyauthTest qw(wait_until);

my $etcd = EtcdCluster->new(members => 1);
my $ops = KeyauthTest->new(etcd => $etcd->endpoints);
my $acc = $ops->account(entitlement => 600000);
# 6/min: each edge has its own burst of 6, then 429s
my $key = $ops->key(account => $acc->{id}, rate => 6);

my @edges = map {
    my $e = KeyauthTest->new(etcd => $etcd->endpoints);
    $e->start_syncd(args => ['--usage-interval', '1']);
    $e->wait_synced or die "syncd did not sync:\n" . $e->syncd_log;
    $e->start_nginx(http => "keyauth_zone keys:1m;\nkeyauth_usage_interval 1s;", no_init => 1,
                    locations => 'location /t/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }');
    $e;
} 1 .. 2;

# What etcd holds for the account: { key hex => { edge hex => [allowed, limited, last ms] } }
sub published {
    (my $acc_hex = $acc->{id}) =~ s/^acc_//;
    my ($rc, $out) = $etcd->etcdctl('get', '--prefix', "/keyauth/1/usage/$acc_hex", '-w', 'json');
    return {} if $rc != 0;
    my %p;
    for my $kv (@{ decode_json($out)->{kvs} // [] }) {
        my ($k, $edge) = decode_base64($kv->{key}) =~ m{/usage/\Q$acc_hex\E([0-9a-f]{24})/([0-9a-f]{24})$} or next;
        my ($ver, @v) = unpack 'v x6 Q< Q< q<', decode_base64($kv->{value});
        $p{$k}{$edge} = \@v if $ver == 1;
    }
    return \%p;
}

(my $key_hex = $key->{id}) =~ s/^key_//;
my %sent = (200 => 0, 429 => 0);
my $before = int(time);
my $events_before = $edges[0]->syncd_metric('keyauth_syncd_events_total');
for my $e (@edges) {
    for (1 .. 8) {
        my $st = $e->request(GET => '/t/x', "Authorization: Bearer $key->{secret}")->{status};
        $sent{$st}++;
    }
}
my $after = time;
is($sent{200} + $sent{429}, 16, 'every request answered 200 or 429');
cmp_ok($sent{200}, '>=', 12, 'each edge let its burst through');

my $sum;
ok(wait_until(sub {
    my $p = published()->{$key_hex} or return 0;
    $sum = [0, 0, 0];
    for my $v (values %$p) {
        $sum->[0] += $v->[0];
        $sum->[1] += $v->[1];
        $sum->[2] = $v->[2] if $v->[2] > $sum->[2];
    }
    keys %$p == 2 && $sum->[0] == $sent{200} && $sum->[1] == $sent{429};
}, 60, 'both edges to publish'), 'the edges\' totals add up to what was sent')
    or diag explain [published(), \%sent];
is(scalar keys %{ published()->{$key_hex} }, 2, 'one record per edge');
my $last = $sum->[2] / 1000;
ok($last >= $before && $last <= $after + 1, "lastUsedAt $last within [$before, $after]");

# each edge's buckets of the key: one hour record and one day record per
# edge (the traffic took well under a minute: two hours at most)
sub bucket_records {
    my $table = shift;
    my ($rc, $out) = $etcd->etcdctl('get', '--prefix', "/keyauth/1/$table/", '--keys-only', '-w', 'json');
    return [] if $rc != 0;
    return [ grep { m{/[0-9a-f]{24}\Q$key_hex\E/[0-9a-f]{24}$} } map { decode_base64($_->{key}) } @{ decode_json($out)->{kvs} // [] } ];
}
ok(wait_until(sub { @{ bucket_records('usage_days') } == 2 }, 30, 'the day buckets'),
   'a day bucket of the key from each edge') or diag explain bucket_records('usage_days');
my $hour_records = bucket_records('usage_hours');
ok(@$hour_records >= 2 && @$hour_records <= 4, scalar(@$hour_records) . ' hour bucket records of the key')
    or diag explain $hour_records;
like($hour_records->[0], qr{^/keyauth/1/usage_hours/\d{10}/[0-9a-f]{24}\Q$key_hex\E/[0-9a-f]{24}$}, 'time first');

# the usage publications never reach the edges' watches
is($edges[0]->syncd_metric('keyauth_syncd_events_total'), $events_before,
   'no watch event on an edge for usage');
cmp_ok($_->syncd_metric('keyauth_syncd_usage_published_total'), '>=', 1, 'published counted') for @edges;
is($_->syncd_metric('keyauth_syncd_usage_publish_errors_total'), 0, 'no publish error') for @edges;

# the console (keyauthd on etcd) shows the sum over the edges
$ops->start_keyauthd;
my $shown = KeyauthTest::json_body(KeyauthTest::http_request($ops->keyauthd_port, GET => "/v1/keys/$key->{id}",
                                                             "Authorization: Bearer $acc->{consoleToken}"));
is_deeply($shown->{usage}, { allowed => $sent{200}, rateLimited => $sent{429} },
          'GET /v1/keys/{id}: usage is the sum of both edges');
my $listed = KeyauthTest::json_body(KeyauthTest::http_request($ops->keyauthd_port, GET => '/v1/keys',
                                                              "Authorization: Bearer $acc->{consoleToken}"));
is_deeply($listed->{keys}[0]{usage}, $shown->{usage}, 'GET /v1/keys: the same');
like($shown->{lastUsedAt}, qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, "lastUsedAt $shown->{lastUsedAt}");

# GET /v1/usage on keyauthd (etcd mode): the series adds up to what both
# edges let through and refused, by hour and by day, the account's and the key's
my @FIELDS = qw(allowed rateLimited quotaExceeded units);
sub iso { strftime('%Y-%m-%dT%H:%M:%S.000Z', gmtime shift) }
my ($h0, $h1) = (floor($before / 3600) * 3600, (floor($after / 3600) + 1) * 3600);
my ($d0, $d1) = (floor($before / 86400) * 86400, (floor($after / 86400) + 1) * 86400);
sub usage_over_time {
    my $q = shift;
    my $res = KeyauthTest::http_request($ops->keyauthd_port, GET => "/v1/usage$q",
                                        "Authorization: Bearer $acc->{consoleToken}");
    return $res->{status} == 200 ? KeyauthTest::json_body($res) : undef;
}
sub series_sum {
    my $u = shift or return undef;
    my %s = map { $_ => 0 } @FIELDS;
    for my $p (@{ $u->{series} }) { $s{$_} += $p->{$_} for @FIELDS }
    return \%s;
}
my %want = (allowed => $sent{200}, rateLimited => $sent{429}, quotaExceeded => 0, units => $sent{200});
for my $q ('?granularity=hour&from=' . iso($h0) . '&to=' . iso($h1),
           '?granularity=day&from=' . iso($d0) . '&to=' . iso($d1),
           "?granularity=hour&keyId=$key->{id}&from=" . iso($h0) . '&to=' . iso($h1)) {
    my $u;
    ok(wait_until(sub { $u = usage_over_time($q); my $s = series_sum($u);
                        $s && join(',', @$s{@FIELDS}) eq join(',', @want{@FIELDS}) }, 30, "GET /v1/usage$q"),
       "GET /v1/usage$q: the sum of both edges") or diag explain [$u, \%want];
    is_deeply({ map { $_ => $u->{totals}{$_} } @FIELDS }, \%want, 'its totals too');
}

# more on one edge: its record grows, the other's stays
$edges[1]->request(GET => '/t/x', "Authorization: Bearer $key->{secret}");
ok(wait_until(sub {
    my $p = published()->{$key_hex} or return 0;
    my $t = 0;
    $t += $_->[0] + $_->[1] for values %$p;
    $t == 17;
}, 60, 'the 17th request'), 'a later request is added on top');
my $t17 = time;
my $later = '?granularity=hour&from=' . iso($h0) . '&to=' . iso((floor($t17 / 3600) + 1) * 3600);
ok(wait_until(sub { my $s = series_sum(usage_over_time($later)); $s && $s->{allowed} + $s->{rateLimited} == 17 },
              30, 'the 17th request in the buckets'), 'GET /v1/usage: the later request is added on top');

done_testing;
