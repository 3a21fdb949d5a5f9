# keyauth_verify (issue #48 item 3): POST /v1/verify answers the access
# phase's own decision for callers that are not behind nginx, on the same
# keyauth_zone, quota ledger, usage counts and keyauth_status counters:
# valid, unknown, revoked, wrong scope, suspended, over rate, over quota,
# with cost; a quota spent partly at the edge and partly through verify
# refuses the next call in either place, and the usage report counts both;
# malformed bodies are 400 VALIDATION_ERROR naming the field, other methods
# 405; the secret is never in an answer nor a log.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use POSIX qw(strftime);
use KeyauthTest qw(wait_until);

sub h { KeyauthTest::header(@_) }
sub code_of { (KeyauthTest::json_body($_[0]) // {})->{error}{code} // '' }

# client_body_buffer_size 1k: keyauth_verify keeps its bodies (up to 64 KiB)
# in memory whatever the location's buffer says
my $LOCATIONS = <<'LOC';
        client_body_buffer_size 1k;
        location /v1/ip/ {
            keyauth on;
            keyauth_scope ip:read;
            proxy_pass http://tool;
        }
        location = /v1/verify {
            allow 127.0.0.1;
            deny all;
            keyauth_verify;
        }
        location = /status { keyauth_status; }
LOC

my $t = KeyauthTest->new(workers => 2);
my $acc = $t->account;
my $key = $t->key(account => $acc->{id}, scopes => ['ip:read', 'tools:*']);
$t->start_nginx(http => "keyauth_zone keys:1m;\n    keyauth_usage_interval 1s;", locations => $LOCATIONS);

my $JSON = JSON::PP->new->canonical;
my @secrets = ($key->{secret});

# POST /v1/verify with $body (a hash: encoded; a string: as it is)
sub verify {
    my ($body, @headers) = @_;
    my $text = ref $body ? $JSON->encode($body) : $body;
    return $t->request(POST => '/v1/verify', 'Content-Type: application/json', @headers, \$text);
}
sub answer {
    my $res = verify(@_);
    is $res->{status}, 200, 'a decided check is 200' or diag $res->{body};
    like h($res, 'Content-Type') // '', qr{^application/json}, '... JSON';
    return KeyauthTest::json_body($res) // {};
}
sub edge { $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $_[0]") }
sub counter {
    my $outcome = shift;
    my ($n) = $t->request(GET => '/status')->{body} =~ /^keyauth_requests_total\{outcome="$outcome"\} (\d+)$/m;
    return $n // -1;
}

subtest 'a valid key: its ids, scopes and rate; never the secret' => sub {
    my $ok = counter('ok');
    my $a = answer({ key => $key->{secret} });
    is $a->{valid}, JSON::PP::true, 'valid';
    is $a->{keyId}, $key->{id}, 'keyId';
    is $a->{accountId}, $acc->{id}, 'accountId';
    is_deeply $a->{scopes}, ['ip:read', 'tools:*'], 'the scopes it grants';
    is $a->{name}, $key->{name}, 'name: the key\'s';
    # no plan, no meta here: null (t/68-meta.t answers them all)
    ok exists $a->{$_} && !defined $a->{$_}, "$_ null: none" for qw(planId meta accountMeta);
    is $a->{ratelimit}{limit}, 6000, 'ratelimit.limit: the key\'s rate';
    cmp_ok $a->{ratelimit}{remaining}, '<', 6000, 'ratelimit.remaining: this check spent one';
    ok defined $a->{ratelimit}{resetSeconds}, 'ratelimit.resetSeconds';
    ok exists $a->{quota} && !defined $a->{quota}, 'no quota in force: null';
    $a = answer({ key => $key->{secret}, scopes => ['ip:read', 'tools:run'], ip => '2001:db8::1' });
    is $a->{valid}, JSON::PP::true, 'with scopes it grants (tools:* grants tools:run) and an ip, no list';
    is counter('ok'), $ok + 2, 'counted in keyauth_requests_total{outcome="ok"}';
    my $res = verify({ key => $key->{secret} });
    unlike $res->{body}, qr/\Q$key->{secret}\E/, 'the answer never holds the secret';
};

subtest 'refusals: 200 valid:false with the edge\'s codes, counted like the edge\'s' => sub {
    my $invalid = counter('invalid_key');
    my $a = answer({ key => 'ka_nothing' });
    is_deeply $a, { valid => JSON::PP::false, code => 'INVALID_API_KEY' }, 'malformed key';
    my $other = KeyauthTest->new;
    my $stranger = $other->key(account => $other->account->{id});
    push @secrets, $stranger->{secret};
    is answer({ key => $stranger->{secret} })->{code}, 'INVALID_API_KEY', 'a key of another store: unknown';
    my $revoked = $t->key(account => $acc->{id});
    push @secrets, $revoked->{secret};
    $t->ctl('key', 'revoke', $revoked->{id});
    is answer({ key => $revoked->{secret} })->{code}, 'INVALID_API_KEY', 'revoked';
    is counter('invalid_key'), $invalid + 3, 'keyauth_requests_total{outcome="invalid_key"}';

    my $scope = counter('insufficient_scope');
    $a = answer({ key => $key->{secret}, scopes => ['ip:read', 'billing:read'] });
    is_deeply $a, { valid => JSON::PP::false, code => 'INSUFFICIENT_SCOPE' }, 'a scope it lacks';
    is counter('insufficient_scope'), $scope + 1, '... counted';

    my $sacc = $t->account(name => 'to suspend');
    my $skey = $t->key(account => $sacc->{id});
    push @secrets, $skey->{secret};
    is answer({ key => $skey->{secret} })->{valid}, JSON::PP::true, 'valid before';
    $t->ctl('account', 'suspend', $sacc->{id});
    is answer({ key => $skey->{secret} })->{code}, 'ACCOUNT_SUSPENDED', 'suspended account';
    is edge($skey->{secret})->{status}, 403, 'as at the edge';
};

subtest 'allowedIps: the ip given is checked against the key\'s and its account\'s lists' => sub {
    my $ipacc = $t->ctl('account', 'create', '--name', 'lists', '--entitlement', 6000, '--allow-ip', '10.1.0.0/16');
    my $ipkey = $t->ctl('key', 'create', '--account', $ipacc->{id}, '--name', 'office', '--scope', 'ip:read',
                        '--rate', 6000, '--allow-ip', '10.0.0.0/8', '--allow-ip', '2001:db8::/32');
    push @secrets, $ipkey->{secret};
    my $refused = counter('ip_not_allowed');
    is answer({ key => $ipkey->{secret}, ip => '10.1.2.3' })->{valid}, JSON::PP::true, '10.1.2.3 fits both';
    is answer({ key => $ipkey->{secret}, ip => '10.2.0.1' })->{code}, 'IP_NOT_ALLOWED', "10.2.0.1: outside the account's";
    is answer({ key => $ipkey->{secret}, ip => '2001:db8::1' })->{code}, 'IP_NOT_ALLOWED', "2001:db8::1: outside the account's";
    is answer({ key => $ipkey->{secret}, ip => '::ffff:10.1.2.3' })->{valid}, JSON::PP::true, 'IPv4-mapped: as IPv4';
    is answer({ key => $ipkey->{secret} })->{code}, 'IP_NOT_ALLOWED', 'no ip: fits no list';
    is counter('ip_not_allowed'), $refused + 3, 'keyauth_requests_total{outcome="ip_not_allowed"}';
    is answer({ key => $key->{secret} })->{valid}, JSON::PP::true, 'a key without lists needs no ip';
};

subtest 'over rate: the edge and verify spend the same GCRA state' => sub {
    my $slow = $t->key(account => $acc->{id}, rate => 2);
    push @secrets, $slow->{secret};
    my $limited = counter('rate_limited');
    is edge($slow->{secret})->{status}, 200, 'edge: the first of a burst of 2';
    my $a = answer({ key => $slow->{secret} });
    is $a->{valid}, JSON::PP::true, 'verify: the second';
    is $a->{ratelimit}{remaining}, 0, '... none left';
    $a = answer({ key => $slow->{secret} });
    is $a->{code}, 'RATE_LIMITED', 'verify: the third is RATE_LIMITED';
    cmp_ok $a->{retryAfterSeconds} // 0, '>=', 1, '... with retryAfterSeconds';
    is edge($slow->{secret})->{status}, 429, 'edge: refused too';
    is counter('rate_limited'), $limited + 2, 'both counted as rate_limited';
};

my $day = strftime('%Y-%m-%d', gmtime);
my $qacc = $t->account(name => 'quota');
my $qkey = $t->ctl('key', 'create', '--account', $qacc->{id}, '--name', 'ten', '--scope', 'ip:read',
                   '--rate', 6000, '--quota', '10/day');
push @secrets, $qkey->{secret};

subtest 'one quota: 4 units at the edge and 6 through verify refuse the 11th in either place' => sub {
    my $exceeded = counter('quota_exceeded');
    is edge($qkey->{secret})->{status}, 200, "edge call $_" for 1 .. 4;
    my $a = answer({ key => $qkey->{secret}, cost => 0 });
    is $a->{valid}, JSON::PP::true, 'cost 0: free';
    is $a->{quota}{remaining}, 6, '... and shows the balance: 6';
    like $a->{quota}{resetsAt} // '', qr/^\d{4}-\d\d-\d\dT00:00:00.000Z$/, 'resetsAt: the next UTC midnight';
    $a = answer({ key => $qkey->{secret}, cost => 7 });
    is $a->{code}, 'QUOTA_EXCEEDED', 'cost 7 with 6 left: QUOTA_EXCEEDED';
    cmp_ok $a->{retryAfterSeconds} // 0, '>=', 1, '... retryAfterSeconds until the day ends';
    $a = answer({ key => $qkey->{secret} });
    is $a->{quota}{remaining}, 5, 'the refusal charged nothing; a default call costs 1';
    $a = answer({ key => $qkey->{secret}, cost => 5 });
    is $a->{valid}, JSON::PP::true, 'cost 5: the last units';
    is $a->{quota}{remaining}, 0, '... none left';
    my $res = edge($qkey->{secret});
    is $res->{status}, 429, 'the 11th unit at the edge: 429';
    is code_of($res), 'QUOTA_EXCEEDED', '... QUOTA_EXCEEDED';
    is answer({ key => $qkey->{secret} })->{code}, 'QUOTA_EXCEEDED', 'and through verify';
    is counter('quota_exceeded'), $exceeded + 3, 'keyauth_requests_total{outcome="quota_exceeded"}: 3';
};

subtest 'the usage report counts the edge\'s calls and verify\'s alike' => sub {
    # the quota key: 4 edge + 3 verify admitted (one free), 3 refused; 10 units
    my $want = { allowed => 7, rateLimited => 0, quotaExceeded => 3, units => 10 };
    my $got;
    my $counted = sub {
        my $json = $t->ctl('usage', 'report', '--account', $qacc->{id}, '--from', $day, '--to', $day,
                           '--by', 'day', '--format', 'json');
        my ($row) = grep { ($_->{account} // $_->{accountId} // '') eq $qacc->{id} } @{ $json->{rows} // [] };
        $got = { map { $_ => ($row // {})->{$_} } keys %$want };
        return join(',', map { $got->{$_} // '' } sort keys %$want) eq join(',', map { $want->{$_} } sort keys %$want);
    };
    ok wait_until($counted, 30, 'the usage report to hold both'), 'allowed, quotaExceeded and units of both'
        or diag explain $got;
};

subtest 'malformed bodies: 400 VALIDATION_ERROR naming the field' => sub {
    my @cases = (
        ['', 'body', 'empty'],
        ['not json', 'body', 'not JSON'],
        ['[1,2]', 'body', 'not an object'],
        ['{"key":1}', 'key', 'key not a string'],
        ['{"scopes":["ip:read"]}', 'key', 'no key'],
        [qq({"key":"$key->{secret}","scopes":"ip:read"}), 'scopes', 'scopes not an array'],
        [qq({"key":"$key->{secret}","scopes":["ip"]}), 'scopes', 'a scope not <resource>:<action>'],
        [qq({"key":"$key->{secret}","cost":"5"}), 'cost', 'cost a string'],
        [qq({"key":"$key->{secret}","cost":-1}), 'cost', 'cost negative'],
        [qq({"key":"$key->{secret}","cost":1000000001}), 'cost', 'cost over the bound'],
        [qq({"key":"$key->{secret}","ip":"10.0.0.0/8"}), 'ip', 'ip a CIDR'],
        [qq({"key":"$key->{secret}","name":"x"}), 'name', 'an unknown field'],
    );
    for my $c (@cases) {
        my ($body, $field, $what) = @$c;
        my $res = verify($body);
        is $res->{status}, 400, "$what: 400";
        my $err = (KeyauthTest::json_body($res) // {})->{error} // {};
        is $err->{code}, 'VALIDATION_ERROR', "... VALIDATION_ERROR";
        is $err->{field}, $field, "... field $field";
        unlike $res->{body}, qr/\Q$key->{secret}\E/, '... without the secret';
    }
    my $fits = qq({"key":"$key->{secret}"});
    $fits .= ' ' x (65536 - length $fits);
    is answer($fits)->{valid}, JSON::PP::true, '64 KiB exactly: read (in memory, past a 1k buffer)';
    my $res = verify($fits . ' ');
    is $res->{status}, 400, '64 KiB + 1: 400';
    is((KeyauthTest::json_body($res) // {})->{error}{field}, 'body', '... the body');
    # the same, chunked: no Content-Length to refuse it by
    my $chunked = "POST /v1/verify HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                . "Transfer-Encoding: chunked\r\n\r\n";
    $chunked .= sprintf("%x\r\n%s\r\n", length $_, $_) for (substr($fits, 0, 40000), substr($fits, 40000) . ' ');
    $chunked .= "0\r\n\r\n";
    $res = KeyauthTest::raw_request($t->port, $chunked);
    is $res->{status}, 400, 'chunked, 64 KiB + 1: 400';
    is code_of($res), 'VALIDATION_ERROR', '... VALIDATION_ERROR';
};

subtest 'other methods: 405 with Allow: POST; others than 127.0.0.1: 403' => sub {
    for my $m (qw(GET PUT DELETE)) {
        my $res = $t->request($m => '/v1/verify');
        is $res->{status}, 405, "$m: 405";
        is h($res, 'Allow'), 'POST', '... Allow: POST';
        is code_of($res), 'METHOD_NOT_ALLOWED', '... in the JSON layout';
    }
    my $res = KeyauthTest::http_request_from('127.0.0.2', $t->port, POST => '/v1/verify',
                                             \qq({"key":"$key->{secret}"}));
    is $res->{status}, 403, 'from 127.0.0.2: the snippet\'s allow/deny refuses it';
};

subtest 'no secret in the logs' => sub {
    my $logs = $t->error_log . do { local (@ARGV, $/) = ($t->dir . '/logs/access.log'); <> // '' };
    for my $s (@secrets) {
        unlike $logs, qr/\Q$s\E/, 'a secret is in no log';
    }
};

done_testing;
