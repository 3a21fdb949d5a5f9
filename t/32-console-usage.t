# The developer console page's usage charts (build/console/: console/ plus
# uPlot, vendored by make) in real headless Chromium, against real traffic:
# a key's calls allowed, another's refused by its rate (429 RATE_LIMITED), a
# third's refused by its quota (429 QUOTA_EXCEEDED), through real nginx with
# keyauth_usage_interval 1s. Once GET /v1/usage shows them, the page signs
# in and draws the last 30 days and the last 48 hours; the data the page drew
# (uPlot's own data arrays, and the table beside each chart) is exactly what
# GET /v1/usage answers for the same range, for the account and for one key
# chosen in the select; the quota gauge says what GET /v1/account says. The
# screenshot goes to docs/console-usage.png when KEYAUTH_SCREENSHOT_USAGE is
# set (to that path).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP qw(decode_json encode_json);
use KeyauthTest qw(wait_until);

my $driver = "$FindBin::Bin/lib/console_usage_browser.py";
plan skip_all => 'chromium, chromium-driver or python3-selenium missing (make deps installs them)'
    unless -x '/usr/bin/chromium' && -x '/usr/bin/chromedriver'
        && system('/usr/bin/python3', '-c', 'import selenium') == 0;

my $root = KeyauthTest::root();
my $page = KeyauthTest::console_dir();
ok -s "$page/uPlot.iife.min.js" && -s "$page/index.html", "the built page ($page; make builds it)"
    or BAIL_OUT("$page is not built: run make (after make deps)");

my @FIELDS = qw(allowed rateLimited quotaExceeded units);
sub code_of { (KeyauthTest::json_body($_[0]) // {})->{error}{code} // '' }
sub zero { return { map { $_ => 0 } @FIELDS } }
sub counts { my $r = shift; return { map { $_ => $r->{$_} } @FIELDS } }

my $t = KeyauthTest->new;
my $acc = $t->account(name => 'usage charts');
$t->ctl('plans', 'import', "$root/lmdb_schema/plans.json");
$t->ctl('fx', 'set', '83.50');
$t->ctl('account', 'update', $acc->{id}, '--quota', '1000/month');
my $steady = $t->key(account => $acc->{id}, name => 'steady');
my $slow = $t->key(account => $acc->{id}, name => 'slow <b>&amp;</b>', rate => 3);
my $credits = $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'credits',
                      '--scope', 'ip:read', '--rate', 6000, '--quota', '4/day');
$t->start_keyauthd;
$t->start_nginx(http => $t->console_http . "\nkeyauth_zone keys:1m;\nkeyauth_usage_interval 1s;",
                locations => $t->console_locations . <<"LOC");
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }
        location /api/plans { keyauth off; keyauth_plans; }
        location /console/ {
            alias $page/;
            include $root/nginx_conf/console_page.conf;
        }
LOC
my $console = $t->console_client($acc->{consoleToken});

subtest 'the page and uPlot as nginx serves them: its own files only' => sub {
    my $res = $t->request(GET => '/console/');
    is $res->{status}, 200, 'GET /console/';
    my $csp = KeyauthTest::header($res, 'Content-Security-Policy') // '';
    like $csp, qr/script-src 'self';/, "script-src 'self'";
    like $csp, qr/style-src 'self';/, "style-src 'self'";
    unlike $csp, qr/unsafe|https?:|\*/, 'no unsafe-inline, unsafe-eval, remote origin or wildcard';
    unlike $res->{body}, qr{(?:src|href)="(?:https?:)?//}i, 'the page loads nothing from another origin';
    like $res->{body}, qr{<script src="uPlot\.iife\.min\.js" defer></script>}, 'it loads its own uPlot';
    for ([ 'uPlot.iife.min.js', 'text/javascript' ], [ 'uPlot.min.css', 'text/css' ],
         [ 'uPlot.LICENSE.txt', 'text/plain' ]) {
        my ($file, $type) = @$_;
        my $r = $t->request(GET => "/console/$file");
        is $r->{status}, 200, "GET /console/$file";
        like KeyauthTest::header($r, 'Content-Type') // '', qr/^\Q$type\E/, "... as $type";
    }
    like $t->request(GET => '/console/uPlot.LICENSE.txt')->{body}, qr/MIT License/, 'uPlot\'s license is served beside it';
};

# ---- the traffic, counted as the test sees it, per key
my %want = map { $_->{id} => zero() } $steady, $slow, $credits;
sub call {
    my $key = shift;
    my $res = $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $key->{secret}");
    my $outcome = $res->{status} == 200 ? 'allowed'
                : $res->{status} == 429 && code_of($res) eq 'RATE_LIMITED' ? 'rateLimited'
                : $res->{status} == 429 && code_of($res) eq 'QUOTA_EXCEEDED' ? 'quotaExceeded'
                : die "unexpected answer $res->{status}: $res->{body}";
    $want{ $key->{id} }{$outcome}++;
    $want{ $key->{id} }{units}++ if $outcome eq 'allowed';
}
call($steady) for 1 .. 9;
call($slow) for 1 .. 7;      # 3 a minute: most are refused
call($credits) for 1 .. 6;   # 4 a day: 2 refused
my $account_want = zero();
for my $k (values %want) { $account_want->{$_} += $k->{$_} for @FIELDS }
is_deeply $want{ $credits->{id} }, { allowed => 4, rateLimited => 0, quotaExceeded => 2, units => 4 },
    'credits: 4 allowed, then 2 QUOTA_EXCEEDED';
ok $want{ $slow->{id} }{allowed} >= 1 && $want{ $slow->{id} }{rateLimited} >= 1, 'slow: allowed, then RATE_LIMITED'
    or diag explain $want{ $slow->{id} };

# The collector files them within a second or so: wait for GET /v1/usage to
# show all of them (days and hours), and for the account's quota to count them.
sub totals_of {
    my $res = $console->(GET => shift);
    return $res->{status} == 200 ? encode_json(counts($res->{json}{totals})) : '';
}
ok wait_until(sub { totals_of('/v1/usage?granularity=day') eq encode_json($account_want)
                    && totals_of('/v1/usage?granularity=hour') eq encode_json($account_want) }, 30,
              'GET /v1/usage to show the calls'), 'the collector stored the calls'
    or diag totals_of('/v1/usage?granularity=day');
ok wait_until(sub { my $q = $console->(GET => '/v1/account')->{json}{quota};
                    $q && defined $q->{used} && $q->{used} == $account_want->{units} }, 30,
              'the account quota to count the units'), "the account's quota counts $account_want->{units} units";

# ---- the browser
my $shot = $ENV{KEYAUTH_SCREENSHOT_USAGE} // $t->dir . '/console-usage.png';
my $base = 'http://127.0.0.1:' . $t->port;
my $out = `/usr/bin/python3 $driver $base $acc->{consoleToken} $slow->{id} $shot 2>&1`;
is $? >> 8, 0, 'the browser ran' or diag $out;
my ($json) = $out =~ /^(\{.*\})$/m;
my $seen = eval { decode_json($json // '') } // {};
ok $seen->{uplot_loaded}, 'uPlot loaded (from the page\'s own origin)';

# What a chart must hold for an API answer: x the periods' starts in epoch
# seconds, then the stack top down (all three, allowed + rate-limited,
# allowed); the table: each period with its four counts, then the totals.
sub epoch { my ($y, $m, $d, $H) = $_[0] =~ /^(\d{4})-(\d\d)-(\d\d)T(\d\d):00:00\.000Z$/ or die "not a period start: $_[0]";
            require Time::Local; return Time::Local::timegm(0, 0, $H, $d, $m - 1, $y) }
sub drawn_from {
    my $u = shift;
    my @s = @{ $u->{series} };
    return [ [ map { epoch($_->{start}) } @s ],
             [ map { $_->{allowed} + $_->{rateLimited} + $_->{quotaExceeded} } @s ],
             [ map { $_->{allowed} + $_->{rateLimited} } @s ],
             [ map { $_->{allowed} } @s ] ];
}
sub label { my ($start, $g) = @_; my ($d, $h) = $start =~ /^(\d{4}-\d\d-\d\d)T(\d\d)/; $g eq 'hour' ? "$d $h:00" : $d }
sub table_from {
    my $u = shift;
    return [ map { my $p = $_; [ $p->{start}, label($p->{start}, $u->{granularity}), map { "$p->{$_}" } @FIELDS ] }
             @{ $u->{series} } ];
}

for my $view ([ 'account', '', 'the account' ], [ 'key', $slow->{id}, "one key chosen in the select ($slow->{id})" ]) {
    my ($name, $key_id, $what) = @$view;
    for my $chart ([ 'daily', 'day', 30 ], [ 'hourly', 'hour', 48 ]) {
        my ($c, $g, $n) = @$chart;
        subtest "$what, $c" => sub {
            my $drawn = $seen->{$name}{$c} // {};
            is $drawn->{granularity}, $g, "granularity $g";
            is $drawn->{keyId}, $key_id, $key_id ? 'the key chosen' : 'all keys';
            my $q = "/v1/usage?granularity=$g&from=$drawn->{from}&to=$drawn->{to}" . ($key_id ? "&keyId=$key_id" : '');
            my $res = $console->(GET => $q);
            is $res->{status}, 200, "GET $q";
            my $u = $res->{json};
            is scalar @{ $u->{series} }, $n, "$n periods";
            is_deeply counts($u->{totals}), $key_id ? $want{$key_id} : $account_want, '... holding the traffic sent';
            ok $drawn->{canvas}{width} > 0 && $drawn->{canvas}{height} > 0
               && $drawn->{canvas}{shownWidth} > 0 && $drawn->{canvas}{shownHeight} > 0,
               "a uPlot canvas of nonzero size ($drawn->{canvas}{shownWidth} x $drawn->{canvas}{shownHeight})";
            is_deeply $drawn->{data}, drawn_from($u), 'the data uPlot drew is the API\'s, stacked';
            is_deeply $drawn->{seriesLabels}, [ $g eq 'hour' ? 'Hour (UTC)' : 'Day (UTC)', 'Quota exceeded', 'Rate-limited', 'Allowed' ],
                'its series';
            is_deeply $drawn->{table}, table_from($u), 'the table beside it: the same numbers';
            is_deeply $drawn->{total}, [ map { "$u->{totals}{$_}" } @FIELDS ], '... and the totals';
            my $range = '(' . label($u->{series}[0]{start}, $g) . ' to ' . label($u->{series}[-1]{start}, $g) . ' UTC)';
            is $drawn->{range}, $range, "the heading's range names the first and the last $g shown: $range";
        };
    }
}
my @options = @{ $seen->{select_options} // [] };
is_deeply [ $options[0], sort @options[1 .. $#options] ], [ '', sort map { $_->{id} } $steady, $slow, $credits ],
    'the select: the account, then each key listed'
    or diag explain \@options;
is $seen->{select_label}, "slow <b>&amp;</b> (" . substr($slow->{secret}, 0, 12) . "\x{2026})",
    'a key\'s name in it as text, never markup';

# The gauge, from GET /v1/account: "612 of 1,000 units this month, resets 1 Dec".
my $quota = $console->(GET => '/v1/account')->{json}{quota};
my @MON = qw(Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec);
sub grouped { my $n = reverse shift; $n =~ s/(\d{3})(?=\d)/$1,/g; return scalar reverse $n }
my ($y, $m, $d) = $quota->{resetsAt} =~ /^(\d{4})-(\d\d)-(\d\d)T/;
my $this_year = (gmtime)[5] + 1900;
my $gauge = grouped($quota->{used}) . ' of ' . grouped($quota->{units}) . ' units this month, resets '
          . ($d + 0) . " $MON[$m - 1]" . ($y == $this_year ? '' : " $y");
is $seen->{gauge}{text}, $gauge, "the gauge says what GET /v1/account says: \"$gauge\"";
ok $seen->{gauge}{meter_shown}, '... with a meter';
is_deeply [ $seen->{gauge}{meter_value}, $seen->{gauge}{meter_max} ], [ $quota->{used}, $quota->{units} ],
    "... at $quota->{used} of $quota->{units}";

my $gone = $seen->{after_sign_out} // {};
is_deeply [ @$gone{qw(charts canvases rows options quota)} ], [ undef, 0, 0, 1, "\x{2026}" ],
    'signed out: no chart, no table row, no key in the select, no quota';
is_deeply $seen->{console_errors} // [ 'none read' ], [], 'no error in the browser console (CSP included)';
ok -s $shot, "a screenshot: $shot";

done_testing;
