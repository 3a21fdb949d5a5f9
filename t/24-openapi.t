# docs/openapi.yaml cannot drift from the code: it passes Redocly's lint,
# and real answers of the running stack (nginx with the module, keyauthd)
# for every operation, its success and the errors it can be made to give,
# are validated against it by tools/openapi/validate.mjs (Ajv, JSON Schema
# 2020-12). The validator is first shown to fail on answers that break the
# description, so a green run means something.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP qw(decode_json encode_json);
use KeyauthTest qw(http_request wait_until);

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
$t->start_keyauthd;
$t->start_nginx(http => "keyauth_zone keys:1m;\nkeyauth_usage_interval 1s;\n" . $t->console_http,
                locations => $t->console_locations . <<'LOC');
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; ip_lookup; }
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

# tools
ask(GET => '/v1/ip/2001:db8::1', bearer($key->{secret}));
ask(GET => '/v1/ip/1.1.1.1');
ask(GET => '/v1/ip/1.1.1.1', bearer('ka_notakey'));
ask(GET => '/v1/ip/1.1.1.1', bearer($other->{secret}));
ask(GET => '/v1/ip/not-an-ip', bearer($key->{secret}));
ask(POST => '/v1/ip/1.1.1.1', bearer($key->{secret}));
ask(GET => '/v1/ip/1.1.1.1', bearer($slow->{secret})) for 1 .. 2;

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
    for ([\%broken, qr/must have required property 'usage'/, 'a key without usage'],
         [\%secret, qr/unevaluated/, 'a secret in a key read back'],
         [\%status, qr/status not documented/, 'an undocumented status'],
         [\%path, qr/no such operation/, 'a path the spec does not know'],
         [\%usage, qr/must have required property 'units'/, 'a usage series entry without units'],
         [\%extra, qr/unevaluated/, 'usage totals with a start']) {
        my ($rc, $out) = validate(@seen, $_->[0]);
        is $rc, 1, "$_->[2]: refused";
        like $out, $_->[1], '... saying why';
    }
    my ($rc, $out) = validate(grep { $_->{path} !~ m{/roll$} } @seen);
    like $out, qr{POST /v1/keys/\{id\}/roll: no success seen}, 'an operation never seen is named';
};

my ($rc, $out) = validate(@seen);
is $rc, 0, 'every answer matches docs/openapi.yaml' or diag $out;
like $out, qr/^\d+ answers checked, 0 failures$/m, scalar(@seen) . ' answers';

done_testing;
