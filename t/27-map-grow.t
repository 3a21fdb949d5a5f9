# A store never fills up on its own map (issue 30 item 6): made with a 1 MiB
# map, it takes keys past it through keyauthd's console API and through
# keyauthctl, each growing the map itself, while a running nginx answers for
# the old key and every new one without a reload; and keyauthd goes on
# writing after keyauthctl grew the map past its own.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time);
use KeyauthTest;

# The map size the store was last written with (what a writer grew it to).
sub map_size {
    my ($t) = @_;
    my $out = qx{mdb_stat -e ${\ $t->db } 2>&1};
    return $out =~ /Map size: (\d+)/ ? $1 : die "mdb_stat: $out";
}

sub status_of {
    my ($t, $secret) = @_;
    return $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $secret")->{status};
}

my $t = KeyauthTest->new;
$t->ctl('--map-size', 1, 'init');
my $acc = $t->account;
my $old = $t->key(account => $acc->{id});
$t->start_keyauthd(map_size_mib => 1);
$t->start_nginx(locations => 'location /v1/ip/ { keyauth on; keyauth_scope ip:read; ip_lookup; }');
is status_of($t, $old->{secret}), 200, 'the old key authenticates';
my $master = $t->pid;
my @workers = sort $t->worker_pids;
my $start = map_size($t);
is $start, 1 << 20, 'the store starts with a 1 MiB map';

# Large keys (32 long scopes, a 200-byte name), so that a few hundred fill a MiB.
my @scopes = ('ip:read', map { sprintf 'res%02d%s:read%s', $_, 'x' x 26, 'y' x 27 } 1 .. 31);
my $body = sprintf '{"name":"%s","scopes":[%s],"rateLimitPerMinute":5}',
    'n' x 200, join ',', map { qq{"$_"} } @scopes;

subtest 'keyauthd grows the map it fills' => sub {
    my (@secrets, @refused);
    my $deadline = time + 60;
    while (map_size($t) == $start && time < $deadline && !@refused) {
        for (1 .. 5) {
            my $res = KeyauthTest::http_request($t->keyauthd_port, POST => '/v1/keys',
                "Authorization: Bearer $acc->{consoleToken}", 'Content-Type: application/json', \$body);
            if ($res->{status} != 201) {
                push @refused, "$res->{status} $res->{body}";
                last;
            }
            push @secrets, KeyauthTest::json_body($res)->{secret};
        }
    }
    is_deeply \@refused, [], 'every create answered 201' or diag "@refused";
    cmp_ok map_size($t), '>', $start, 'the map grew past 1 MiB after ' . scalar(@secrets) . ' keys';
    my @bad = grep { status_of($t, $_) != 200 } @secrets;
    is scalar @bad, 0, 'the edge authenticates every new key (' . scalar(@secrets) . ')';
    is status_of($t, $old->{secret}), 200, 'and the old one';
};

subtest 'keyauthctl grows it in the same command' => sub {
    my $before = map_size($t);
    my ($rc, $made, $err) = $t->ctl_raw('key', 'create', '--account', $acc->{id}, '--name', 'bulk',
                                        '--scope', 'ip:read', '--rate', 5, '--count', 12000);
    is $rc, 0, 'key create --count 12000 succeeds' or diag $err;
    my @keys = @{ $made->{keys} // [] };
    is scalar @keys, 12000, 'all 12000 keys made';
    cmp_ok map_size($t), '>', $before, "the map grew past $before bytes";
    my @sample = @keys[grep { $_ % 500 == 0 } 0 .. $#keys];
    push @sample, $keys[-1] if @keys;
    my @bad = grep { status_of($t, $_->{secret}) != 200 } @sample;
    is scalar @bad, 0, 'the edge authenticates the new keys (' . scalar(@sample) . ' of them tried)';
    is status_of($t, $old->{secret}), 200, 'and the old one';
};

subtest 'keyauthd follows the map keyauthctl grew' => sub {
    my $res = KeyauthTest::http_request($t->keyauthd_port, POST => '/v1/keys',
        "Authorization: Bearer $acc->{consoleToken}", 'Content-Type: application/json', \$body);
    is $res->{status}, 201, 'a create after the other writer grew the map: 201' or diag $res->{body};
    my $secret = (KeyauthTest::json_body($res) // {})->{secret} // '';
    is status_of($t, $secret), 200, 'the edge authenticates it';
    my $list = KeyauthTest::http_request($t->keyauthd_port, GET => '/v1/keys?limit=5',
        "Authorization: Bearer $acc->{consoleToken}");
    is $list->{status}, 200, 'keyauthd lists keys';
};

is $t->pid, $master, 'the same nginx master';
is_deeply [sort $t->worker_pids], \@workers, 'the same workers: no reload, no respawn';
unlike $t->error_log, qr/\[(?:alert|emerg|crit)\]/, 'no alert in the error log';
unlike $t->keyauthd_log, qr/MDB_MAP_FULL|MDB_MAP_RESIZED/, 'keyauthd logged no map error';

done_testing;
