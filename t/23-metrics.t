# Every program's Prometheus text passes `promtool check metrics` (Debian's
# prometheus): the edge's keyauth_status (keyauth_shared_limits included),
# keyauthd's /metrics and keyauth-syncd's /metrics; and keyauthd's counts
# match what was done: requests by route template, method and status, the
# latency and store-write histograms, the store's size and records.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use File::Temp qw(tempfile);
use JSON::PP qw(decode_json encode_json);
use EtcdCluster;
use KeyauthTest qw(wait_until http_request);
use RedisServer;

plan skip_all => 'promtool is not installed (make deps installs prometheus)'
    unless -x '/usr/bin/promtool';

# promtool's findings on the text (empty: clean) and its exit status
sub promtool {
    my $text = shift;
    my ($fh, $file) = tempfile(UNLINK => 1);
    print $fh $text;
    close $fh;
    my $out = `promtool check metrics < $file 2>&1`;
    return ($? >> 8, $out);
}

my $t = KeyauthTest->new;
my $redis = RedisServer->new(dir => $t->dir);
my $acc = $t->account(entitlement => 1000);
my $token = $acc->{consoleToken};
$t->start_keyauthd;
$t->start_nginx(
    http => "keyauth_zone keys:1m;\nkeyauth_shared_limits " . $redis->url . ";\n" . $t->console_http,
    locations => $t->console_locations . <<'LOC');
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }
        location = /status { keyauth_status; }
LOC

my %exposed;  # every metric name the three programs expose
sub note_names { $exposed{$1} = 1 while $_[0] =~ /^([a-z_]+)(?:\{| )/mg }

sub console {
    my ($method, $path, $body) = @_;
    my @h = ("Authorization: Bearer $token");
    push @h, 'Content-Type: application/json', \encode_json($body) if $body;
    return $t->request($method, $path, @h);
}

# what is done, and so what keyauthd must count
my @made = map { decode_json(console(POST => '/v1/keys', { name => "m$_", scopes => ['ip:read'], rateLimitPerMinute => 60 })->{body}) } 1 .. 3;
is console(GET => '/v1/keys')->{status}, 200, 'list';
is console(GET => "/v1/keys/$made[0]{id}")->{status}, 200, 'one key';
is console(POST => "/v1/keys/$made[0]{id}/revoke")->{status}, 200, 'revoke';
is console(GET => '/v1/keys/key_000000000000000000000000')->{status}, 404, 'an unknown key';
is $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $made[1]{secret}")->{status}, 200, 'the edge';

subtest "keyauthd's /metrics" => sub {
    my $res = http_request($t->keyauthd_port, GET => '/metrics');
    is $res->{status}, 200, 'GET /metrics on the listener';
    like KeyauthTest::header($res, 'Content-Type'), qr{^text/plain; version=0\.0\.4}, 'Prometheus text';
    my $m = $res->{body};
    note_names($m);
    my ($rc, $out) = promtool($m);
    is $rc, 0, 'promtool check metrics: exit 0';
    is $out, '', '... and nothing to say' or diag $out;
    like $m, qr/^keyauthd_requests_total\{route="\/v1\/keys",method="POST",status="201"\} 3$/m, 'three creates';
    like $m, qr/^keyauthd_requests_total\{route="\/v1\/keys\/\{id\}\/revoke",method="POST",status="200"\} 1$/m,
        'one revoke, under the route template, not the id';
    like $m, qr/^keyauthd_requests_total\{route="\/v1\/keys\/\{id\}",method="GET",status="404"\} 1$/m, 'one 404';
    unlike $m, qr/key_[0-9a-f]{24}/, 'no key id in any label';
    like $m, qr/^keyauthd_request_duration_seconds_count\{route="\/v1\/keys"\} 4$/m,
        'the latency histogram counts every /v1/keys request';
    like $m, qr/^keyauthd_request_duration_seconds_bucket\{route="\/v1\/keys",le="\+Inf"\} 4$/m, '... up to +Inf';
    my ($writes) = $m =~ /^keyauthd_store_write_seconds_count (\d+)$/m;
    cmp_ok $writes, '>=', 4, "store writes timed: $writes (3 creates, 1 revoke)";
    like $m, qr/^keyauthd_store_keys 3$/m, 'three key records';
    like $m, qr/^keyauthd_store_accounts 1$/m, 'one account';
    my ($map) = $m =~ /^keyauthd_store_map_bytes (\d+)$/m;
    my ($used) = $m =~ /^keyauthd_store_used_bytes (\d+)$/m;
    ok $map && $used && $used < $map, "map $map bytes, $used in use";
    my $post = http_request($t->keyauthd_port, POST => '/metrics');
    is $post->{status}, 405, 'POST /metrics: 405';
    is KeyauthTest::header($post, 'Allow'), 'GET', 'Allow: GET';
    is $t->request(GET => '/metrics')->{status}, 404, 'the console config does not expose it through nginx';
};

subtest "the edge's keyauth_status, with keyauth_shared_limits" => sub {
    ok wait_until(sub { $t->request(GET => '/status')->{body} =~ /^keyauth_shared_limits_up 1$/m }, 30,
                  'the exchange'), 'sharing';
    my $m = $t->request(GET => '/status')->{body};
    note_names($m);
    like $m, qr/^keyauth_requests_total\{outcome="ok"\} 1$/m, 'the request counted';
    like $m, qr/^keyauth_shared_limits_edge_info\{edge="[0-9a-f]{16}"\} 1$/m, 'edge info';
    my ($rc, $out) = promtool($m);
    is $rc, 0, 'promtool check metrics: exit 0';
    is $out, '', '... and nothing to say' or diag $out;
};

subtest "keyauth-syncd's /metrics" => sub {
    my $etcd = EtcdCluster->new(members => 1);
    my $edge = KeyauthTest->new(etcd => $etcd->endpoints);
    $edge->ctl('init');
    $edge->start_syncd;
    ok $edge->wait_synced, 'synced';
    my $res = http_request($edge->syncd_port, GET => '/metrics');
    is $res->{status}, 200, 'GET /metrics';
    note_names($res->{body});
    my ($rc, $out) = promtool($res->{body});
    is $rc, 0, 'promtool check metrics: exit 0';
    is $out, '', '... and nothing to say' or diag $out;
};

subtest 'docs/grafana-dashboard.json: valid PromQL over metrics that exist' => sub {
    my $dash = decode_json(do { local (@ARGV, $/) = (KeyauthTest::root() . '/docs/grafana-dashboard.json'); <> });
    my @exprs = map { $_->{expr} } map { @{ $_->{targets} } } @{ $dash->{panels} };
    cmp_ok scalar @exprs, '>=', 10, scalar(@exprs) . ' queries';
    my ($fh, $rules) = tempfile(UNLINK => 1, SUFFIX => '.yml');
    print $fh "groups:\n  - name: dashboard\n    rules:\n";
    my $i = 0;
    print $fh "      - record: dashboard:q$i\n        expr: " . encode_json($_) . "\n" and $i++ for @exprs;
    close $fh;
    my $out = `promtool check rules $rules 2>&1`;
    is $? >> 8, 0, 'promtool check rules: every query parses' or diag $out;
    my %used;
    my $all = join ' ', @exprs;
    $used{$1} = 1 while $all =~ /\b(keyauth[a-z_]*)/g;
    my @missing = grep { !$exposed{$_} } sort keys %used;
    is_deeply \@missing, [], 'every metric it uses is exposed by the edge, keyauthd or keyauth-syncd';
};

done_testing;
