# The admin API in both modes (issue 45): single host, and many edges
# (keyauthd stateless on etcd, the edge's keyauth-syncd mirroring it). The
# business's services sign a customer up, sell it a plan and give it a
# key, and the edge enforces each at once (single host) or within the
# propagation bound (many edges); a revoke through the admin API stops the
# key at the edge; keyauthctl on the same store sees what the API wrote, and
# the usage report the API streams is keyauthctl's, byte for byte.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP qw(decode_json);
use POSIX qw(strftime);
use EtcdCluster;
use KeyauthTest qw(wait_until);

my $root = KeyauthTest::root();

sub run_mode {
    my ($mode, %opt) = @_;
    my $t = KeyauthTest->new(%opt);
    $t->ctl('init') unless $opt{etcd};
    $t->ctl('plans', 'import', "$root/lmdb_schema/plans.json");
    my $ops = $t->ctl('admin-token', 'create', '--name', 'ops', '--scope', '*');
    $t->start_console_stack(admin => 1, locations => "        location /v1/ip/ { keyauth on; keyauth_scope ip:read; ip_lookup; }\n");
    my $admin = $t->admin_client($ops->{token});
    my $edge = sub { $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $_[0]")->{status} };
    my $becomes = sub {
        my ($secret, $status, $what) = @_;
        ok wait_until(sub { $edge->($secret) == $status }, 15, $what), $what;
    };

    subtest "$mode: signup, plan, key; the edge enforces each" => sub {
        my $made = $admin->(POST => '/v1/admin/accounts', { name => 'Acme', externalId => 'cus_7', planId => 'trial-100' });
        is $made->{status}, 201, 'the account' or diag $made->{body};
        my $acc = $made->{json}{id};
        is $admin->(POST => '/v1/admin/accounts', { name => 'Acme', externalId => 'cus_7', planId => 'trial-100' })
            ->{json}{error}{accountId}, $acc, 'a retried signup: 409 naming it';
        my $key = $admin->(POST => "/v1/admin/accounts/$acc/keys", { name => 'k', scopes => ['ip:read'], rateLimitPerMinute => 30 });
        is $key->{status}, 201, 'a key' or diag $key->{body};
        $becomes->($key->{json}{secret}, 200, 'the edge admits it');
        my $second = $admin->(POST => "/v1/admin/accounts/$acc/keys", { name => 'k2', scopes => ['ip:read'], rateLimitPerMinute => 30 });
        is $second->{json}{error}{code}, 'KEY_LIMIT_REACHED', 'the trial plan\'s one key: a second is 409';
        is $admin->(PUT => "/v1/admin/accounts/$acc/plan", { planId => 'basic-1k', orderId => 'ord_9' })->{status}, 200,
            'the payment service puts it on basic-1k';
        $second = $admin->(POST => "/v1/admin/accounts/$acc/keys", { name => 'k2', scopes => ['ip:read'], rateLimitPerMinute => 30 });
        is $second->{status}, 201, 'now a second key fits (5 on basic-1k)';
        my $shown = $t->ctl('account', 'show', $acc);
        is $shown->{planId}, 'basic-1k', 'keyauthctl on the same store sees the plan';
        is $admin->(POST => "/v1/admin/keys/$key->{json}{id}/revoke")->{status}, 200, 'the support desk revokes the first';
        $becomes->($key->{json}{secret}, 401, 'the edge refuses it');
        $becomes->($second->{json}{secret}, 200, 'the second works');
        $t->{acme} = $acc;
    };

    subtest "$mode: the report is keyauthctl's" => sub {
        my $day = strftime('%Y-%m-%d', gmtime);
        my $r = $admin->(GET => "/v1/admin/usage/report?from=$day&to=$day&by=month");
        is $r->{status}, 200, 'the report';
        my $cli = `'@{[ KeyauthTest::build_dir() ]}/keyauthctl' @{[ join ' ', $t->store_args ]} usage report --from $day --to $day --by month`;
        is $? >> 8, 0, 'keyauthctl usage report';
        is $r->{body}, $cli, '... the same bytes';
    };
}

run_mode('single host');
my $etcd = EtcdCluster->new(members => 1);
run_mode('many edges', etcd => $etcd->endpoints);

done_testing;
