# The admin API's usage routes end to end (issue 45), one host, real nginx
# and keyauthd: 1,500 accounts made through the admin API, each key called a
# known number of times and collected every second; then GET
# /v1/admin/usage gives any account's, one key's or everyone's numbers, and
# GET /v1/admin/usage/report streams (chunked, in more than one piece) the
# very bytes of keyauthctl usage report, CSV and JSON, by day and by month,
# for all accounts or one. Every bad input is a clear 4xx.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP qw(decode_json);
use POSIX qw(strftime);
use KeyauthTest qw(wait_until);

sub h { KeyauthTest::header(@_) }

my $root = KeyauthTest::root();
my $t = KeyauthTest->new;
$t->ctl('init');
$t->ctl('plans', 'import', "$root/lmdb_schema/plans.json");
my $plan = decode_json(do { local (@ARGV, $/) = ("$root/lmdb_schema/plans.json"); <> });
$plan = (ref $plan eq 'HASH' ? $plan->{plans} : $plan)->[0]{id};
my $ops = $t->ctl('admin-token', 'create', '--name', 'ops', '--scope', '*');
my $billing = $t->ctl('admin-token', 'create', '--name', 'billing', '--scope', 'usage:read');
my $support = $t->ctl('admin-token', 'create', '--name', 'support', '--scope', 'accounts:read');

$t->start_keyauthd(admin => 1);
$t->start_nginx(http => "keyauth_zone keys:4m;\nkeyauth_usage_interval 1s;",
                locations => "        location /v1/ip/ { keyauth on; keyauth_scope ip:read; ip_lookup; }\n");
my $admin = $t->admin_client($ops->{token});
my $bill = $t->admin_client($billing->{token});
my $ctl = KeyauthTest::build_dir() . '/keyauthctl';

# ---- 1,500 accounts, a key each, names a CSV must quote among them
my $n = 1500;
my (@accs, @keys, %calls);
for my $i (1 .. $n) {
    my $name = $i % 7 ? "bulk $i" : qq{Bulk, "$i" \x{dc}n\x{ef}code};
    my $a = $admin->(POST => '/v1/admin/accounts',
                     { name => $name, rateLimitPerMinute => 6000, externalId => "cus_$i",
                       ($i % 3 ? () : (planId => $plan)) });
    $a->{status} == 201 or BAIL_OUT("account $i: $a->{status} $a->{body}");
    my $k = $admin->(POST => "/v1/admin/accounts/$a->{json}{id}/keys",
                     { name => "key $i", scopes => ['ip:read'], rateLimitPerMinute => 6000 });
    $k->{status} == 201 or BAIL_OUT("key $i: $k->{status} $k->{body}");
    push @accs, $a->{json}{id};
    push @keys, $k->{json};
}
my $total = 0;
for my $i (0 .. $#keys) {
    for (1 .. 1 + $i % 3) {
        my $s = $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $keys[$i]{secret}")->{status};
        $s == 200 or BAIL_OUT("call of key $i: $s");
        $calls{ $accs[$i] }++;
        $total++;
    }
}
ok wait_until(sub { ($bill->(GET => '/v1/admin/usage?granularity=day')->{json}{totals}{allowed} // 0) == $total },
              60, 'the usage collected'),
    "GET /v1/admin/usage without accountId: every account's $total calls";

my $today = strftime('%Y-%m-%d', gmtime);
my $month = substr($today, 0, 7);

subtest 'GET /v1/admin/usage: any account, one key, everyone' => sub {
    my $u = $bill->(GET => "/v1/admin/usage?accountId=$accs[5]&granularity=day");
    is $u->{status}, 200, 'one account';
    is $u->{json}{totals}{allowed}, $calls{ $accs[5] }, '... its calls';
    is $u->{json}{accountId}, $accs[5], '... named in the answer';
    my $k = $bill->(GET => "/v1/admin/usage?keyId=$keys[7]{id}&granularity=hour");
    is $k->{json}{totals}{allowed}, $calls{ $accs[7] }, 'keyId alone: that key, by hour';
    is $k->{json}{accountId}, $accs[7], '... of its account';
    is $bill->(GET => "/v1/admin/usage?accountId=$accs[1]&keyId=$keys[2]{id}")->{code}, 'KEY_NOT_FOUND',
        "another account's key: 404 KEY_NOT_FOUND";
    is $bill->(GET => '/v1/admin/usage?accountId=acc_000000000000000000000000')->{code}, 'ACCOUNT_NOT_FOUND',
        'an account that does not exist: 404 ACCOUNT_NOT_FOUND';
    my $bad = $bill->(GET => '/v1/admin/usage?accountId=nope');
    is_deeply [ $bad->{status}, $bad->{json}{error}{field} ], [ 400, 'accountId' ], 'a malformed accountId: 400';
    is $bill->(GET => '/v1/admin/usage?account=x')->{json}{error}{field}, 'account', 'an unknown parameter: 400';
    is $bill->(GET => '/v1/admin/usage?granularity=week')->{json}{error}{field}, 'granularity',
        'the ranges of GET /v1/usage, its errors too';
    my $no = $t->admin_client($support->{token})->(GET => '/v1/admin/usage');
    is_deeply [ $no->{status}, $no->{json}{error}{scope} ], [ 403, 'usage:read' ], 'without usage:read: 403';
};

# keyauthctl usage report's stdout, byte for byte
sub cli_report {
    my @args = @_;
    my $q = join ' ', map { "'$_'" } @args;
    my $out = `'$ctl' --db '@{[ $t->db ]}' usage report $q`;
    die "keyauthctl usage report @args: exit " . ($? >> 8) if $?;
    return $out;
}

subtest 'the report streams the bytes of keyauthctl usage report' => sub {
    for my $by ('day', 'month') {
        my $r = $bill->(GET => "/v1/admin/usage/report?from=$today&to=$today&by=$by");
        is $r->{status}, 200, "by $by: 200";
        like h($r, 'Content-Type'), qr{^text/csv; charset=utf-8$}, '... text/csv by default';
        like h($r, 'Transfer-Encoding'), qr/chunked/, '... streamed: chunked';
        ok !defined h($r, 'Content-Length'), '... never built whole to measure it';
        my $cli = cli_report('--from', $today, '--to', $today, '--by', $by);
        ok defined $r->{body} && $r->{body} eq $cli, "... equal byte for byte to keyauthctl's CSV ("
            . length($cli) . ' bytes)';
        my $pieces = grep { hex $_ } $r->{raw} =~ /\r\n([0-9a-fA-F]+)\r\n/g;
        cmp_ok $pieces, '>=', 2, "... in more than one piece ($pieces)";
        my @lines = split /\r\n/, $cli;
        is scalar(@lines), 1 + $n, "... a row for each of the $n accounts, after the header";
    }
    my ($row) = grep { /^$today,$accs[6],/ } split /\r\n/, cli_report('--from', $today, '--to', $today, '--by', 'day');
    like $row, qr/^\Q$today,$accs[6],"Bulk, ""7"" \E/, 'a name with a comma and quotes is quoted';
    like $row, qr/,$calls{$accs[6]},0,0,$calls{$accs[6]}$/, "... with that account's numbers";

    my $json = $bill->(GET => "/v1/admin/usage/report?from=$today&to=$today&by=month", undef, 'Accept: application/json');
    is h($json, 'Content-Type'), 'application/json', 'Accept: application/json: JSON';
    is $json->{body}, cli_report('--from', $today, '--to', $today, '--by', 'month', '--format', 'json'),
        "... the bytes of keyauthctl's --format json";
    my $parsed = decode_json($json->{body});
    is scalar(@{ $parsed->{rows} }), $n, "... $n rows";
    my $sum = 0;
    $sum += $_->{allowed} for @{ $parsed->{rows} };
    is $sum, $total, '... adding up to every call';
    is $parsed->{rows}[0]{period}, $month, '... each of the month';

    my $one = $bill->(GET => "/v1/admin/usage/report?from=$today&to=$today&by=day&accountId=$accs[9]");
    is $one->{body}, cli_report('--from', $today, '--to', $today, '--by', 'day', '--account', $accs[9]),
        'accountId: the bytes of --account';
    my $key = $bill->(GET => "/v1/admin/usage/report?from=$today&to=$today&by=day&keyId=$keys[9]{id}");
    is $key->{body}, cli_report('--from', $today, '--to', $today, '--by', 'day', '--key', $keys[9]{id}),
        'keyId: the bytes of --key';
    like $key->{body}, qr/^period,accountId,accountName,planId,planName,keyId,keyName,/, '... with the key columns';
};

subtest 'bad input of the report: a clear 4xx' => sub {
    my $base = "/v1/admin/usage/report?from=$today&to=$today";
    my $field = sub { my $r = $bill->(GET => shift, undef, @_); return [ $r->{status}, $r->{json}{error}{field} // $r->{code} ] };
    is_deeply $field->("$base"), [ 400, 'by' ], 'no by: 400 naming by';
    is_deeply $field->("$base&by=week"), [ 400, 'by' ], 'by=week: 400';
    is_deeply $field->("/v1/admin/usage/report?from=2026-13-01&to=$today&by=day"), [ 400, 'from' ], 'a bad date: 400';
    is_deeply $field->("/v1/admin/usage/report?from=$today&to=2020-01-01&by=day"), [ 400, 'to' ], 'to before from: 400';
    is_deeply $field->("/v1/admin/usage/report?from=2024-01-01&to=$today&by=day"), [ 400, 'to' ],
        'more than 400 days: 400';
    is_deeply $field->("$base&by=day&format=xml"), [ 400, 'format' ], 'an unknown parameter: 400';
    is_deeply $field->("$base&by=day&accountId=acc_000000000000000000000000"), [ 404, 'ACCOUNT_NOT_FOUND' ],
        'an account that does not exist: 404';
    is_deeply $field->("$base&by=day&accountId=$accs[0]&keyId=$keys[1]{id}"), [ 404, 'KEY_NOT_FOUND' ],
        "another account's key: 404";
    is_deeply $field->("$base&by=day", 'Accept: image/png'), [ 406, 'NOT_ACCEPTABLE' ], 'Accept: image/png: 406';
    is $t->admin_client($support->{token})->(GET => "$base&by=day")->{json}{error}{scope}, 'usage:read',
        'without usage:read: 403 naming it';
    is KeyauthTest::http_request($t->keyauthd_port, GET => "$base&by=day",
                                 "Authorization: Bearer $billing->{token}")->{status}, 404,
        "the console's listener never serves it";
};

done_testing;
