# The IP lookup tool behind keyauth: GET /v1/ip/{ip_address} with ip:read.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use KeyauthTest;

my $t = KeyauthTest->new;
my $acc = $t->account;
my $key = $t->key(account => $acc->{id}, scopes => ['ip:read']);
my $geo = $t->key(account => $acc->{id}, scopes => ['geo:read']);
$t->start_nginx(http => 'keyauth_zone keys:1m;', locations => <<'LOC');
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; ip_lookup; }
LOC

my $auth = "Authorization: Bearer $key->{secret}";
sub lookup { my $r = $t->request(GET => "/v1/ip/$_[0]", $auth); $r->{json} = KeyauthTest::json_body($r); $r }

my @good = (
    ['8.8.8.8', 4, '8.8.8.8', 'global', '8.8.8.8.in-addr.arpa'],
    ['10.1.2.3', 4, '10.1.2.3', 'private', '3.2.1.10.in-addr.arpa'],
    ['100.64.0.1', 4, '100.64.0.1', 'shared', '1.0.64.100.in-addr.arpa'],
    ['127.0.0.1', 4, '127.0.0.1', 'loopback', '1.0.0.127.in-addr.arpa'],
    ['198.18.0.1', 4, '198.18.0.1', 'benchmarking', '1.0.18.198.in-addr.arpa'],
    ['2001:0DB8:0000:0000:0000:0000:0000:0001', 6, '2001:db8::1', 'documentation',
     '1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa'],
    ['::', 6, '::', 'unspecified', undef],
    ['::ffff:192.0.2.1', 6, '::ffff:192.0.2.1', 'ipv4-mapped', undef],
    ['fe80::1', 6, 'fe80::1', 'link-local', undef],
    ['2606:4700:4700::1111', 6, '2606:4700:4700::1111', 'global', undef],
);
for my $g (@good) {
    my ($ip, $version, $canonical, $type, $ptr) = @$g;
    my $res = lookup($ip);
    subtest $ip => sub {
        is $res->{status}, 200, 'status 200';
        like KeyauthTest::header($res, 'Content-Type'), qr{^application/json}, 'JSON';
        is $res->{json}{ip}, $ip, 'ip as given';
        is $res->{json}{version}, $version, "version $version";
        is $res->{json}{canonical}, $canonical, "canonical $canonical";
        is $res->{json}{type}, $type, "type $type";
        is $res->{json}{reverseDns}, $ptr, 'reverseDns' if defined $ptr;
        ok defined KeyauthTest::header($res, 'RateLimit'), 'rate-limit headers on a tool answer';
    };
}

is lookup('%31.2.3.4')->{json}{ip}, '1.2.3.4', 'percent-encoded digits are decoded as in any URL';

for my $bad ('1.2.3.256', '::g', '1.2.3', '01.2.3.4', 'fe80::1%25eth0', '1.2.3.4%2F32', '[::1]',
             '1::2::3', 'localhost', '', '1.2.3.4/extra', 'A' x 1024, '%C3%A9') {
    my $res = lookup($bad);
    my $label = length $bad > 40 ? '1 KB of garbage' : "'$bad'";
    is $res->{status}, 400, "$label: 400";
    is $res->{json}{error}{code}, 'INVALID_IP', "$label: INVALID_IP";
}
is $t->request(GET => '/v1/ip/1.2.3.4%00', $auth)->{status}, 400, 'a NUL byte: nginx refuses the URI';

my $noscope = $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $geo->{secret}");
is $noscope->{status}, 403, 'a key without ip:read: 403';
is $t->request(GET => '/v1/ip/8.8.8.8')->{status}, 401, 'no key: 401';
my $post = $t->request(POST => '/v1/ip/8.8.8.8', $auth, \'x');
is $post->{status}, 405, 'POST: 405';
is KeyauthTest::header($post, 'Allow'), 'GET, HEAD', 'Allow: GET, HEAD';
my $head = $t->request(HEAD => '/v1/ip/8.8.8.8', $auth);
is $head->{status}, 200, 'HEAD: 200';
is $head->{body}, '', 'HEAD: no body';

done_testing;
