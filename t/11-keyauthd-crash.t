# kill -9 keyauthd while it creates keys: every key that got a 201 survives
# (keyauthd answers only after a durable commit) and works at the edge.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use POSIX ();
use JSON::PP;
use Time::HiRes qw(time);
use KeyauthTest qw(wait_until);

my $t = KeyauthTest->new;
my $acc = $t->account(entitlement => 600);
$t->start_keyauthd;
$t->start_nginx(locations => <<'LOC');
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }
LOC

my $port = $t->keyauthd_port;
my $record = $t->dir . '/created.jsonl';
my $client = fork // die "fork: $!";
if ($client == 0) {
    open my $out, '>', $record or die $!;
    $out->autoflush(1);
    my $body = '{"name":"storm","scopes":["ip:read"],"rateLimitPerMinute":60}';
    my $deadline = time + 120;   # it ends when keyauthd is killed
    while (time < $deadline) {
        my $res = eval {
            KeyauthTest::http_request($port, POST => '/v1/keys',
                "Authorization: Bearer $acc->{consoleToken}", 'Content-Type: application/json', \$body);
        };
        last unless $res && $res->{status};   # keyauthd is gone
        print $out "$res->{body}" if $res->{status} == 201;
    }
    close $out;
    POSIX::_exit(0);
}

# kill it while it creates keys, once a good number were acknowledged
sub acknowledged {
    open my $in, '<', $record or return 0;
    my $text = do { local $/; <$in> } // '';
    return $text =~ tr/\n//;   # one line per 201
}
ok wait_until(sub { acknowledged() >= 200 }, 60, '200 keys acknowledged'), 'keys are being created';
$t->stop_keyauthd('KILL');
waitpid $client, 0;

open my $in, '<', $record or die $!;
my @created = map { decode_json($_) } grep { /\S/ } <$in>;
close $in;
cmp_ok scalar @created, '>', 5, scalar(@created) . ' keys acknowledged before the crash';

$t->start_keyauthd;
my %listed;
my $cursor;
for (1 .. 1000) {
    my $q = '/v1/keys?limit=100' . ($cursor ? "&cursor=$cursor" : '');
    my $page = KeyauthTest::json_body(KeyauthTest::http_request(
        $t->keyauthd_port, GET => $q, "Authorization: Bearer $acc->{consoleToken}"));
    $listed{ $_->{id} } = 1 for @{ $page->{keys} };
    $cursor = $page->{nextCursor} or last;
}
my @missing = grep { !$listed{ $_->{id} } } @created;
is scalar @missing, 0, 'every acknowledged key is listed after the restart';

my @failing = grep {
    $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $_->{secret}")->{status} != 200
} @created;
is scalar @failing, 0, 'every acknowledged key authenticates at the edge';

my ($rc, $json) = $t->ctl_raw('key', 'list', '--account', $acc->{id}, '--limit', 1);
is $rc, 0, 'the store opens cleanly for keyauthctl';

done_testing;
