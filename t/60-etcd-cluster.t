# The etcd harness for the many-edge tests (t/lib/EtcdCluster.pm) does what
# they will rely on: three real members that take writes, keep taking them
# with one member killed, refuse them without a quorum and take them again
# when a stopped member comes back, and leave no process behind.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use HTTP::Tiny;
use EtcdCluster;
use KeyauthTest qw(wait_until);

my $etcd = EtcdCluster->new(members => 3);
is $etcd->size, 3, 'three members';
like $etcd->endpoints, qr{^http://127\.0\.0\.1:\d+(,http://127\.0\.0\.1:\d+){2}$}, 'endpoint list';
ok $etcd->healthy($_), "member $_ healthy" for 0 .. 2;
my @pids = map { $etcd->pid($_) } 0 .. 2;

my ($rc, $out) = $etcd->etcdctl(qw(put /t60/a 1));
is $rc, 0, 'etcdctl put' or diag $out;
($rc, $out) = $etcd->etcdctl(qw(get /t60/a --print-value-only));
is $out, "1\n", 'and get';
# the JSON gateway answers too (what keyauth's programs use)
my $res = HTTP::Tiny->new(timeout => 5)->post($etcd->endpoint(2) . '/v3/kv/range',
    { content => '{"key":"L3Q2MC9h"}' });   # base64 of /t60/a
like $res->{content}, qr/"value":"MQ=="/, 'the JSON gateway reads it';

$etcd->kill_member(0);
ok !kill(0, $pids[0]), 'member 0 killed';
# member 0 may have led: the other two elect a leader first (a few seconds)
ok wait_until(sub { ($rc, $out) = $etcd->etcdctl(qw(put /t60/b 2)); $rc == 0 }, 30,
              'a write with member 0 killed'),
   'a write still succeeds with two of three members' or diag $out;
($rc, $out) = $etcd->etcdctl(qw(get /t60/b --print-value-only));
is $out, "2\n", 'and is read back';

$etcd->stop_member(1);
($rc, $out) = $etcd->etcdctl({ endpoints => [ $etcd->endpoint(2) ] },
                             qw(put /t60/c 3 --command-timeout=2s));
isnt $rc, 0, 'one member of three alone does not take a write' or diag $out;
$etcd->cont_member(1);
ok wait_until(sub { ($etcd->etcdctl(qw(put /t60/c 3)))[0] == 0 }, 30, 'a write after SIGCONT'),
   'writes again once the stopped member continues';

ok $etcd->restart_member(0, 30), 'the killed member restarts and rejoins';
($rc, $out) = $etcd->etcdctl({ endpoints => [ $etcd->endpoint(0) ] },
                             qw(get /t60/c --print-value-only));
is $out, "3\n", 'and serves what was written while it was down';

my @now = grep { defined } map { $etcd->pid($_) } 0 .. 2;
$etcd->stop_all;
ok !(grep { kill 0, $_ } @now), 'stop_all leaves no member running';

{
    my $one = EtcdCluster->new(members => 1);
    my $pid = $one->pid(0);
    ok kill(0, $pid), 'a one-member cluster runs';
    undef $one;
    ok !kill(0, $pid), 'and is killed when the object goes';
}

done_testing;
