# SPEC §5 / DESIGN "Edge responses": every authentication outcome, with its
# status, code, JSON body and WWW-Authenticate challenge.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use KeyauthTest;

my $t = KeyauthTest->new;
my $acc = $t->account(name => 'acme');
my $key = $t->key(account => $acc->{id}, scopes => ['ip:read']);
my $all_ip = $t->key(account => $acc->{id}, scopes => ['ip:*']);
my $other = $t->key(account => $acc->{id}, scopes => ['geo:read']);

$t->start_nginx(locations => <<'LOC');
        location /v1/ip/ {
            keyauth on;
            keyauth_scope ip:read;
            proxy_set_header X-Key-Id $keyauth_key_id;
            proxy_set_header X-Account-Id $keyauth_account_id;
            proxy_set_header X-Key-Prefix $keyauth_key_prefix;
            proxy_set_header Authorization "";
            proxy_pass http://tool;
        }
        location /v1/multi/ {
            keyauth on;
            keyauth_scope ip:read geo:read;
            proxy_pass http://tool;
        }
        location /v1/open/ {
            proxy_pass http://tool;
        }
LOC

sub is_error {
    my ($res, $status, $code, $challenge, $name) = @_;
    subtest $name => sub {
        is $res->{status}, $status, 'status';
        like KeyauthTest::header($res, 'Content-Type'), qr{^application/json}, 'JSON';
        my $body = KeyauthTest::json_body($res);
        is $body->{error}{code}, $code, 'code';
        ok length($body->{error}{message}), 'message';
        is KeyauthTest::header($res, 'WWW-Authenticate'), $challenge, 'challenge';
        unlike $res->{body}, qr/upstream/, 'never reached the upstream';
    };
}

my $required = 'Bearer realm="api"';
my $invalid = 'Bearer realm="api", error="invalid_token"';

my $ok = $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $key->{secret}");
is $ok->{status}, 200, 'valid key with the scope: 200';
like $ok->{body}, qr/key=\Q$key->{id}\E account=\Q$acc->{id}\E prefix=\Q$key->{prefix}\E auth=$/,
    'upstream sees key id, account id and prefix, and no Authorization';
is $key->{prefix}, substr($key->{secret}, 0, 12), 'prefix is the first 12 characters';

is $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: bEaReR   $key->{secret}  ")->{status}, 200,
    'scheme is case-insensitive; extra blanks tolerated';
is $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $all_ip->{secret}")->{status}, 200,
    'ip:* grants ip:read';

is_error($t->request(GET => '/v1/ip/1.1.1.1'), 401, 'API_KEY_REQUIRED', $required, 'no header');
is_error($t->request(GET => '/v1/ip/1.1.1.1', 'Authorization: Basic dXNlcjpwYXNz'),
         401, 'API_KEY_REQUIRED', $required, 'Basic scheme');
is_error($t->request(GET => '/v1/ip/1.1.1.1', 'Authorization: Bearer'),
         401, 'API_KEY_REQUIRED', $required, 'empty Bearer');
is_error($t->request(GET => '/v1/ip/1.1.1.1', 'Authorization: Bearer    '),
         401, 'API_KEY_REQUIRED', $required, 'Bearer with blanks only');
is_error($t->request(GET => '/v1/ip/1.1.1.1', 'Authorization: '),
         401, 'API_KEY_REQUIRED', $required, 'empty header');

my $s = $key->{secret};
(my $typo = $s) =~ s/^(ka_.{5})(.)/$1 . ($2 eq 'A' ? 'B' : 'A')/e;
my $unknown = $t->key(account => $acc->{id});
$t->ctl('key', 'revoke', $unknown->{id});
my %bad = (
    'one character changed (checksum)' => $typo,
    'truncated'                        => substr($s, 0, -1),
    'one character appended'           => $s . 'x',
    'wrong prefix'                     => 'kb_' . substr($s, 3),
    'console-token shaped'             => 'kac_' . substr($s, 3),
    'two tokens'                       => "$s $s",
    '4 KB token'                       => 'ka_' . ('A' x 4096),
    'lowercase secret'                 => lc $s,
    'non-ASCII bytes'                  => "ka_\xc3\xa9\xff" . substr($s, 6),
    'revoked key'                      => $unknown->{secret},
);
for my $name (sort keys %bad) {
    is_error($t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $bad{$name}"),
             401, 'INVALID_API_KEY', $invalid, $name);
}

is_error($t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $other->{secret}"),
         403, 'INSUFFICIENT_SCOPE',
         'Bearer realm="api", error="insufficient_scope", scope="ip:read"', 'key without ip:read');
is_error($t->request(GET => '/v1/multi/x', "Authorization: Bearer $key->{secret}"),
         403, 'INSUFFICIENT_SCOPE',
         'Bearer realm="api", error="insufficient_scope", scope="geo:read"',
         'all listed scopes are required; the first missing one is named');
my $both = $t->key(account => $acc->{id}, scopes => ['ip:read', 'geo:read']);
is $t->request(GET => '/v1/multi/x', "Authorization: Bearer $both->{secret}")->{status}, 200,
    'key with every required scope';

my $huge = $t->request(GET => '/v1/ip/1.1.1.1', 'Authorization: Bearer ka_' . ('A' x 10240));
is $huge->{status}, 400, '10 KB Authorization header: nginx refuses it (large_client_header_buffers)';
unlike $huge->{body}, qr/upstream/, '10 KB token never reaches the upstream';

my $dup = $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $s", "Authorization: Bearer $s");
ok $dup->{status} == 400 || $dup->{status} == 401, "two Authorization headers refused ($dup->{status})";
unlike $dup->{body}, qr/upstream/, 'two Authorization headers never reach the upstream';

# Request-smuggling-style bytes: nginx's parser refuses them (400) before any
# phase runs, so the key in them is never judged and nothing reaches the
# upstream; what it accepts (bare LF line ends, OWS after "Bearer") is judged
# like any other request.
my $auth = "Authorization: Bearer $s";
my %raw = (
    'bare CR inside the value'        => [400, "$auth\rX-Injected: 1\r\n"],
    'NUL inside the value'            => [400, "$auth\0x\r\n"],
    'obs-fold continuation'           => [400, "Authorization: Bearer\r\n $s\r\n"],
    'space before the colon'          => [400, "Authorization : Bearer $s\r\n"],
    'Transfer-Encoding and Content-Length, a keyed request smuggled behind' =>
        [400, "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
              . "GET /v1/ip/2.2.2.2 HTTP/1.1\r\nHost: x\r\n$auth\r\n"],
    'two different Content-Lengths'   => [400, "Content-Length: 5\r\nContent-Length: 60\r\n$auth\r\n"],
    'tab after Bearer'                => [200, "Authorization: Bearer\t$s\r\n"],
);
for my $name (sort keys %raw) {
    my ($status, $headers) = @{ $raw{$name} };
    my $res = KeyauthTest::raw_request($t->port,
        "GET /v1/ip/1.1.1.1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n$headers\r\n");
    is $res->{status}, $status, "$name: $status";
    is(() = $res->{raw} =~ /upstream uri=/g, $status == 200 ? 1 : 0,
       $status == 200 ? "$name: the one request reaches the upstream" : "$name: nothing reaches the upstream");
}
my $lf = KeyauthTest::raw_request($t->port, "GET /v1/ip/1.1.1.1 HTTP/1.1\nHost: x\nConnection: close\n$auth\n\n");
is $lf->{raw} =~ m{^HTTP/1\.1 (\d{3})} && $1, 200, 'bare LF line ends: the key is judged as usual';

is $t->request(GET => '/v1/open/x')->{status}, 200, 'location without keyauth stays open';
is $t->request(HEAD => '/v1/ip/1.1.1.1')->{status}, 401, 'HEAD is authenticated too';

# POST with a body is refused without reading it into the upstream.
my $post = $t->request(POST => '/v1/ip/1.1.1.1', 'Content-Type: text/plain', \'hello');
is $post->{status}, 401, 'POST without key: 401';

my $log = $t->error_log;
like $log, qr/keyauth: API key "\Q$key->{prefix}\E\.\.\." is unknown|keyauth: API key \Q$unknown->{id}\E is revoked/,
    'error log says why a key was refused, by prefix or id';
unlike $log, qr/\Q$s\E/, 'no secret in the error log';
unlike $log, qr/\[(emerg|alert|crit)\]/, 'no serious errors logged';

done_testing;
