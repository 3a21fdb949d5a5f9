# A binary upgrade (USR2, WINCH, QUIT to the old master) while requests run:
# the new master opens the store in its own workers and not one request fails.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use KeyauthTest;

my $t = KeyauthTest->new;
my $acc = $t->account(entitlement => 1_000_000);
my $key = $t->key(account => $acc->{id}, rate => 1_000_000);
$t->start_nginx(http => 'keyauth_zone keys:1m;', locations => <<'LOC');
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; ip_lookup; }
LOC
my $old = $t->pid;
my $client = $t->background_client(5, '/v1/ip/1.1.1.1', "Authorization: Bearer $key->{secret}");

sleep 0.5;
ok kill('USR2', $old), 'USR2 to the master: start the new binary';
my $new;
for (1 .. 100) {
    sleep 0.05;
    $new = $t->pid;
    last if $new && $new != $old && -e $t->dir . '/nginx.pid.oldbin';
}
isnt $new, $old, "a new master ($new) next to the old one ($old)"
    or BAIL_OUT('no new master: ' . $t->error_log);
sleep 1;
ok kill('WINCH', $old), 'WINCH: the old workers finish gracefully';
sleep 1;
ok kill('QUIT', $old), 'QUIT: the old master leaves';
my $deadline = time + 5;
sleep 0.05 while kill(0, $old) && time < $deadline;
ok !kill(0, $old), 'the old master is gone';
$t->{master_pid} = $new;

my ($ok, $bad) = $client->finish;
cmp_ok $ok, '>', 100, "$ok requests during the upgrade";
is $bad, 0, 'not one failed';
is $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $key->{secret}")->{status}, 200,
    'the new binary\'s workers authenticate';
unlike $t->error_log, qr/\[(emerg|alert|crit)\]/, 'nothing serious logged';

done_testing;
