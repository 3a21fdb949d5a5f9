# nginx -s reload while requests run: old and new workers overlap on the
# same LMDB environment and not one request fails.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use KeyauthTest qw(wait_until);

my $t = KeyauthTest->new;
my $acc = $t->account;
my $key = $t->key(account => $acc->{id});
$t->start_nginx(locations => <<'LOC');
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }
LOC

# Each reload waits for its new workers and for requests to go on flowing
# after it (not for a guessed time): old and new workers overlap.
my $client = $t->background_client(300, '/v1/ip/1.1.1.1', "Authorization: Bearer $key->{secret}");
ok wait_until(sub { $client->successes >= 20 }, 30, 'the first 20 requests'), 'requests flow';

my @workers_before = sort $t->worker_pids;
for my $n (1 .. 5) {
    my %old = map { $_ => 1 } $t->worker_pids;
    ok $t->signal_nginx('reload'), "nginx -s reload ($n)";
    my $done = $client->successes;
    ok wait_until(sub { (grep { !$old{$_} } $t->worker_pids) >= 2 && $client->successes >= $done + 20 },
                  60, "reload $n: two new workers and 20 more requests"),
        "reload $n: new workers, and requests kept flowing";
}
my ($ok, $bad) = $client->stop;
cmp_ok $ok, '>', 100, "requests kept flowing during reloads ($ok)";
is $bad, 0, 'no request failed';

my @workers_after = sort $t->worker_pids;
isnt "@workers_after", "@workers_before", 'workers were replaced';
is $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $key->{secret}")->{status}, 200,
    'new workers authenticate';
unlike $t->error_log, qr/\[(emerg|alert|crit)\]|MDB_|reader/i, 'no LMDB reader trouble logged';

done_testing;
