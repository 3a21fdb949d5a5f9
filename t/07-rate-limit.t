# Per-key rate limits at the edge: GCRA in the keyauth_zone, shared by both
# workers, capped by the account entitlement, kept across reloads.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use KeyauthTest;

my $t = KeyauthTest->new;
my $acc = $t->account(entitlement => 100000);
my $k30 = $t->key(account => $acc->{id}, rate => 30);
my $other = $t->key(account => $acc->{id}, rate => 30);

$t->start_nginx(http => 'keyauth_zone keys:1m;', locations => <<'LOC');
        location /v1/ip/ {
            keyauth on;
            keyauth_scope ip:read;
            proxy_set_header X-Key-Id $keyauth_rate_remaining;
            proxy_pass http://tool;
        }
LOC

sub get { my $s = shift; $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $s") }
sub h { KeyauthTest::header(@_) }

subtest 'a 30/min key: exactly 30 fast successes, then 429' => sub {
    my @remaining;
    for my $i (1 .. 30) {
        my $res = get($k30->{secret});
        if ($res->{status} != 200) { fail "request $i: $res->{status}"; return }
        is h($res, 'RateLimit-Policy'), '"per-key";q=30;w=60', "policy on success $i" if $i == 1;
        my ($r) = (h($res, 'RateLimit') // '') =~ /^"per-key";r=(\d+);t=\d+$/;
        push @remaining, $r;
        like $res->{body}, qr/key=\Q$r\E /, '$keyauth_rate_remaining reaches the upstream' if $i == 1;
    }
    is_deeply \@remaining, [reverse 0 .. 29], 'RateLimit r= counts down from 29 to 0';
    my $res = get($k30->{secret});
    is $res->{status}, 429, '31st request: 429';
    is KeyauthTest::json_body($res)->{error}{code}, 'RATE_LIMITED', 'code RATE_LIMITED';
    like h($res, 'Content-Type'), qr{^application/json}, 'JSON';
    is h($res, 'Retry-After'), '2', 'Retry-After: one 2-second interval, rounded up';
    is h($res, 'RateLimit-Policy'), '"per-key";q=30;w=60', 'policy on 429';
    like h($res, 'RateLimit'), qr/^"per-key";r=0;t=(59|60)$/, 'RateLimit r=0 with the time to a full burst';
    unlike $res->{body}, qr/upstream/, 'a limited request never reaches the upstream';
    sleep 2;
    is get($k30->{secret})->{status}, 200, 'after Retry-After, one more passes';
    is get($k30->{secret})->{status}, 429, '... and only one';
};

subtest 'two keys do not interfere' => sub {
    my $ok = grep { get($other->{secret})->{status} == 200 } 1 .. 30;
    is $ok, 30, 'the other key still has its whole burst';
};

subtest 'effective rate is capped by the entitlement, and follows its changes' => sub {
    my $small = $t->account(name => 'small', entitlement => 5);
    my $key = $t->key(account => $small->{id}, rate => 1000);
    my @st = map { get($key->{secret})->{status} } 1 .. 8;
    is_deeply \@st, [(200) x 5, (429) x 3], 'entitlement 5/min: 5 pass although the key asks 1000';
    is h(get($key->{secret}), 'RateLimit-Policy'), '"per-key";q=5;w=60', 'policy shows the cap';
    $t->ctl('account', 'set-entitlement', '--account', $small->{id}, '--entitlement', 600);
    my $res = get($key->{secret});
    is h($res, 'RateLimit-Policy'), '"per-key";q=600;w=60', 'new entitlement applies at the next request';
    # The bucket was empty and stays so, but now refills at 600/min: one
    # request every 100 ms instead of every 12 s.
    select undef, undef, undef, 0.25;
    is get($key->{secret})->{status}, 200, 'the key is admitted again within 250 ms';
};

subtest 'a reload keeps the counters' => sub {
    my $key = $t->key(account => $acc->{id}, rate => 3);
    get($key->{secret}) for 1 .. 3;
    is get($key->{secret})->{status}, 429, 'exhausted';
    ok $t->signal_nginx('reload'), 'reload';
    sleep 1;
    is get($key->{secret})->{status}, 429, 'still exhausted after the reload';
    is get($k30->{secret})->{status}, 429, 'the 30/min key too';
};

subtest 'failed authentication does not spend anyone\'s budget' => sub {
    my $key = $t->key(account => $acc->{id}, rate => 2, scopes => ['geo:read']);
    is get($key->{secret})->{status}, 403, 'wrong scope: 403' for 1 .. 3;
    my $ok = $t->key(account => $acc->{id}, rate => 2);
    is h(get($ok->{secret}), 'RateLimit'), '"per-key";r=1;t=30', 'fresh key: r=1 after its first request';
};

like $t->error_log, qr/keyauth: API key \Q$k30->{id}\E is over its rate of 30\/min/, 'refusals are logged with the key id';

done_testing;
