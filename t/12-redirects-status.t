# Internal redirects, "satisfy any" and keyauth_status.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use KeyauthTest;

my $t = KeyauthTest->new;
my $acc = $t->account;
my $key = $t->key(account => $acc->{id}, rate => 3);
my $revoked = $t->key(account => $acc->{id});
$t->ctl('key', 'revoke', $revoked->{id});
$t->start_nginx(http => 'keyauth_zone keys:1m;', locations => <<'LOC');
        location /v1/try/ {
            keyauth on;
            keyauth_scope ip:read;
            try_files /nonexistent @tool;
        }
        location @tool {
            keyauth on;
            keyauth_scope ip:read;
            proxy_set_header X-Account-Id $keyauth_account_id;
            proxy_pass http://tool;
        }
        location /v1/open-after/ {
            keyauth on;
            keyauth_scope ip:read;
            try_files /nonexistent @open;
        }
        location @open {
            proxy_set_header X-Key-Id $keyauth_key_id;
            proxy_pass http://tool;
        }
        location /v1/any/ {
            satisfy any;
            allow 127.0.0.1;
            deny all;
            keyauth on;
            proxy_set_header X-Account-Id $keyauth_account_id;
            proxy_pass http://tool;
        }
        location /v1/err/ {
            keyauth on;
            keyauth_scope ip:read;
            error_page 400 = @after_error;
            proxy_set_header X-Account-Id $keyauth_account_id;
            proxy_pass http://tool;
        }
        location @after_error {
            keyauth on;
            keyauth_scope ip:read;
            proxy_set_header X-Account-Id $keyauth_account_id;
            proxy_pass http://tool;
        }
        location = /keyauth/status { keyauth_status; }
LOC

subtest 'an internal redirect authenticates again but charges once' => sub {
    my @st;
    for (1 .. 4) {
        my $res = $t->request(GET => '/v1/try/x', "Authorization: Bearer $key->{secret}");
        push @st, $res->{status};
        if ($_ == 1) {
            like $res->{body}, qr/account=\Q$acc->{id}\E/, 'the named location sees the account';
            is KeyauthTest::header($res, 'RateLimit'), '"per-key";r=2;t=20',
                'RateLimit headers after the redirect, one request spent';
        }
    }
    is_deeply \@st, [200, 200, 200, 429], 'a 3/min key gets 3 requests through try_files, not fewer';
    is $t->request(GET => '/v1/try/x')->{status}, 401, 'no key: still 401';
};

subtest 'satisfy any' => sub {
    my $res = $t->request(GET => '/v1/any/x', "Authorization: Bearer $revoked->{secret}");
    is $res->{status}, 200, 'allow 127.0.0.1 lets a request with a revoked key through';
    like $res->{body}, qr/account= /, '... but the refused key\'s account does not reach the upstream';
};

subtest 'keyauth_status' => sub {
    $t->request(GET => '/v1/try/x', 'Authorization: Bearer ka_nope');
    my $res = $t->request(GET => '/keyauth/status');
    is $res->{status}, 200, 'status 200';
    like KeyauthTest::header($res, 'Content-Type'), qr{^text/plain; version=0\.0\.4}, 'Prometheus text';
    my %n = $res->{body} =~ /^keyauth_requests_total\{outcome="(\w+)"\} (\d+)$/mg;
    # both workers add to the same counters; a redirected request counts once
    is $n{ok}, 3, 'ok: 3';
    is $n{rate_limited}, 1, 'rate_limited: 1';
    is $n{key_required}, 1, 'key_required: 1';
    is $n{invalid_key}, 2, 'invalid_key: 2 (a revoked key under satisfy any, a malformed one)';
    is $n{insufficient_scope}, 0, 'insufficient_scope: 0';
    like $res->{body}, qr/^keyauth_rate_zone_slots \d+$/m, 'zone size';
    like $res->{body}, qr/^keyauth_rate_zone_busy_evictions_total 0$/m, 'no evictions';
    unlike $res->{body}, qr/ka_|kac_/, 'no secrets';
    is $t->request(POST => '/keyauth/status', \'x')->{status}, 405, 'POST: 405';
};

# Found by review: a refusal that could not be sent (its request body would
# not discard: a broken chunk) became a 400 that error_page redirected, and
# the redirect found the key "admitted" and let it through uncharged. Only a
# call let through is admitted now; a refused one is checked again.
subtest 'a refusal turned into an error_page redirect does not let the key through' => sub {
    my $k = $t->key(account => $acc->{id}, rate => 1);
    is $t->request(GET => '/v1/err/x', "Authorization: Bearer $k->{secret}")->{status}, 200,
        'its one request a minute';
    my $res = KeyauthTest::raw_request($t->port,
        "POST /v1/err/x HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer $k->{secret}\r\n"
        . "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n");
    isnt $res->{status}, 200, "over its rate, with a broken body: refused ($res->{status})";
    unlike $res->{body}, qr/account=/, 'the upstream never saw it';
    is $t->request(GET => '/v1/err/x', "Authorization: Bearer $k->{secret}")->{status}, 429,
        'and still over its rate';
};

# Found by review: the variables and the RateLimit headers lost the key's
# context after a redirect into a location without keyauth.
subtest 'after a redirect into a location without keyauth, the key is still known' => sub {
    my $k = $t->key(account => $acc->{id}, rate => 60);
    my $res = $t->request(GET => '/v1/open-after/x', "Authorization: Bearer $k->{secret}");
    is $res->{status}, 200, 'served by the named location';
    like $res->{body}, qr/key=\Q$k->{id}\E/, '$keyauth_key_id reaches its upstream';
    is KeyauthTest::header($res, 'RateLimit'), '"per-key";r=59;t=1', 'and the RateLimit headers are sent';
};

done_testing;
