# Leaked keys on many edges (issue 47): keyauthd on etcd (stateless), an
# edge (nginx over the LMDB mirror keyauth-syncd keeps) whose console routes
# reach that keyauthd. GitHub's signed report, through the edge's nginx,
# revokes the key in etcd and the edge refuses it once the revocation is
# mirrored; the edge never holds the leak reports (not mirrored); notify and
# the admin API's report behave as on one host; GitHub's keys are read from
# --github-keys-file, so nothing is dialled.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Digest::SHA qw(sha256_hex);
use JSON::PP qw(decode_json);
use EtcdCluster;
use KeyauthTest qw(wait_until);
use SecretScanner;

my $etcd = EtcdCluster->new(members => 1);
my $t = KeyauthTest->new(etcd => $etcd->endpoints);
my $gh = SecretScanner->new(dir => "$t->{dir}/github");
$t->start_console_stack(admin => 1, keyauthd => { args => ['--github-keys-file', $gh->keys_file] },
                        locations => "        location /v1/ip/ { keyauth on; keyauth_scope ip:read; ip_lookup; }\n");
my $acc = $t->account(name => 'Acme');
sub key { $t->ctl('key', 'create', '--account', $acc->{id}, '--name', $_[0], '--scope', 'ip:read', '--rate', 600) }
sub edge { $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $_[0]{secret}")->{status} }
sub report {
    my $body = $gh->report_body(@_);
    my $res = $t->request(POST => '/v1/secret-scanning/github', $gh->headers($body), \$body);
    $res->{json} = eval { decode_json($res->{body}) };
    return $res;
}

my $key = key('ci');
my $other = key('prod');
ok wait_until(sub { edge($key) == 200 && edge($other) == 200 }, 20, 'mirrored'), 'the keys work at the edge';

my $res = report($key->{secret});
is $res->{status}, 200, 'a signed report: 200' or diag $res->{body};
is_deeply $res->{json}, [{ token_hash => sha256_hex($key->{secret}), token_type => 'keyauth_api_key',
                           label => 'true_positive' }], 'true_positive';
ok wait_until(sub { edge($key) == 401 }, 20, 'revocation mirrored'), 'the edge refuses the key once mirrored';
is edge($other), 200, 'the other key still works';
my ($e) = grep { $_->{target}{id} eq $key->{id} } @{ $t->ctl('audit', 'list', '--account', $acc->{id})->{events} };
is $e->{action}, 'key.leak', 'audited in etcd: key.leak';
is $e->{actor}{type}, 'secret_scanning', '... by the scanner';
is $t->ctl('key', 'show', $key->{id})->{leak}{source}, 'github', 'the report is kept (etcd) and shown';

my $admin = $t->ctl('admin-token', 'create', '--name', 'support', '--scope', 'keys:write');
my $k2 = key('b');
ok wait_until(sub { edge($k2) == 200 }, 20, 'mirrored'), 'a new key works';
my $r = $t->admin_client($admin->{token})->(POST => '/v1/admin/keys/report-leak', { secret => $k2->{secret} });
ok $r->{json}{revoked}, 'the admin API\'s report revokes it';
ok wait_until(sub { edge($k2) == 401 }, 20, 'mirrored'), 'and the edge refuses it';

$res = report($admin->{token});
is $res->{json}[0]{label}, 'true_positive', 'the admin token reported';
is $t->admin_client($admin->{token})->(GET => '/v1/admin/accounts')->{status}, 401, 'refused from then on';

ok $t->wait_synced, 'the edge is in step';
my $mdb = do { local (@ARGV, $/) = ("$t->{db}/data.mdb"); <> };
unlike $mdb, qr/github\.com\/octo/, 'the edge\'s LMDB holds no leak report (never mirrored)';

done_testing;
