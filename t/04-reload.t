# nginx -s reload while requests run: old and new workers overlap on the
# same LMDB environment and not one request fails.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use KeyauthTest;

my $t = KeyauthTest->new;
my $acc = $t->account;
my $key = $t->key(account => $acc->{id});
$t->start_nginx(locations => <<'LOC');
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }
LOC

my $client = $t->background_client(4, '/v1/ip/1.1.1.1', "Authorization: Bearer $key->{secret}");

my @workers_before = sort $t->worker_pids;
for (1 .. 5) {
    sleep 0.5;
    ok $t->signal_nginx('reload'), 'nginx -s reload';
}
my ($ok, $bad) = $client->finish;
cmp_ok $ok, '>', 100, "requests kept flowing during reloads ($ok)";
is $bad, 0, 'no request failed';

my @workers_after = sort $t->worker_pids;
isnt "@workers_after", "@workers_before", 'workers were replaced';
is $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $key->{secret}")->{status}, 200,
    'new workers authenticate';
unlike $t->error_log, qr/\[(emerg|alert|crit)\]|MDB_|reader/i, 'no LMDB reader trouble logged';

done_testing;
