# Usage over time through its readers, one host, real nginx and keyauthd: a
# known traffic pattern (calls allowed, refused by the key's rate, refused by
# a quota, metered units) is collected every second (keyauth_usage_interval
# 1s), then GET /v1/usage (hours and days, the account and each key, ranges
# given as instants, dates or left out) and keyauthctl usage report (CSV read
# back by Python's csv module, and JSON) give exactly those numbers; every bad
# input of either gets a clear error, and another account's key is 404.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Encode qw(encode_utf8);
use JSON::PP qw(decode_json encode_json);
use POSIX qw(strftime floor ceil);
use Time::HiRes qw(time);
use Time::Local qw(timegm);
use EtcdCluster;
use KeyauthTest qw(wait_until);

sub code_of { (KeyauthTest::json_body($_[0]) // {})->{error}{code} // '' }
my @FIELDS = qw(allowed rateLimited quotaExceeded units);
sub zero { return { map { $_ => 0 } @FIELDS } }
sub counts { my $r = shift; return { map { $_ => $r->{$_} } @FIELDS } }
sub add_to { my ($s, $r) = @_; $s->{$_} += $r->{$_} // 0 for @FIELDS; return $s }
sub iso { strftime('%Y-%m-%dT%H:%M:%S.000Z', gmtime shift) }
sub date_of { strftime('%Y-%m-%d', gmtime shift) }
sub epoch_of {
    my ($y, $m, $d, $H, $M, $S) = shift =~ /^(\d{4})-(\d\d)-(\d\d)(?:T(\d\d):(\d\d):(\d\d))?/ or return -1;
    return timegm($S // 0, $M // 0, $H // 0, $d, $m - 1, $y);
}

my $root = KeyauthTest::root();
my $t = KeyauthTest->new;
my $acc = $t->account(name => 'Acme, "the" tools; Ünïcode');   # a name a CSV must quote
my $other = $t->account(name => 'other');
$t->ctl('plans', 'import', "$root/lmdb_schema/plans.json");
$t->ctl('account', 'set-plan', $acc->{id}, 'unlimited');
my $plain = $t->key(account => $acc->{id}, name => 'plain');
my $slow = $t->key(account => $acc->{id}, name => 'slow', rate => 3);
my $credits = $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'credits, "4 a day"',
                      '--scope', 'ip:read', '--rate', 6000, '--quota', '4/day');
my $stranger = $t->key(account => $other->{id}, name => 'stranger');

$t->start_keyauthd;
$t->start_nginx(http => $t->console_http . "\nkeyauth_zone keys:1m;\nkeyauth_usage_interval 1s;",
                locations => $t->console_locations . $t->metered_locations);
my $console = $t->console_client($acc->{consoleToken});
my $ctl = KeyauthTest::build_dir() . '/keyauthctl';

# ---- the traffic, counted as the test sees it, per key
my %want = map { $_->{id} => zero() } $plain, $slow, $credits, $stranger;
my %status;
sub call {
    my ($path, $key, $units) = @_;
    my $res = $t->request(GET => $path, "Authorization: Bearer $key->{secret}");
    my $w = $want{ $key->{id} };
    my $outcome = $res->{status} == 200 ? 'allowed'
                : $res->{status} == 429 && code_of($res) eq 'RATE_LIMITED' ? 'rateLimited'
                : $res->{status} == 429 && code_of($res) eq 'QUOTA_EXCEEDED' ? 'quotaExceeded'
                : die "unexpected answer $res->{status} to $path: $res->{body}";
    $w->{$outcome}++;
    $w->{units} += $units if $outcome eq 'allowed';
    $status{ $key->{id} }{$outcome}++;
}
my $t0 = time;
call('/v1/ip/8.8.8.8', $plain, 1) for 1 .. 7;
call('/three/x', $plain, 3) for 1 .. 2;
call("/metered/x?u=$_", $plain, $_) for 5, 7;
call('/v1/ip/8.8.8.8', $slow, 1) for 1 .. 8;       # 3 a minute: most are refused
call('/v1/ip/8.8.8.8', $credits, 1) for 1 .. 6;    # 4 a day: 2 refused
call('/v1/ip/8.8.8.8', $stranger, 1) for 1 .. 2;
my $t1 = time;

is_deeply $want{ $plain->{id} }, { allowed => 11, rateLimited => 0, quotaExceeded => 0, units => 25 },
          'plain: 11 calls allowed, 7 + 2 x 3 + 5 + 7 = 25 units';
is_deeply $want{ $credits->{id} }, { allowed => 4, rateLimited => 0, quotaExceeded => 2, units => 4 },
          'credits: 4 allowed, then 2 QUOTA_EXCEEDED';
ok $want{ $slow->{id} }{allowed} >= 1 && $want{ $slow->{id} }{rateLimited} >= 1
   && $want{ $slow->{id} }{allowed} + $want{ $slow->{id} }{rateLimited} == 8, 'slow: allowed, then RATE_LIMITED'
   or diag explain $want{ $slow->{id} };
my $account_want = zero();
add_to($account_want, $want{$_}) for $plain->{id}, $slow->{id}, $credits->{id};

# The range that holds the traffic, whichever hours and days it fell in.
my $h0 = floor($t0 / 3600) * 3600;
my $h1 = (floor($t1 / 3600) + 1) * 3600;
my $d0 = floor($t0 / 86400) * 86400;
my $d1 = (floor($t1 / 86400) + 1) * 86400;

sub usage_get {
    my $q = shift;
    my $res = $console->(GET => "/v1/usage$q");
    return $res;
}
sub totals_of {
    my $q = shift;
    my $res = usage_get($q);
    return $res->{status} == 200 ? counts($res->{json}{totals}) : undef;
}

# ---- GET /v1/usage
my $hours_q = '?granularity=hour&from=' . iso($h0) . '&to=' . iso($h1);
ok wait_until(sub { my $got = totals_of($hours_q);
                    $got && encode_json($got) eq encode_json(counts($account_want)) }, 30,
              'the collections to store the account\'s hours'), 'the collector stored the calls';

subtest 'hours: zero-filled, in order, exactly what was sent' => sub {
    my $res = usage_get($hours_q);
    is $res->{status}, 200, "GET /v1/usage$hours_q";
    my $u = $res->{json};
    is $u->{granularity}, 'hour', 'granularity';
    is $u->{from}, iso($h0), 'from: the hour of the first call, RFC 3339 UTC with milliseconds';
    is $u->{to}, iso($h1), 'to: the end of the hour of the last call';
    is $u->{keyId}, undef, 'keyId: null (all keys)';
    is scalar @{ $u->{series} }, ($h1 - $h0) / 3600, 'one entry per hour';
    is_deeply [ map { $_->{start} } @{ $u->{series} } ], [ map { iso($h0 + 3600 * $_) } 0 .. ($h1 - $h0) / 3600 - 1 ],
              'every hour, in order';
    my $sum = zero();
    add_to($sum, $_) for @{ $u->{series} };
    is_deeply $sum, counts($account_want), 'the series adds up to what was sent';
    is_deeply counts($u->{totals}), counts($account_want), 'totals: what was sent';
    is $res->{headers}{'content-type'}[0], 'application/json', 'JSON';
};

subtest 'days and each key' => sub {
    my $q = '?granularity=day&from=' . date_of($d0) . '&to=' . date_of($d1 - 86400);
    my $u = usage_get($q)->{json};
    is scalar @{ $u->{series} }, ($d1 - $d0) / 86400, 'dates: one entry per day from from to to, both included';
    is $u->{to}, iso($d1), '... to answered as the instant the range ends at (exclusive)';
    is $u->{from}, iso($d0), 'from: the date\'s 00:00Z';
    is_deeply counts($u->{totals}), counts($account_want), 'the account\'s days: what was sent';
    for my $k ($plain, $slow, $credits) {
        for my $g ('hour', 'day') {
            my ($f, $to) = $g eq 'hour' ? ($h0, $h1) : ($d0, $d1);
            my $r = usage_get("?granularity=$g&keyId=$k->{id}&from=" . iso($f) . '&to=' . iso($to));
            is $r->{json}{keyId}, $k->{id}, "keyId echoed ($g)";
            is_deeply counts($r->{json}{totals}), $want{ $k->{id} }, "keyId $k->{id} by $g: what it sent";
        }
    }
    my $before = usage_get('?granularity=day&from=' . date_of($d0 - 5 * 86400) . '&to=' . date_of($d0 - 86400));
    is scalar @{ $before->{json}{series} }, 5, 'five days before the traffic: five entries';
    is_deeply counts($before->{json}{totals}), zero(), '... all zero';
};

subtest 'defaults and alignment' => sub {
    my $u = usage_get('')->{json};
    is $u->{granularity}, 'day', 'granularity: day by default';
    is scalar @{ $u->{series} }, 30, 'the last 30 days';
    my $today = floor(time / 86400) * 86400;
    is $u->{series}[-1]{start}, iso($today), '... ending with today';
    is $u->{to}, iso($today + 86400), '... to the end of today';
    is_deeply counts($u->{totals}), counts($account_want), '... holding the traffic';
    my $h = usage_get('?granularity=hour')->{json};
    is scalar @{ $h->{series} }, 48, 'hours: the last 48';
    my $hour = floor(time / 3600) * 3600;
    is $h->{series}[-1]{start}, iso($hour), '... ending with the current hour';
    is_deeply counts($h->{totals}), counts($account_want), '... holding the traffic';
    my $from_only = usage_get('?granularity=day&from=' . date_of($d0 - 86400))->{json};
    is $from_only->{to}, iso($today + 86400), 'from alone: to the end of today';
    my $odd = usage_get('?granularity=hour&from=2026-11-20T09:30:00Z&to=2026-11-20T10:15:00.5Z')->{json};
    is_deeply [ $odd->{from}, $odd->{to}, scalar @{ $odd->{series} } ],
              [ '2026-11-20T09:00:00.000Z', '2026-11-20T11:00:00.000Z', 2 ],
              'from rounded down, to up: every instant asked for is covered';
    my $offset = usage_get('?granularity=hour&from=2026-11-20T09:00:00%2B05:30&to=2026-11-20T05:00:00Z')->{json};
    is_deeply [ $offset->{from}, scalar @{ $offset->{series} } ], [ '2026-11-20T03:00:00.000Z', 2 ],
              'an offset: read as the instant it names, answered in UTC';
    my $exact = usage_get('?granularity=hour&from=2026-11-20T00:00:00Z&to=2026-11-27T00:00:00Z');
    is $exact->{status}, 200, '168 hours: allowed';
    is scalar @{ $exact->{json}{series} }, 168, '... 168 entries';
    my $year = usage_get('?granularity=day&from=2025-01-01&to=2026-02-04');
    is $year->{status}, 200, '400 days: allowed';
    is scalar @{ $year->{json}{series} }, 400, '... 400 entries';
};

subtest 'to: a date includes that whole day, an instant is exclusive, as keyauthctl reads it' => sub {
    my $day = date_of($d0);
    my $one = usage_get("?granularity=day&from=$day&to=$day");
    is $one->{status}, 200, "from=to=$day: 200";
    is scalar @{ $one->{json}{series} // [] }, 1, '... that one day';
    my $hours = usage_get("?granularity=hour&from=$day&to=$day")->{json};
    is scalar @{ $hours->{series} // [] }, 24, '... in hours, its 24 hours';
    my $excl = usage_get("?granularity=day&from=$day&to=" . iso($d0 + 86400))->{json};
    is scalar @{ $excl->{series} // [] }, 1, 'to the next 00:00 as an instant: the same day, exclusive end';
    my $days = usage_get('?granularity=day&from=' . date_of($d0 - 2 * 86400) . "&to=$day")->{json};
    my ($rc, $out) = run_report('--account', $acc->{id}, '--from', date_of($d0 - 2 * 86400), '--to', $day,
                                '--by', 'day', '--format', 'json');
    my $report = decode_json($out);
    is_deeply [ map { substr($_->{start}, 0, 10) } @{ $days->{series} } ], [ map { $_->{period} } @{ $report->{rows} } ],
              'GET /v1/usage and usage report, the same from and to: the same days';
};

subtest 'bad input: 400 VALIDATION_ERROR naming the field' => sub {
    for ([ '?granularity=week', 'granularity' ],
         [ '?granularity=', 'granularity' ],
         [ '?granularity=HOUR', 'granularity' ],
         [ '?from=yesterday', 'from' ],
         [ '?from=2026-11-20T09:00:00', 'from' ],          # no zone
         [ '?to=2026-13-01', 'to' ],
         [ '?to=2026-02-30', 'to' ],
         [ '?to=', 'to' ],
         [ '?from=2026-11-20&to=2026-11-20T00:00:00Z', 'from' ],  # empty: an instant as to is exclusive
         [ '?to=1970-01-01', 'to' ],                        # the default 30 days would start in 1969
         [ '?from=2026-11-21&to=2026-11-20', 'from' ],      # backwards
         [ '?granularity=hour&from=2026-11-20T00:00:00Z&to=2026-11-27T01:00:00Z', 'to' ],  # 169 hours
         [ '?granularity=day&from=2025-01-01&to=2026-02-05', 'to' ],                        # 401 days
         [ '?granularity=day&keyId=nope', 'keyId' ],
         [ '?keyId=acc_000000000000000000000000', 'keyId' ],
         [ '?limit=5', 'limit' ],
         [ '?granularity=day&granularity=day', 'granularity' ],
         [ '?from=2026-11-01&from=2026-11-02', 'from' ],
         [ '?from=1969-12-31&to=1970-01-02', 'from' ],                                      # before the epoch
         [ '?from=bad&to=bad', 'from' ],                                                   # from named first
         [ '?granularity=day&from=2020-01-01', 'from' ],                                   # to not given
         [ '?from=9999-12-30&to=9999-12-31T00:00:00.001Z', 'to' ],                         # past 9999
         [ '?=day', 'query' ]) {
        my ($q, $field) = @$_;
        my $res = usage_get($q);
        is $res->{status}, 400, "$q: 400";
        is $res->{code}, 'VALIDATION_ERROR', '... VALIDATION_ERROR';
        is $res->{json}{error}{field}, $field, "... field $field";
        like $res->{json}{error}{message}, qr/\S/, '... and a message: ' . ($res->{json}{error}{message} // '');
    }
    my $stray = usage_get('?&granularity=day&&from=2026-11-01&to=2026-11-02&');
    is $stray->{status}, 200, 'stray &s: ignored';
    is scalar @{ $stray->{json}{series} // [] }, 2, '... the range as asked';
    my $esc = usage_get('?from=%zz');
    is $esc->{status}, 400, 'a malformed %-escape: 400';
};

subtest 'keys of another account, unknown keys, tokens and methods' => sub {
    for my $id ($stranger->{id}, 'key_000000000000000000000000') {
        my $res = usage_get("?keyId=$id");
        is $res->{status}, 404, "$id: 404";
        is $res->{code}, 'KEY_NOT_FOUND', '... KEY_NOT_FOUND, as GET /v1/keys/{id}';
    }
    my $mine = $t->console_client($other->{consoleToken})->(GET => "/v1/usage?keyId=$stranger->{id}&from="
                                                                  . date_of($d0) . '&to=' . date_of($d1));
    is_deeply counts($mine->{json}{totals}), $want{ $stranger->{id} }, 'its own account sees it: its 2 calls';
    my $none = $t->request(GET => '/v1/usage');
    is $none->{status}, 401, 'no console token: 401';
    is code_of($none), 'CONSOLE_TOKEN_REQUIRED', '... CONSOLE_TOKEN_REQUIRED';
    is $t->request(GET => '/v1/usage', 'Authorization: Bearer kac_wrong')->{status}, 401, 'a wrong token: 401';
    my $post = $console->(POST => '/v1/usage', {});
    is $post->{status}, 405, 'POST: 405';
    is KeyauthTest::header($post, 'Allow'), 'GET', '... Allow: GET';
};

# ---- keyauthctl usage report
# (exit code, stdout, stderr) of keyauthctl --db DB usage report ARGS
sub run_report { return run_report_on($t, @_) }
sub run_report_on {
    my ($on, @args) = @_;
    my ($out, $err) = ($on->dir . '/report.out', $on->dir . '/report.err');
    my $cmd = join(' ', map { KeyauthTest::_q($_) } $ctl, $on->store_args, 'usage', 'report', @args)
            . " >'$out' 2>'$err'";
    system $cmd;
    my $rc = $? >> 8;
    my $slurp = sub { local (@ARGV, $/) = (shift); <> // '' };
    return ($rc, $slurp->($out), $slurp->($err));
}
# RFC 4180 as a spreadsheet reads it: Python's csv module (strict).
sub parse_csv {
    my ($text, $on) = @_;
    my $file = ($on // $t)->dir . '/parse.csv';
    open my $fh, '>:raw', $file or die $!;
    print $fh $text;
    close $fh;
    my $json = `python3 -c 'import csv, json, sys
with open(sys.argv[1], newline="", encoding="utf-8") as f:
    print(json.dumps(list(csv.reader(f, strict=True))))' '$file'`;
    die "python3 could not read the CSV" if $?;
    my $rows = decode_json($json);
    my $head = shift @$rows;
    return [ map { my %r; @r{@$head} = @$_; \%r } @$rows ], $head;
}
my ($from_day, $to_day) = (date_of($d0), date_of($d1 - 86400));
my $n_days = ($d1 - $d0) / 86400;

subtest 'CSV: every account with use, every day, exactly what was sent' => sub {
    my ($rc, $csv, $err) = run_report('--from', $from_day, '--to', $to_day, '--by', 'day', '--format', 'csv');
    is $rc, 0, 'exit 0' or diag $err;
    unlike $csv, qr/^\xEF\xBB\xBF/, 'no BOM';
    my @lines = split /(?<=\n)/, $csv;
    is scalar(grep { !/\r\n\z/ } @lines), 0, 'every line ends in CRLF';
    my ($rows, $head) = parse_csv($csv);
    is_deeply [ @$head[-4 .. -1] ], \@FIELDS, 'a header row, the four counts last';
    ok((grep { $_ eq 'accountName' } @$head) && (grep { $_ eq 'planId' } @$head), 'account name and plan columns');
    my @mine = grep { $_->{accountId} eq $acc->{id} } @$rows;
    is scalar @mine, $n_days, 'the account: a row per day of the range';
    is encode_utf8($mine[0]{accountName}), 'Acme, "the" tools; Ünïcode', 'its name, quoted and UTF-8, reads back as it is';
    is $mine[0]{planId}, 'unlimited', 'its plan';
    is $mine[0]{planName}, 'Unlimited', 'its plan\'s name';
    my $sum = zero();
    add_to($sum, $_) for @mine;
    is_deeply $sum, counts($account_want), 'its rows add up to what its keys sent';
    my @theirs = grep { $_->{accountId} eq $other->{id} } @$rows;
    my $s2 = zero();
    add_to($s2, $_) for @theirs;
    is_deeply $s2, $want{ $stranger->{id} }, 'the other account: its own calls';
    is scalar(grep { $_->{accountId} ne $acc->{id} && $_->{accountId} ne $other->{id} } @$rows), 0,
       'no other account (none used anything)';
};

subtest 'CSV for spreadsheets: --bom, and every formula lead shown as text' => sub {
    my ($rc, $csv, $err) = run_report('--account', $acc->{id}, '--from', $from_day, '--to', $to_day, '--by', 'day',
                                      '--format', 'csv', '--bom');
    is $rc, 0, '--bom: exit 0' or diag $err;
    like $csv, qr/\A\xEF\xBB\xBFperiod,/, '--bom: the UTF-8 byte order mark, then the header row';
    is((() = $csv =~ /\xEF\xBB\xBF/g), 1, '... once, at the start');
    my ($plain_rc, $plain_csv) = run_report('--account', $acc->{id}, '--from', $from_day, '--to', $to_day,
                                            '--by', 'day', '--format', 'csv');
    is $csv, "\xEF\xBB\xBF$plain_csv", '... and otherwise the same bytes';
    my ($j_rc, undef, $j_err) = run_report('--account', $acc->{id}, '--from', $from_day, '--to', $to_day,
                                          '--by', 'day', '--format', 'json', '--bom');
    is $j_rc, 2, '--bom with JSON: exit 2';
    like $j_err, qr/--bom/, '... naming --bom';
    # (names hold no control character: a tab or CR lead is tests/usage_series_test.cc's)
    for my $lead (';', '=', '+', '-', '@') {
        my $name = "${lead}SUM(1)";
        my $a = $t->account(name => $name);
        my ($n_rc, $out) = run_report('--account', $a->{id}, '--from', $from_day, '--to', $from_day, '--by', 'day');
        my ($rows) = parse_csv($out);
        is $rows->[0]{accountName}, "'$name", "a name led by $lead reads back as text, after an apostrophe";
    }
};

subtest 'JSON, one account, one key, months, zero-filled days' => sub {
    my ($rc, $out, $err) = run_report('--account', $acc->{id}, '--from', $from_day, '--to', $to_day, '--by', 'day',
                                      '--format', 'json');
    is $rc, 0, 'exit 0' or diag $err;
    my $j = decode_json($out);
    is_deeply [ @$j{qw(from to by)} ], [ $from_day, $to_day, 'day' ], 'from, to (inclusive) and by';
    is scalar @{ $j->{rows} }, $n_days, 'a row per day';
    my $sum = zero();
    add_to($sum, $_) for @{ $j->{rows} };
    is_deeply $sum, counts($account_want), 'the account\'s days: what was sent';
    is $j->{rows}[0]{planId}, 'unlimited', 'the plan';

    ($rc, $out, $err) = run_report('--key', $credits->{id}, '--from', $from_day, '--to', $to_day, '--by', 'day',
                                   '--format', 'csv');
    is $rc, 0, '--key: exit 0' or diag $err;
    my ($rows) = parse_csv($out);
    is scalar(grep { $_->{keyId} eq $credits->{id} } @$rows), $n_days, '--key: a row per day, the key named';
    is $rows->[0]{keyName}, 'credits, "4 a day"', '... with its name, quoted';
    is $rows->[0]{accountId}, $acc->{id}, '... and its account';
    $sum = zero();
    add_to($sum, $_) for @$rows;
    is_deeply $sum, $want{ $credits->{id} }, '--key: what that key sent';

    my ($m_from, $m_to) = (date_of($d0 - 40 * 86400), $to_day);
    ($rc, $out, $err) = run_report('--account', $acc->{id}, '--from', $m_from, '--to', $m_to, '--by', 'month',
                                   '--format', 'json');
    is $rc, 0, '--by month: exit 0' or diag $err;
    $j = decode_json($out);
    my @months = map { $_->{period} } @{ $j->{rows} };
    ok(@months >= 2 && !(grep { !/^\d{4}-\d\d$/ } @months), "--by month: a row per calendar month (@months)");
    is_deeply \@months, [ sort @months ], '... in order';
    is_deeply counts($j->{rows}[-1]), counts($account_want), '... the last month holds the traffic'
        if date_of($d0) =~ /^\Q$months[-1]\E/ && date_of($d1 - 86400) =~ /^\Q$months[-1]\E/;
    $sum = zero();
    add_to($sum, $_) for @{ $j->{rows} };
    is_deeply $sum, counts($account_want), '... and the months add up to it';

    ($rc, $out) = run_report('--account', $other->{id}, '--from', date_of($d0 - 3 * 86400), '--to',
                             date_of($d0 - 86400), '--by', 'day', '--format', 'json');
    $j = decode_json($out);
    is scalar @{ $j->{rows} }, 3, 'an account asked for, days without use: still a row per day';
    is_deeply [ map { counts($_) } @{ $j->{rows} } ], [ zero(), zero(), zero() ], '... of zeros';
};

subtest 'bad input of usage report' => sub {
    my @ok = ('--from', $from_day, '--to', $to_day, '--by', 'day');
    for ([ [ @ok, '--bogus' ], 2, qr/usage: keyauthctl/, 'an unknown option: exit 2 and the usage' ],
         [ [ '--to', $to_day, '--by', 'day' ], 2, qr/--from/, '--from missing' ],
         [ [ '--from', $from_day, '--to', $to_day ], 2, qr/--by/, '--by missing' ],
         [ [ '--from', 'yesterday', '--to', $to_day, '--by', 'day' ], 2, qr/--from/, 'a bad date' ],
         [ [ '--from', '2026-02-30', '--to', $to_day, '--by', 'day' ], 2, qr/--from/, 'a date not in the calendar' ],
         [ [ '--from', '2026-11-20T00:00:00Z', '--to', $to_day, '--by', 'day' ], 2, qr/--from/, 'a time, not a date' ],
         [ [ '--from', '2026-11-21', '--to', '2026-11-20', '--by', 'day' ], 2, qr/--to.*--from|--from.*--to/,
           '--to before --from' ],
         [ [ '--from', '2025-01-01', '--to', '2026-02-05', '--by', 'day' ], 2, qr/400/, '401 days' ],
         [ [ @ok[0 .. 3], '--by', 'week' ], 2, qr/--by/, '--by week' ],
         [ [ @ok, '--format', 'xml' ], 2, qr/--format/, '--format xml' ],
         [ [ @ok, '--account', 'acc_nope' ], 2, qr/--account/, 'a malformed account id' ],
         [ [ @ok, '--key', 'key_nope' ], 2, qr/--key/, 'a malformed key id' ],
         [ [ @ok, '--account', 'acc_000000000000000000000000' ], 1, qr/acc_000000000000000000000000/,
           'an unknown account: exit 1' ],
         [ [ @ok, '--key', 'key_000000000000000000000000' ], 1, qr/key_000000000000000000000000/,
           'an unknown key: exit 1' ],
         [ [ @ok, '--account', $acc->{id}, '--key', $stranger->{id} ], 1, qr/\Q$stranger->{id}\E/,
           'another account\'s key: exit 1' ]) {
        my ($args, $want_rc, $msg, $what) = @$_;
        my ($rc, $out, $err) = run_report(@$args);
        is $rc, $want_rc, "$what: exit $want_rc";
        like $err, $msg, '... saying so' or diag $err;
        is $out, '', '... and printing nothing';
    }
    my ($rc, $out, $err) = run_report('--from', '2025-01-02', '--to', '2026-02-05', '--by', 'day', '--format', 'json');
    is $rc, 0, '400 days: allowed' or diag $err;
};

# Many edges: keyauthctl --etcd reads the buckets every edge's syncd put in
# etcd and adds them up (GET /v1/usage on etcd: t/62-usage-edges.t).
subtest 'many edges: keyauthctl --etcd usage report is the sum of both edges' => sub {
    my $etcd = EtcdCluster->new(members => 1);
    my $ops = KeyauthTest->new(etcd => $etcd->endpoints);
    my $a = $ops->account(name => 'edges, "two"');
    my $k = $ops->key(account => $a->{id}, name => 'k');
    my @edges = map {
        my $e = KeyauthTest->new(etcd => $etcd->endpoints);
        $e->start_syncd(args => ['--usage-interval', '1']);
        $e->wait_synced or die "syncd did not sync:\n" . $e->syncd_log;
        $e->start_nginx(http => "keyauth_zone keys:1m;\nkeyauth_usage_interval 1s;", no_init => 1,
                        locations => "location /t/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }\n"
                                   . "location /three/ { keyauth on; keyauth_cost 3; proxy_pass http://tool; }");
        $e;
    } 1 .. 2;
    my $s0 = time;
    my %ok;
    $ok{ $edges[0]->request(GET => '/three/x', "Authorization: Bearer $k->{secret}")->{status} }++ for 1 .. 3;
    $ok{ $edges[1]->request(GET => '/t/x', "Authorization: Bearer $k->{secret}")->{status} }++ for 1 .. 4;
    my $s1 = time;
    is_deeply \%ok, { 200 => 7 }, 'seven calls allowed, three on one edge (3 units each), four on the other';
    my %want = (allowed => 7, rateLimited => 0, quotaExceeded => 0, units => 13);
    my @range = ('--from', date_of($s0), '--to', date_of($s1), '--by', 'day');
    my ($rows, $err);
    ok wait_until(sub {
        my ($rc, $out);
        ($rc, $out, $err) = run_report_on($ops, @range, '--format', 'json');
        return 0 if $rc != 0;
        $rows = [ grep { $_->{accountId} eq $a->{id} } @{ decode_json($out)->{rows} } ];
        my $sum = zero();
        add_to($sum, $_) for @$rows;
        return encode_json($sum) eq encode_json(counts(\%want));
    }, 60, 'both edges\' buckets in etcd'), '--etcd --format json: the sum of both edges' or diag $err, explain $rows;
    my ($rc, $csv, $e2) = run_report_on($ops, @range, '--format', 'csv', '--key', $k->{id});
    is $rc, 0, '--etcd --format csv --key: exit 0' or diag $e2;
    my ($crows) = parse_csv($csv, $ops);
    my $sum = zero();
    add_to($sum, $_) for @$crows;
    is_deeply $sum, \%want, '... the same numbers';
    is $crows->[0]{accountName}, 'edges, "two"', '... the name read back';
    ($rc, undef, $e2) = run_report_on($ops, @range, '--account', 'acc_000000000000000000000000');
    is $rc, 1, '--etcd, an unknown account: exit 1';
};

done_testing;
