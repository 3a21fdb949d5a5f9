# The console flow through nginx -> keyauthd -> LMDB -> the edge: create a key,
# call a keyauth location with it, revoke it through the API, and the next
# call is 401. Plus isolation between accounts and every bad input.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use utf8;
use JSON::PP;
use Digest::SHA qw(sha256);
use KeyauthTest;

my $t = KeyauthTest->new;
my $alice = $t->account(name => 'alice', entitlement => 120);
my $bob = $t->account(name => 'bob', entitlement => 600);
$t->start_keyauthd;
$t->start_nginx(http => $t->console_http . "\nkeyauth_zone keys:1m;",
                locations => $t->console_locations . <<'LOC');
        keyauth on;
        location /v1/ip/ { keyauth_scope ip:read; proxy_pass http://tool; }
LOC

my $json = JSON::PP->new->utf8->canonical;

sub api {
    my ($method, $path, $token, $body, @headers) = @_;
    push @headers, "Authorization: Bearer $token" if defined $token;
    if (defined $body) {
        push @headers, 'Content-Type: application/json' unless grep /^Content-Type/i, @headers;
        $body = $json->encode($body) if ref $body;
        push @headers, \$body;
    }
    my $res = $t->request($method, $path, @headers);
    $res->{json} = KeyauthTest::json_body($res);
    return $res;
}

sub create {
    my ($token, %f) = @_;
    return api(POST => '/v1/keys', $token,
               { name => 'k', scopes => ['ip:read'], rateLimitPerMinute => 60, %f });
}

sub error_is {
    my ($res, $status, $code, $field, $name) = @_;
    subtest $name => sub {
        is $res->{status}, $status, "status $status";
        like KeyauthTest::header($res, 'Content-Type') // '', qr{^application/json}, 'JSON';
        is $res->{json}{error}{code}, $code, "code $code";
        is $res->{json}{error}{field}, $field, "field $field" if defined $field;
        ok length($res->{json}{error}{message} // ''), 'a message';
    };
}

my $a_tok = $alice->{consoleToken};
my $b_tok = $bob->{consoleToken};

subtest 'create -> use -> revoke -> 401' => sub {
    my $res = create($a_tok, name => 'production', rateLimitPerMinute => 1000);
    is $res->{status}, 201, '201 Created';
    my $k = $res->{json};
    like $k->{secret}, qr/^ka_[0-9A-Za-z]{38}$/, 'the secret, once';
    is $k->{prefix}, substr($k->{secret}, 0, 12), 'prefix';
    is $k->{rateLimitPerMinute}, 120, 'effective rate capped at the entitlement';
    is $k->{requestedRateLimitPerMinute}, 1000, 'requested rate kept';
    is $k->{status}, 'active', 'active';
    is_deeply $k->{scopes}, ['ip:read'], 'scopes';
    like $k->{createdAt}, qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, 'createdAt';
    is KeyauthTest::header($res, 'Cache-Control'), 'no-store', 'the secret is not cached';

    my $call = $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $k->{secret}");
    is $call->{status}, 200, 'the new key works at the edge at once';
    is KeyauthTest::header($call, 'RateLimit-Policy'), '"per-key";q=120;w=60', 'at the capped rate';

    my $rev = api(POST => "/v1/keys/$k->{id}/revoke", $a_tok);
    is $rev->{status}, 200, 'revoke: 200';
    is $rev->{json}{status}, 'revoked', 'status revoked';
    ok $rev->{json}{revokedAt}, 'revokedAt';
    ok !exists $rev->{json}{secret}, 'no secret in the revoke answer';
    my $after = $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $k->{secret}");
    is $after->{status}, 401, 'the very next call: 401';
    is KeyauthTest::json_body($after)->{error}{code}, 'INVALID_API_KEY', 'INVALID_API_KEY';
    my $again = api(POST => "/v1/keys/$k->{id}/revoke", $a_tok);
    is $again->{status}, 200, 'revoking again: 200 (idempotent)';
    is $again->{json}{revokedAt}, $rev->{json}{revokedAt}, 'same revokedAt';
};

subtest 'accounts see only their own keys' => sub {
    my $bk = create($b_tok, name => 'bob key')->{json};
    my $ak = create($a_tok, name => 'alice key')->{json};
    my $alist = api(GET => '/v1/keys', $a_tok);
    is $alist->{status}, 200, 'list: 200';
    my @names = map { $_->{name} } @{ $alist->{json}{keys} };
    ok !(grep { $_ eq 'bob key' } @names), "alice does not see bob's key";
    ok((grep { $_ eq 'alice key' } @names), 'alice sees her key');
    ok !(grep { exists $_->{secret} } @{ $alist->{json}{keys} }), 'never a secret in a list';
    my $cross = api(POST => "/v1/keys/$bk->{id}/revoke", $a_tok);
    error_is($cross, 404, 'KEY_NOT_FOUND', undef, "alice revoking bob's key: 404");
    is $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $bk->{secret}")->{status}, 200,
        "bob's key still works";
    error_is(api(POST => '/v1/keys/key_000000000000000000000000/revoke', $a_tok), 404,
             'KEY_NOT_FOUND', undef, 'unknown key id: 404');
    error_is(api(POST => '/v1/keys/nonsense/revoke', $a_tok), 404, 'KEY_NOT_FOUND', undef,
             'malformed key id: 404');
};

subtest 'pagination with a cursor' => sub {
    my $carol = $t->account(name => 'carol');
    my @made = map { create($carol->{consoleToken}, name => "c$_")->{json}{id} } 1 .. 7;
    my (@seen, $cursor);
    for (1 .. 10) {
        my $q = '/v1/keys?limit=3' . ($cursor ? "&cursor=$cursor" : '');
        my $page = api(GET => $q, $carol->{consoleToken});
        push @seen, map { $_->{id} } @{ $page->{json}{keys} };
        $cursor = $page->{json}{nextCursor} or last;
    }
    is_deeply \@seen, \@made, 'every key once, in creation order';
    error_is(api(GET => '/v1/keys?limit=0', $a_tok), 400, 'VALIDATION_ERROR', 'limit', 'limit=0');
    error_is(api(GET => '/v1/keys?limit=101', $a_tok), 400, 'VALIDATION_ERROR', 'limit', 'limit=101');
    error_is(api(GET => '/v1/keys?limit=x', $a_tok), 400, 'VALIDATION_ERROR', 'limit', 'limit=x');
    error_is(api(GET => '/v1/keys?cursor=zzz', $a_tok), 400, 'VALIDATION_ERROR', 'cursor', 'bad cursor');
};

subtest 'console authentication' => sub {
    error_is(api(GET => '/v1/keys', undef), 401, 'CONSOLE_TOKEN_REQUIRED', undef, 'no token');
    error_is(api(GET => '/v1/keys', 'kac_' . ('A' x 38)), 401, 'INVALID_CONSOLE_TOKEN', undef, 'bad token');
    my $k = create($a_tok)->{json};
    error_is(api(GET => '/v1/keys', $k->{secret}), 401, 'INVALID_CONSOLE_TOKEN', undef,
             'an API key is not a console token');
    error_is(create(undef), 401, 'CONSOLE_TOKEN_REQUIRED', undef, 'create without token');
};

subtest 'bad input: 400 naming the field, nothing written' => sub {
    my $before = scalar @{ api(GET => '/v1/keys?limit=100', $b_tok)->{json}{keys} };
    my @cases = (
        ['missing name', { scopes => ['ip:read'], rateLimitPerMinute => 5 }, 'name'],
        ['missing scopes', { name => 'x', rateLimitPerMinute => 5 }, 'scopes'],
        ['missing rate', { name => 'x', scopes => ['ip:read'] }, 'rateLimitPerMinute'],
        ['extra field', { name => 'x', scopes => ['ip:read'], rateLimitPerMinute => 5, admin => JSON::PP::true }, 'admin'],
        ['name not a string', { name => 5, scopes => ['ip:read'], rateLimitPerMinute => 5 }, 'name'],
        ['empty name', { name => '', scopes => ['ip:read'], rateLimitPerMinute => 5 }, 'name'],
        ['201-byte name', { name => 'n' x 201, scopes => ['ip:read'], rateLimitPerMinute => 5 }, 'name'],
        ['scopes not an array', { name => 'x', scopes => 'ip:read', rateLimitPerMinute => 5 }, 'scopes'],
        ['scope not a string', { name => 'x', scopes => [5], rateLimitPerMinute => 5 }, 'scopes'],
        ['scope without action', { name => 'x', scopes => ['ip'], rateLimitPerMinute => 5 }, 'scopes'],
        ['upper-case scope', { name => 'x', scopes => ['IP:READ'], rateLimitPerMinute => 5 }, 'scopes'],
        ['duplicate scopes', { name => 'x', scopes => ['ip:read', 'ip:read'], rateLimitPerMinute => 5 }, 'scopes'],
        ['no scopes', { name => 'x', scopes => [], rateLimitPerMinute => 5 }, 'scopes'],
        ['33 scopes', { name => 'x', scopes => [map { "r$_:read" } 1 .. 33], rateLimitPerMinute => 5 }, 'scopes'],
        ['rate 0', { name => 'x', scopes => ['ip:read'], rateLimitPerMinute => 0 }, 'rateLimitPerMinute'],
        ['negative rate', { name => 'x', scopes => ['ip:read'], rateLimitPerMinute => -5 }, 'rateLimitPerMinute'],
        ['fractional rate', { name => 'x', scopes => ['ip:read'], rateLimitPerMinute => 1.5 }, 'rateLimitPerMinute'],
        ['rate as string', { name => 'x', scopes => ['ip:read'], rateLimitPerMinute => '5' }, 'rateLimitPerMinute'],
        ['absurd rate', { name => 'x', scopes => ['ip:read'], rateLimitPerMinute => 10_000_001 }, 'rateLimitPerMinute'],
        ['rate true', { name => 'x', scopes => ['ip:read'], rateLimitPerMinute => JSON::PP::true }, 'rateLimitPerMinute'],
    );
    for my $c (@cases) {
        my ($name, $body, $field) = @$c;
        error_is(api(POST => '/v1/keys', $b_tok, $body), 400, 'VALIDATION_ERROR', $field, $name);
    }
    error_is(api(POST => '/v1/keys', $b_tok, '{"name":"a","name":"b","scopes":["ip:read"],"rateLimitPerMinute":5}'),
             400, 'VALIDATION_ERROR', 'name', 'a repeated member (the last would have won)');
    for my $c (['C1 control U+0085', "a\x{85}b"], ['right-to-left override U+202E', "prod\x{202E}dub"],
               ['first strong isolate U+2068', "a\x{2068}b"], ['BEL', "a\x07b"]) {
        error_is(api(POST => '/v1/keys', $b_tok, { name => $c->[1], scopes => ['ip:read'], rateLimitPerMinute => 5 }),
                 400, 'VALIDATION_ERROR', 'name', "name with a $c->[0]");
    }
    error_is(api(POST => '/v1/keys', $b_tok, '{"name": "x", '), 400, 'VALIDATION_ERROR', 'body', 'truncated JSON');
    error_is(api(POST => '/v1/keys', $b_tok, '[1,2]'), 400, 'VALIDATION_ERROR', 'body', 'JSON array');
    error_is(api(POST => '/v1/keys', $b_tok, qq({"name":"\xff\xfe","scopes":["ip:read"],"rateLimitPerMinute":5})),
             400, 'VALIDATION_ERROR', 'name', 'invalid UTF-8 in name: 400 naming it');
    error_is(api(POST => '/v1/keys', $b_tok, '', 'Content-Type: application/json'), 400,
             'VALIDATION_ERROR', 'body', 'empty body');
    error_is(api(POST => '/v1/keys', $b_tok, 'name=x', 'Content-Type: application/x-www-form-urlencoded'),
             415, 'UNSUPPORTED_MEDIA_TYPE', undef, 'form body: 415');
    error_is(api(POST => '/v1/keys', $b_tok, { name => 'x' . ('y' x 70000), scopes => ['ip:read'], rateLimitPerMinute => 5 }),
             413, 'PAYLOAD_TOO_LARGE', undef, 'body over 64 KiB: 413');
    error_is(api(DELETE => '/v1/keys', $b_tok), 405, 'METHOD_NOT_ALLOWED', undef, 'DELETE /v1/keys: 405');
    error_is(api(GET => '/v1/keys/key_000000000000000000000000/revoke', $b_tok), 405,
             'METHOD_NOT_ALLOWED', undef, 'GET on revoke: 405');
    error_is(api(GET => '/v1/keys/extra/path', $b_tok), 404, 'NOT_FOUND', undef, 'unknown route: 404');
    my $ok = create($b_tok, name => 'clé 🔑 ünïcode');
    is $ok->{status}, 201, 'a Unicode name is fine';
    is $ok->{json}{name}, 'clé 🔑 ünïcode', '... and kept';
    my $after = scalar @{ api(GET => '/v1/keys?limit=100', $b_tok)->{json}{keys} };
    is $after, $before + 1, 'only the valid create wrote anything';
};

# Found by review: httplib inflates a compressed body without bound, and
# reads a chunked one past any size limit, before the token is even checked.
subtest 'bodies keyauthd must not read: refused before they are read' => sub {
    my $before = @{ api(GET => '/v1/keys?limit=100', $a_tok)->{json}{keys} };
    my $gz = "\x1f\x8b\x08\x00" . ("\0" x 60);
    my $res = api(POST => '/v1/keys', $a_tok, $gz, 'Content-Type: application/json', 'Content-Encoding: gzip');
    is $res->{status}, 415, 'through nginx, a compressed body: 415';
    is $res->{json}{error}{code}, 'UNSUPPORTED_MEDIA_TYPE', 'in the JSON layout';
    my $port = $t->keyauthd_port;
    my $direct = KeyauthTest::raw_request($port, "POST /v1/keys HTTP/1.1\r\nHost: x\r\n"
        . "Authorization: Bearer $a_tok\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
        . "Content-Length: " . length($gz) . "\r\n\r\n$gz");
    is $direct->{status}, 415, 'straight to keyauthd, a compressed body: 415';
    is KeyauthTest::header($direct, 'Connection'), 'close', 'and the connection closes (its body is unread)';
    $direct = KeyauthTest::raw_request($port, "POST /v1/keys HTTP/1.1\r\nHost: x\r\n"
        . "Authorization: Bearer $a_tok\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        . "5\r\nhello\r\n0\r\n\r\n");
    is $direct->{status}, 411, 'straight to keyauthd, a chunked body: 411 (Content-Length required)';
    is +(KeyauthTest::json_body($direct) // {})->{error}{code}, 'LENGTH_REQUIRED', 'LENGTH_REQUIRED';
    is KeyauthTest::header($direct, 'Connection'), 'close', 'and the connection closes';
    is @{ api(GET => '/v1/keys?limit=100', $a_tok)->{json}{keys} }, $before, 'nothing was created';
};

subtest 'the edge does not need keyauthd' => sub {
    my $k = create($a_tok)->{json};
    is $t->stop_keyauthd, 0, 'keyauthd stops cleanly on SIGTERM (exit 0)';
    is $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $k->{secret}")->{status}, 200,
        'keys still authenticate with keyauthd down';
    is api(GET => '/v1/keys', $a_tok)->{status}, 502, 'the console API is down meanwhile (502)';
    $t->start_keyauthd;
    is api(GET => '/v1/keys', $a_tok)->{status}, 200, 'and back after a restart';
};

subtest 'secrets stay out of logs and the data file' => sub {
    my $k = create($a_tok)->{json};
    my $log = $t->keyauthd_log . $t->error_log;
    like $t->keyauthd_log, qr/"method":"POST","path":"\/v1\/keys","status":201,"account":"\Q$alice->{id}\E"/,
        'keyauthd logs one line per request with the account';
    unlike $log, qr/\Q$k->{secret}\E/, 'no secret in the logs';
    # a hostile path: quotes and a newline (percent-encoded) and a pasted secret
    my $evil = "/v1/keys/%22%7D%0A%7B%22status%22:200,$k->{secret}/revoke";
    is $t->request(POST => $evil, "Authorization: Bearer $a_tok")->{status}, 404, 'a hostile path: 404';
    my @lines = grep { /"path"/ } split /\n/, $t->keyauthd_log;
    my $last = $lines[-1];
    ok eval { JSON::PP->new->decode($last); 1 }, 'its log line is still one valid JSON object' or diag $last;
    unlike $t->keyauthd_log, qr/\Q$k->{secret}\E/, 'the secret pasted in a path is masked in the log';
    unlike $log, qr/\Q$a_tok\E/, 'no console token in the logs';
    open my $fh, '<:raw', $t->db . '/data.mdb' or die $!;
    my $data = do { local $/; <$fh> };
    unlike $data, qr/\Q$k->{secret}\E/, 'no secret in data.mdb';
    ok index($data, sha256($k->{secret})) >= 0, 'its SHA-256 is there';
};

done_testing;
