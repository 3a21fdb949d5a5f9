# The usage store somewhere else than beside the key store (#44 item 9):
# nginx's keyauth_usage_db names it, keyauthd and keyauthctl are told with
# --usage-db, and the whole flow agrees: what the edge let through and
# charged is GET /v1/usage's totals, the key's usage and lastUsedAt, GET
# /v1/account's quota used, keyauthctl account show's and usage report's
# rows. Nothing is written beside the store. (Many edges read usage from
# etcd: there --usage-db is a usage error.)
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP qw(decode_json);
use POSIX qw(strftime);
use KeyauthTest qw(wait_until);

my $t = KeyauthTest->new;
my $usage = $t->dir . '/elsewhere/usage';
mkdir $t->dir . '/elsewhere' or die $!;
my $acc = $t->account(name => 'elsewhere');
$t->ctl('--usage-db', $usage, 'account', 'update', $acc->{id}, '--quota', '1000/month');
my $key = $t->key(account => $acc->{id});
$t->start_keyauthd(args => ['--usage-db', $usage]);
$t->start_nginx(http => $t->console_http . "\nkeyauth_zone keys:1m;\nkeyauth_usage_interval 1s;\nkeyauth_usage_db $usage;",
                locations => $t->console_locations . $t->metered_locations);
my $console = $t->console_client($acc->{consoleToken});

my ($allowed, $units) = (0, 0);
for (1 .. 4) { $allowed++, $units += 1 if $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $key->{secret}")->{status} == 200 }
for (1 .. 2) { $allowed++, $units += 3 if $t->request(GET => '/three/x', "Authorization: Bearer $key->{secret}")->{status} == 200 }
is_deeply [ $allowed, $units ], [ 6, 10 ], 'the edge let 6 calls through, charging 10 units';

my $today = strftime('%Y-%m-%d', gmtime);
ok wait_until(sub {
    my $u = $console->(GET => "/v1/usage?granularity=day&from=$today&to=$today")->{json};
    ($u->{totals}{allowed} // -1) == $allowed && ($u->{totals}{units} // -1) == $units;
}, 30, 'GET /v1/usage to show the calls'), 'GET /v1/usage: the calls and their units';
my $k = $console->(GET => "/v1/keys/$key->{id}")->{json};
is_deeply $k->{usage}, { allowed => $allowed, rateLimited => 0 }, 'the key\'s usage';
ok defined $k->{lastUsedAt}, 'its lastUsedAt: ' . ($k->{lastUsedAt} // 'null');
is $console->(GET => '/v1/account')->{json}{quota}{used}, $units, 'GET /v1/account: quota used';

my $shown = $t->ctl('--usage-db', $usage, 'account', 'show', $acc->{id});
is $shown->{quota}{used}, $units, 'keyauthctl --usage-db account show: quota used';
my $report = $t->ctl('--usage-db', $usage, 'usage', 'report', '--account', $acc->{id}, '--from', $today,
                     '--to', $today, '--by', 'day');
is_deeply [ map { [ @$_{qw(allowed units)} ] } @{ $report->{rows} } ], [ [ $allowed, $units ] ],
          'keyauthctl --usage-db usage report: the same row';
ok !-e $t->db . '.usage', 'nothing beside the store';

subtest 'many edges read usage from etcd: --usage-db is refused there' => sub {
    my ($rc, undef, $err) = KeyauthTest->new(etcd => 'http://127.0.0.1:1')->ctl_raw('--usage-db', $usage, 'account', 'list');
    is $rc, 2, 'keyauthctl --etcd --usage-db: exit 2';
    like $err, qr/--usage-db/, '... naming --usage-db';
};

done_testing;
