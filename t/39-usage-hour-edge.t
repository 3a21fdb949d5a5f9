# Calls on both sides of a UTC day's edge (00:00) with a large zone, whose
# collection walks 1.4 million usage slots in some 340 parts over most of a
# second (#44 item 13): every call lands in the hour and the day it was made,
# so the day's usage (GET /v1/usage, keyauthctl usage report) and the quota
# ledger, which charges each call to the period of its own time, agree at
# the edge. Before, every part of the collection due at 00:00 was filed at
# 23:59:59.999: a call made after midnight to a key whose slot the walk had
# not reached yet was counted in the day before, while the ledger charged it
# to the new day. nginx and keyauthd run on a clock of libfaketime's, 25 s (45 s
# under ASan) before a midnight three days ago: nginx's first collection is the one due
# at 00:00, and it takes both sides (a slot it walked before that slot's
# call is taken by the next, 30 s later).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP qw(decode_json);
use POSIX qw(strftime floor);
use Time::HiRes qw(time);
use KeyauthTest qw(wait_until);

my $ASAN = ($ENV{KEYAUTH_BUILD} // '') =~ /asan/;
my $t = KeyauthTest->new(workers => 1);
my $acc = $t->account(name => 'midnight');
$t->ctl('account', 'update', $acc->{id}, '--quota', '1000000/day');
my @keys = map { $t->key(account => $acc->{id}, name => "k$_") } 1 .. 20;

# The clock is set once the store is made, with room for a slow start (an
# ASan build of nginx making its 128m zone on a busy machine): the calls
# before midnight must all be made before it.
my $lead = $ASAN ? 45 : 25;
my $midnight = floor((time - 3 * 86400) / 86400) * 86400 + 86400;
my $offset = floor($midnight - $lead - time);
my $clock = sprintf('%+d', $offset);
sub edge_now { time + $offset }
$t->start_keyauthd(faketime => $clock);
my $env = join "\n", ($ASAN ? () : 'env LD_PRELOAD;'), 'env FAKETIME;', 'env DONT_FAKE_MONOTONIC;',
                      'env FAKETIME_DONT_RESET;';
$t->start_nginx(faketime => $clock, main => $env,
                http => $t->console_http . "\nkeyauth_zone keys:128m;\nkeyauth_usage_interval 30s;",
                locations => $t->console_locations . $KeyauthTest::IP_AND_STATUS);
my $console = $t->console_client($acc->{consoleToken});
sub call { $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $_[0]{secret}")->{status} }

my $slots = $t->request(GET => '/status')->{body} =~ /^keyauth_usage_zone_slots (\d+)$/m ? $1 : 0;
cmp_ok $slots, '>', 300 * 4096, "a zone of $slots usage slots: some 340 parts a walk";

# two calls of every key before midnight, one after
my $before = 0;
for my $k (@keys) { $before += call($k) == 200 for 1 .. 2 }
ok edge_now() < $midnight - 2, 'the calls before midnight were made more than 2 s before it';
ok wait_until(sub { edge_now() >= $midnight + 0.02 }, $lead + 30, 'the edge\'s clock to pass 00:00:00.02'),
   'midnight has passed on the edge\'s clock';
my $after = 0;
$after += call($_) == 200 for @keys;
my $late = edge_now() - $midnight;
is_deeply [ $before, $after ], [ 40, 20 ], sprintf('40 calls before midnight, 20 within %.2f s after it', $late);

sub iso { strftime('%Y-%m-%dT%H:%M:%SZ', gmtime shift) }
sub date_of { strftime('%Y-%m-%d', gmtime shift) }
my $hours_q = '/v1/usage?granularity=hour&from=' . iso($midnight - 3600) . '&to=' . iso($midnight + 3600);
my $hours;
ok wait_until(sub {
    my $res = $console->(GET => $hours_q);
    $hours = $res->{json};
    return $res->{status} == 200 && $hours->{totals}{allowed} == 60;
}, 90, 'the collections at 00:00 and 00:00:30 to store every call'), 'all 60 calls collected';
my %by_hour = map { ($_->{start} => $_->{allowed}) } @{ $hours->{series} // [] };
is_deeply [ @by_hour{ map { KeyauthTest::rfc3339($_) } $midnight - 3600, $midnight } ], [ 40, 20 ],
          '23:00 holds the 40 calls made before midnight, 00:00 the 20 after it';

my $out = `'@{[ KeyauthTest::build_dir() ]}/keyauthctl' --db '$t->{db}' usage report --account $acc->{id} --from @{[ date_of($midnight - 86400) ]} --to @{[ date_of($midnight) ]} --by day --format json`;
my @days = map { [ $_->{period}, $_->{allowed}, $_->{units} ] } @{ (eval { decode_json($out) } // {})->{rows} // [] };
is_deeply \@days, [ [ date_of($midnight - 86400), 40, 40 ], [ date_of($midnight), 20, 20 ] ],
          'usage report by day: 40 the day before, 20 on the new day';
my $quota = $console->(GET => '/v1/account')->{json}{quota} // {};
is $quota->{used}, 20, 'the quota ledger\'s day (GET /v1/account, on the edge\'s clock): the 20 units after midnight';
is $quota->{used}, $days[-1][2], '... what usage report says of the new day';

done_testing;
