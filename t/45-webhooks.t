# Webhooks on one host (issue 46), end to end: real nginx, real keyauthd,
# a real HTTPS receiver on loopback with a test CA (t/lib/WebhookReceiver.pm)
# whose verification is the Standard Webhooks specification's, written in
# the test, not keyauthd's code. Every event type a change raises reaches
# the receiver signed; quota thresholds and key expiry fire once; a
# receiver that fails is tried again on schedule with one webhook-id (the
# clock crossed with libfaketime, never waited for); 410 disables the
# endpoint; one that never answers ends dead; a keyauthd killed mid-delivery
# sends it again after restart; bad endpoints are refused with nothing
# written; and without --webhook-allow-private nothing on loopback is ever
# dialled.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP qw(decode_json);
use POSIX qw(strftime);
use KeyauthTest qw(wait_until);
use WebhookReceiver;

my $root = KeyauthTest::root();
my $t = KeyauthTest->new;
$t->ctl('init');
$t->ctl('plans', 'import', "$root/lmdb_schema/plans.json");
my $rx = WebhookReceiver->new(dir => "$t->{dir}/rx");
my $clock = "$t->{dir}/clock";
my $offset = 0;    # seconds keyauthd's clock runs ahead
sub clock_ahead {
    $offset = shift;
    open my $fh, '>', "$clock.tmp" or die $!;
    print $fh "+${offset}s\n";
    close $fh;
    rename "$clock.tmp", $clock or die $!;
}
clock_ahead(0);
my @keyauthd = (faketime_file => $clock,
                args => ['--webhook-allow-private', '--webhook-ca-file', $rx->ca_file,
                         '--webhook-scan-seconds', '1', '--webhook-timeout', '2']);
$t->start_console_stack(admin => 1, keyauthd => {@keyauthd},
                        locations => "        location /v1/ip/ { keyauth on; keyauth_scope ip:read; ip_lookup; }\n");

my @all_types = qw(key.created key.updated key.rolled key.revoked key.expiring key.leaked account.created
                   account.updated account.plan_changed account.suspended account.resumed quota.threshold);
sub webhook {
    my ($path, @types) = @_;
    return $t->ctl('webhook', 'create', '--url', $rx->url($path), map { ('--event', $_) } @types);
}
sub deliveries { @{ $t->ctl('webhook', 'deliveries', $_[0]{id}, @_[1 .. $#_])->{deliveries} } }
# the endpoint's first delivery ({} before there is one)
sub first { (deliveries(@_))[0] // {} }
sub received_types { map { decode_json($_->{body})->{type} } $rx->requests($_[0]) }
sub has_type {
    my ($path, $type, $pred) = @_;
    return grep { my $b = decode_json($_->{body}); $b->{type} eq $type && (!$pred || $pred->($b)) } $rx->requests($path);
}

sub metric {
    my ($name) = @_;
    my $m = KeyauthTest::http_request($t->keyauthd_port, GET => '/metrics')->{body};
    return $m =~ /^\Q$name\E ([\d.]+)$/m ? $1 : undef;
}
# Two more looks over the store after now: what one found, the next two
# found again (and must not have told again).
sub two_more_scans {
    my $now = metric('keyauthd_webhook_scans_total') // 0;
    ok wait_until(sub { (metric('keyauthd_webhook_scans_total') // 0) >= $now + 2 }, 30, 'two scans'),
        'two more scans';
}

my $all = webhook('/ok', @all_types);
like $all->{secret}, qr/^whsec_[A-Za-z0-9+\/]{43}=$/, 'the signing secret, shown once: whsec_ + base64 of 32 bytes';
is $t->ctl('webhook', 'list')->{webhooks}[0]{secret}, undef, 'never shown again';
unlike do { local (@ARGV, $/) = ("$t->{db}/data.mdb"); <> }, qr/\Q$all->{secret}\E|\Q@{[substr $all->{secret}, 6]}\E/,
    'the store holds no signing secret';

my ($acc, $key);
subtest 'every change reaches the receiver, signed as the specification says' => sub {
    $acc = $t->ctl('account', 'create', '--name', 'Acme', '--entitlement', 600)->{id};
    $t->ctl('account', 'update', $acc, '--name', 'Acme Ltd');
    $t->ctl('account', 'set-plan', $acc, 'basic-1k');
    $t->ctl('account', 'suspend', $acc);
    $t->ctl('account', 'resume', $acc);
    $key = $t->ctl('key', 'create', '--account', $acc, '--name', 'k', '--scope', 'ip:read', '--rate', 600);
    $t->ctl('key', 'update', $key->{id}, '--name', 'k2');
    my $rolled = $t->ctl('key', 'roll', $key->{id}, '--grace-seconds', 60);
    $t->ctl('key', 'revoke', $rolled->{id});
    my @want = qw(account.created account.updated account.plan_changed account.suspended account.resumed
                  key.created key.updated key.rolled key.revoked);
    ok wait_until(sub { my %got = map { $_ => 1 } received_types('/ok'); !grep { !$got{$_} } @want }, 30,
                  'every type'), 'one event of each type arrived' or diag join ' ', received_types('/ok');
    my @got = $rx->requests('/ok');
    my $ok = grep { WebhookReceiver->verify($all->{secret}, $_->{headers}, $_->{body}) } @got;
    is $ok, scalar @got, 'each verifies with the specification\'s check';
    my $r = $got[0];
    like $r->{headers}{'webhook-id'}, qr/^evt_[0-9a-f]{24}$/, 'webhook-id is the event\'s id';
    is $r->{headers}{'content-type'}, 'application/json', 'a JSON body';
    my $body = decode_json($r->{body});
    is_deeply [sort keys %$body], [qw(data timestamp type)], 'type, timestamp and data';
    is $body->{data}{accountId}, $acc, 'data names the account';
    ok !WebhookReceiver->verify($all->{secret}, $r->{headers}, $r->{body} . ' '), 'a tampered body fails';
    ok !WebhookReceiver->verify($all->{secret}, $r->{headers}, $r->{body}, now => $r->{headers}{'webhook-timestamp'} + 600),
        'an old timestamp fails';
    ok !WebhookReceiver->verify('whsec_' . ('A' x 43) . '=', $r->{headers}, $r->{body}), 'another secret fails';
    my $text = join '', map { $_->{body} } @got;
    unlike $text, qr/\Q$key->{secret}\E|\Q@{[substr $key->{secret}, 0, 16]}\E/, 'no secret in any event';
    is scalar(() = $t->keyauthd_log =~ /\Q$all->{secret}\E/g), 0, 'nor in keyauthd\'s log';
};

subtest 'quota thresholds fire once each, at 80 % and 100 %' => sub {
    my $q = $t->ctl('account', 'create', '--name', 'Metered', '--entitlement', 600, '--quota', '5/day')->{id};
    my $k = $t->ctl('key', 'create', '--account', $q, '--name', 'm', '--scope', 'ip:read', '--rate', 600);
    my $call = sub { $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $k->{secret}")->{status} };
    is $call->(), 200, "call $_" for 1 .. 3;
    ok !has_type('/ok', 'quota.threshold'), 'at 60 %: nothing';
    is $call->(), 200, 'call 4: 80 %';
    ok wait_until(sub { has_type('/ok', 'quota.threshold', sub { $_[0]{data}{threshold} == 80 }) }, 30, '80'),
        'quota.threshold 80 arrives';
    my ($e) = grep { $_ } map { my $b = decode_json($_->{body}); $b->{type} eq 'quota.threshold' ? $b : () } $rx->requests('/ok');
    is_deeply [@{ $e->{data} }{qw(accountId keyId period units used threshold)}], [$q, undef, 'day', 5, 4, 80],
        'its data: the account, the period, units, used, the threshold';
    like $e->{data}{periodStart}, qr/^\d{4}-\d\d-\d\dT00:00:00(\.000)?Z$/, 'the period\'s start';
    is $call->(), 200, 'call 5: 100 %';
    ok wait_until(sub { has_type('/ok', 'quota.threshold', sub { $_[0]{data}{threshold} == 100 }) }, 30, '100'),
        'quota.threshold 100 arrives';
    is $call->(), 429, 'call 6 is over';
    two_more_scans();
    is scalar(has_type('/ok', 'quota.threshold', sub { $_[0]{data}{accountId} eq $q })), 2, 'once per threshold';
};

subtest 'key.expiring: 7 days and 1 day ahead, once each' => sub {
    my $exp = strftime('%Y-%m-%dT%H:%M:%SZ', gmtime(time + 3 * 86400));
    my $k = $t->ctl('key', 'create', '--account', $acc, '--name', 'soon', '--scope', 'ip:read', '--rate', 60,
                    '--expires-at', $exp);
    my $of = sub { my $w = shift; has_type('/ok', 'key.expiring', sub { $_[0]{data}{keyId} eq $k->{id} && $_[0]{data}{within} eq $w }) };
    ok wait_until(sub { $of->('7d') }, 30, '7d'), 'within 7 days: told';
    ok !$of->('1d'), 'not yet within a day';
    clock_ahead(2.5 * 86400);
    ok wait_until(sub { $of->('1d') }, 30, '1d'), 'a day ahead: told again';
    two_more_scans();
    is scalar($of->('7d')) + scalar($of->('1d')), 2, 'once each';
};

subtest 'a failing receiver is tried again on schedule, with one webhook-id' => sub {
    my $w = webhook('/fail3', 'account.created');
    $t->ctl('account', 'create', '--name', 'Retry', '--entitlement', 60);
    ok $rx->wait_requests('/fail3', 1), 'attempt 1 (500)';
    ok $rx->wait_requests('/fail3', 2, 30), 'attempt 2, about 5 s later (500)';
    # each attempt settled (its next one scheduled) before the clock moves
    ok wait_until(sub { first($w)->{attempts} == 2 }, 20, 'attempt 2 settled'), 'attempt 2 settled';
    clock_ahead($offset + 6 * 60);
    ok $rx->wait_requests('/fail3', 3, 30), 'attempt 3, 5 min later (500)';
    ok wait_until(sub { first($w)->{attempts} == 3 }, 20, 'attempt 3 settled'), 'attempt 3 settled';
    clock_ahead($offset + 34 * 60);
    ok $rx->wait_requests('/fail3', 4, 30), 'attempt 4, 30 min later (200)';
    my @r = $rx->requests('/fail3');
    my %ids = map { $_->{headers}{'webhook-id'} => 1 } @r;
    is scalar(keys %ids), 1, 'one webhook-id for all four';
    ok wait_until(sub { first($w)->{status} eq 'delivered' }, 15, 'delivered'), 'delivered';
    my ($d) = deliveries($w);
    is $d->{attempts}, 4, 'four attempts';
    is $d->{lastStatus}, 200, 'the last answer';
    is_deeply [map { $_->{eventId} } deliveries($w, '--status', 'pending')], [], 'nothing pending';
    ok(WebhookReceiver->verify($w->{secret}, $r[-1]{headers}, $r[-1]{body}, now => time + $offset),
       'the retry is signed afresh (on keyauthd\'s clock, hours ahead)');
    isnt $r[-1]{headers}{'webhook-timestamp'}, $r[0]{headers}{'webhook-timestamp'}, 'with its own timestamp';
};

subtest '410 Gone disables the endpoint' => sub {
    my $w = webhook('/gone', 'account.created');
    $t->ctl('account', 'create', '--name', 'Gone', '--entitlement', 60);
    ok wait_until(sub { my ($x) = grep { $_->{id} eq $w->{id} } @{ $t->ctl('webhook', 'list')->{webhooks} }; $x->{status} eq 'disabled' },
                  30, 'disabled'), 'the endpoint is disabled';
    my $d = first($w);
    is($d->{status}, 'dead', 'its delivery is dead');
    my ($ev) = grep { $_->{action} eq 'webhook.disable' } @{ $t->ctl('audit', 'list')->{events} };
    ok $ev, 'the audit trail says so';
    # One request, or more when an earlier attempt timed out
    # (--webhook-timeout 2, a loaded machine) after the receiver had it: at
    # most one an attempt, all of them the one event (at least once).
    my @gone = $rx->requests('/gone');
    ok @gone >= 1 && @gone <= $d->{attempts}, 'at most a request an attempt'
        or diag scalar(@gone) . " requests, $d->{attempts} attempts";
    is scalar(keys %{ { map { $_->{headers}{'webhook-id'} => 1 } @gone } }), 1, 'all of them the one event';
    $t->ctl('account', 'create', '--name', 'After', '--entitlement', 60);
    ok $rx->wait_requests('/ok', scalar($rx->requests('/ok')) + 1), 'others hear of the next account';
    is scalar($rx->requests('/gone')), scalar(@gone), 'the disabled one hears nothing more';
};

subtest 'a receiver that never answers: dead after the schedule' => sub {
    my $w = webhook('/hang', 'account.created');
    $t->ctl('account', 'create', '--name', 'Hang', '--entitlement', 60);
    # each wait past its attempt's longest (+10 %)
    my @waits = (6, 6 * 60, 34 * 60, 133 * 60, 331 * 60, 661 * 60, 661 * 60);
    for my $n (1 .. 8) {
        ok $rx->wait_requests('/hang', $n, 40), "attempt $n (no answer in 2 s)";
        last if $n == 8;
        # the attempt is settled after its timeout, then the clock crosses its wait
        ok wait_until(sub { first($w)->{attempts} == $n }, 20, "attempt $n settled"), "attempt $n settled";
        clock_ahead($offset + $waits[$n - 1]);
    }
    ok wait_until(sub { first($w)->{status} eq 'dead' }, 20, 'dead'), 'dead after 8 attempts';
    my ($d) = deliveries($w, '--status', 'dead');
    is $d->{attempts}, 8, 'eight attempts';
    is $d->{lastError}, 'timeout', 'why';
};

subtest 'keyauthd killed mid-delivery sends it again after restart' => sub {
    my $w = webhook('/slow4', 'account.created');
    $t->ctl('account', 'create', '--name', 'Crash', '--entitlement', 60);
    ok $rx->wait_requests('/slow4', 1), 'the attempt is in flight';
    $t->stop_keyauthd('KILL');
    is(first($w)->{status}, 'pending', 'still pending in the store');
    # again, with time for a receiver that takes 4 s (the first one, 2 s,
    # may have timed it out already: then this is its retry)
    my %again = @keyauthd;
    $again{args} = [map { $_ eq '2' ? '10' : $_ } @{ $again{args} }];
    $t->start_keyauthd(admin => 1, %again);
    ok $rx->wait_requests('/slow4', 2, 40), 'sent again';
    my @r = $rx->requests('/slow4');
    is $r[0]{headers}{'webhook-id'}, $r[1]{headers}{'webhook-id'}, 'the same webhook-id: the receiver dedupes';
    ok wait_until(sub { first($w)->{status} eq 'delivered' }, 30, 'delivered'), 'delivered';
};

subtest 'a redirect is not followed' => sub {
    my $w = webhook('/redirect', 'account.created');
    $t->ctl('account', 'create', '--name', 'Redirect', '--entitlement', 60);
    ok wait_until(sub { first($w)->{lastStatus} }, 30, 'settled'), 'attempt 1 settled';
    is(first($w)->{lastStatus}, 302, 'a 302 is a failed attempt');
    is scalar($rx->requests('/target')), 0, 'its target got nothing';
};

subtest 'bad endpoints: exit 2 or 400, nothing written' => sub {
    my $before = @{ $t->ctl('webhook', 'list')->{webhooks} };
    for my $case (['--url', 'not a url'], ['--url', 'http://127.0.0.1/x'], ['--url', 'https://h.example/' . ('a' x 2100)],
                  ['--url', 'ftp://h.example/x']) {
        my ($rc, undef, $err) = $t->ctl_raw('webhook', 'create', @$case, '--event', 'key.created');
        is $rc, 2, "$case->[1]: exit 2" or diag $err;
    }
    my ($rc) = $t->ctl_raw('webhook', 'create', '--url', $rx->url('/ok'), '--event', 'key.exploded');
    is $rc, 2, 'an unknown event type: exit 2';
    my $ops = $t->ctl('admin-token', 'create', '--name', 'hooks', '--scope', 'webhooks:write');
    my $admin = $t->admin_client($ops->{token});
    my $r = $admin->(POST => '/v1/admin/webhooks', { url => 'http://127.0.0.1/x', events => ['key.created'] });
    is $r->{status}, 400, 'the admin API: 400';
    is $r->{json}{error}{field}, 'url', 'naming the field';
    is $admin->(POST => '/v1/admin/webhooks', { url => $rx->url('/ok'), events => ['nope'] })->{json}{error}{field},
        'events', 'an unknown type names events';
    is scalar @{ $t->ctl('webhook', 'list')->{webhooks} }, $before, 'nothing was written';
    my $made = $admin->(POST => '/v1/admin/webhooks', { url => $rx->url('/ok'), events => ['key.created'] });
    is $made->{status}, 201, 'a good one through the admin API' or diag $made->{body};
    like $made->{json}{secret}, qr/^whsec_/, 'with its secret';
    is $admin->(GET => "/v1/admin/webhooks/$made->{json}{id}/deliveries")->{status}, 200, 'its deliveries';
    is $admin->(DELETE => "/v1/admin/webhooks/$made->{json}{id}")->{status}, 200, 'deleted';
    is $admin->(DELETE => "/v1/admin/webhooks/$made->{json}{id}")->{status}, 404, 'gone';
};

subtest 'metrics' => sub {
    my $m = KeyauthTest::http_request($t->keyauthd_port, GET => '/metrics')->{body};
    like $m, qr/^keyauthd_webhook_sender 1$/m, 'this keyauthd sends';
    like $m, qr/^keyauthd_webhook_attempts_total\{outcome="delivered"\} [1-9]/m, 'deliveries by outcome';
    like $m, qr/^keyauthd_webhook_pending \d+$/m, 'the pending count';
    like $m, qr/^keyauthd_webhook_oldest_pending_seconds [\d.]+$/m, 'the oldest pending event\'s age';
};

# Without --webhook-allow-private: loopback by address or by name is never
# dialled (this machine may reach no other address, so no test dials one).
subtest 'no SSRF: loopback is refused on the address dialled' => sub {
    $t->stop_keyauthd;    # its retries would reach the receiver meanwhile
    my $u = KeyauthTest->new;
    $u->ctl('init');
    my $rx6 = eval { WebhookReceiver->new(dir => "$u->{dir}/rx6", host => '::1') };
    $u->start_keyauthd(args => ['--webhook-ca-file', $rx->ca_file]);
    my @hooks = map { $u->ctl('webhook', 'create', '--url', $_, '--event', 'account.created') }
                ($rx->url('/ok', '127.0.0.1'), $rx->url('/ok', 'localhost'), ($rx6 ? $rx6->url('/ok', '[::1]') : ()));
    my $seen = $rx->requests;
    $u->ctl('account', 'create', '--name', 'Probe', '--entitlement', 60);
    for my $h (@hooks) {
        ok wait_until(sub { ($u->ctl('webhook', 'deliveries', $h->{id})->{deliveries}[0] // {})->{attempts} }, 30, 'tried'),
            "$h->{url}: tried";
        my $d = $u->ctl('webhook', 'deliveries', $h->{id})->{deliveries}[0];
        like $d->{lastError}, qr/^refused: .*loopback/, "refused: $d->{lastError}";
        is $d->{status}, 'pending', 'to be tried again (an operator may fix the address)';
    }
    is scalar($rx->requests), $seen, 'the receiver got nothing';
    is scalar($rx6->requests), 0, 'nor the one on ::1' if $rx6;
    $u->stop_keyauthd;
};

done_testing;
