# An edge is never silently stale (issue 27, item 2): a record this edge
# cannot read, put in etcd as an operator (or a newer writer) would, stops
# that edge's keyauth-syncd there, and it says so: /healthz 503 naming the
# record within --max-lag, keyauth_syncd_lag_seconds above it, apply_blocked
# 1; nginx keeps serving every other key from its copy. Once the record is
# deleted the edge rebuilds and a revocation made meanwhile reaches it.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use MIME::Base64 qw(encode_base64);
use JSON::PP qw(encode_json);
use EtcdCluster;
use KeyauthTest qw(wait_until http_request);

my $etcd = EtcdCluster->new(members => 1);
my $e = KeyauthTest->new(etcd => $etcd->endpoints);
my $acc = $e->account(entitlement => 600000);
my $key = $e->key(account => $acc->{id});
my $other = $e->key(account => $acc->{id}, name => 'revoked while the edge is stuck');
$e->start_syncd(args => ['--max-lag', 3]);
$e->wait_synced or die "syncd did not sync:\n" . $e->syncd_log;
$e->start_nginx(http => 'keyauth_zone keys:1m;',
                locations => 'location /t/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }',
                no_init => 1);
my $status = sub { $e->request(GET => '/t/x', "Authorization: Bearer $_[0]")->{status} };
ok wait_until(sub { $status->($key->{secret}) == 200 && $status->($other->{secret}) == 200 }, 20, 'keys to work'),
   'both keys work at the edge';

# a key record of layout 99 under keys_by_hash, through etcd's JSON gateway
my ($port) = $etcd->endpoint(0) =~ /:(\d+)$/;
my $etcd_key = '/keyauth/1/keys_by_hash/' . ('ab' x 32);
my $put = sub {
    my ($path, $body) = @_;
    my $res = http_request($port, POST => $path, 'Content-Type: application/json', \(encode_json($body)));
    return $res->{status};
};
is $put->('/v3/kv/put', { key => encode_base64($etcd_key, ''), value => encode_base64("\x63\x00" . ('x' x 80), '') }),
   200, 'a record of an unknown layout put in etcd';

ok wait_until(sub { ($e->syncd_health)[0] == 503 }, 10, '/healthz 503'), '/healthz answers 503 within the threshold';
my (undef, $h) = $e->syncd_health;
is $h->{error}{code}, 'CANNOT_APPLY', 'CANNOT_APPLY';
like $h->{error}{message}, qr/\Q$etcd_key\E/, 'naming the record';
is $e->syncd_metric('keyauth_syncd_apply_blocked'), 1, 'keyauth_syncd_apply_blocked 1';
ok wait_until(sub { $e->syncd_metric('keyauth_syncd_lag_seconds') > 3 }, 15, 'lag past the threshold'),
   'keyauth_syncd_lag_seconds grows past --max-lag';
like $e->syncd_log, qr/"apply refused".*\Q$etcd_key\E/, 'a log line names the record';

is $status->($key->{secret}), 200, 'the edge still serves every other key from its copy';
$e->ctl('key', 'revoke', $other->{id});
is $status->($other->{secret}), 200, 'a revocation made now does not reach the stuck edge (it says so above)';

# the operator deletes the record: the edge catches up, the revocation lands
is $put->('/v3/kv/deleterange', { key => encode_base64($etcd_key, '') }), 200, 'the record deleted';
ok wait_until(sub { $status->($other->{secret}) == 401 }, 30, 'the revocation'),
   'the edge catches up: the key revoked meanwhile is refused';
ok wait_until(sub { ($e->syncd_health)[0] == 200 }, 15, 'healthy'), '/healthz 200 again';
is $e->syncd_metric('keyauth_syncd_apply_blocked'), 0, 'apply_blocked 0';
is $status->($key->{secret}), 200, 'the other key still works';

done_testing;
