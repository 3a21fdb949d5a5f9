# allowedIps on keys and accounts (issue 48, DESIGN *Restrictions and
# metadata*), in both modes: a call must fit the key's list and its
# account's; outside, 403 IP_NOT_ALLOWED, charged nothing (neither rate nor
# quota) and counted. Client addresses are posed through nginx's realip
# module (set_real_ip_from 127.0.0.1), so every connection stays on loopback.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use EtcdCluster;
use KeyauthTest qw(wait_until);

my $REALIP = "set_real_ip_from 127.0.0.1;\n    real_ip_header X-Real-IP;";
my $LOCATIONS = <<'LOC';
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }
        location = /status { keyauth_status; }
LOC

sub run_mode {
    my ($mode, %opt) = @_;
    my $t = KeyauthTest->new(%opt);
    my $acc = $t->ctl('account', 'create', '--name', "ips-$mode", '--entitlement', 600,
                      '--allow-ip', '10.1.0.0/16', '--allow-ip', '2001:db8:1::/48');
    is_deeply $acc->{allowedIps}, ['10.1.0.0/16', '2001:db8:1::/48'], "$mode: the account's list, as given";
    $t->start_console_stack(locations => $LOCATIONS, http => $REALIP);
    my $api = $t->console_client($acc->{consoleToken});
    my $from = sub {
        my ($secret, $addr) = @_;
        my @h = ("Authorization: Bearer $secret");
        push @h, "X-Real-IP: $addr" if defined $addr;
        my $res = $t->request(GET => '/v1/ip/192.0.2.1', @h);
        $res->{json} = KeyauthTest::json_body($res);
        $res->{code} = ref $res->{json} eq 'HASH' && $res->{json}{error} ? $res->{json}{error}{code} : '';
        return $res;
    };
    # many edges: a change is on the edge once syncd applied it
    my $soon = sub {
        my ($secret, $addr, $status, $what) = @_;
        ok wait_until(sub { $from->($secret, $addr)->{status} == $status }, 10, $what), $what;
    };

    # 5 a minute (the burst) and 5 units in all: a refusal that charged
    # either would leave fewer than five calls
    my $res = $api->(POST => '/v1/keys', { name => 'office', scopes => ['ip:read'], rateLimitPerMinute => 5,
                                           quota => { units => 5, period => 'total' },
                                           allowedIps => ['10.0.0.0/8', '2001:db8::/32'] });
    is $res->{status}, 201, "$mode: a key limited to 10.0.0.0/8 and 2001:db8::/32" or diag $res->{body};
    is_deeply $res->{json}{allowedIps}, ['10.0.0.0/8', '2001:db8::/32'], '... its list in the key object';
    my ($secret, $id) = @{ $res->{json} }{qw(secret id)};
    $soon->($secret, '10.1.2.3', 200, 'from 10.1.2.3 (in both lists): 200');

    my %refused = ('10.2.0.1' => "outside the account's 10.1.0.0/16", '192.0.2.1' => 'outside both',
                   '2001:db8:2::1' => "IPv6 outside the account's 2001:db8:1::/48", '' => 'no X-Real-IP: 127.0.0.1');
    for my $addr (sort keys %refused) {
        my $r = $from->($secret, $addr eq '' ? undef : $addr);
        is "$r->{status} $r->{code}", '403 IP_NOT_ALLOWED', "from " . ($addr || '127.0.0.1') . " ($refused{$addr}): 403";
    }
    my $forged = KeyauthTest::http_request_from('127.0.0.2', $t->port, GET => '/v1/ip/192.0.2.1',
                                                "Authorization: Bearer $secret", 'X-Real-IP: 10.1.2.3');
    is $forged->{status}, 403, 'X-Real-IP from a peer nginx does not trust (127.0.0.2): ignored, 403';
    is $from->($secret, '2001:db8:1::7')->{status}, 200, 'from 2001:db8:1::7 (in both): 200';
    is $from->($secret, '::ffff:10.1.9.9')->{status}, 200, 'from ::ffff:10.1.9.9 (IPv4-mapped): the IPv4 lists decide';
    # three of the five units (and of the burst) went above; two are left
    my @left = map { $from->($secret, '10.1.2.3')->{status} } 1 .. 3;
    is_deeply \@left, [200, 200, 429], 'the refusals charged nothing: exactly five calls passed in all'
        or diag explain \@left;
    my $status = $t->request(GET => '/status')->{body};
    like $status, qr/^keyauth_requests_total\{outcome="ip_not_allowed"\} (\d+)$/m, 'counted as ip_not_allowed';
    my ($n) = $status =~ /^keyauth_requests_total\{outcome="ip_not_allowed"\} (\d+)$/m;
    cmp_ok $n, '>=', 4, '... every refusal';

    # changed by PATCH: the next request follows (a fresh key: the first is spent)
    $res = $api->(POST => '/v1/keys', { name => 'moving', scopes => ['ip:read'], rateLimitPerMinute => 600,
                                        allowedIps => ['10.1.2.3'] });
    is_deeply $res->{json}{allowedIps}, ['10.1.2.3/32'], 'an address alone is its /32';
    my $moving = $res->{json};
    $soon->($moving->{secret}, '10.1.2.3', 200, 'the /32 itself: 200');
    is $from->($moving->{secret}, '10.1.2.4')->{status}, 403, 'its neighbour: 403';
    $res = $api->(PATCH => "/v1/keys/$moving->{id}", { allowedIps => ['10.1.2.5/30'] });
    is "$res->{status} $res->{json}{error}{field}", '400 allowedIps', 'PATCH 10.1.2.5/30 (host bits set): 400, never widened';
    $res = $api->(PATCH => "/v1/keys/$moving->{id}", { allowedIps => ['10.1.2.4/30'] });
    is $res->{status}, 200, 'PATCH to 10.1.2.4/30' or diag $res->{body};
    $soon->($moving->{secret}, '10.1.2.5', 200, '... the next request follows: 10.1.2.5 passes');
    is $from->($moving->{secret}, '10.1.2.3')->{status}, 403, '... and 10.1.2.3 no longer';
    $res = $api->(PATCH => "/v1/keys/$moving->{id}", { allowedIps => undef });
    is_deeply [$res->{status}, $res->{json}{allowedIps}], [200, undef], 'PATCH null: any address';
    $soon->($moving->{secret}, '10.1.200.1', 200, '... anywhere in the account\'s list');
    is $from->($moving->{secret}, '192.0.2.1')->{status}, 403, '... but still not outside the account\'s';
    $t->ctl('account', 'update', $acc->{id}, '--allow-ip', 'any');
    $soon->($moving->{secret}, '192.0.2.1', 200, 'the account lifted to any address: the next request follows');

    # bad input: 400 naming the field, nothing written
    my $before = $api->(GET => "/v1/keys/$moving->{id}")->{body};
    for my $bad (['10.1.2.3/8'], ['not-an-address'], ['10.0.0.0/33'], [], [map { "10.0.$_.0/24" } 0 .. 32],
                 '10.0.0.0/8', [8], ['10.0.0.0/8 '], ['fe80::1%eth0']) {
        my $r = $api->(PATCH => "/v1/keys/$moving->{id}", { allowedIps => $bad });
        my $shown = ref $bad ? '[' . substr(join(',', @$bad), 0, 40) . ']' : "\"$bad\"";
        is "$r->{status} $r->{code}", '400 VALIDATION_ERROR', "allowedIps $shown: 400";
        is $r->{json}{error}{field}, 'allowedIps', '... naming the field';
    }
    is $api->(GET => "/v1/keys/$moving->{id}")->{body}, $before, 'the key is unchanged';
    my $audit = $api->(GET => '/v1/audit?limit=100')->{json}{events};
    my ($ev) = grep { $_->{action} eq 'key.update' && $_->{changes}{allowedIps} } @$audit;
    ok $ev, 'the change is in the audit trail';
    my ($create) = grep { $_->{action} eq 'key.create' && $_->{target}{id} eq $id } @$audit;
    is_deeply $create->{changes}{allowedIps}{to}, ['10.0.0.0/8', '2001:db8::/32'], '... and the create, with its list'
        or diag explain $create;
}

run_mode('single host');
my $etcd = EtcdCluster->new(members => 1);
run_mode('many edges', etcd => $etcd->endpoints);

done_testing;
