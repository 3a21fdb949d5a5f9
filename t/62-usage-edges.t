# Usage on many edges: each edge's nginx collects its counts into its own
# usage env, its keyauth-syncd publishes the totals to etcd under
# <prefix>/usage/<account><key>/<edge id>, and the sum over the edges is the
# key's usage. One etcd member, two edges (nginx + syncd), short intervals.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time);
use JSON::PP qw(decode_json);
use MIME::Base64 qw(decode_base64);
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

# more on one edge: its record grows, the other's stays
$edges[1]->request(GET => '/t/x', "Authorization: Bearer $key->{secret}");
ok(wait_until(sub {
    my $p = published()->{$key_hex} or return 0;
    my $t = 0;
    $t += $_->[0] + $_->[1] for values %$p;
    $t == 17;
}, 60, 'the 17th request'), 'a later request is added on top');

done_testing;
