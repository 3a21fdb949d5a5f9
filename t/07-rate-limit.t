# Per-key rate limits at the edge: GCRA in the keyauth_zone, shared by both
# workers, capped by the account entitlement, kept across reloads.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use KeyauthTest qw(wait_until);

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

# The 30/min key refills one request every 2 s. A busy machine may take that
# long over the burst, so what is allowed is computed from the time measured
# around the requests: request i, answered e seconds after the first was
# sent, must show r = 30 - i plus at most floor(e / 2) refills. When the burst
# takes under 2 s (as it does on an idle machine) that is exactly 29 down to 0,
# then 429.
subtest 'a 30/min key: 30 fast successes (plus what refilled meanwhile), then 429' => sub {
    my ($admitted, $res, $sent, @off) = (0);
    my $start = time;
    for my $i (1 .. 100) {
        $sent = time;
        $res = get($k30->{secret});
        my $refills = int((time - $start) / 2);
        last if $res->{status} != 200;
        $admitted = $i;
        is h($res, 'RateLimit-Policy'), '"per-key";q=30;w=60', "policy on success $i" if $i == 1;
        my ($r) = (h($res, 'RateLimit') // '') =~ /^"per-key";r=(\d+);t=\d+$/;
        like $res->{body}, qr/key=\Q$r\E /, '$keyauth_rate_remaining reaches the upstream' if $i == 1;
        push @off, "request $i: r=" . ($r // 'none') . ', expected ' . (30 - $i)
                   . ($refills ? ' to ' . (30 - $i + $refills) : '')
            unless defined $r && $r >= 30 - $i && $r <= 30 - $i + $refills;
    }
    my $elapsed = time - $start;
    my $refills = int($elapsed / 2);
    my $took = sprintf '%.2f s', $elapsed;
    is_deeply \@off, [], "RateLimit r= counts down from 29 to 0 (refills possible in $took: $refills)";
    cmp_ok $admitted, '>=', 30, 'the whole burst of 30 passed';
    cmp_ok $admitted, '<=', 30 + $refills, "no more than the burst and $refills refills ($took)";
    is $res->{status}, 429, 'the next request: 429';
    is KeyauthTest::json_body($res)->{error}{code}, 'RATE_LIMITED', 'code RATE_LIMITED';
    like h($res, 'Content-Type'), qr{^application/json}, 'JSON';
    # the next refill is due 2 s after the first request, less what has passed
    my $retry = h($res, 'Retry-After') // '';
    if ($elapsed < 1) {
        is $retry, '2', 'Retry-After: one 2-second interval, rounded up';
    } else {
        like $retry, qr/^[12]$/, "Retry-After: the rest of a 2-second interval, rounded up ($took passed)";
    }
    is h($res, 'RateLimit-Policy'), '"per-key";q=30;w=60', 'policy on 429';
    like h($res, 'RateLimit'), qr/^"per-key";r=0;t=(59|60)$/, 'RateLimit r=0 with the time to a full burst';
    unlike $res->{body}, qr/upstream/, 'a limited request never reaches the upstream';
    # Waiting what Retry-After says is what is tested here: a longer wait
    # cannot make the request fail.
    sleep($retry || 2);
    is get($k30->{secret})->{status}, 200, 'after Retry-After, one more passes';
    # The refill that let it pass came more than Retry-After - 1 s after the
    # 429 was sent; the next one is due 2 s after that.
    my $next = get($k30->{secret})->{status};
    my $since = time - $sent;
    if ($since < ($retry || 2) + 1) {
        is $next, 429, '... and only one';
    } else {
        ok $next == 429 || $next == 200,
            sprintf '... and then 429 or, %.2f s after the 429, a refill: %d', $since, $next;
    }
};

subtest 'two keys do not interfere' => sub {
    my $ok = grep { get($other->{secret})->{status} == 200 } 1 .. 30;
    is $ok, 30, 'the other key still has its whole burst';
};

subtest 'effective rate is capped by the entitlement, and follows its changes' => sub {
    my $small = $t->account(name => 'small', entitlement => 5);
    my $key = $t->key(account => $small->{id}, rate => 1000);
    my $start = time;
    my @st = map { get($key->{secret})->{status} } 1 .. 8;
    is_deeply \@st, [(200) x 5, (429) x 3], 'entitlement 5/min: 5 pass although the key asks 1000';
    is h(get($key->{secret}), 'RateLimit-Policy'), '"per-key";q=5;w=60', 'policy shows the cap';
    $t->ctl('account', 'set-entitlement', '--account', $small->{id}, '--entitlement', 600);
    my $res = get($key->{secret});
    is h($res, 'RateLimit-Policy'), '"per-key";q=600;w=60', 'new entitlement applies at the next request';
    # The bucket was empty and stays so, but now refills at 600/min: one
    # request every 100 ms instead of every 12 s.
    ok wait_until(sub { get($key->{secret})->{status} == 200 }, 10, 'a request to pass'),
        'the key is admitted again';
    my $took = time - $start;
    cmp_ok $took, '<', 12, sprintf 'in %.2f s since its first request, before 5/min would have refilled it', $took;
};

# 1/min and 2/min keys: neither refills for 30 s, far longer than the test
# waits for a reload. The reload is done when new workers have replaced the
# old ones: the requests after it are theirs.
subtest 'a reload keeps the counters' => sub {
    my $one = $t->key(account => $acc->{id}, rate => 1);
    my $two = $t->key(account => $acc->{id}, rate => 2);
    my $start = time;
    is_deeply [map { get($one->{secret})->{status} } 1 .. 2], [200, 429], 'the 1/min key: exhausted';
    is_deeply [map { get($two->{secret})->{status} } 1 .. 3], [200, 200, 429], 'the 2/min key: exhausted';
    my %old = map { $_ => 1 } $t->worker_pids;
    ok $t->signal_nginx('reload'), 'reload';
    ok wait_until(sub { my @w = $t->worker_pids; @w == 2 && !grep { $old{$_} } @w }, 20,
                  'two new workers, and the old ones gone'), 'new workers replaced the old ones';
    is get($one->{secret})->{status}, 429, 'the 1/min key: still exhausted after the reload';
    is get($two->{secret})->{status}, 429, 'the 2/min key too';
    my $took = time - $start;
    cmp_ok $took, '<', 30, sprintf 'all in %.2f s, before either key could refill', $took;
};

subtest 'failed authentication does not spend anyone\'s budget' => sub {
    my $key = $t->key(account => $acc->{id}, rate => 2, scopes => ['geo:read']);
    is get($key->{secret})->{status}, 403, 'wrong scope: 403' for 1 .. 3;
    my $ok = $t->key(account => $acc->{id}, rate => 2);
    is h(get($ok->{secret}), 'RateLimit'), '"per-key";r=1;t=30', 'fresh key: r=1 after its first request';
};

like $t->error_log, qr/keyauth: API key \Q$k30->{id}\E is over its rate of 30\/min/, 'refusals are logged with the key id';

done_testing;
