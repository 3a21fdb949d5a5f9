# The quota ledger holds every unit it was given (issue 44): a quota whose
# period kind changes and back keeps its use; an nginx whose clock is a day
# ahead never charges today's period; metered calls in flight never hold
# more than the quota has; an X-Accel-Redirect answer's reported units are
# the ones charged; and a ledger that runs out of room grows, and reuses the
# credits of revoked keys, instead of refusing paying accounts with 503.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use IO::Socket::INET;
use KeyauthTest qw(wait_until);

sub h { KeyauthTest::header(@_) }
sub code_of { (KeyauthTest::json_body($_[0]) // {})->{error}{code} // '' }

my $LOCATIONS = <<'LOC';
        location /v1/ip/ {
            keyauth on;
            keyauth_scope ip:read;
            add_header X-Left $keyauth_quota_remaining always;
            proxy_pass http://tool;
        }
        location = /status {
            keyauth_status;
        }
LOC

# A slow upstream: each connection is answered after $delay seconds with
# "X-Units: $units", in a process of its own, so that many calls are in
# flight at once. Returns (port, pid).
sub slow_upstream {
    my ($delay, $units) = @_;
    my $srv = IO::Socket::INET->new(Listen => 128, LocalAddr => '127.0.0.1', LocalPort => 0, ReuseAddr => 1)
        or die "listen: $!";
    my $port = $srv->sockport;
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        $SIG{CHLD} = 'IGNORE';
        while (my $c = $srv->accept) {
            my $kid = fork;
            if (defined $kid && $kid == 0) {
                local $/ = "\r\n\r\n";
                my $req = <$c>;
                sleep $delay;
                print $c "HTTP/1.1 200 OK\r\nX-Units: $units\r\nContent-Length: 5\r\nConnection: close\r\n\r\nslow\n";
                close $c;
                POSIX::_exit(0);
            }
            close $c;
        }
        POSIX::_exit(0);
    }
    close $srv;
    return ($port, $pid);
}

# $n calls at once; the statuses, sorted.
sub parallel {
    my ($t, $n, $path, $secret) = @_;
    my @kids;
    for my $i (1 .. $n) {
        my $out = $t->dir . "/par-$i.out";
        my $pid = fork // die "fork: $!";
        if ($pid == 0) {
            my $res = eval { $t->request(GET => $path, "Authorization: Bearer $secret") };
            open my $fh, '>', $out or POSIX::_exit(1);
            print $fh ($res ? $res->{status} : 0), ' ', ($res ? code_of($res) : ''), "\n";
            close $fh;
            POSIX::_exit(0);
        }
        push @kids, [$pid, $out];
    }
    my %seen;
    for my $k (@kids) {
        waitpid $k->[0], 0;
        open my $fh, '<', $k->[1] or die "no result from $k->[0]";
        my ($st, $code) = split ' ', <$fh>;
        $seen{ $st . ($code ? " $code" : '') }++;
    }
    return \%seen;
}

sub metric {
    my ($t, $name) = @_;
    my $body = $t->request(GET => '/status')->{body} // '';
    return $body =~ /^\Q$name\E (\d+)$/m ? $1 : undef;
}

subtest 'a quota whose period kind changes and back keeps what it used' => sub {
    my $t = KeyauthTest->new(workers => 2);
    my $acc = $t->account;
    my $key = $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'credits', '--scope', 'ip:read',
                      '--rate', 6000, '--quota', '2/total');
    $t->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATIONS);
    my $get = sub { $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $key->{secret}") };
    is $get->()->{status}, 200, 'credit 1 of 2';
    is $get->()->{status}, 200, 'credit 2 of 2';
    is code_of($get->()), 'QUOTA_EXCEEDED', 'then QUOTA_EXCEEDED';
    $t->ctl('key', 'update', $key->{id}, '--quota', '5/day');
    is $get->()->{status}, 200, 'switched to 5 a day: a call';
    $t->ctl('key', 'update', $key->{id}, '--quota', '2/total');
    my $res = $get->();
    is $res->{status}, 429, 'back to its 2 credits: still used up (they were never refilled)';
    is code_of($res), 'QUOTA_EXCEEDED', '... QUOTA_EXCEEDED';

    my $other = $t->key(account => $acc->{id});
    my $call = sub { $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $other->{secret}") };
    $t->ctl('account', 'update', $acc->{id}, '--quota', '10/month');
    is $call->()->{status}, 200, "the account's month: call $_ of 6" for 1 .. 6;
    $t->ctl('account', 'update', $acc->{id}, '--quota', '5/day');
    is $call->()->{status}, 200, 'switched to 5 a day: a call';
    $t->ctl('account', 'update', $acc->{id}, '--quota', '10/month');
    is h($call->(), 'X-Left'), '3', 'back to 10 a month: the 6 used this month count (3 left after this call)';
};

subtest 'an nginx whose clock is a day ahead never charges today' => sub {
    my $t = KeyauthTest->new(workers => 1);
    my $acc = $t->account;
    $t->ctl('account', 'update', $acc->{id}, '--quota', '5/day');
    my $key = $t->key(account => $acc->{id});
    $t->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATIONS);
    # a second nginx on the same store (and so the same usage dir and ledger)
    my $ahead = KeyauthTest->new(workers => 1);
    $ahead->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATIONS, db => $t->db, no_init => 1,
                        faketime => '+1d');
    my $auth = "Authorization: Bearer $key->{secret}";
    like h($ahead->request(GET => '/v1/ip/8.8.8.8', $auth), 'Date'), qr/GMT/, 'the clock ahead: a call';
    is $ahead->request(GET => '/v1/ip/8.8.8.8', $auth)->{status}, 200, "the clock ahead: call $_" for 2 .. 3;
    my %got;
    $got{ $t->request(GET => '/v1/ip/8.8.8.8', $auth)->{status} }++ for 1 .. 6;
    is $got{200}, 5, "today's 5 units are all today's: the clock ahead charged its own day";
    is $got{429}, 1, '... and the sixth call is refused';
    is h($ahead->request(GET => '/v1/ip/8.8.8.8', $auth), 'X-Left'), '1',
        'the clock ahead counts its own day alone (3 used, then this one)';
};

subtest 'metered calls in flight never hold more than the quota has' => sub {
    my $t = KeyauthTest->new(workers => 2);
    my ($port, $slow) = slow_upstream(2, 1);
    my $acc = $t->account;
    $t->ctl('account', 'update', $acc->{id}, '--quota', '10/day');
    my $key = $t->key(account => $acc->{id});
    my $other = $t->account(name => 'no quota');
    my $once = $t->ctl('key', 'create', '--account', $other->{id}, '--name', 'once', '--scope', 'ip:read',
                       '--rate', 6000, '--quota', '1/total');
    $t->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATIONS . <<"LOC");
        location /slow/ {
            keyauth on;
            keyauth_cost_header X-Units;
            add_header X-Left \$keyauth_quota_remaining always;
            proxy_pass http://127.0.0.1:$port;
        }
LOC
    my $seen = parallel($t, 50, '/slow/a', $key->{secret});
    is $seen->{200}, 10, '50 calls at once to a 10-a-day account: exactly 10 admitted';
    is $seen->{'429 QUOTA_EXCEEDED'}, 40, '... 40 refused with QUOTA_EXCEEDED';
    $seen = parallel($t, 20, '/slow/b', $once->{secret});
    is $seen->{200}, 1, 'a one-time key, 20 calls at once: one admitted';
    is $seen->{'429 QUOTA_EXCEEDED'}, 19, '... 19 refused';
    kill 'TERM', $slow;
    waitpid $slow, 0;
};

subtest 'an X-Accel-Redirect answer: the units its upstream reported are charged' => sub {
    my $t = KeyauthTest->new(workers => 1);
    my $acc = $t->account;
    $t->ctl('account', 'update', $acc->{id}, '--quota', '100/day');
    my $key = $t->key(account => $acc->{id});
    mkdir $t->dir . '/files';
    open my $fh, '>', $t->dir . '/files/report.txt' or die $!;
    print $fh "a file\n";
    close $fh;
    my $files = $t->dir . '/files/';
    $t->start_nginx(http => 'keyauth_zone keys:1m;', locations => $LOCATIONS . <<"LOC");
        location /accel/ {
            keyauth on;
            keyauth_cost_header X-Units;
            proxy_pass http://127.0.0.1:\$server_port/accel-up/\$is_args\$args;
        }
        location /accel-up/ {
            add_header X-Accel-Redirect \$arg_to;
            add_header X-Units \$arg_u;
            return 200 "the first answer\\n";
        }
        location /final/ {
            internal;
            return 200 "final\\n";
        }
        location /file/ {
            internal;
            alias $files;
        }
        location /final-metered/ {
            internal;
            keyauth on;
            keyauth_cost_header X-Units;
            proxy_pass http://127.0.0.1:\$server_port/units/;
        }
        location /units/ {
            add_header X-Units 9;
            return 200 "units\\n";
        }
LOC
    my $auth = "Authorization: Bearer $key->{secret}";
    my $left = sub { h($t->request(GET => '/v1/ip/8.8.8.8', $auth), 'X-Left') };
    is $left->(), '99', 'a plain call: 99 left';
    my $res = $t->request(GET => '/accel/x?to=/final/&u=5', $auth);
    is $res->{status}, 200, 'redirected to a location that returns';
    is $res->{body}, "final\n", '... its answer';
    is h($res, 'X-Units'), undef, 'no X-Units reaches the client';
    is $left->(), '93', '5 units charged (the first answer reported them), then 1: 93 left';
    $res = $t->request(GET => '/accel/x?to=/file/report.txt&u=7', $auth);
    is $res->{body}, "a file\n", 'redirected to a file';
    is $left->(), '85', '7 units charged: 85 left';
    $res = $t->request(GET => '/accel/x?to=/final-metered/&u=2', $auth);
    is $res->{body}, "units\n", 'redirected to a metered location';
    is h($res, 'X-Units'), undef, '... no X-Units reaches the client';
    is $left->(), '82', "2 units charged (the admitting location's upstream said so), not 9: 82 left";
    unlike $t->error_log, qr/answer has no "X-Units"/, 'no fallback to keyauth_cost was logged';
};

subtest 'a full ledger grows, and revoked keys give back their slots: never a 503' => sub {
    my $t = KeyauthTest->new(workers => 2);
    my $acc = $t->account;
    my $keys = $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'one-time', '--scope', 'ip:read',
                       '--rate', 6000, '--quota', '1/total', '--count', 150);
    $t->start_nginx(http => "keyauth_zone keys:1m;\n    keyauth_quota_size 4k;\n    keyauth_usage_interval 1s;",
                    locations => $LOCATIONS);
    like $t->error_log, qr/keyauth_quota_size 4k: room for 64 keys and accounts/,
        'the error log says what the ledger holds';
    is metric($t, 'keyauth_quota_ledger_slots'), 64, 'keyauth_status: 64 slots';
    my %got;
    $got{ $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $_->{secret}")->{status} }++
        for @{ $keys->{keys} // $keys };
    is $got{200}, 150, '150 one-time keys, each used once: all admitted (the ledger grew)';
    ok !$got{503}, 'no 503';
    cmp_ok metric($t, 'keyauth_quota_ledger_slots'), '>=', 150, 'keyauth_status: the ledger has room for them';
    my $grown = metric($t, 'keyauth_quota_ledger_slots');
    ok wait_until(sub { (metric($t, 'keyauth_quota_ledger_live_slots') // 0) >= 150 }, 30,
                  'a sweep to count them'), 'keyauth_quota_ledger_live_slots: 150';
    $t->ctl('key', 'revoke', $_->{id}) for @{ $keys->{keys} // $keys };
    ok wait_until(sub { (metric($t, 'keyauth_quota_ledger_live_slots') // 999) == 0 }, 30,
                  'the sweep to release the revoked keys\' credits'),
        'the revoked keys\' credits are released';
    my @accounts = map { $t->account(name => "paying $_") } 1 .. 20;
    %got = ();
    for my $a (@accounts) {
        $t->ctl('account', 'update', $a->{id}, '--quota', '1000/month');
        my $k = $t->key(account => $a->{id});
        $got{ $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $k->{secret}")->{status} }++;
    }
    is $got{200}, 20, '20 paying accounts, first call each: all admitted';
    is metric($t, 'keyauth_quota_ledger_slots'), $grown, '... in the released slots: the ledger did not grow';
    is metric($t, 'keyauth_quota_ledger_no_room_total'), 0, 'keyauth_quota_ledger_no_room_total: 0';
};

subtest 'a faked clock holds in the workers for the whole test (libfaketime reads FAKETIME again)' => sub {
    my $t = KeyauthTest->new(workers => 1);
    $t->start_nginx(locations => $LOCATIONS, faketime => '@2020-02-02 02:02:02');
    my $start = time;
    my @dates;
    wait_until(sub {
        push @dates, h($t->request(GET => '/status'), 'Date') // '';
        return time - $start > 13;
    }, 60, '13 s of real time, libfaketime re-reading its variables past 10 s');
    my @real = grep { !/ 2020 / } @dates;
    is scalar(@real), 0, scalar(@dates) . ' answers over 13 s: every Date is the faked one'
        or diag "the first real one: $real[0]";
};

done_testing;
