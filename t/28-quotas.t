# Quotas at the edge, one host: an account's monthly quota is exact across
# two workers, concurrent clients, a reload, a binary upgrade and a restart;
# the period refills at the calendar boundary (crossed under faketime), not
# a second before; keyauth_cost and keyauth_cost_header charge what they
# say; a one-time key; a keyauth_zone too small for the keys refills
# nothing; a plan's quota follows set-plan and the account's override.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use POSIX qw(strftime);
use Time::HiRes qw(time sleep);
use Time::Local qw(timegm);
use IO::Select;
use IO::Socket::INET;
use KeyauthTest qw(wait_until http_request);

sub h { KeyauthTest::header(@_) }
sub code_of { (KeyauthTest::json_body($_[0]) // {})->{error}{code} // '' }

my $LOCATIONS = <<'LOC';
        location /v1/ip/ {
            keyauth on;
            keyauth_scope ip:read;
            add_header X-Left $keyauth_quota_remaining always;
            proxy_pass http://tool;
        }
        location /five/ {
            keyauth on;
            keyauth_cost 5;
            add_header X-Left $keyauth_quota_remaining always;
            proxy_pass http://tool;
        }
        location /free/ {
            keyauth on;
            keyauth_cost 0;
            add_header X-Left $keyauth_quota_remaining always;
            proxy_pass http://tool;
        }
        location /metered/ {
            keyauth on;
            keyauth_cost_header X-Units;
            add_header X-Left $keyauth_quota_remaining always;
            proxy_pass http://127.0.0.1:$server_port/units/$is_args$args;
        }
        location /units/ {
            add_header X-Units $arg_u;
            return 200 "counted\n";
        }
        # admitted at 5 units, then redirected into a metered location
        location /five-then-metered/ {
            keyauth on;
            keyauth_cost 5;
            add_header X-Left $keyauth_quota_remaining always;
            try_files /nonexistent @metered;
        }
        location @metered {
            keyauth on;
            keyauth_cost_header X-Units;
            add_header X-Left $keyauth_quota_remaining always;
            proxy_pass http://127.0.0.1:$server_port/units/$is_args$args;
        }
        location = /status {
            keyauth_status;
        }
LOC

# $clients processes send $each requests at once; returns (200s, 429
# QUOTA_EXCEEDED, anything else).
sub burst {
    my ($t, $clients, $each, $path, $secret) = @_;
    my @kids;
    for my $c (1 .. $clients) {
        my $out = $t->dir . "/burst-$c.out";
        my $pid = fork // die "fork: $!";
        if ($pid == 0) {
            my ($ok, $quota, $other) = (0, 0, 0);
            for (1 .. $each) {
                my $res = eval { $t->request(GET => $path, "Authorization: Bearer $secret") };
                my $st = $res ? $res->{status} : 0;
                if ($st == 200) { $ok++ }
                elsif ($st == 429 && code_of($res) eq 'QUOTA_EXCEEDED') { $quota++ }
                else { $other++ }
            }
            open my $fh, '>', $out or die $!;
            print $fh "$ok $quota $other\n";
            close $fh;
            POSIX::_exit(0);
        }
        push @kids, [$pid, $out];
    }
    my @sum = (0, 0, 0);
    for my $k (@kids) {
        waitpid $k->[0], 0;
        open my $fh, '<', $k->[1] or die "no result from client $k->[0]";
        my @n = split ' ', <$fh>;
        $sum[$_] += $n[$_] for 0 .. 2;
    }
    return @sum;
}

# Seconds from the instant of an answer's Date header to the 1st of the
# next month, 00:00 UTC.
sub seconds_to_next_month {
    my $date = shift;
    my ($d, $mon, $y, $hh, $mm, $ss) = $date =~ /, (\d+) (\w+) (\d+) (\d+):(\d+):(\d+) GMT/ or return -1;
    my %m = (Jan => 0, Feb => 1, Mar => 2, Apr => 3, May => 4, Jun => 5, Jul => 6, Aug => 7,
             Sep => 8, Oct => 9, Nov => 10, Dec => 11);
    my $now = timegm($ss, $mm, $hh, $d, $m{$mon}, $y);
    my ($ny, $nm) = $m{$mon} == 11 ? ($y + 1, 0) : ($y, $m{$mon} + 1);
    return timegm(0, 0, 0, 1, $nm, $ny) - $now;
}

subtest 'a 100-unit monthly account quota: exactly 100 across workers, reload, binary upgrade, restart' => sub {
    my $t = KeyauthTest->new(workers => 2);
    my $acc = $t->account;
    $t->ctl('account', 'update', $acc->{id}, '--quota', '100/month');
    my $key = $t->key(account => $acc->{id});
    $t->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATIONS);
    my $path = '/v1/ip/8.8.8.8';

    my @a = burst($t, 6, 10, $path, $key->{secret});
    is_deeply \@a, [60, 0, 0], '6 clients x 10: all 60 admitted';

    ok $t->signal_nginx('reload'), 'nginx -s reload';
    my @b = burst($t, 6, 5, $path, $key->{secret});
    is_deeply \@b, [30, 0, 0], 'after the reload, 30 more: admitted (90 used)';

    my $old = $t->pid;
    ok kill('USR2', $old), 'binary upgrade: USR2';
    my $new = wait_until(sub {
        my $pid = $t->pid;
        return $pid && $pid != $old && -e $t->dir . '/nginx.pid.oldbin' ? $pid : 0;
    }, 30, 'the new master');
    ok $new, 'the new master runs beside the old one';
    # both generations' workers serve this burst: they share the ledger
    my @c = burst($t, 8, 5, $path, $key->{secret});
    is $c[0], 10, 'during the upgrade, 40 requests: exactly the 10 units left are admitted';
    is $c[1], 30, '... and 30 are refused with QUOTA_EXCEEDED';
    is $c[2], 0, '... and nothing else';
    kill 'QUIT', $old;
    ok wait_until(sub { !kill 0, $old }, 30, 'the old master to exit'), 'the old master is gone';

    $t->stop_nginx;
    $t->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATIONS, no_init => 1);
    my @d = burst($t, 2, 5, $path, $key->{secret});
    is_deeply \@d, [0, 10, 0], 'after a full restart: nothing more is admitted';

    my $res = $t->request(GET => $path, "Authorization: Bearer $key->{secret}");
    is $res->{status}, 429, 'the next call: 429';
    is code_of($res), 'QUOTA_EXCEEDED', 'code QUOTA_EXCEEDED';
    my $want = seconds_to_next_month(h($res, 'Date'));
    my $retry = h($res, 'Retry-After') // -1;
    cmp_ok abs($retry - $want), '<=', 2, "Retry-After ($retry s) reaches the 1st of next month ($want s)";
    like h($res, 'RateLimit-Policy'), qr/"per-key";q=6000;w=60, "account-quota";q=100;w=\d+$/,
        'RateLimit-Policy lists every policy in force';
    like h($res, 'RateLimit'), qr/^"account-quota";r=0;t=\d+$/, 'RateLimit: the quota, used up';
};

subtest 'the month ends at 00:00 UTC on the 1st: refilled then, not a second before' => sub {
    my $t = KeyauthTest->new(workers => 2);
    my $acc = $t->account;
    $t->ctl('account', 'update', $acc->{id}, '--quota', '3/month');
    my $key = $t->key(account => $acc->{id});
    $t->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATIONS,
                    faketime => '@2026-11-30 23:59:53');
    my $get = sub { $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $key->{secret}") };
    my $first = $get->();
    like h($first, 'Date'), qr/30 Nov 2026 23:59:5\d GMT/, "nginx's clock is near the end of November";
    is $first->{status}, 200, 'unit 1 of 3';
    is $get->()->{status}, 200, 'unit 2';
    is $get->()->{status}, 200, 'unit 3';
    my ($last_refused, $first_admitted, @refusals);
    wait_until(sub {
        my $res = $get->();
        if ($res->{status} == 200) { $first_admitted = $res; return 1 }
        push @refusals, $res;
        $last_refused = $res;
        sleep 0.1;
        return 0;
    }, 30, 'the quota to refill');
    ok @refusals, scalar(@refusals) . ' calls refused before the refill';
    like h($last_refused, 'Date'), qr/30 Nov 2026 23:59:5\d GMT/, 'the last refusal: still November';
    is code_of($last_refused), 'QUOTA_EXCEEDED', '... QUOTA_EXCEEDED';
    my $retry = h($refusals[0], 'Retry-After') // -1;
    my $want = seconds_to_next_month(h($refusals[0], 'Date'));
    cmp_ok abs($retry - $want), '<=', 1, "Retry-After ($retry s) counts down to midnight ($want s)";
    ok $first_admitted, 'a call is admitted again';
    like h($first_admitted, 'Date') // '', qr/01 Dec 2026 00:00:\d\d GMT/, '... from December 1st, 00:00 UTC';
    like h($first_admitted, 'RateLimit-Policy'), qr/"account-quota";q=3;w=2678400/,
        "December's window: 31 days";
};

subtest 'keyauth_cost and keyauth_cost_header charge what they say' => sub {
    my $t = KeyauthTest->new(workers => 2);
    my $acc = $t->account;
    $t->ctl('account', 'update', $acc->{id}, '--quota', '100/day');
    my $key = $t->key(account => $acc->{id});
    $t->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATIONS);
    my $auth = "Authorization: Bearer $key->{secret}";
    my $left = sub { my $res = $t->request(GET => $_[0], $auth); ($res->{status}, h($res, 'X-Left'), $res) };

    my ($st, $l) = $left->('/v1/ip/8.8.8.8');
    is "$st $l", '200 99', 'keyauth_cost 1 (the default): 99 left';
    ($st, $l) = $left->('/five/');
    is "$st $l", '200 94', 'keyauth_cost 5: 94 left';
    ($st, $l) = $left->('/free/');
    is "$st $l", '200 94', 'keyauth_cost 0: free';

    my @cases = (['7', 87, 'reported 7'], ['0', 87, 'reported 0'], ['lots', 86, 'garbage: the static 1'],
                 ['-3', 85, 'a negative number: the static 1'],
                 ['99999999999999999999', 84, 'an enormous number: the static 1'],
                 ['', 83, 'nothing: the static 1']);
    for my $c (@cases) {
        my ($st, $l, $res) = $left->("/metered/?u=$c->[0]");
        is "$st $l", "200 $c->[1]", "metered, $c->[2]: $c->[1] left";
        ok !defined h($res, 'X-Units'), '... and X-Units never reaches the client';
    }
    like $t->error_log, qr/keyauth: the upstream's answer has a malformed "X-Units"/, 'a malformed cost is logged';
    my $unlimited = $t->key(account => $t->account(name => 'no quota')->{id});
    my $plain = $t->request(GET => '/metered/?u=7', "Authorization: Bearer $unlimited->{secret}");
    is $plain->{status}, 200, 'a key under no quota, metered';
    ok !defined h($plain, 'X-Units'), '... X-Units is stripped for it too';

    ($st, $l) = $left->('/metered/?u=90');
    is "$st $l", '200 -7', 'admitted with 83 left, charged 90: the balance goes below zero';
    my (undef, undef, $res) = $left->('/metered/?u=1');
    is $res->{status}, 429, 'the next metered call is refused';
    is code_of($res), 'QUOTA_EXCEEDED', '... QUOTA_EXCEEDED';
    ($st, $l) = $left->('/free/');
    is "$st $l", '200 -7', 'a free call still passes';

    my $status = $t->request(GET => '/status')->{body} // '';
    like $status, qr/^keyauth_requests_total\{outcome="quota_exceeded"\} 1$/m,
        'keyauth_status counts the quota_exceeded outcome';
    # 1 + 5 + 7 + 0 + 1 + 1 + 1 + 1 + 90 charged; the free calls nothing
    like $status, qr/^keyauth_quota_units_charged_total 107$/m, '... and every unit charged';
};

# Found by review: the cost header of a location an admitted call was
# redirected into reached the client. The location that admits a call sets
# its cost; the cost header of one it is redirected into is still stripped.
subtest 'a call redirected after its admission: charged once, as admitted, and no cost header sent' => sub {
    my $t = KeyauthTest->new;
    my $acc = $t->account;
    $t->ctl('account', 'update', $acc->{id}, '--quota', '100/day');
    my $key = $t->key(account => $acc->{id});
    $t->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATIONS);
    my $res = $t->request(GET => '/five-then-metered/?u=7', "Authorization: Bearer $key->{secret}");
    is $res->{status}, 200, 'served by the metered location';
    like $res->{body}, qr/counted/, '... from its upstream';
    is h($res, 'X-Left'), 95, 'charged the 5 units of the location that admitted it, once';
    ok !defined h($res, 'X-Units'), 'and X-Units never reaches the client';
};

# Found by review: a metered call is charged when its answer's header arrives;
# a client that hung up before it came called for free. The location's
# keyauth_cost is charged then, at the log phase.
subtest 'a metered call whose client hangs up before the answer is charged keyauth_cost' => sub {
    my $t = KeyauthTest->new;
    my $acc = $t->account;
    $t->ctl('account', 'update', $acc->{id}, '--quota', '100/day');
    my $key = $t->key(account => $acc->{id});
    # an upstream that takes the request and never answers
    my $silent = IO::Socket::INET->new(Listen => 8, LocalAddr => '127.0.0.1', LocalPort => 0, ReuseAddr => 1)
        or die "listen: $!";
    my $port = $silent->sockport;
    $t->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATIONS . <<LOC);
        location /metered-silent/ {
            keyauth on;
            keyauth_cost 2;
            keyauth_cost_header X-Units;
            proxy_read_timeout 60s;
            proxy_pass http://127.0.0.1:$port;
        }
LOC
    my $auth = "Authorization: Bearer $key->{secret}";
    my $left = sub { h($t->request(GET => '/free/', $auth), 'X-Left') // '' };
    is $left->(), 100, 'nothing used';

    my $client = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t->port) or die "connect: $!";
    print $client "GET /metered-silent/ HTTP/1.1\r\nHost: localhost\r\n$auth\r\n\r\n";
    ok(IO::Select->new($silent)->can_read(30), 'admitted: nginx passes the call to the upstream');
    my $held = $silent->accept;
    close $client;  # before any answer
    ok wait_until(sub { $left->() eq '98' }, 30, 'the hung-up call to be charged'),
        'the hung-up call is charged its keyauth_cost, 2';
    close $held if $held;
};

subtest 'a one-time key (total quota of 1), and a zone too small refills nothing' => sub {
    my $t = KeyauthTest->new(workers => 2);
    my $acc = $t->account;
    my $once = $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'once', '--scope', 'ip:read',
                       '--rate', 6000, '--quota', '1/total');
    my $daily = $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'daily', '--scope', 'ip:read',
                        '--rate', 6000, '--quota', '2/day');
    my @others = @{ $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'other', '--scope', 'ip:read',
                            '--rate', 6000, '--count', 300)->{keys} };
    # the smallest zone: its rate and usage slots are reused all the time
    $t->start_nginx(http => 'keyauth_zone keys:32k;', locations => $LOCATIONS);
    my $get = sub { $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $_[0]") };
    is $get->($once->{secret})->{status}, 200, 'the one-time key works once';
    my $res = $get->($once->{secret});
    is $res->{status}, 429, 'then 429';
    is code_of($res), 'QUOTA_EXCEEDED', '... QUOTA_EXCEEDED';
    ok !defined h($res, 'Retry-After'), 'no Retry-After: credits never refill';
    like h($res, 'RateLimit'), qr/^"key-quota";r=0$/, 'RateLimit: the key\'s credits, no reset';
    is $get->($daily->{secret})->{status}, 200, 'the daily key: 1 of 2';
    is $get->($daily->{secret})->{status}, 200, '... 2 of 2';
    # every other key through the zone, twice: the quota'd keys' states go
    for (1 .. 2) { $get->($_->{secret}) for @others }
    like $t->error_log, qr/keyauth_zone "keys" (is full|has no room)/, 'the zone was too small';
    is $get->($once->{secret})->{status}, 429, 'the one-time key is still used up';
    is $get->($daily->{secret})->{status}, 429, 'the daily key is still used up';
};

subtest 'keyauth_usage_db off: usage is not stored, quotas still hold (#44)' => sub {
    my $t = KeyauthTest->new(workers => 2);
    my $acc = $t->account;
    my $plain = $t->key(account => $acc->{id});
    my $metered = $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'm', '--scope', 'ip:read',
                          '--rate', 6000, '--quota', '3/day');
    $t->start_nginx(http => "keyauth_zone keys:1m;\n    keyauth_usage_db off;", locations => $LOCATIONS);
    is $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $plain->{secret}")->{status}, 200,
        'a key without a quota works';
    my $get = sub { $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $metered->{secret}") };
    is $get->()->{status}, 200, "a key with a quota: unit $_ of 3" for 1 .. 3;
    my $res = $get->();
    is $res->{status}, 429, 'then 429 (it was 503 AUTH_UNAVAILABLE: no ledger without the usage store)';
    is code_of($res), 'QUOTA_EXCEEDED', '... QUOTA_EXCEEDED';
    ok -e $t->db . '.usage/quota.ledger', 'the ledger lives in the default usage directory';
    ok !-e $t->db . '.usage/data.mdb', '... and no usage is stored there';
    my $keys = $t->ctl('key', 'list', '--account', $acc->{id});
    my ($k) = grep { $_->{id} eq $metered->{id} } @{ $keys->{keys} };
    is $k->{quota}{used}, 3, 'keyauthctl reads the ledger there: 3 used';
    unlike $t->error_log, qr/\[(error|crit|alert|emerg)\]/, 'no error in the error log';
};

subtest 'a plan gives its quota; the account overrides it; "plan" follows the plan again' => sub {
    my $t = KeyauthTest->new(workers => 2);
    $t->ctl('init');
    $t->ctl('plans', 'import', KeyauthTest::root() . '/lmdb_schema/plans.json');
    my $acc = $t->account;
    my $key = $t->key(account => $acc->{id});
    $t->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATIONS, no_init => 1);
    my $policy = sub {
        h($t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $key->{secret}"), 'RateLimit-Policy') // '';
    };
    unlike $policy->(), qr/account-quota/, 'no plan, no quota';
    $t->ctl('account', 'set-plan', $acc->{id}, 'basic-1k');
    like $policy->(), qr/"account-quota";q=1000;w=\d+/, 'set-plan basic-1k: 1,000 units a month, at once';
    $t->ctl('account', 'update', $acc->{id}, '--quota', '5/day');
    like $policy->(), qr/"account-quota";q=5;w=86400/, 'an override: 5 a day';
    $t->ctl('account', 'update', $acc->{id}, '--quota', 'plan');
    like $policy->(), qr/"account-quota";q=1000;w=\d+/, '--quota plan: the plan\'s again';
    $t->ctl('account', 'set-plan', $acc->{id}, 'none');
    unlike $policy->(), qr/account-quota/, 'set-plan none: no quota';
};

subtest 'GET /v1/account and the key object show what the edge counted' => sub {
    my $t = KeyauthTest->new(workers => 2);
    my $acc = $t->account;
    $t->ctl('account', 'update', $acc->{id}, '--quota', '10/day');
    my $key = $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'k', '--scope', 'ip:read',
                      '--rate', 6000, '--quota', '4/total');
    $t->start_console_stack(locations => <<'LOC');
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }
LOC
    my $api = $t->console_client($acc->{consoleToken});
    is $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $key->{secret}")->{status}, 200, "call $_"
        for 1 .. 3;
    my $me = $api->(GET => '/v1/account');
    is $me->{status}, 200, 'GET /v1/account';
    is_deeply [@{ $me->{json}{quota} }{qw(units period used remaining)}], [10, 'day', 3, 7],
        "the account's quota: 3 of 10 used today, as the edge counted";
    like $me->{json}{quota}{resetsAt}, qr/T00:00:00(\.000)?Z$/, '... resets at midnight UTC';
    my $k = $api->(GET => "/v1/keys/$key->{id}");
    is_deeply [@{ $k->{json}{quota} }{qw(units period used remaining resetsAt)}], [4, 'total', 3, 1, undef],
        "the key's credits: 3 of 4 used, never reset";
};

done_testing;
