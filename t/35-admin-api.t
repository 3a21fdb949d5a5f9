# The admin API end to end (issue 45): keyauthd's own listener for the
# business's services, never the console's; admin tokens made, listed and
# revoked with keyauthctl; the payment flow from the catalog to a plan whose
# quota the edge enforces at once, retried without a second event; a
# console session that a backend hands to the console page in a URL
# fragment the browser drops at once, refused at its expiry (keyauthd under
# faketime) and when the account is suspended.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP qw(decode_json encode_json);
use POSIX ();
use KeyauthTest qw(wait_until);

sub h { KeyauthTest::header(@_) }

my $root = KeyauthTest::root();
my $t = KeyauthTest->new;
$t->ctl('init');
# a catalog with a small plan, so that its quota is reached in a test
my $catalog = $t->dir . '/plans.json';
{
    my $plans = decode_json(do { local (@ARGV, $/) = ("$root/lmdb_schema/plans.json"); <> });
    my $list = ref $plans eq 'HASH' ? $plans->{plans} : $plans;
    $list->[0]{entitlements} = { rateLimitPerMinute => 600, maxKeys => 3, quota => { units => 3, period => 'day' } };
    open my $fh, '>', $catalog or die $!;
    print $fh encode_json($plans);
    close $fh;
}
$t->ctl('plans', 'import', $catalog);
$t->ctl('fx', 'set', '83.50');
my $small = decode_json(do { local (@ARGV, $/) = ($catalog); <> });
$small = (ref $small eq 'HASH' ? $small->{plans} : $small)->[0]{id};

my $ops = $t->ctl('admin-token', 'create', '--name', 'ops', '--scope', '*');
like $ops->{token}, qr/^kaa_[0-9A-Za-z]{38}$/, 'keyauthctl admin-token create prints a kaa_ token once';
my $pay = $t->ctl('admin-token', 'create', '--name', 'payments', '--scope', 'accounts:plan');
my $login = $t->ctl('admin-token', 'create', '--name', 'login', '--scope', 'accounts:read', '--scope', 'sessions:write');

$t->start_keyauthd(admin => 1);
my $page = KeyauthTest::console_dir();
$t->start_nginx(http => "keyauth_zone keys:1m;\n" . $t->console_http, locations => $t->console_locations . <<"LOC");
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; ip_lookup; }
        location /api/plans { keyauth off; keyauth_plans; }
        location /console/ {
            alias $page/;
            include $root/nginx_conf/console_page.conf;
        }
LOC
my $admin = $t->admin_client($ops->{token});

subtest 'admin tokens: made, listed without a secret, revoked; bad input exits 2' => sub {
    my $list = $t->ctl('admin-token', 'list');
    is scalar @{ $list->{adminTokens} }, 3, 'three tokens';
    unlike encode_json($list), qr/kaa_/, 'no token in the list';
    is_deeply [sort map { @{ $_->{scopes} } } grep { $_->{name} eq 'login' } @{ $list->{adminTokens} }],
        ['accounts:read', 'sessions:write'], 'their scopes';
    my ($rc, undef, $err) = $t->ctl_raw('admin-token', 'create', '--name', 'x', '--scope', 'root');
    is $rc, 2, 'an unknown scope: exit 2';
    like $err, qr/"root" is not an admin scope/, '... saying so';
    ($rc) = $t->ctl_raw('admin-token', 'create', '--name', 'x');
    is $rc, 2, 'no scope: exit 2';
    my $brief = $t->ctl('admin-token', 'create', '--name', 'brief', '--scope', 'accounts:read');
    my $c = $t->admin_client($brief->{token});
    is $c->(GET => '/v1/admin/accounts')->{status}, 200, 'a new token works';
    $t->ctl('admin-token', 'revoke', $brief->{id});
    my $res = $c->(GET => '/v1/admin/accounts');
    is $res->{status}, 401, 'revoked: the next call is 401';
    is $res->{code}, 'INVALID_ADMIN_TOKEN', '... INVALID_ADMIN_TOKEN';
    is $t->admin_client(undef)->(GET => '/v1/admin/accounts')->{code}, 'ADMIN_TOKEN_REQUIRED', 'no token: 401';
};

subtest 'the admin API lives on its own listener only' => sub {
    for my $path ('/v1/admin/accounts', '/v1/admin/accounts/acc_000000000000000000000000/plan', '/v1/admin/fx') {
        my $res = KeyauthTest::http_request($t->keyauthd_port, GET => $path, "Authorization: Bearer $ops->{token}");
        is $res->{status}, 404, "the console listener: $path is 404";
        $res = $t->request(GET => $path, "Authorization: Bearer $ops->{token}");
        is $res->{status}, 404, "through nginx's console locations: $path is 404";
    }
    my $out = `$root/build/keyauthd --db @{[$t->db]} --listen 127.0.0.1:1 --admin-listen 0.0.0.0:2 2>&1`;
    is $? >> 8, 2, 'a non-loopback --admin-listen without --allow-remote: exit 2';
    like $out, qr/--admin-listen 0\.0\.0\.0:2 is not a loopback address; add --allow-remote/, '... saying why';
    like $t->request(GET => '/v1/keys', "Authorization: Bearer $ops->{token}")->{body}, qr/INVALID_CONSOLE_TOKEN/,
        'an admin token is no console token';
};

subtest "the admin listener has the console's limits, each answered in the JSON error layout" => sub {
    my $big = 'x' x (65 * 1024);
    my $r = KeyauthTest::http_request($t->admin_port, POST => '/v1/admin/accounts', "Authorization: Bearer $ops->{token}",
                                      'Content-Type: application/json', \$big);
    is $r->{status}, 413, 'a body over 64 KiB: 413';
    is eval { decode_json($r->{body})->{error}{code} }, 'PAYLOAD_TOO_LARGE', '... as JSON';
    $r = KeyauthTest::http_request($t->admin_port, GET => '/v1/admin/accounts', "Authorization: Bearer $ops->{token}",
                                   map { "X-Filler-$_: " . ('y' x 200) } 1 .. 120);
    is $r->{status}, 431, 'too many header fields: 431';
    is eval { decode_json($r->{body})->{error}{code} } // '', 'HEADERS_TOO_LARGE', '... as JSON';
    $r = KeyauthTest::raw_request($t->admin_port, "NOT-HTTP\r\n\r\n");
    is $r->{status}, 400, 'a malformed request: 400';
    ok eval { decode_json($r->{body})->{error}{code} }, '... as JSON';
    # a client that sends half a head and stops is cut off (408), costing no worker meanwhile
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t->admin_port) or die $!;
    print $s "GET /v1/admin/accounts HTTP/1.1\r\nHost: x\r\n";
    my $answer = $admin->(GET => '/v1/admin/accounts?limit=1');
    is $answer->{status}, 200, 'other callers are answered meanwhile';
    local $/;
    my $late = <$s> // '';
    like $late, qr{^HTTP/1\.1 408 }, 'the slow head is 408 after the head timeout';
};

subtest 'signup, then the payment flow: the plan applies at the edge at once, a retry records nothing' => sub {
    my $made = $admin->(POST => '/v1/admin/accounts', { name => 'Acme', externalId => 'cus_42', rateLimitPerMinute => 600 });
    is $made->{status}, 201, 'the signup service creates the account';
    my $acc = $made->{json}{id};
    my $again = $admin->(POST => '/v1/admin/accounts', { name => 'Acme', externalId => 'cus_42', rateLimitPerMinute => 600 });
    is $again->{code}, 'EXTERNAL_ID_TAKEN', 'a retried signup: 409 EXTERNAL_ID_TAKEN';
    is $again->{json}{error}{accountId}, $acc, '... naming the account it made';
    my $key = $admin->(POST => "/v1/admin/accounts/$acc/keys", { name => 'k', scopes => ['ip:read'], rateLimitPerMinute => 600 });
    is $key->{status}, 201, 'a key';
    my $get = sub { $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $key->{json}{secret}")->{status} };
    is $get->(), 200, "call $_ with no plan" for 1 .. 4;

    # the payment service checks the plan id, then assigns the plan after the order
    is $t->request(GET => "/api/plans/$small")->{status}, 200, "GET /api/plans/$small: the plan exists";
    my $plan = $t->admin_client($pay->{token});
    my $r = $plan->(PUT => "/v1/admin/accounts/$acc/plan", { planId => $small, orderId => 'ord_1001' });
    is $r->{status}, 200, 'PUT .../plan with the orderId';
    is $r->{json}{quota}{units}, 3, "the account's quota is the plan's: 3 a day";
    is $get->(), 200, "the edge's next request counts against it ($_ of 3)" for 1 .. 3;
    is $get->(), 429, 'then 429: the plan is enforced at once';
    my $events = sub {
        scalar grep { $_->{action} eq 'account.set_plan' }
            @{ $admin->(GET => "/v1/admin/audit?accountId=$acc")->{json}{events} };
    };
    is $events->(), 1, 'one account.set_plan event';
    is $plan->(PUT => "/v1/admin/accounts/$acc/plan", { planId => $small, orderId => 'ord_1001' })->{status}, 200,
        'the same PUT again (a retried webhook): 200';
    is $events->(), 1, '... and still one event';
    my ($ev) = grep { $_->{action} eq 'account.set_plan' } @{ $admin->(GET => "/v1/admin/audit?accountId=$acc")->{json}{events} };
    is_deeply $ev->{actor}, { type => 'admin', token => 'payments', tokenId => $pay->{id} }, 'the actor: the payment token';
    is $ev->{changes}{orderId}{to}, 'ord_1001', 'the order id in the event';
    is $plan->(PATCH => "/v1/admin/accounts/$acc", { name => 'x' })->{code}, 'ADMIN_SCOPE_REQUIRED',
        'the payment token can do nothing else';
    my $trail = decode_json($t->request(GET => '/v1/audit', "Authorization: Bearer "
        . $admin->(POST => "/v1/admin/accounts/$acc/sessions")->{json}{token})->{body});
    ok((grep { $_->{actor}{type} eq 'admin' } @{ $trail->{events} }), "the account's own trail shows the admin calls");
};

subtest 'a console session: the example backend hands it to the page in a fragment the tab drops' => sub {
    plan skip_all => 'chromium, chromium-driver or python3-selenium missing (make deps installs them)'
        unless -x '/usr/bin/chromium' && -x '/usr/bin/chromedriver'
            && system('/usr/bin/python3', '-c', 'import selenium') == 0;
    my $port = KeyauthTest::free_port();
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        $ENV{KEYAUTH_ADMIN_URL} = 'http://127.0.0.1:' . $t->admin_port;
        $ENV{KEYAUTH_ADMIN_TOKEN} = $login->{token};
        $ENV{CONSOLE_URL} = 'http://127.0.0.1:' . $t->port . '/console/';
        $ENV{PORT} = $port;
        open STDERR, '>>', $t->dir . '/logs/login.log';
        exec '/usr/bin/python3', "$root/docs/examples/console_login.py" or POSIX::_exit(127);
    }
    ok wait_until(sub { IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port) }, 30, 'the backend'),
        'the example backend listens';
    my $res = KeyauthTest::http_request($port, GET => '/open-console?customer=cus_42');
    is $res->{status}, 303, 'the backend redirects';
    like h($res, 'Location'), qr{/console/#session=kac_[0-9A-Za-z]+$}, '... to the console with #session=';
    my ($token) = h($res, 'Location') =~ /#session=(kac_\w+)/;
    my $acc = $admin->(GET => '/v1/admin/accounts?externalId=cus_42')->{json}{accounts}[0]{id};
    is decode_json($t->request(GET => '/v1/account', "Authorization: Bearer $token")->{body})->{id}, $acc,
        "the session is a console token of cus_42's account";
    my $out = `/usr/bin/python3 $FindBin::Bin/lib/session_handoff.py http://127.0.0.1:$port/open-console?customer=cus_42 2>&1`;
    is $? >> 8, 0, 'the browser signed in' or diag $out;
    my ($json) = $out =~ /^(\{.*\})$/m;
    my $seen = eval { decode_json($json // '') } // {};
    is $seen->{hash}, '', 'the address bar has no fragment left';
    unlike $seen->{href} // 'session=', qr/session=/, '... nor the token';
    is $seen->{stored}, 'kac_', 'the token is in the tab\'s sessionStorage';
    is scalar(grep { /session=/ } @{ $seen->{history} // ['session='] }), 0, 'no entry of the history holds it';
    unlike do { local (@ARGV, $/) = ($t->dir . '/logs/access.log'); <> } // '', qr/kac_/,
        'no console token in nginx\'s access log (a fragment is never sent)';
    kill 'TERM', $pid;
    waitpid $pid, 0;
};

subtest 'a session stops at its expiry (keyauthd under faketime) and at once with a suspension' => sub {
    my $acc = $admin->(GET => '/v1/admin/accounts?externalId=cus_42')->{json}{accounts}[0]{id};
    my $s = $admin->(POST => "/v1/admin/accounts/$acc/sessions", { ttlSeconds => 60 });
    is $s->{status}, 201, 'a session of 60 s';
    my $me = sub { KeyauthTest::http_request($_[0], GET => '/v1/account', "Authorization: Bearer $s->{json}{token}")->{status} };
    is $me->($t->keyauthd_port), 200, 'it works now';
    # a second keyauthd on the same store whose clock is 61 s ahead
    my $later = KeyauthTest->new;
    $later->{db} = $t->db;
    $later->start_keyauthd(faketime => '+61s');
    is $me->($later->keyauthd_port), 401, 'at its expiry it is refused (401)';
    $later->stop_keyauthd;
    is $admin->(PATCH => "/v1/admin/accounts/$acc", { status => 'suspended' })->{status}, 200, 'the account suspended';
    is $me->($t->keyauthd_port), 403, 'the session is refused at once (403 ACCOUNT_SUSPENDED)';
    is $admin->(PATCH => "/v1/admin/accounts/$acc", { status => 'active' })->{status}, 200, 'resumed';
    is $me->($t->keyauthd_port), 200, 'it works again';
};

subtest "keyauthd's metrics count admin calls by route and status" => sub {
    my $m = KeyauthTest::http_request($t->keyauthd_port, GET => '/metrics')->{body};
    like $m, qr{^keyauthd_admin_requests_total\{route="/v1/admin/accounts/\{id\}/plan",method="PUT",status="200"\} 2$}m,
        'PUT /v1/admin/accounts/{id}/plan: 2';
    like $m, qr{^keyauthd_admin_requests_total\{route="/v1/admin/accounts/\{id\}",method="PATCH",status="403"\} 1$}m,
        'a 403 counted';
    unlike $m, qr{acc_[0-9a-f]{24}}, 'no account id in a label';
};

done_testing;
