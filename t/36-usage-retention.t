# Usage buckets past their keeping, one host, real nginx and keyauthd (#44
# item 12): an edge that counted calls 404 days ago and 9 days ago (nginx
# under libfaketime) and has served nothing since still holds those hour and
# day buckets; keyauthd (the real clock) never reads them back: GET
# /v1/usage, the key's day and keyauthctl usage report clip to the
# retention window (hours 7 days, days keyauth_usage_history, 400 by
# default) whether or not the buckets were aged out. Then nginx runs idle
# on the real clock: its collections age the old buckets out without a
# single request.
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
my $DAY = 86400;

my $t = KeyauthTest->new(workers => 1);
my $acc = $t->account(name => 'retention');
my $key = $t->key(account => $acc->{id});
$t->start_keyauthd;

my $env = join "\n", ($ASAN ? () : 'env LD_PRELOAD;'), 'env FAKETIME;', 'env DONT_FAKE_MONOTONIC;',
                      'env FAKETIME_DONT_RESET;';
my %nginx = (main => $env, http => "keyauth_zone keys:1m;\nkeyauth_usage_interval 1s;",
             locations => $KeyauthTest::IP_AND_STATUS);

# $n calls on nginx's clock $days_ago days back; the epoch second nginx
# answered the last one at (its Date header).
sub calls_at {
    my ($days_ago, $n) = @_;
    $t->start_nginx(%nginx, faketime => sprintf("%+d", -$days_ago * $DAY));
    my $at;
    for (1 .. $n) {
        my $res = $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $key->{secret}");
        is $res->{status}, 200, "a call $days_ago days ago" if $_ == 1;
        $at = KeyauthTest::header($res, 'Date');
    }
    $t->stop_nginx;  # its workers collect on exit
    require HTTP::Date;
    return HTTP::Date::str2time($at);
}
my $old = calls_at(404, 3);
my $recent = calls_at(9, 2);
ok $old && $recent, 'nginx answered on its faked clocks';
my ($old_day, $recent_day) = (floor($old / $DAY), floor($recent / $DAY));
my $recent_hour = floor($recent / 3600);

subtest 'the edge still holds them: nothing has aged them out' => sub {
    ok $t->usage_buckets('days')->{$old_day}, 'the day 404 days ago';
    ok $t->usage_buckets('hours')->{$recent_hour}, 'the hour 9 days ago';
};

sub iso { strftime('%Y-%m-%dT%H:%M:%SZ', gmtime shift) }
sub date_of { strftime('%Y-%m-%d', gmtime shift) }
sub allowed {
    my $q = shift;
    my $res = KeyauthTest::http_request($t->keyauthd_port, GET => "/v1/usage$q",
                                        "Authorization: Bearer $acc->{consoleToken}");
    is $res->{status}, 200, "GET /v1/usage$q" or return -1;
    return KeyauthTest::json_body($res)->{totals}{allowed};
}

subtest 'keyauthd reads them as zeros: past the retention window' => sub {
    is allowed('?granularity=hour&from=' . iso($recent_hour * 3600) . '&to=' . iso(($recent_hour + 1) * 3600)), 0,
       'the hour 9 days ago: 0 (hours are kept 7 days)';
    is allowed('?granularity=day&from=' . date_of($recent) . '&to=' . date_of($recent)), 2,
       'its day: the 2 calls (days are kept 400 days)';
    is allowed('?granularity=day&from=' . date_of($old) . '&to=' . date_of($old)), 0,
       'the day 404 days ago: 0';
    my $ctl = KeyauthTest::build_dir() . '/keyauthctl';
    my $out = `'$ctl' --db '$t->{db}' usage report --account $acc->{id} --from @{[ date_of($old) ]} --to @{[ date_of($old) ]} --by day --format json`;
    is $? >> 8, 0, 'keyauthctl usage report of that day';
    my $rows = (eval { decode_json($out) } // {})->{rows} // [];
    is_deeply [ map { $_->{allowed} } @$rows ], [0], '... a row of zeros';
};

subtest 'an idle edge ages them out: no request needed' => sub {
    $t->start_nginx(%nginx);
    ok wait_until(sub { !$t->usage_buckets('hours')->{$recent_hour} && !$t->usage_buckets('days')->{$old_day} },
                  15, 'the collections of an idle nginx to age out the old buckets'),
       'the hour 9 days old and the day 404 days old are gone'
        or diag explain { hours => $t->usage_buckets('hours'), days => $t->usage_buckets('days') };
    ok $t->usage_buckets('days')->{$recent_day}, 'the day 9 days ago stays';
    like $t->request(GET => '/status')->{body}, qr/^keyauth_usage_flush_errors_total 0$/m, 'no flush error';
};

done_testing;
