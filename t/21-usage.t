# Per-key usage: every allowed and every rate-limited request is counted in
# keyauth_zone and collected (keyauth_usage_interval) into the usage env
# beside the store, exactly: nothing lost, nothing counted twice, also across
# nginx -s reload; lastUsedAt is the last request's time.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time);
use KeyauthTest qw(wait_until);

my $t = KeyauthTest->new;
my $acc = $t->account(entitlement => 100000);
# 6/min: a refill every 10 s, so a burst of 6 and then 429s
my $key = $t->key(account => $acc->{id}, rate => 6);
my $other = $t->key(account => $acc->{id}, rate => 6000);
my $id = "$acc->{id} $key->{id}";

$t->start_nginx(http => "keyauth_zone keys:1m;\nkeyauth_usage_interval 1s;", locations => $KeyauthTest::IP_AND_STATUS);

my %sent = (200 => 0, 429 => 0);
sub send_n {
    my ($secret, $n) = @_;
    for (1 .. $n) {
        my $st = $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $secret")->{status};
        $sent{$st}++ if $secret eq $key->{secret};
    }
}
sub usage_of { $t->usage->{ $_[0] // $id } }
sub counted {
    my $u = usage_of();
    return $u && $u->{allowed} == $sent{200} && $u->{rateLimited} == $sent{429};
}

subtest 'allowed and rate-limited requests reach the usage env exactly' => sub {
    my $before = int(time);
    send_n($key->{secret}, 10);
    my $after = time;
    cmp_ok($sent{200}, '>=', 6, 'the burst went through');
    cmp_ok($sent{429}, '>=', 1, 'then 429s');
    is($sent{200} + $sent{429}, 10, 'nothing else');
    ok(wait_until(\&counted, 30, 'the usage env to hold the counts'), 'counted exactly')
        or diag explain usage_of();
    my $last = usage_of()->{lastUsedMs} / 1000;
    ok($last >= $before && $last <= $after + 1, "lastUsedAt $last within [$before, $after]");
    ok(-d $t->db . '.usage', 'the default place: keyauth_db + ".usage"');
    like($t->request(GET => '/status')->{body}, qr/^keyauth_usage_dropped_total 0$/m, 'nothing dropped');
    like($t->request(GET => '/status')->{body}, qr/^keyauth_usage_flush_errors_total 0$/m, 'no flush error');
};

subtest 'the console shows the usage and the last use' => sub {
    $t->start_keyauthd;
    my $res = KeyauthTest::http_request($t->keyauthd_port, GET => "/v1/keys/$key->{id}",
                                        "Authorization: Bearer $acc->{consoleToken}");
    my $k = KeyauthTest::json_body($res);
    is($res->{status}, 200, 'GET /v1/keys/{id}');
    is_deeply($k->{usage}, { allowed => $sent{200}, rateLimited => $sent{429} }, 'usage as counted');
    my $ms = usage_of()->{lastUsedMs};
    my @t = gmtime(int($ms / 1000));
    my $want = sprintf('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', $t[5] + 1900, $t[4] + 1, @t[3, 2, 1, 0], $ms % 1000);
    is($k->{lastUsedAt}, $want, 'lastUsedAt as collected');
    my $list = KeyauthTest::json_body(KeyauthTest::http_request($t->keyauthd_port, GET => '/v1/keys?limit=100',
                                                                "Authorization: Bearer $acc->{consoleToken}"));
    my ($never) = grep { $_->{id} eq $other->{id} } @{ $list->{keys} };
    is_deeply([$never->{usage}, $never->{lastUsedAt}], [{ allowed => 0, rateLimited => 0 }, undef],
              'an unused key: zeros, lastUsedAt null');
    $t->stop_keyauthd;
};

# A marker key used after a reload proves collections ran since; the first
# key's totals must still be exact then (neither lost nor counted twice).
subtest 'nginx -s reload loses and doubles nothing' => sub {
    for my $round (1 .. 3) {
        send_n($key->{secret}, 5);
        ok($t->signal_nginx('reload'), "reload $round");
        send_n($key->{secret}, 3);
    }
    send_n($other->{secret}, 4);
    ok(wait_until(sub { my $u = usage_of("$acc->{id} $other->{id}"); $u && $u->{allowed} == 4 },
                  30, 'the marker key to be collected'), 'marker collected');
    ok(wait_until(\&counted, 30, 'the counts after the reloads'), 'exact after 3 reloads')
        or diag explain [usage_of(), \%sent];
    send_n($other->{secret}, 1);
    ok(wait_until(sub { usage_of("$acc->{id} $other->{id}")->{allowed} == 5 }, 30, 'another collection'),
       'another collection ran');
    ok(counted(), 'still exact: nothing collected twice') or diag explain [usage_of(), \%sent];
};

subtest 'a usage env that cannot be made: requests go on, counts wait in the zone' => sub {
    my $t2 = KeyauthTest->new;
    my $a2 = $t2->account(entitlement => 100000);
    my $k2 = $t2->key(account => $a2->{id}, rate => 6000);
    my $blocked = $t2->dir . '/not-a-dir';
    open my $fh, '>', $blocked or die $!;
    close $fh;
    $t2->start_nginx(http => "keyauth_zone keys:1m;\nkeyauth_usage_interval 1s;\n"
                           . "keyauth_usage_db $blocked/usage;", locations => <<'LOC');
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }
        location = /status { keyauth_status; }
LOC
    is($t2->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $k2->{secret}")->{status}, 200,
       'the request is served');
    ok(wait_until(sub { $t2->error_log =~ /cannot open the usage store "\Q$blocked\E\/usage"/ }, 30,
                  'the error line'), 'logged');
    like($t2->request(GET => '/status')->{body}, qr/^keyauth_usage_flush_errors_total [1-9]/m, 'counted');
    unlink $blocked;
    mkdir $blocked;
    ok(wait_until(sub { my $u = $t2->usage("$blocked/usage")->{"$a2->{id} $k2->{id}"}; $u && $u->{allowed} == 1 },
                  30, 'the counts once the env opens'), 'stored once the directory can be made');
};

subtest 'keyauth_usage_db off and a bad interval' => sub {
    my $t3 = KeyauthTest->new;
    my $a3 = $t3->account(entitlement => 100000);
    my $k3 = $t3->key(account => $a3->{id}, rate => 6000);
    $t3->start_nginx(http => "keyauth_zone keys:1m;\nkeyauth_usage_interval 1s;\nkeyauth_usage_db off;",
                     locations => 'location /v1/ip/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }');
    is($t3->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $k3->{secret}")->{status}, 200, 'served');
    $t3->stop_nginx;  # the exit flush would have made it by now
    ok(!-e $t3->db . '.usage/data.mdb', 'no usage env (the directory holds the quota ledger alone)');
    my $conf = $t3->dir . '/bad.conf';
    open my $fh, '>', $conf or die $!;
    print $fh "load_module " . KeyauthTest::module_path() . ";\nevents {}\nhttp { keyauth_db " . $t3->db
        . "; keyauth_usage_interval 2m; }\n";
    close $fh;
    my $out = KeyauthTest::with_nginx_env($t3->dir, sub {
        `@{[KeyauthTest::nginx_bin()]} -t -p @{[$t3->dir]} -c $conf -e @{[$t3->dir]}/logs/t.log 2>&1` });
    like($out, qr/invalid "keyauth_usage_interval" "2m": expected 1s to 60s/, 'an interval over 60 s is refused');
};

done_testing;
