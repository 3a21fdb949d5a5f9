# A binary upgrade (USR2, WINCH, QUIT to the old master) while requests run:
# the new master opens the store in its own workers and not one request fails,
# and the usage counted in the old master's zone and in the new one's adds up
# to exactly the requests served.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use KeyauthTest qw(wait_until);

my $t = KeyauthTest->new;
my $acc = $t->account(entitlement => 1_000_000);
my $key = $t->key(account => $acc->{id}, rate => 1_000_000);
$t->start_nginx(http => "keyauth_zone keys:1m;\nkeyauth_usage_interval 1s;", locations => <<'LOC');
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; ip_lookup; }
LOC
my $old = $t->pid;
# Every step waits for what it is for (not for a guessed time), and for
# requests to go on flowing after it.
my $client = $t->background_client(300, '/v1/ip/1.1.1.1', "Authorization: Bearer $key->{secret}");
sub more_requests { my $n = $client->successes; return sub { $client->successes >= $n + 30 } }
my $flowing = more_requests();
ok wait_until($flowing, 30, 'the first 30 requests'), 'requests flow';

ok kill('USR2', $old), 'USR2 to the master: start the new binary';
my $new = wait_until(sub {
    my $pid = $t->pid;
    return $pid && $pid != $old && -e $t->dir . '/nginx.pid.oldbin' ? $pid : 0;
}, 30, 'a new master') || $old;
isnt $new, $old, "a new master ($new) next to the old one ($old)"
    or BAIL_OUT('no new master: ' . $t->error_log);
$flowing = more_requests();
ok wait_until(sub { KeyauthTest::children_of($new) == 2 && $flowing->() }, 30,
              'two workers of the new master, and 30 more requests'),
    'the new master\'s workers run beside the old ones';

# the new master is a child of the old one, beside its workers
sub old_workers { grep { $_ != $new } KeyauthTest::children_of($old) }
ok kill('WINCH', $old), 'WINCH: the old workers finish gracefully';
$flowing = more_requests();
ok wait_until(sub { !old_workers() && $flowing->() }, 30, 'the old workers to exit, and 30 more requests'),
    'the old workers are gone, and requests go on';
ok kill('QUIT', $old), 'QUIT: the old master leaves';
ok wait_until(sub { !kill 0, $old }, 30, 'the old master to exit'), 'the old master is gone';
$t->{master_pid} = $new;

$flowing = more_requests();
ok wait_until($flowing, 30, '30 more requests'), 'requests go on after the upgrade';
my ($ok, $bad) = $client->stop;
cmp_ok $ok, '>', 100, "$ok requests during the upgrade";
is $bad, 0, 'not one failed';
is $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $key->{secret}")->{status}, 200,
    'the new binary\'s workers authenticate';
unlike $t->error_log, qr/\[(emerg|alert|crit)\]/, 'nothing serious logged';

my $id = "$acc->{id} $key->{id}";
ok wait_until(sub { my $u = $t->usage->{$id}; $u && $u->{allowed} == $ok + 1 }, 30,
              'the usage of every request'),
    'usage: every request counted once across the upgrade (old zone collected by the old workers)'
    or diag explain [$t->usage->{$id}, $ok + 1];

done_testing;
