# Usage over time, one host, real nginx (2 workers) and keyauthd: a known
# traffic pattern (calls allowed, refused by the rate, refused by a quota,
# metered units) on both sides of a UTC hour, crossed for real under
# libfaketime, then GET /v1/usage (hours and days, the account and each key)
# and keyauthctl usage report (CSV and JSON) give exactly those numbers.
# keyauth_usage_interval is 60 s, so only the collection nginx makes at the
# hour can put the first hour's calls in their hour. In the second hour a
# reload, a worker killed with SIGKILL, a binary upgrade (USR2, QUIT of the
# old master) and a stop and start lose and double nothing.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use POSIX qw(strftime floor);
use Time::HiRes qw(time);
use Time::Local qw(timegm);
use KeyauthTest qw(wait_until);

my $ASAN = ($ENV{KEYAUTH_BUILD} // '') =~ /asan/;
sub code_of { (KeyauthTest::json_body($_[0]) // {})->{error}{code} // '' }

# nginx's clock: 30 s before 10:00 UTC three days ago (within the 7 days
# hours are kept: keyauthd reads older ones as zeros), running on from there. A
# relative offset, so that a binary upgrade's new master (which inherits the
# variables below) keeps the same clock.
my $hour10 = do { my @g = gmtime(time - 3 * 86400); timegm(0, 0, 10, $g[3], $g[4], $g[5]) };
my $offset = floor($hour10 - 30 - time);
my $day = strftime('%Y-%m-%d', gmtime $hour10);
my $iso = sub { strftime('%Y-%m-%dT%H:%M:%SZ', gmtime shift) };

my $t = KeyauthTest->new(workers => 2);
my $acc = $t->account(name => 'acme, "the" tools');  # a name a CSV must quote
my $other = $t->account(name => 'other');
my $plain = $t->key(account => $acc->{id}, name => 'plain');
my $slow = $t->key(account => $acc->{id}, name => 'slow', rate => 3);
my $credits = $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'credits',
                      '--scope', 'ip:read', '--rate', 6000, '--quota', '4/day');
my $stranger = $t->key(account => $other->{id}, name => 'stranger');
my %name_of = ($plain->{id} => 'plain', $slow->{id} => 'slow', $credits->{id} => 'credits');

$t->start_keyauthd;
my $env = join "\n", ($ASAN ? () : 'env LD_PRELOAD;'), 'env FAKETIME;', 'env DONT_FAKE_MONOTONIC;',
                      'env FAKETIME_DONT_RESET;';
my %nginx = (
    faketime => sprintf('%+d', $offset),
    main => $env,
    http => $t->console_http . "\nkeyauth_zone keys:1m;\nkeyauth_usage_interval 60s;",
    locations => $t->console_locations . $t->metered_locations);
$t->start_nginx(%nginx);
my $console = $t->console_client($acc->{consoleToken});

# What the test saw, by nginx's hour (its Date header) and key.
my (%want, @late);
sub call {
    my ($path, $key, $units) = @_;
    my $res = $t->request(GET => $path, "Authorization: Bearer $key->{secret}");
    my $date = KeyauthTest::header($res, 'Date') // '';
    my ($d, $mon, $y, $hh, $mm, $ss) = $date =~ /^\w+, (\d+) (\w+) (\d+) (\d+):(\d+):(\d+) GMT$/
        or die "no Date in the answer to $path";
    my %m = (Jan => 0, Feb => 1, Mar => 2, Apr => 3, May => 4, Jun => 5, Jul => 6, Aug => 7,
             Sep => 8, Oct => 9, Nov => 10, Dec => 11);
    my $at = timegm($ss, $mm, $hh, $d, $m{$mon}, $y);
    push @late, $at if $at >= $hour10 - 2 && $at < $hour10 + 2;  # too near the hour to say which
    my $w = $want{ floor($at / 3600) * 3600 }{ $key->{id} } //= { map { $_ => 0 } qw(allowed rateLimited quotaExceeded units) };
    if ($res->{status} == 200) { $w->{allowed}++; $w->{units} += $units }
    elsif ($res->{status} == 429 && code_of($res) eq 'RATE_LIMITED') { $w->{rateLimited}++ }
    elsif ($res->{status} == 429 && code_of($res) eq 'QUOTA_EXCEEDED') { $w->{quotaExceeded}++ }
    else { die "unexpected answer $res->{status} to $path: $res->{body}" }
    return $res->{status};
}

# One round of the pattern: every outcome and both kinds of cost.
sub traffic {
    my $n = shift;
    call('/v1/ip/8.8.8.8', $plain, 1) for 1 .. $n;
    call('/three/x', $plain, 3) for 1 .. 2;
    call("/metered/x?u=$_", $plain, $_) for 5, 7;
    call('/v1/ip/8.8.8.8', $slow, 1) for 1 .. 6;      # 3/min: most are refused
    call('/v1/ip/8.8.8.8', $credits, 1) for 1 .. 3;   # 4 a day: used up in the first hour
}

sub sum_of {
    my @rows = @_;
    my %s = map { $_ => 0 } qw(allowed rateLimited quotaExceeded units);
    for my $r (@rows) { $s{$_} += $r->{$_} // 0 for keys %s }
    return \%s;
}
sub counts { my $r = shift; return { map { $_ => $r->{$_} } qw(allowed rateLimited quotaExceeded units) } }

sub usage {
    my ($gran, $from, $to, $key) = @_;
    my $q = "/v1/usage?granularity=$gran&from=" . $iso->($from) . '&to=' . $iso->($to)
          . ($key ? "&keyId=$key" : '');
    my $res = $console->(GET => $q);
    return $res->{status} == 200 ? $res->{json} : undef;
}

# The account's (or a key's) series for 09:00-11:00 as {hour start => counts}.
sub hours_of {
    my $key = shift;
    my $u = usage('hour', $hour10 - 3600, $hour10 + 3600, $key) or return;
    return { map { (epoch_of($_->{start}) => counts($_)) } @{ $u->{series} } };
}

sub expected_hour {
    my ($hour, $key) = @_;
    my $by_key = $want{$hour} // {};
    return sum_of($key ? ($by_key->{$key} // ()) : values %$by_key);
}

# ---- the hour before 10:00
traffic(5);
is scalar(@late), 0, 'the first hour\'s calls were all made before 09:59:58 (nginx\'s clock)';
my $zero = sum_of();

ok wait_until(sub { time + $offset >= $hour10 + 2 }, 60, 'nginx\'s clock to pass 10:00:02'),
   'the hour has turned on nginx\'s clock';
my $h = wait_until(sub {
    my $got = hours_of() or return;
    return is_deeply_quiet($got->{$hour10 - 3600}, expected_hour($hour10 - 3600)) ? $got : undef;
}, 30, 'the collection at 10:00 to store the first hour');
ok $h, 'the collection due at the hour stored the first hour\'s calls (the interval is 60 s)';
is_deeply $h->{$hour10 - 3600}, expected_hour($hour10 - 3600), '09:00: exactly what was sent' if $h;
is_deeply $h->{$hour10}, $zero, '10:00: nothing yet' if $h;

# ---- the hour after 10:00, across a reload, a killed worker and a binary upgrade
traffic(3);
ok $t->signal_nginx('reload'), 'nginx -s reload';
traffic(2);
my @workers = $t->worker_pids;
ok kill('KILL', $workers[0]), 'a worker killed with SIGKILL';
ok wait_until(sub { my @w = $t->worker_pids; @w == 2 && !grep { $_ == $workers[0] } @w }, 30,
              'the master to start another worker'), 'a new worker replaces it';
traffic(2);
my $old = $t->pid;
ok kill('USR2', $old), 'binary upgrade: USR2';
ok wait_until(sub { my $p = $t->pid; $p && $p != $old && -e $t->dir . '/nginx.pid.oldbin' }, 30,
              'the new master'), 'the new master runs beside the old one';
traffic(2);
kill 'QUIT', $old;
ok wait_until(sub { !kill 0, $old }, 30, 'the old master to exit'), 'the old master has left';
traffic(1);
$t->stop_nginx;  # the last collection: every exiting worker collects
is scalar(@late), 0, 'no call was made within 2 s of the hour';
# started again (the console API goes through it): nothing is counted twice
$t->start_nginx(%nginx, no_init => 1);

my $hours = hours_of();
is_deeply $hours->{$hour10 - 3600}, expected_hour($hour10 - 3600), 'GET /v1/usage, hours: 09:00 as sent';
is_deeply $hours->{$hour10}, expected_hour($hour10), '10:00 as sent, across reload, SIGKILL and upgrade';
for my $key ($plain, $slow, $credits) {
    my $hk = hours_of($key->{id});
    is_deeply [ @{$hk}{ $hour10 - 3600, $hour10 } ],
              [ expected_hour($hour10 - 3600, $key->{id}), expected_hour($hour10, $key->{id}) ],
              "keyId=$name_of{$key->{id}}: both hours as sent";
}
my $all_day = sum_of(expected_hour($hour10 - 3600), expected_hour($hour10));
ok $all_day->{quotaExceeded} > 0 && $all_day->{rateLimited} > 0 && $all_day->{units} > $all_day->{allowed},
   'the pattern has every outcome and metered units';
my $days = usage('day', $hour10 - 10 * 3600, $hour10 + 14 * 3600);
is scalar @{ $days->{series} // [] }, 1, 'GET /v1/usage, days: one day';
is_deeply counts($days->{series}[0] // {}), $all_day, 'the day: the sum of both hours';
is_deeply counts($days->{totals} // {}), $all_day, 'totals: the same';

# ---- the billing export
my $csv_out = "$t->{dir}/report.csv";
my $ctl = KeyauthTest::build_dir() . '/keyauthctl';
system("'$ctl' --db '$t->{db}' usage report --account $acc->{id} --from $day --to $day --by day "
       . "--format csv > '$csv_out'") == 0 or die 'keyauthctl usage report failed';
my $csv = do { local (@ARGV, $/) = ($csv_out); <> };
my @lines = split /\r\n/, $csv;
like $lines[0], qr/\ballowed\b.*\brateLimited\b.*\bquotaExceeded\b.*\bunits\b/i, 'CSV: a header row';
my $row = (grep { index($_, $acc->{id}) >= 0 } @lines)[0] // '';
like $row, qr/"acme, ""the"" tools"/, 'the account name quoted as RFC 4180 says';
like $row, qr/,$all_day->{allowed},$all_day->{rateLimited},$all_day->{quotaExceeded},$all_day->{units}(,|$)/,
     'CSV: the day\'s four counts';
my $json = $t->ctl('usage', 'report', '--account', $acc->{id}, '--from', $day, '--to', $day,
                   '--by', 'day', '--format', 'json');
my @rows = grep { ($_->{account} // $_->{accountId} // '') eq $acc->{id} } @{ $json->{rows} // [] };
is scalar @rows, 1, 'JSON: one row for the account and day';
is_deeply counts($rows[0] // {}), $all_day, 'JSON: the same four counts';
my $res = $console->(GET => "/v1/usage?granularity=day&keyId=$stranger->{id}&from="
                            . $iso->($hour10 - 36000) . '&to=' . $iso->($hour10 + 50400));
is $res->{status}, 404, 'another account\'s key: 404';
is $res->{code}, 'KEY_NOT_FOUND', '... KEY_NOT_FOUND';

sub epoch_of {
    my ($y, $m, $d, $H, $M, $S) = shift =~ /^(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)/ or return -1;
    return timegm($S, $M, $H, $d, $m - 1, $y);
}

sub is_deeply_quiet {
    my ($a, $b) = @_;
    return 0 unless ref $a eq 'HASH' && ref $b eq 'HASH';
    return join(',', map { "$_=" . ($a->{$_} // '') } sort keys %$b) eq join(',', map { "$_=$b->{$_}" } sort keys %$b);
}

done_testing;
