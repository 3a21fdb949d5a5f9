# What was sold stays in force through every operator and console path
# (issue 44), one host, through keyauthctl, the console API behind nginx and
# the edge: a catalog import that drops a plan accounts are on is refused,
# naming them, unless --retire moves them (what they used this month kept);
# credits sold with keyauthctl cannot be lifted from the console, in both
# modes (the key record that says so goes through etcd and keyauth-syncd).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use EtcdCluster;
use KeyauthTest qw(wait_until);

sub h { KeyauthTest::header(@_) }

my $LOCATIONS = <<'LOC';
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }
LOC

my $seed = KeyauthTest::root() . '/lmdb_schema/plans.json';

# The seed catalog without the plans named, as a file in the test's directory.
sub catalog_without {
    my ($t, @gone) = @_;
    my $doc = decode_json(do { local (@ARGV, $/) = ($seed); <> });
    my %gone = map { $_ => 1 } @gone;
    $doc->{plans} = [grep { !$gone{ $_->{id} } } @{ $doc->{plans} }];
    my $path = $t->dir . '/without-' . join('-', @gone) . '.json';
    open my $fh, '>', $path or die "$path: $!";
    print $fh encode_json($doc);
    close $fh;
    return $path;
}

subtest 'a catalog without a plan accounts are on: refused, or --retire moves them' => sub {
    my $t = KeyauthTest->new(workers => 2);
    $t->ctl('init');
    $t->ctl('plans', 'import', $seed);
    my $acc = $t->ctl('account', 'create', '--name', 'starter', '--plan', 'starter-500');
    my $key = $t->key(account => $acc->{id});
    my $without = catalog_without($t, 'starter-500');
    $t->start_console_stack(locations => $LOCATIONS);
    my $api = $t->console_client($acc->{consoleToken});
    my $calls = 0;
    my $policy = sub {
        $calls++;
        h($t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $key->{secret}"), 'RateLimit-Policy') // '';
    };
    like $policy->(), qr/"account-quota";q=500;/, 'on the Starter: 500 units a month';

    my ($rc, undef, $err) = $t->ctl_raw('plans', 'import', $without);
    is $rc, 1, 'plans import of a catalog without starter-500: exit 1';
    like $err, qr/plan "starter-500" is in use by 1 account \(\Q$acc->{id}\E\)/, '... naming the plan and its account'
        or diag $err;
    like $err, qr/PLAN_IN_USE/, '... PLAN_IN_USE';
    like $policy->(), qr/"account-quota";q=500;/, 'the edge still counts its 500 (it used to be unlimited)';
    is $t->ctl('plans', 'show', 'starter-500')->{id}, 'starter-500', 'the catalog is unchanged';

    ($rc, undef, $err) = $t->ctl_raw('plans', 'import', $without, '--retire', 'starter-500=no-such-plan');
    is $rc, 2, '--retire to a plan the file lacks: exit 2';
    like $err, qr/"no-such-plan".*not in the imported catalog/, '... saying so' or diag $err;
    ($rc, undef, $err) = $t->ctl_raw('plans', 'import', $without, '--retire', 'starter-500');
    is $rc, 2, '--retire without =NEW: a usage error';

    my $done = $t->ctl('plans', 'import', $without, '--retire', 'starter-500=basic-1k');
    is_deeply $done->{moved}, [{ from => 'starter-500', to => 'basic-1k', accounts => 1 }],
        'plans import --retire starter-500=basic-1k: one account moved';
    like $policy->(), qr/"account-quota";q=1000;/, 'the edge counts the Basic\'s 1,000 at once';
    my $me = $api->(GET => '/v1/account')->{json};
    is $me->{planId}, 'basic-1k', 'GET /v1/account: on the Basic';
    is_deeply [@{ $me->{quota} }{qw(units period used)}], [1000, 'month', $calls],
        "... what it used this month kept ($calls calls)";
    my ($moved) = grep { $_->{action} eq 'account.set_plan' } @{ $api->(GET => '/v1/audit')->{json}{events} };
    is_deeply $moved->{changes}{planId}, { from => 'starter-500', to => 'basic-1k' }, 'its trail says so';
    is $moved->{actor}{type}, 'operator', '... done by the operator';
};

sub sold_credits {
    my ($mode, %opt) = @_;
    subtest "$mode: credits sold with keyauthctl cannot be lifted from the console" => sub {
        my $t = KeyauthTest->new(%opt);
        my $acc = $t->account(name => "buyer-$mode");
        my $key = $t->ctl('key', 'create', '--account', $acc->{id}, '--name', 'sold', '--scope', 'ip:read',
                          '--rate', 6000, '--quota', '2/total');
        ok $key->{quotaManaged}, 'keyauthctl key create --quota 2/total: a managed quota';
        $t->start_console_stack(locations => $LOCATIONS);
        my $api = $t->console_client($acc->{consoleToken});
        for my $lift ([undef, 'removed'], [{ units => 1000, period => 'total' }, 'raised'],
                      [{ units => 2, period => 'month' }, 'made to refill monthly']) {
            my $res = $api->(PATCH => "/v1/keys/$key->{id}", { quota => $lift->[0] });
            is $res->{status}, 403, "PATCH: the quota $lift->[1] from the console: 403" or diag $res->{body};
            is $res->{code}, 'QUOTA_MANAGED', '... QUOTA_MANAGED';
        }
        my $shown = $api->(GET => "/v1/keys/$key->{id}")->{json};
        is_deeply [@{ $shown->{quota} }{qw(units period)}], [2, 'total'], 'the key still has its 2 credits';
        ok $shown->{quotaManaged}, '... shown as managed';
        # the edge spends them (a call refused before the edge knows the key is charged nothing)
        my $call = sub { $t->request(GET => '/v1/ip/8.8.8.8', "Authorization: Bearer $key->{secret}")->{status} };
        ok wait_until(sub { $call->() == 200 }, 15, 'the key at the edge'), 'the first credit';
        is $call->(), 200, 'the second';
        is $call->(), 429, 'then QUOTA_EXCEEDED: sold as 2 calls, 2 calls';
        my $own = $api->(POST => '/v1/keys', { name => 'budget', scopes => ['ip:read'], rateLimitPerMinute => 60,
                                               quota => { units => 5, period => 'day' } });
        is $own->{status}, 201, 'a budget the console sets';
        is $api->(PATCH => "/v1/keys/$own->{json}{id}", { quota => undef })->{status}, 200, '... the console removes';
    };
}

sold_credits('single host');
my $etcd = EtcdCluster->new(members => 1);
sold_credits('many edges', etcd => $etcd->endpoints);

done_testing;
