# Secrets stay secret: only SHA-256 hashes reach LMDB, and no secret reaches
# the error log even at debug level, where nginx itself logs every request
# header and every header it proxies.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Digest::SHA qw(sha256);
use KeyauthTest;

my $t = KeyauthTest->new;
my $acc = $t->account;
my $key = $t->key(account => $acc->{id});
my $token = $acc->{consoleToken};
like $token, qr/^kac_[0-9A-Za-z]{38}$/, 'console token format';
like $key->{secret}, qr/^ka_[0-9A-Za-z]{38}$/, 'API key format';

$t->start_nginx(log_level => 'debug', locations => <<'LOC');
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }
        location /v1/strip/ {
            keyauth on;
            proxy_set_header Authorization "";
            proxy_pass http://tool;
        }
LOC

my $auth = "Authorization: Bearer $key->{secret}";
is $t->request(GET => '/v1/ip/1.1.1.1', $auth)->{status}, 200, 'authenticated request (passes Authorization on)';
is $t->request(GET => '/v1/strip/1.1.1.1', $auth)->{status}, 200, 'authenticated request (strips Authorization)';
is $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $token")->{status}, 401,
    'a console token is not an API key';
is $t->request(GET => '/v1/ip/1.1.1.1', $auth, $auth)->{status}, 400,
    'duplicate Authorization (nginx logs the header line at info level)';
$t->stop_nginx;

my $log = $t->error_log;
like $log, qr/\[debug\]/, 'the log really is at debug level';
like $log, qr/http header: "Authorization: Bearer \Q$key->{prefix}\E\*{29}"/,
    'nginx\'s own header debug line is there, masked after the 12-character prefix';
unlike $log, qr/\Q$key->{secret}\E/, 'the API key appears nowhere in the error log';
unlike $log, qr/\Q$token\E/, 'the console token appears nowhere in the error log';
unlike $log, qr/ka_[0-9A-Za-z]{10}[0-9A-Za-z]{29}/, 'nothing key-shaped and unmasked';

# a secret pasted where keyauthctl wants an id is masked in its error
my ($rc, undef, $stderr) = $t->ctl_raw('key', 'revoke', $key->{secret});
is $rc, 2, 'keyauthctl: a secret is not a key id (usage error)';
unlike $stderr, qr/\Q${\ substr($key->{secret}, 12) }\E/, 'and its message masks the secret';
like $stderr, qr/\Q$key->{prefix}\E\*+/, '(after its 12-character prefix)';

for my $file ('data.mdb', 'lock.mdb') {
    open my $fh, '<:raw', $t->db . "/$file" or die $!;
    local $/;
    my $bytes = <$fh>;
    unlike $bytes, qr/\Q$key->{secret}\E/, "$file does not contain the API key";
    unlike $bytes, qr/\Q$token\E/, "$file does not contain the console token";
    if ($file eq 'data.mdb') {
        ok index($bytes, sha256($key->{secret})) >= 0, 'data.mdb holds the SHA-256 of the key';
        ok index($bytes, sha256($token)) >= 0, 'data.mdb holds the SHA-256 of the console token';
    }
}

done_testing;
