# A usage collection walks keyauth_zone one transaction (4096 slots) at a
# time, on a timer, and the worker serves requests between the parts: a
# large zone's walk never holds the event loop for the whole of it (with a
# million busy keys, one walk in one go stalled every request for a third of
# a second). keyauth_status counts both: with one worker, two answers in a
# row between which parts of a walk ran but no walk ended were served in the
# middle of a walk, which a walk made in one go cannot show. And the walk in
# parts still collects every request exactly once.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use KeyauthTest qw(wait_until);

my $t = KeyauthTest->new(workers => 1);
my $acc = $t->account(entitlement => 1000000);
my @keys = map { $t->key(account => $acc->{id}, rate => 60000) } 1 .. 3;

# 128m: about 1.4 million usage slots, some 340 parts a walk
$t->start_nginx(http => "keyauth_zone keys:128m;\nkeyauth_usage_interval 1s;", locations => $KeyauthTest::IP_AND_STATUS);

sub counters {
    my $body = $t->request(GET => '/status')->{body};
    my ($walks) = $body =~ /^keyauth_usage_collections_total (\d+)$/m;
    my ($parts) = $body =~ /^keyauth_usage_collection_parts_total (\d+)$/m;
    return ($walks, $parts);
}

subtest 'requests are served between the parts of a walk' => sub {
    my ($walks, $parts) = counters();
    ok(defined $walks && defined $parts, 'keyauth_status counts walks and parts')
        or return;
    ok(wait_until(sub { (counters())[0] >= 1 }, 30, 'a first walk to end'), 'walks end');
    my $slots = $t->request(GET => '/status')->{body} =~ /^keyauth_usage_zone_slots (\d+)$/m ? $1 : 0;
    cmp_ok($slots, '>', 100 * 4096, "a zone of $slots usage slots: over 100 parts a walk");
    my @seen;
    my $mid_walk = wait_until(sub {
        my @before = counters();
        my @after = counters();
        @seen = (@before, @after);
        return $after[0] == $before[0] && $after[1] > $before[1];
    }, 30, 'two answers with parts of a walk between them and no walk ended');
    ok($mid_walk, 'an answer came between two parts of one walk')
        or diag "walks, parts before and after: @seen";
};

subtest 'a walk in parts collects every request once' => sub {
    my %sent;
    for my $k (@keys) {
        my $n = 3 + keys %sent;
        is($t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $k->{secret}")->{status}, 200)
            for 1 .. $n;
        $sent{"$acc->{id} $k->{id}"} = $n;
    }
    ok(wait_until(sub {
        my $u = $t->usage;
        !grep { !$u->{$_} || $u->{$_}{allowed} != $sent{$_} } keys %sent;
    }, 30, 'the usage env to hold every key\'s count'), 'every request counted once')
        or diag explain $t->usage;
    like($t->request(GET => '/status')->{body}, qr/^keyauth_usage_flush_errors_total 0$/m, 'no flush error');
};

done_testing;
