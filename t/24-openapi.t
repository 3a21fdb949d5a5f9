# docs/openapi.yaml cannot drift from the code: it passes Redocly's lint,
# and real answers of the running stack (nginx with the module, keyauthd,
# and keyauthd's admin listener for the admin API) for every operation, its
# success and the errors it can be made to give, are validated against it by
# tools/openapi/validate.mjs (Ajv, JSON Schema 2020-12; the usage report's
# CSV too). So are the webhook requests keyauthd sends (issue 46) to a real
# HTTPS receiver on loopback (t/lib/WebhookReceiver.pm): every event type but
# the reserved key.leaked, its body and its Standard Webhooks headers,
# against the spec's `webhooks`. The validator is first shown to fail on
# answers that break the description, so a green run means something.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP qw(decode_json encode_json);
use POSIX qw(strftime);
use KeyauthTest qw(http_request wait_until);
use SecretScanner;
use WebhookReceiver;

my $root = KeyauthTest::root();
my $tools = "$root/tools/openapi";
my $spec = "$root/docs/openapi.yaml";
plan skip_all => 'tools/openapi is not installed (make deps runs npm ci there)'
    unless -d "$tools/node_modules/ajv" && -x "$tools/node_modules/.bin/redocly";

my $lint = `cd $tools && NO_COLOR=1 REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true node_modules/.bin/redocly lint $spec 2>&1`;
is $? >> 8, 0, 'redocly lint docs/openapi.yaml' or diag $lint;
unlike $lint, qr/\d+ warnings?\b(?<!0 warnings)/, 'no warning' or diag $lint;

my $t = KeyauthTest->new;
my $acc = $t->account(entitlement => 1000, allowed_scopes => ['ip:read', 'tools:run']);
my $token = $acc->{consoleToken};
my $key = $t->key(account => $acc->{id}, rate => 600);
my $slow = $t->key(account => $acc->{id}, rate => 1);
my $other = $t->key(account => $acc->{id}, scopes => ['tools:run']);
# the admin API's callers: every scope, and two narrow ones (each lacks the
# other's routes' scopes)
my $admin_token = $t->ctl('admin-token', 'create', '--name', 'spec', '--scope', '*')->{token};
my $narrow = $t->ctl('admin-token', 'create', '--name', 'narrow', '--scope', 'webhooks:write')->{token};
my $auditor = $t->ctl('admin-token', 'create', '--name', 'auditor', '--scope', 'audit:read')->{token};
# the webhooks' receiver; keyauthd may dial it on loopback, trusts its test
# CA, and looks for quota thresholds and expiring keys every second
my $rx = WebhookReceiver->new(dir => $t->dir . '/rx');
# GitHub's secret scanning, played here: its signing key from a file
my $gh = SecretScanner->new(dir => $t->dir . '/github');
$t->start_keyauthd(admin => 1, args => ['--webhook-allow-private', '--webhook-ca-file', $rx->ca_file,
                                        '--webhook-scan-seconds', '1', '--github-keys-file', $gh->keys_file]);
$t->start_nginx(http => "keyauth_zone keys:1m;\nkeyauth_usage_interval 1s;\n" . $t->console_http,
                locations => $t->console_locations . <<'LOC');
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; ip_lookup; }
        location = /v1/verify { keyauth_verify; }
        location /api/plans { keyauth off; keyauth_plans; }
LOC
$t->ctl('plans', 'import', "$root/lmdb_schema/plans.json");
$t->ctl('fx', 'set', '83.50');

my @seen;
# One exchange with the server on $port, recorded for the validator.
sub exchange {
    my ($port, $method, $path, @h) = @_;
    my $res = http_request($port, $method, $path, @h);
    my %headers = map { $_ => $res->{headers}{$_}[0] } keys %{ $res->{headers} };
    push @seen, { method => $method, path => $path, status => $res->{status} + 0,
                  headers => \%headers, body => $res->{body} };
    return $res;
}
sub ask { exchange($t->port, @_) }
sub bearer { "Authorization: Bearer $_[0]" }
# The headers of a call as $as (undef: no Authorization) with $body (undef:
# none; a reference is sent as JSON, a string as it is).
sub call_headers {
    my ($as, $body, @extra) = @_;
    my @h = ((defined $as ? bearer($as) : ()), @extra);
    push @h, 'Content-Type: application/json', \(ref $body ? encode_json($body) : $body) if defined $body;
    return @h;
}
sub console {
    my ($method, $path, $body, @extra) = @_;
    return ask($method, $path, call_headers($token, $body, @extra));
}
# The admin API, straight to keyauthd's admin listener (never behind nginx).
sub admin_as {
    my ($as, $method, $path, $body, @extra) = @_;
    return exchange($t->admin_port, $method, $path, call_headers($as, $body, @extra));
}
sub admin { admin_as($admin_token, @_) }

# issue 46: an endpoint for every event type, made first so that it hears of
# every change below (the payloads are validated at the end)
my @event_types = qw(key.created key.updated key.rolled key.revoked key.expiring key.leaked account.created
                     account.updated account.plan_changed account.suspended account.resumed quota.threshold);
my $hook = decode_json(admin(POST => '/v1/admin/webhooks', { url => $rx->url('/ok'), events => \@event_types })->{body});

# tools
ask(GET => '/v1/ip/2001:db8::1', bearer($key->{secret}));
ask(GET => '/v1/ip/1.1.1.1');
ask(GET => '/v1/ip/1.1.1.1', bearer('ka_notakey'));
ask(GET => '/v1/ip/1.1.1.1', bearer($other->{secret}));
ask(GET => '/v1/ip/not-an-ip', bearer($key->{secret}));
ask(POST => '/v1/ip/1.1.1.1', bearer($key->{secret}));
ask(GET => '/v1/ip/1.1.1.1', bearer($slow->{secret})) for 1 .. 2;
# the verify API: valid, refused (with and without retryAfterSeconds), 400, 405
ask(POST => '/v1/verify', call_headers(undef, { key => $key->{secret}, scopes => ['ip:read'], cost => 0 }));
ask(POST => '/v1/verify', call_headers(undef, { key => 'ka_notakey' }));
ask(POST => '/v1/verify', call_headers(undef, { key => $slow->{secret} }));
ask(POST => '/v1/verify', call_headers(undef, { key => $key->{secret}, cost => -1 }));
ask(GET => '/v1/verify');

# catalog
my $catalog = ask(GET => '/api/plans');
my $plan = decode_json($catalog->{body})->{plans}[0]{id};
my $etag = KeyauthTest::header($catalog, 'ETag');
ask(GET => '/api/plans', "If-None-Match: $etag");
ask(GET => "/api/plans/$plan");
ask(GET => '/api/plans/no-such-plan');
ask(POST => '/api/plans');
ask(POST => "/api/plans/$plan");

# console
my $made = decode_json(console(POST => '/v1/keys', { name => 'spec', scopes => ['ip:read'], rateLimitPerMinute => 5000,
                                                     expiresAt => '2030-01-01T00:00:00+05:30' })->{body});
console(POST => '/v1/keys', { name => 'spec', scopes => ['ip:read'] });
console(POST => '/v1/keys', { name => 'spec', scopes => ['db:drop'], rateLimitPerMinute => 5 });
console(POST => '/v1/keys', '{"name":"x"}', );
ask(POST => '/v1/keys', 'Content-Type: application/json', \'{}');
ask(POST => '/v1/keys', bearer('kac_wrong'), 'Content-Type: application/json', \'{}');
ask(POST => '/v1/keys', bearer($token), 'Content-Type: text/plain', \'name=x');
console(GET => '/v1/keys?limit=2');
console(GET => '/v1/keys?limit=0');
ask(GET => '/v1/keys');
console(GET => "/v1/keys/$made->{id}");
console(GET => '/v1/keys/key_000000000000000000000000');
console(PATCH => "/v1/keys/$made->{id}", { name => 'spec 2', expiresAt => undef });
console(PATCH => "/v1/keys/$made->{id}", {});
console(PATCH => '/v1/keys/key_000000000000000000000000', { name => 'x' });
my $rolled = decode_json(console(POST => "/v1/keys/$made->{id}/roll", { gracePeriodSeconds => 60 })->{body});
console(POST => "/v1/keys/$made->{id}/roll");
console(POST => '/v1/keys/key_000000000000000000000000/roll');
console(POST => "/v1/keys/$rolled->{id}/revoke");
console(POST => "/v1/keys/$rolled->{id}/revoke");
console(POST => '/v1/keys/key_000000000000000000000000/revoke');
console(PATCH => "/v1/keys/$rolled->{id}", { name => 'late' });
console(GET => '/v1/audit?limit=5');
console(GET => '/v1/audit?limit=many');
# issue 28: a key's quota, and the account on a plan
my $metered = decode_json(console(POST => '/v1/keys', { name => 'metered', scopes => ['ip:read'], rateLimitPerMinute => 5,
                                                        quota => { units => 10, period => 'total' } })->{body});
console(POST => '/v1/keys', { name => 'x', scopes => ['ip:read'], rateLimitPerMinute => 5, quota => { units => 0, period => 'day' } });
console(PATCH => "/v1/keys/$metered->{id}", { quota => { units => 100, period => 'week' } });
console(PATCH => "/v1/keys/$metered->{id}", { quota => { units => 1000, period => 'month' } });
console(GET => "/v1/keys/$metered->{id}");
# issue 44: credits an operator sold cannot be lifted from the console
my $sold = $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'sold', '--scope', 'ip:read', '--rate', 5,
                   '--quota', '2/total');
console(PATCH => "/v1/keys/$sold->{id}", { quota => undef });
console(PATCH => "/v1/keys/$sold->{id}", { quota => { units => 1, period => 'total' } });
# issue 46: a key expiring within the week (key.expiring), and one whose one
# credit a call uses up (quota.threshold 80 and 100)
console(POST => '/v1/keys', { name => 'soon', scopes => ['ip:read'], rateLimitPerMinute => 5,
                              expiresAt => strftime('%Y-%m-%dT%H:%M:%SZ', gmtime(time + 2 * 86400)) });
my $one = decode_json(console(POST => '/v1/keys', { name => 'one', scopes => ['ip:read'], rateLimitPerMinute => 5,
                                                    quota => { units => 1, period => 'total' } })->{body});
ask(GET => '/v1/ip/1.1.1.1', bearer($one->{secret}));
console(GET => '/v1/account');
$t->ctl('account', 'set-plan', $acc->{id}, 'enterprise-100k');
console(GET => '/v1/account');
console(POST => '/v1/account', {});
ask(GET => '/v1/account');
# issue 29: usage over time (the calls above are in the current hour and day)
ok wait_until(sub { (decode_json(console(GET => '/v1/usage?granularity=hour')->{body})->{totals}{allowed} // 0) > 0 },
              30, 'the collector to store the calls'), 'GET /v1/usage: the calls above counted';
console(GET => '/v1/usage');
console(GET => '/v1/usage?granularity=day&from=2026-11-01&to=2026-12-01');
console(GET => "/v1/usage?granularity=hour&keyId=$key->{id}");
console(GET => '/v1/usage?granularity=week');
console(GET => '/v1/usage?granularity=hour&from=2026-11-01&to=2026-11-30');
console(GET => '/v1/usage?from=2026-11-01&from=2026-11-02');
console(GET => '/v1/usage?keyId=key_000000000000000000000000');
console(POST => '/v1/usage', {});
ask(GET => '/v1/usage');

# issue 45: the admin API, every operation of keyauthd's admin listener
my $no_acc = 'acc_000000000000000000000000';
my $no_key = 'key_000000000000000000000000';
my $signup = decode_json(admin(POST => '/v1/admin/accounts', { name => 'signup', externalId => 'cus_spec',
                                                              rateLimitPerMinute => 600, allowedScopes => ['ip:read'] })->{body});
my $planned = decode_json(admin(POST => '/v1/admin/accounts', { name => 'planned', externalId => 'cus_planned',
                                                               planId => 'trial-100' })->{body});
admin(POST => '/v1/admin/accounts', { name => 'again', externalId => 'cus_spec', rateLimitPerMinute => 600 });
admin(POST => '/v1/admin/accounts', { externalId => 'cus_nameless', rateLimitPerMinute => 600 });
admin(POST => '/v1/admin/accounts', { name => 'x', planId => 'no-such-plan' });
admin(GET => '/v1/admin/accounts?limit=1');
admin(GET => '/v1/admin/accounts?externalId=cus_spec');
admin(GET => '/v1/admin/accounts?externalId=cus_nobody');
admin(GET => '/v1/admin/accounts?limit=0');
admin(GET => "/v1/admin/accounts/$signup->{id}");
admin(GET => "/v1/admin/accounts/$no_acc");
admin(PATCH => "/v1/admin/accounts/$signup->{id}", { name => 'signup 2', maxKeys => 5,
                                                     quota => { units => 1000, period => 'month' } });
admin(PATCH => "/v1/admin/accounts/$signup->{id}", { externalId => 'cus_planned' });
admin(PATCH => "/v1/admin/accounts/$signup->{id}", { maxKeys => 'plan' });
admin(PATCH => "/v1/admin/accounts/$signup->{id}", {});
admin(PATCH => "/v1/admin/accounts/$no_acc", { name => 'x' });
admin(PUT => "/v1/admin/accounts/$signup->{id}/plan", { planId => 'starter-500', orderId => 'ord_1' });
admin(PUT => "/v1/admin/accounts/$signup->{id}/plan", { planId => 'no-such-plan' });
admin(PUT => "/v1/admin/accounts/$signup->{id}/plan", { orderId => 'ord_2' });
my $session = decode_json(admin(POST => "/v1/admin/accounts/$signup->{id}/sessions", { ttlSeconds => 600 })->{body});
admin(POST => "/v1/admin/accounts/$signup->{id}/sessions");
admin(POST => "/v1/admin/accounts/$signup->{id}/sessions", { ttlSeconds => 10 });
admin(PATCH => "/v1/admin/accounts/$planned->{id}", { status => 'suspended' });
admin(POST => "/v1/admin/accounts/$planned->{id}/sessions");
admin(PATCH => "/v1/admin/accounts/$planned->{id}", { status => 'active' });
my $admin_key = decode_json(admin(POST => "/v1/admin/accounts/$signup->{id}/keys",
    { name => 'admin', scopes => ['ip:read'], rateLimitPerMinute => 60, quota => { units => 100, period => 'month' } })->{body});
admin(POST => "/v1/admin/accounts/$signup->{id}/keys", { name => 'x', scopes => ['db:drop'], rateLimitPerMinute => 60 });
admin(POST => "/v1/admin/accounts/$no_acc/keys", { name => 'x', scopes => ['ip:read'], rateLimitPerMinute => 60 });
admin(GET => "/v1/admin/accounts/$signup->{id}/keys?limit=1");
admin(GET => "/v1/admin/accounts/$signup->{id}/keys?limit=0");
admin(GET => "/v1/admin/keys/$admin_key->{id}");
admin(GET => "/v1/admin/keys/$no_key");
admin(PATCH => "/v1/admin/keys/$admin_key->{id}", { name => 'admin 2', quota => { units => 1000, period => 'month' } });
admin(PATCH => "/v1/admin/keys/$admin_key->{id}", {});
my $admin_rolled = decode_json(admin(POST => "/v1/admin/keys/$admin_key->{id}/roll", { gracePeriodSeconds => 60 })->{body});
admin(POST => "/v1/admin/keys/$admin_key->{id}/roll");
admin(POST => "/v1/admin/keys/$admin_rolled->{id}/revoke");
admin(POST => "/v1/admin/keys/$no_key/revoke");
admin(PATCH => "/v1/admin/keys/$admin_rolled->{id}", { name => 'late' });
# issue 47: leaked keys, reported by the admin API and by GitHub's secret scanning
my $leaked = decode_json(admin(POST => "/v1/admin/accounts/$signup->{id}/keys",
    { name => 'leaked', scopes => ['ip:read'], rateLimitPerMinute => 60 })->{body});
admin(POST => '/v1/admin/keys/report-leak', { secret => $leaked->{secret}, url => 'https://pastebin.example/x' });
admin(POST => '/v1/admin/keys/report-leak', { secret => 'not a key' });
admin(POST => '/v1/admin/keys/report-leak', { url => 'https://pastebin.example/x' });
admin(GET => "/v1/admin/accounts/$signup->{id}/keys");
my $scanned = decode_json(console(POST => '/v1/keys', { name => 'scanned', scopes => ['ip:read'], rateLimitPerMinute => 5 })->{body});
my $report_body = $gh->report_body($scanned->{secret}, 'not a key');
ask(POST => '/v1/secret-scanning/github', $gh->headers($report_body), \$report_body);
ask(POST => '/v1/secret-scanning/github', 'Content-Type: application/json', \$report_body);
my $not_report = '{"token":"x"}';
ask(POST => '/v1/secret-scanning/github', $gh->headers($not_report), \$not_report);
ask(GET => '/v1/secret-scanning/github');
console(GET => '/v1/keys');
# the account's own trail shows the admin API's calls, their actor the admin token
ask(GET => '/v1/audit', bearer($session->{token}));
admin(GET => '/v1/admin/usage?granularity=hour');
admin(GET => "/v1/admin/usage?accountId=$acc->{id}");
admin(GET => "/v1/admin/usage?keyId=$key->{id}&granularity=hour");
admin(GET => '/v1/admin/usage?accountId=nope');
admin(GET => "/v1/admin/usage?accountId=$no_acc");
admin(GET => "/v1/admin/usage?accountId=$signup->{id}&keyId=$key->{id}");
my $today = strftime('%Y-%m-%d', gmtime);
my $report = "/v1/admin/usage/report?from=$today&to=$today";
admin(GET => "$report&by=day");
admin(GET => "$report&by=month", undef, 'Accept: application/json');
admin(GET => "$report&by=day&keyId=$key->{id}", undef, 'Accept: text/csv');
admin(GET => "$report&by=day&accountId=$acc->{id}&keyId=$key->{id}", undef, 'Accept: application/json');
admin(GET => "/v1/admin/usage/report?from=$today&by=day");
admin(GET => "$report&by=day&accountId=$no_acc");
admin(GET => "$report&by=day", undef, 'Accept: image/png');
my $plans_file = do { local (@ARGV, $/) = ("$root/lmdb_schema/plans.json"); <> };
my $without_trial = do {
    my $c = decode_json($plans_file);
    encode_json({ plans => [ grep { $_->{id} ne 'trial-100' } @{ $c->{plans} } ] });
};
admin(PUT => '/v1/admin/plans', $plans_file);
admin(PUT => '/v1/admin/plans', $without_trial);
admin(PUT => '/v1/admin/plans?retire=trial-100=starter-500', $without_trial);
admin(PUT => '/v1/admin/plans', $plans_file);
admin(PUT => '/v1/admin/plans?retire=trial-100', $plans_file);
admin(PUT => '/v1/admin/plans', { plans => [{ id => 'x' }] });
admin(PUT => '/v1/admin/fx', { usdInr => '83.50' });
admin(PUT => '/v1/admin/fx', { usdInr => 83.5 });
admin(DELETE => '/v1/admin/fx');
# issue 46: webhook endpoints, and what was sent to them
my $hook_of = "/v1/admin/webhooks/$hook->{id}";
my $no_hook = 'wh_000000000000000000000000';
# one for an account, on a port nothing listens on: its deliveries fail and stay pending
my $dead_end = decode_json(admin(POST => '/v1/admin/webhooks', { url => 'https://127.0.0.1:1/hook',
                                                                 events => ['account.updated', 'key.created'],
                                                                 accountId => $signup->{id} })->{body});
admin(PATCH => "/v1/admin/accounts/$signup->{id}", { name => 'signup 3' });
admin(POST => '/v1/admin/webhooks', { url => 'http://127.0.0.1/hook', events => ['key.created'] });
admin(POST => '/v1/admin/webhooks', { url => $rx->url('/ok'), events => ['key.exploded'] });
admin(POST => '/v1/admin/webhooks', { url => $rx->url('/ok'), events => [] });
admin(POST => '/v1/admin/webhooks', { url => $rx->url('/ok'), events => ['key.created'], accountId => 'nope' });
admin(POST => '/v1/admin/webhooks', { url => $rx->url('/ok'), events => ['key.created'], accountId => $no_acc });
admin(POST => '/v1/admin/webhooks', { url => $rx->url('/ok'), events => ['key.created'], secret => 'mine' });
admin(GET => '/v1/admin/webhooks');
admin(GET => '/v1/admin/webhooks?limit=1');
ok wait_until(sub { my $d = decode_json(admin_as($narrow, GET => "/v1/admin/webhooks/$dead_end->{id}/deliveries")->{body});
                    grep { $_->{attempts} > 0 } @{ $d->{deliveries} } }, 30, 'a failed attempt'),
    'the unreachable endpoint\'s delivery was tried';
admin(GET => "/v1/admin/webhooks/$dead_end->{id}/deliveries?status=pending");
admin(GET => "$hook_of/deliveries");
my $first_page = decode_json(admin(GET => "$hook_of/deliveries?limit=1&status=delivered")->{body});
admin(GET => "$hook_of/deliveries?limit=1&status=delivered&cursor=$first_page->{nextCursor}") if $first_page->{nextCursor};
admin(GET => "$hook_of/deliveries?status=dead");
admin(GET => "$hook_of/deliveries?status=lost");
admin(GET => "$hook_of/deliveries?cursor=acc_1");
admin(GET => "$hook_of/deliveries?limit=0");
admin(GET => "/v1/admin/webhooks/$no_hook/deliveries");
admin(GET => '/v1/admin/webhooks/nope/deliveries');
admin(DELETE => "/v1/admin/webhooks/$dead_end->{id}");
admin(DELETE => "/v1/admin/webhooks/$dead_end->{id}");
admin(GET => "/v1/admin/webhooks/$dead_end->{id}/deliveries");
admin(DELETE => "/v1/admin/webhooks/$no_hook");
# the fiftieth endpoint is the last (endpoints for a type nothing sends)
my $endpoints = @{ decode_json(admin(GET => '/v1/admin/webhooks')->{body})->{webhooks} };
admin(POST => '/v1/admin/webhooks', { url => $rx->url("/spare$_"), events => ['key.leaked'] }) for $endpoints + 1 .. 50;
admin(POST => '/v1/admin/webhooks', { url => $rx->url('/one-too-many'), events => ['key.leaked'] });
admin(GET => '/v1/admin/webhooks');
admin(GET => '/v1/admin/audit?limit=100');
admin(GET => "/v1/admin/audit?accountId=$signup->{id}");
admin(GET => '/v1/admin/audit?limit=many');
admin(GET => "/v1/admin/audit?accountId=$no_acc");
# every operation without a token (401), and with one lacking its scope (403)
for my $op ([POST => '/v1/admin/accounts'], [GET => '/v1/admin/accounts'],
            [GET => "/v1/admin/accounts/$signup->{id}"], [PATCH => "/v1/admin/accounts/$signup->{id}"],
            [PUT => "/v1/admin/accounts/$signup->{id}/plan"], [POST => "/v1/admin/accounts/$signup->{id}/sessions"],
            [GET => "/v1/admin/accounts/$signup->{id}/keys"], [POST => "/v1/admin/accounts/$signup->{id}/keys"],
            [GET => "/v1/admin/keys/$admin_key->{id}"], [PATCH => "/v1/admin/keys/$admin_key->{id}"],
            [POST => "/v1/admin/keys/$admin_key->{id}/roll"], [POST => "/v1/admin/keys/$admin_key->{id}/revoke"],
            [POST => '/v1/admin/keys/report-leak'],
            [GET => '/v1/admin/usage'], [GET => "$report&by=day"], [GET => '/v1/admin/audit'],
            [PUT => '/v1/admin/plans'], [PUT => '/v1/admin/fx']) {
    admin_as(undef, @$op);
    admin_as($narrow, @$op);
}
for my $op ([POST => '/v1/admin/webhooks'], [GET => '/v1/admin/webhooks'], [DELETE => $hook_of],
            [GET => "$hook_of/deliveries"]) {
    admin_as(undef, @$op);
    admin_as($auditor, @$op);
}
admin_as('kaa_notatoken', GET => '/v1/admin/accounts');

# every event type the calls above raised has reached the receiver
my @sent = @event_types;
my %got;
ok wait_until(sub { %got = map { decode_json($_->{body})->{type} => 1 } $rx->requests('/ok');
                    !grep { !$got{$_} } @sent }, 30, 'every event type'),
    'the receiver got every event type' or diag 'missing: ', join ' ', grep { !$got{$_} } @sent;
my @hooks = map { { webhook => JSON::PP::true, headers => $_->{headers}, body => $_->{body} } } $rx->requests('/ok');

my $file = $t->dir . '/exchanges.jsonl';
sub validate {
    my @x = @_;
    open my $fh, '>', $file or die $!;
    print $fh encode_json($_), "\n" for @x;
    close $fh;
    my $out = `cd $tools && node validate.mjs $spec $file 2>&1`;
    return ($? >> 8, $out);
}

subtest 'the validator fails on answers that break the description' => sub {
    my ($ok) = grep { $_->{path} =~ m{^/v1/keys/key_[0-9a-f]+$} && $_->{status} == 200 && $_->{method} eq 'GET' } @seen;
    my %broken = (%$ok, body => do { my $b = decode_json($ok->{body}); delete $b->{usage}; encode_json($b) });
    my %secret = (%$ok, body => do { my $b = decode_json($ok->{body}); $b->{secret} = 'ka_x'; encode_json($b) });
    my %status = (%$ok, status => 418);
    my %path = (%$ok, path => '/v1/nothing');
    my ($u) = grep { $_->{path} =~ m{^/v1/usage} && $_->{status} == 200 } @seen;
    my %usage = (%$u, body => do { my $b = decode_json($u->{body}); delete $b->{series}[0]{units}; encode_json($b) });
    my %extra = (%$u, body => do { my $b = decode_json($u->{body}); $b->{totals}{start} = $b->{from}; encode_json($b) });
    my ($a) = grep { $_->{path} =~ m{^/v1/admin/accounts/acc_[0-9a-f]+$} && $_->{status} == 200 } @seen;
    my %external = (%$a, body => do { my $b = decode_json($a->{body}); delete $b->{externalId}; encode_json($b) });
    my ($d) = grep { $_->{path} =~ m{^/v1/admin/} && $_->{status} == 403 && $_->{body} =~ /ADMIN_SCOPE_REQUIRED/ } @seen;
    my %scope = (%$d, body => do { my $b = decode_json($d->{body}); delete $b->{error}{scope}; encode_json($b) });
    my ($csv) = grep { $_->{path} =~ m{^/v1/admin/usage/report} && $_->{status} == 200
                       && $_->{headers}{'content-type'} =~ m{^text/csv} } @seen;
    my %plain = (%$csv, headers => { %{ $csv->{headers} }, 'content-type' => 'text/plain' });
    my %columns = (%$csv, body => $csv->{body} =~ s/^period,/day,/r);
    my ($made) = grep { $_->{path} eq '/v1/admin/webhooks' && $_->{status} == 201 } @seen;
    my %unsigned = (%$made, body => do { my $b = decode_json($made->{body}); delete $b->{secret}; encode_json($b) });
    # webhook requests: the same event broken
    my $event = sub { my ($type) = @_; (grep { decode_json($_->{body})->{type} eq $type } @hooks)[0] };
    my $reshaped = sub {
        my ($type, $change) = @_;
        my $e = $event->($type);
        my $b = decode_json($e->{body});
        $change->($b);
        return { %$e, body => encode_json($b) };
    };
    my $quota = $reshaped->('quota.threshold', sub { delete $_[0]{data}{threshold} });
    my $with_key = $reshaped->('account.updated', sub { $_[0]{data}{keyId} = $one->{id} });
    my $unknown = $reshaped->('key.created', sub { $_[0]{type} = 'key.exploded' });
    my $sig = $event->('key.revoked');
    my $v2 = { %$sig, headers => { %{ $sig->{headers} }, 'webhook-signature' => 'v2,abc' } };
    for ([\%broken, qr/must have required property 'usage'/, 'a key without usage'],
         [\%secret, qr/unevaluated/, 'a secret in a key read back'],
         [\%status, qr/status not documented/, 'an undocumented status'],
         [\%path, qr/no such operation/, 'a path the spec does not know'],
         [\%usage, qr/must have required property 'units'/, 'a usage series entry without units'],
         [\%extra, qr/unevaluated/, 'usage totals with a start'],
         [\%external, qr/must have required property 'externalId'/, 'an admin account without externalId'],
         [\%scope, qr/must have required property 'scope'/, 'ADMIN_SCOPE_REQUIRED without the scope'],
         [\%plain, qr{Content-Type text/plain, documented text/csv, application/json}, 'a report of another media type'],
         [\%columns, qr/must match pattern/, 'a CSV report whose header is not the documented one'],
         [\%unsigned, qr/must have required property 'secret'/, 'a webhook made without its secret'],
         [$quota, qr/must have required property 'threshold'/, 'a quota.threshold event without its threshold'],
         [$with_key, qr/keyId boolean schema is false/, 'an account event naming a key'],
         [$unknown, qr/webhook key.exploded: no such event/, 'an event type the spec does not know'],
         [$v2, qr/header webhook-signature: .*must match pattern/, 'a signature not in the v1 format']) {
        my ($rc, $out) = validate(@seen, @hooks, $_->[0]);
        is $rc, 1, "$_->[2]: refused";
        like $out, $_->[1], '... saying why';
    }
    my ($rc, $out) = validate(grep { $_->{path} !~ m{/roll$} } @seen);
    like $out, qr{POST /v1/keys/\{id\}/roll: no success seen}, 'an operation never seen is named';
    ($rc, $out) = validate(@seen, grep { decode_json($_->{body})->{type} ne 'key.expiring' } @hooks);
    like $out, qr{webhook key.expiring: never seen}, 'an event type never sent is named';
};

my ($rc, $out) = validate(@seen, @hooks);
is $rc, 0, 'every answer and webhook request matches docs/openapi.yaml' or diag $out;
like $out, qr/^\d+ answers checked, 0 failures$/m, scalar(@seen) . ' answers, ' . scalar(@hooks) . ' webhook requests';

done_testing;
