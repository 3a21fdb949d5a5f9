# No secret reaches a log, whatever the line length (issue 13). nginx cuts an
# error-log line at 2 KiB (NGX_MAX_ERROR_STR), wherever that falls; a key cut
# there used to keep its last 31 characters in clear text, enough to recover
# it in 49 guesses. Here real keys and a console token sit at every offset
# from 1,800 to 2,100 of 4 KiB and 8 KiB request lines, in the query and in
# the path, are sent in headers, cookies and bodies, percent-encoded, and cut
# by nginx's header buffer; then every log (access logs in three formats, one
# of them buffered, the error log at info, a server's error log at debug, and
# keyauthd's log) must hold nothing of any secret past its public
# 12-character prefix.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use KeyauthTest;

my $t = KeyauthTest->new;
my $acc = $t->account;
my $key = $t->key(account => $acc->{id});                         # valid
my $old = $t->key(account => $acc->{id}, name => 'revoked one');  # revoked
$t->ctl('key', 'revoke', $old->{id});
my $token = $acc->{consoleToken};
# A key of the deployment's own prefix (issue 47), which the masker does not
# know. Its body starts with an uppercase letter: a custom-prefix run cut
# before its first one is taken for a word (redact.h; (36/62)^n for a cut n
# characters in), and this test is about where nginx cuts, not that chance.
$t->ctl('config', 'set', 'key-prefix', 'acme');
my $custom;
$custom = $t->key(account => $acc->{id}, name => 'custom') until $custom && $custom->{secret} =~ /^acme_[A-Z]/;
my %secrets = (key => $key->{secret}, revoked => $old->{secret}, token => $token, custom => $custom->{secret});

my $d = $t->dir;
mkdir "$d/www";
my ($long_port, $debug_port) = (KeyauthTest::free_port(), KeyauthTest::free_port());

# Every variable that can carry a secret, in nginx's default escaping, in
# JSON (buffered: masked before the buffer, flushed at exit) and "combined".
my $http = $t->console_http(unlimited => 1) . <<"HTTP";
    large_client_header_buffers 4 16k;
    log_format everything '"\$request" \$request_uri \$uri \$args \$query_string '
                          'arg=\$arg_api_key auth="\$http_authorization" x=\$http_x_api_key '
                          'cookie=\$cookie_session body=\$request_body '
                          'prefix=\$keyauth_key_prefix id=\$keyauth_key_id \$status';
    log_format everything_json escape=json
        '{"request":"\$request","args":"\$args","auth":"\$http_authorization","body":"\$request_body"}';
    access_log $d/logs/access-all.log everything;
    access_log $d/logs/access-json.log everything_json buffer=64k;

    # the default 8k buffers: a longer request line is cut where the buffer ends
    server {
        listen 127.0.0.1:$long_port;
        large_client_header_buffers 4 8k;
        location / { return 404; }
    }

    # nginx's own debug lines: the request line, each header, the proxied request
    server {
        listen 127.0.0.1:$debug_port;
        error_log $d/logs/debug.log debug;
        location / { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }
    }
HTTP

$t->start_keyauthd;
$t->start_nginx(http => $http, locations => $t->console_locations . <<"LOC");
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }
        location /files/ { keyauth off; root $d/www; }
        location /echo/  { keyauth off; proxy_pass http://tool; }
LOC

# A request target that puts $secret at $offset of the request line
# "GET <target> HTTP/1.1", padded to $length characters.
sub target {
    my ($length, $offset, $head, $secret, $glue, $tail) = @_;
    my $line_head = 'GET ' . $head;
    my $pad = $offset - length($line_head) - length($glue);
    die "offset $offset too small" if $pad < 1;
    my $before = $head . ('p' x $pad) . $glue . $secret . $tail;
    my $after = $length - length('GET ') - length($before) - length(' HTTP/1.1');
    die "length $length too small" if $after < 0;
    my $target = $before . ('q' x $after);
    die 'miscounted' unless index("GET $target HTTP/1.1", $secret) == $offset
        && length("GET $target HTTP/1.1") == $length;
    return $target;
}

sub percent_encoded { join '', map { sprintf '%%%02X', ord } split //, shift }

my (%status, $sent, $sent_main, $sent_console);
sub send_to {
    my ($port, $target, @headers) = @_;
    my $res = KeyauthTest::http_request($port, GET => $target, @headers);
    $status{ $res->{status} }++;
    $sent++;
    $sent_main++ if $port == $t->port;
    return $res;
}

my @offsets = (1800 .. 2100);
my $t0 = time;
for my $length (4096, 8192) {
    for my $o (@offsets) {
        # in the query, refused: the error log's line ends with the request
        send_to($t->port, target($length, $o, '/v1/ip/1.1.1.1?pad=', $key->{secret}, '&api_key=', '&tail='),
                "Authorization: Bearer $old->{secret}", "X-Api-Key: $key->{secret}");
        # a custom-prefix key in the query, refused
        send_to($t->port, target($length, $o, '/v1/ip/1.1.1.1?pad=', $custom->{secret}, '&api_key=', '&tail='),
                "Authorization: Bearer $old->{secret}", "X-Api-Key: $custom->{secret}");
        # in the path, refused
        send_to($t->port, target($length, $o, '/v1/ip/', $key->{secret}, '/', '/'),
                "Authorization: Bearer $old->{secret}", "Cookie: session=$token");
        # a console token in a static file's path: open() failed, cut with "..."
        send_to($t->port, target($length, $o, '/files/', $token, '/', '/'));
        # in a console API path, through keyauthd
        send_to($t->port, target($length, $o, '/v1/keys/', $key->{secret}, '/', '/'),
                "Authorization: Bearer $token");
        $sent_console++;
    }
}
for my $o (470 .. 530) {
    # keyauthd cuts a logged path at 512 bytes: around that cut too
    send_to($t->port, target(1024, $o, '/v1/keys/', $key->{secret}, '/', '/'), "Authorization: Bearer $token");
    $sent_console++;
}
for my $o (grep { $_ % 3 == 0 } @offsets) {
    # percent-encoded, as a client may send it
    send_to($t->port, target(4096, $o, '/v1/ip/1.1.1.1?a=', percent_encoded($key->{secret}), '&api_key=', '&b='),
            "Authorization: Bearer $old->{secret}");
    send_to($t->port, target(4096, $o, '/v1/ip/1.1.1.1?a=', percent_encoded($custom->{secret}), '&api_key=', '&b='),
            "Authorization: Bearer $old->{secret}");
}
for my $o (8192 - 45 .. 8192 + 2) {
    # longer than the 8k buffer: $request is the line cut at 8,192 bytes
    send_to($long_port, target(8300, $o, '/x?', $key->{secret}, 'api_key=', '&'));
    send_to($long_port, target(8300, $o, '/x?', $custom->{secret}, 'api_key=', '&'));
}
for my $o (grep { $_ % 7 == 0 } @offsets) {
    send_to($debug_port, target(4096, $o, '/v1/ip/1.1.1.1?pad=', $key->{secret}, '&api_key=', '&'),
            "Authorization: Bearer $key->{secret}");
}
{
    my $body = "name=$key->{secret}&token=$token";
    my $res = KeyauthTest::http_request($t->port, POST => '/echo/body', \$body);
    $status{ $res->{status} }++;
    $sent++;
}
note sprintf '%d requests in %.1f s; statuses %s', $sent, time - $t0,
    join ', ', map { "$_: $status{$_}" } sort keys %status;
ok $status{401} && $status{404} && $status{414} && $status{200}, 'refused, not found, too long and passed requests';

sub slurp {
    my $file = shift;
    open my $fh, '<:raw', $file or return '';
    local $/;
    return <$fh> // '';
}
sub lines_of { my $n = () = slurp(shift) =~ /\n/g; return $n }

# Lines are written after the answer: wait for them, then stop everything
# (the buffered log is written when nginx exits).
sub wait_for {
    my ($what, $cond) = @_;
    my $deadline = time + 60;
    sleep 0.1 until $cond->() || time > $deadline;
    ok $cond->(), $what;
}
wait_for 'every request is in the access log' => sub { lines_of("$d/logs/access-all.log") >= $sent };
wait_for 'every console request is in keyauthd\'s log' => sub {
    my $n = () = $t->keyauthd_log =~ /"status":/g;   # a 414 is logged without its path
    $n >= $sent_console;
};
my $master = $t->pid;
kill 'QUIT', $master;
wait_for 'nginx exits' => sub { !kill 0, $master };
$t->stop_nginx;
$t->stop_keyauthd;

my %logs = map { $_ => slurp("$d/logs/$_") }
    qw(access.log access-all.log access-json.log error.log debug.log keyauthd.log);

# Every 8-character piece of a secret that holds at least one character past
# its 12-character prefix, searched as it is and percent-decoded.
sub leaks {
    my ($text) = @_;
    my $decoded = $text =~ s/%([0-9A-Fa-f]{2})/chr hex $1/ger;
    my @found;
    for my $name (sort keys %secrets) {
        my $s = $secrets{$name};
        for my $i (12 - 8 + 1 .. length($s) - 8) {
            my $piece = substr $s, $i, 8;
            if (index($text, $piece) >= 0 || index($decoded, $piece) >= 0) {
                push @found, "$name\[$i..]";
                last;
            }
        }
    }
    return @found;
}

# Controls: the search finds what was sent, the old leak (a key cut after 20
# characters at the end of a line), one character past the prefix, and an
# encoded key; it does not flag a prefix followed by the mask.
my $sample = target(4096, 1900, '/v1/ip/', $key->{secret}, '/', '/');
is_deeply [leaks($sample)], ['key[5..]'], 'control: the search finds the key in a request that was sent';
is_deeply [leaks('request: "GET /?k=' . substr($token, 0, 20) . "\n")], ['token[5..]'],
    'control: it finds a token cut after 20 characters';
is_deeply [leaks(substr($old->{secret}, 0, 13))], ['revoked[5..]'], 'control: and one character past the prefix';
is_deeply [leaks(percent_encoded($key->{secret}))], ['key[5..]'], 'control: and an encoded key';
is_deeply [leaks(join ' ', map { substr($_, 0, 12) . '*' x (length($_) - 12) } values %secrets)], [],
    'control: a prefix and its mask are no leak';

for my $log (sort keys %logs) {
    ok length $logs{$log}, "$log is not empty";
    is_deeply [leaks($logs{$log})], [], "$log holds nothing of any secret past its prefix";
}

# The keys did reach the logs, masked where nginx cut them.
my $kp = quotemeta substr($key->{secret}, 0, 12);
my $tp = quotemeta substr($token, 0, 12);
my @cut = grep { length == 2047 } split /\n/, $logs{'error.log'};
ok scalar(@cut), scalar(@cut) . ' error-log lines cut at 2 KiB';
# (the old rule masked a cut secret only if 32 characters followed "ka_":
# these lines keep fewer)
my @inside = grep { /(?:$kp|$tp)\*{1,19}$/ } @cut;
ok scalar(@inside), scalar(@inside) . ' of them end 1 to 19 characters past a secret\'s prefix, masked';
my @dots = grep { /$tp\*{1,19}\.\.\. \(\d+: / } @cut;
ok scalar(@dots), scalar(@dots) . ' end so inside a token, followed by ngx_log_errno()\'s "..."';
my $masked = () = $logs{'access-all.log'} =~ /$kp\*{29}/g;
cmp_ok $masked, '>=', 4 * @offsets, "the access log holds the key masked ($masked times)";
my $cp = quotemeta substr($custom->{secret}, 0, 12);
$masked = () = $logs{'access-all.log'} =~ /$cp\*{31}/g;
cmp_ok $masked, '>=', 2 * @offsets, "the access log holds the custom-prefix key masked ($masked times)";
ok scalar(grep { /$cp\*{1,30}$/ } @cut), 'error-log lines cut inside the custom-prefix key: masked';
my @long = grep { / 414$/ } split /\n/, $logs{'access-all.log'};
ok scalar(grep { /^"GET \/x\?p+api_key=$kp\*{1,28}"/ } @long),
    'a request line cut by the 8k buffer inside the key: masked in $request';
ok scalar(grep { /^"GET \/x\?p+api_key=$cp\*{1,30}"/ } @long),
    '... and inside the custom-prefix key';
like $logs{'access-json.log'}, qr/"body":"name=$kp\*{29}&token=$tp\*{30}"/,
    'the request body (JSON log, buffered) masked';
like $logs{'debug.log'}, qr/\[debug\].*http header: "Authorization: Bearer $kp\*{29}"/,
    'the debug log has nginx\'s header lines, masked';
like $logs{'keyauthd.log'}, qr/"path":"\/v1\/keys\/p+\/$kp\*{29}\/q+"/, 'keyauthd logs the path masked';
like $logs{'keyauthd.log'}, qr/"path":"\/v1\/keys\/p+\/$kp\*{1,28}"/, '... also where it cuts the path inside the key';

# keyauthd logs the method a client sent straight to it (nginx refuses a
# lowercase one), masked before it is cut to 16 bytes.
{
    $t->start_keyauthd;
    my $before = length $t->keyauthd_log;
    my $res = KeyauthTest::raw_request($t->keyauthd_port,
        "$key->{secret} /v1/keys HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    is $res->{status}, 405, 'keyauthd, directly: a secret as the method is an unknown method (405)';
    wait_for 'and logged' => sub { substr($t->keyauthd_log, $before) =~ /"status":405/ };
    $t->stop_keyauthd;
    is_deeply [leaks(substr $t->keyauthd_log, $before)], [],
        'keyauthd\'s log holds nothing of a secret sent as the method';
}

done_testing;
