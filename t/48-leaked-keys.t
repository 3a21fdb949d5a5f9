# Leaked keys revoke themselves (issue 47), on one host, end to end: real
# nginx, real keyauthd, and GitHub's secret scanning played on loopback
# (t/lib/SecretScanner.pm: a key pair made here, its public key served in
# GitHub's JSON layout by a local HTTP server that counts fetches). A signed
# report of a live key revokes it and the very next edge request is 401;
# what is not ours, or revoked, changes nothing; admin and console tokens
# are revoked too; every bad signature is 401 and every oversized report
# 413; the signing keys are fetched on the first report, never at start,
# and again at most once a minute (the clock crossed with libfaketime);
# --leak-action notify records without revoking; the admin API's and
# keyauthctl's reports take the same path; and no reported token reaches a
# log.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Digest::SHA qw(sha256_hex);
use JSON::PP qw(decode_json encode_json);
use KeyauthTest qw(wait_until);
use SecretScanner;

my $root = KeyauthTest::root();
my $t = KeyauthTest->new;
$t->ctl('init');
my $gh = SecretScanner->new(dir => "$t->{dir}/github");
my $keys_url = $gh->serve;
$gh->down(1);
my $clock = "$t->{dir}/clock";
sub clock_ahead {
    open my $fh, '>', "$clock.tmp" or die $!;
    print $fh "+$_[0]s\n";
    close $fh;
    rename "$clock.tmp", $clock or die $!;
}
clock_ahead(0);
my %keyauthd = (faketime_file => $clock, args => ['--github-keys-url', $keys_url]);
$t->start_console_stack(admin => 1, keyauthd => {%keyauthd},
                        locations => "        location /v1/ip/ { keyauth on; keyauth_scope ip:read; ip_lookup; }\n");

my $acc = $t->account(name => 'Acme');
my $key = $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'ci', '--scope', 'ip:read', '--rate', 600);
my $other = $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'prod', '--scope', 'ip:read', '--rate', 600);
sub edge { $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $_[0]{secret}")->{status} }
is edge($key), 200, 'the key works at the edge';

my @reported;    # every token any report carried, for the log check
sub report {
    my ($body, @headers) = @_;
    my $res = $t->request(POST => '/v1/secret-scanning/github', @headers, \$body);
    $res->{json} = eval { decode_json($res->{body}) };
    return $res;
}
sub signed {
    my (@tokens) = @_;
    push @reported, @tokens;
    my $body = $gh->report_body(@tokens);
    return report($body, $gh->headers($body));
}
sub audit { $t->ctl('audit', 'list', '--account', $acc->{id})->{events} }

is $gh->fetches, 0, 'keyauthd read no signing key at start';

subtest 'GitHub\'s key list unreachable: 503, and the scanner retries' => sub {
    my $res = signed($key->{secret});
    is $res->{status}, 503, 'answers 503';
    is $res->{json}{error}{code}, 'SIGNING_KEYS_UNAVAILABLE', 'SIGNING_KEYS_UNAVAILABLE';
    is $res->{headers}{'retry-after'}[0], '60', 'Retry-After: 60';
    is $gh->fetches, 1, 'fetched on the first report';
    is edge($key), 200, 'nothing was done to the key';
};

$gh->down(0);
clock_ahead(61);    # past the minute between fetches

my $events_before = scalar @{ audit() };
subtest 'a signed report of a live key revokes it before its next request' => sub {
    my $res = signed($key->{secret});
    is $res->{status}, 200, 'answers 200' or diag $res->{body};
    is_deeply $res->{json}, [{ token_hash => sha256_hex($key->{secret}), token_type => 'keyauth_api_key',
                               label => 'true_positive' }], 'the feedback array: true_positive';
    is $gh->fetches, 2, 'the list fetched once more';
    my $edge = $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $key->{secret}");
    is $edge->{status}, 401, 'the very next edge request: 401';
    like $edge->{body}, qr/INVALID_API_KEY/, 'INVALID_API_KEY';
    is edge($other), 200, 'the account\'s other key still works';

    my @new = @{ audit() }[0 .. 1];
    is_deeply [map { $_->{action} } @new], ['key.leak', 'key.revoke'], 'audited: key.leak and key.revoke';
    is_deeply $new[0]{actor}, { type => 'secret_scanning', source => 'github' }, 'actor: secret scanning, github';
    is $new[0]{target}{id}, $key->{id}, 'the key';
    is $new[0]{changes}{leak}{to}{url}, 'https://github.com/octo/app/blob/1a2b/.env', 'with the report\'s url';
    is_deeply $new[1]{changes}{status}, { from => 'active', to => 'revoked' }, 'revoked';

    my $console = $t->console_client($acc->{consoleToken});
    my ($shown) = grep { $_->{id} eq $key->{id} } @{ $console->(GET => '/v1/keys')->{json}{keys} };
    is $shown->{status}, 'revoked', 'the console lists it revoked';
    is $shown->{leak}{url}, 'https://github.com/octo/app/blob/1a2b/.env', '... with where it was found';
    is $shown->{leak}{source}, 'github', '... by whom';
    ok $shown->{leak}{revoked}, '... and that the report revoked it';
    my $show = $t->ctl('key', 'show', $key->{id});
    is $show->{leak}{source}, 'github', 'keyauthctl key show says so too';
};

subtest 'what is not a live key of ours changes nothing' => sub {
    my $elsewhere = KeyauthTest->new;    # another deployment's store
    $elsewhere->ctl('init');
    my $a2 = $elsewhere->account(name => 'Other');
    my $foreign = $elsewhere->ctl('key', 'create', '--account', $a2->{id}, '--name', 'x', '--scope', 'ip:read',
                                  '--rate', 60);
    my $trail = scalar @{ $t->ctl('audit', 'list', '--limit', 1000)->{events} };
    my $res = signed($foreign->{secret}, 'just some text', $key->{secret});
    is $res->{status}, 200, 'answers 200';
    is_deeply [map { $_->{label} } @{ $res->{json} }], [qw(false_positive false_positive true_positive)],
        'another deployment\'s key and random text: false_positive; the revoked key: true_positive';
    is $res->{json}[1]{token_hash}, sha256_hex('just some text'), 'each token\'s hash';
    is scalar @{ $t->ctl('audit', 'list', '--limit', 1000)->{events} }, $trail, 'no audit event';
    is edge($other), 200, 'nothing else touched';
};

subtest 'admin and console tokens are revoked too' => sub {
    my $admin = $t->ctl('admin-token', 'create', '--name', 'billing', '--scope', 'accounts:read');
    my $session = $t->ctl('account', 'rotate-token', $acc->{id});
    my $ask_admin = $t->admin_client($admin->{token});
    is $ask_admin->(GET => '/v1/admin/accounts')->{status}, 200, 'the admin token works';
    my $console = $t->console_client($session->{consoleToken});
    is $console->(GET => '/v1/keys')->{status}, 200, 'the console token works';
    my $res = signed($admin->{token}, $session->{consoleToken});
    is_deeply [map { [$_->{token_type}, $_->{label}] } @{ $res->{json} }],
        [['keyauth_admin_token', 'true_positive'], ['keyauth_console_token', 'true_positive']], 'both ours';
    is $ask_admin->(GET => '/v1/admin/accounts')->{status}, 401, 'the admin token is refused';
    is $console->(GET => '/v1/keys')->{status}, 401, 'the console token is refused';
    my ($leak) = grep { $_->{action} eq 'admin_token.leak' } @{ $t->ctl('audit', 'list', '--limit', 1000)->{events} };
    is $leak->{actor}{type}, 'secret_scanning', 'the admin token\'s leak is in the operator\'s trail';
};

subtest 'bad signatures: 401, nothing done' => sub {
    my $body = $gh->report_body($other->{secret});
    my %h = map { /^([^:]+): (.*)$/ } $gh->headers($body);
    my $sig = $h{'Github-Public-Key-Signature'};
    my $id = $h{'Github-Public-Key-Identifier'};
    my $ct = 'Content-Type: application/json';
    $gh->add_key('stranger');
    my $wrong = $gh->sign($body, 'stranger');
    my %cases = (
        'a wrong signature'          => [$body, $ct, "Github-Public-Key-Identifier: $id", "Github-Public-Key-Signature: $wrong"],
        'the body altered after signing' => [$body =~ s/octo/ocTo/r, $ct, "Github-Public-Key-Identifier: $id",
                                         "Github-Public-Key-Signature: $sig"],
        'no signature'               => [$body, $ct, "Github-Public-Key-Identifier: $id"],
        'no identifier'              => [$body, $ct, "Github-Public-Key-Signature: $sig"],
        'a signature that is not base64' => [$body, $ct, "Github-Public-Key-Identifier: $id",
                                             'Github-Public-Key-Signature: %%%'],
    );
    for my $case (sort keys %cases) {
        my ($b, @hdr) = @{ $cases{$case} };
        my $res = report($b, @hdr);
        is $res->{status}, 401, "$case: 401";
        is $res->{json}{error}{code}, 'INVALID_SIGNATURE', "$case: INVALID_SIGNATURE";
    }
    push @reported, $other->{secret};
    clock_ahead(130);    # a minute after the last fetch
    my $fetches = $gh->fetches;
    my $res = report($body, $ct, 'Github-Public-Key-Identifier: ' . $gh->id('stranger'),
                     "Github-Public-Key-Signature: $wrong");
    is $res->{status}, 401, 'signed by a key GitHub does not list: 401';
    is $gh->fetches, $fetches + 1, '... after one refetch of the list';
    is report($body, $ct, 'Github-Public-Key-Identifier: ' . $gh->id('stranger'),
              "Github-Public-Key-Signature: $wrong")->{status}, 401, 'again: 401';
    is $gh->fetches, $fetches + 1, '... without another fetch within the minute';
    is edge($other), 200, 'the key still works';

    # GitHub rotates its key: published, and a minute later it is fetched
    $gh->publish;
    clock_ahead(200);
    $res = report($body, $ct, 'Github-Public-Key-Identifier: ' . $gh->id('stranger'),
                  "Github-Public-Key-Signature: $wrong");
    is $res->{status}, 200, 'a key GitHub now lists, a minute on: fetched, and the report verifies';
    is $gh->fetches, $fetches + 2, 'one fetch more';
    is edge($other), 401, 'and the key it reported is revoked';
};

subtest 'bodies: empty array 200, bad JSON 400, over 1,000 tokens or 1 MiB 413' => sub {
    my $empty = '[]';
    my $res = report($empty, $gh->headers($empty));
    is $res->{status}, 200, '[]: 200';
    is $res->{body} =~ s/\s+//gr, '[]', '... with an empty array';
    for my $bad ('{"token":"x"}', '[{"token":5}]', '[{"type":"t"}]', 'not json', '[{"token":"a","token":"b"}]') {
        $res = report($bad, $gh->headers($bad));
        is $res->{status}, 400, "$bad: 400";
        is $res->{json}{error}{code}, 'BAD_REQUEST', '... BAD_REQUEST';
    }
    my $many = $gh->report_body(map { "tok$_" } 1 .. 1001);
    $res = report($many, $gh->headers($many));
    is $res->{status}, 413, '1,001 tokens: 413';
    my $thousand = $gh->report_body(map { "tok$_" } 1 .. 1000);
    $res = report($thousand, $gh->headers($thousand));
    is $res->{status}, 200, '1,000 tokens: 200';
    is scalar @{ $res->{json} }, 1000, '... each answered';
    local $SIG{PIPE} = 'IGNORE';
    my $huge = '[' . (('{"token":"' . ('x' x 100) . '"},') x 20000) . '{"token":"y"}]';    # 2.2 MB
    $res = report($huge, $gh->headers($huge));
    is $res->{status}, 413, '2 MiB through nginx: 413';
    is $res->{json}{error}{code}, 'PAYLOAD_TOO_LARGE', '... in the JSON layout';
    # straight to keyauthd: refused on its Content-Length, before the body
    $res = KeyauthTest::raw_request($t->keyauthd_port,
        "POST /v1/secret-scanning/github HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" .
        "Content-Type: application/json\r\nContent-Length: " . (2 * 1024 * 1024) . "\r\n\r\n");
    is $res->{status}, 413, '2 MiB straight to keyauthd: 413';
    $res = KeyauthTest::raw_request($t->keyauthd_port,
        "POST /v1/secret-scanning/github HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" .
        "Content-Type: application/json\r\nContent-Length: " . (1024 * 1024 + 1) . "\r\n\r\n");
    is $res->{status}, 413, '1 MiB + 1 straight to keyauthd: 413';
    my $console_big = '{"name":"' . ('x' x (70 * 1024)) . '"}';
    $res = KeyauthTest::http_request($t->keyauthd_port, POST => '/v1/keys', 'Content-Type: application/json',
                                     "Authorization: Bearer $acc->{consoleToken}", \$console_big);
    is $res->{status}, 413, 'the console routes keep their 64 KiB';
    $res = $t->request(GET => '/v1/secret-scanning/github');
    is $res->{status}, 405, 'GET: 405';
};

subtest 'the admin API and keyauthctl report the same way' => sub {
    my $ops = $t->ctl('admin-token', 'create', '--name', 'support', '--scope', 'keys:write');
    my $reader = $t->ctl('admin-token', 'create', '--name', 'reader', '--scope', 'keys:read');
    my $k = $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'a', '--scope', 'ip:read', '--rate', 60);
    push @reported, $k->{secret};
    my $res = $t->admin_client($reader->{token})->(POST => '/v1/admin/keys/report-leak', { secret => $k->{secret} });
    is $res->{status}, 403, 'keys:read is not enough: 403';
    is edge($k), 200, '... and the key works';
    $res = $t->admin_client($ops->{token})->(POST => '/v1/admin/keys/report-leak',
                                              { secret => $k->{secret}, url => 'https://pastebin.example/x' });
    is $res->{status}, 200, 'keys:write: 200' or diag $res->{body};
    is $res->{json}{label}, 'true_positive', 'true_positive';
    ok $res->{json}{revoked}, 'revoked';
    is $res->{json}{keyId}, $k->{id}, 'the key\'s id';
    is $res->{json}{accountId}, $acc->{id}, 'its account';
    is edge($k), 401, 'refused at the edge';
    my ($e) = grep { $_->{action} eq 'key.leak' && $_->{target}{id} eq $k->{id} } @{ audit() };
    is $e->{actor}{type}, 'admin', 'the admin token is the actor';
    is $e->{changes}{leak}{to}{source}, 'support', 'the source: the token\'s name';
    $res = $t->admin_client($ops->{token})->(POST => '/v1/admin/keys/report-leak', { secret => 5 });
    is $res->{status}, 400, 'a secret that is not a string: 400';

    my $k2 = $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'b', '--scope', 'ip:read', '--rate', 60);
    push @reported, $k2->{secret};
    my $out = qx{printf '%s\\n' '$k2->{secret}' | '$t->{ctl}' --db '$t->{db}' --json key report-leak --secret-stdin --url https://example.com/leak};
    is $? >> 8, 0, 'keyauthctl key report-leak: exit 0';
    my $j = decode_json($out);
    is $j->{keyId}, $k2->{id}, 'the key';
    ok $j->{revoked}, 'revoked';
    is edge($k2), 401, 'refused at the edge';
    $out = qx{printf 'nonsense\\n' | '$t->{ctl}' --db '$t->{db}' --json key report-leak --secret-stdin};
    is decode_json($out)->{label}, 'false_positive', 'something else: false_positive';
    qx{printf '' | '$t->{ctl}' --db '$t->{db}' key report-leak --secret-stdin 2>/dev/null};
    is $? >> 8, 2, 'nothing on standard input: exit 2';
    my $long = 'x' x 300;
    qx{printf '%s\n' '$long' | '$t->{ctl}' --db '$t->{db}' key report-leak --secret-stdin 2>/dev/null};
    is $? >> 8, 2, 'over 256 bytes on standard input: exit 2';
    my ($rc, undef, $err) = $t->ctl_raw('key', 'report-leak', $k2->{secret});
    is $rc, 2, 'the secret as an argument: exit 2';
    unlike $err, qr/\Q@{[substr $k2->{secret}, 12]}\E/, '... and the message does not repeat it';
};

subtest '--leak-action notify: recorded and audited, not revoked' => sub {
    $t->stop_keyauthd;
    $t->start_keyauthd(admin => 1, %keyauthd, args => [@{ $keyauthd{args} }, '--leak-action', 'notify']);
    my $k = $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'n', '--scope', 'ip:read', '--rate', 60);
    my $res = signed($k->{secret});
    is $res->{status}, 200, 'answers 200' or diag $res->{body};
    is $res->{json}[0]{label}, 'true_positive', 'true_positive';
    is edge($k), 200, 'the key still works';
    my ($e) = grep { $_->{target}{id} eq $k->{id} } @{ audit() };
    is $e->{action}, 'key.leak', 'key.leak audited';
    ok !exists $e->{changes}{status}, 'no status change';
    my ($shown) = grep { $_->{id} eq $k->{id} } @{ $t->console_client($acc->{consoleToken})->(GET => '/v1/keys')->{json}{keys} // [] };
    $shown //= $t->ctl('key', 'show', $k->{id});
    is $shown->{status}, 'active', 'active';
    ok !$shown->{leak}{revoked}, 'reported, not revoked';
};

subtest 'no reported token reaches a log' => sub {
    my $logs = join '', map { my $f = "$t->{dir}/logs/$_"; -e $f ? do { local (@ARGV, $/) = ($f); <> } : '' }
                        qw(error.log access.log keyauthd.log);
    ok length $logs > 0, 'there are logs';
    my @found = grep { length $_ > 12 && index($logs, substr($_, 12)) >= 0 } @reported;
    is scalar @found, 0, 'none of the ' . scalar(@reported) . ' secrets, past their shown prefix, is in them';
    my $metrics = KeyauthTest::http_request($t->keyauthd_port, GET => '/metrics')->{body};
    like $metrics, qr{route="/v1/secret-scanning/github"}, 'the route has its own metrics label';
    ok !(grep { index($metrics, substr($_, 12)) >= 0 } grep { length $_ > 12 } @reported), 'and no secret in /metrics';
};

done_testing;
