# Keys change under a running nginx: a revoke is seen by the very next
# request; keys made after start work at once; "keyauth off" opens a location.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use KeyauthTest;

my $t = KeyauthTest->new;
my $acc = $t->account;
$t->start_nginx(locations => <<'LOC');
        keyauth on;
        keyauth_scope ip:read;
        location /v1/ip/ { proxy_pass http://tool; }
        location /health { keyauth off; proxy_pass http://tool; }
LOC

my $key = $t->key(account => $acc->{id});
my $auth = "Authorization: Bearer $key->{secret}";
for my $i (1 .. 20) {
    my $st = $t->request(GET => "/v1/ip/10.0.0.$i", $auth)->{status};
    if ($st != 200) { fail "request $i before revoke: $st"; last }
}
pass 'a key created after nginx started works on every worker';

my $revoked = $t->ctl('key', 'revoke', $key->{id});
is $revoked->{status}, 'revoked', 'keyauthctl reports the key revoked';
ok $revoked->{revokedAt}, 'revokedAt is set';

my @after = map { $t->request(GET => '/v1/ip/1.1.1.1', $auth)->{status} } 1 .. 20;
is_deeply \@after, [(401) x 20], 'the very next request, on every worker, is 401';
is KeyauthTest::json_body($t->request(GET => '/v1/ip/1.1.1.1', $auth))->{error}{code},
    'INVALID_API_KEY', 'revoked key: INVALID_API_KEY';

my $again = $t->ctl('key', 'revoke', $key->{id});
is $again->{revokedAt}, $revoked->{revokedAt}, 'revoking twice is idempotent';

is $t->request(GET => '/health')->{status}, 200, '"keyauth off" in a "keyauth on" server is open';
is $t->request(GET => '/elsewhere')->{status}, 401, 'the server-level "keyauth on" covers other URIs';

# An account that is suspended or whose record is gone: covered by unit tests;
# here, the list still shows the revoked key with its metadata.
my $list = $t->ctl('key', 'list', '--account', $acc->{id});
is scalar @{ $list->{keys} }, 1, 'list shows the key';
is $list->{keys}[0]{status}, 'revoked', 'listed as revoked';
ok !exists $list->{keys}[0]{secret}, 'list never shows the secret';

done_testing;
