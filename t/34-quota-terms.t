# What was sold stays in force through every operator and console path
# (issue 44), one host, through keyauthctl, the console API behind nginx and
# the edge: a catalog import that drops a plan accounts are on is refused,
# naming them, unless --retire moves them (what they used this month kept).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use KeyauthTest;

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

done_testing;
