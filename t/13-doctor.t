# keyauthctl doctor: a healthy store, loose permissions, a worker user who
# cannot use it, no store at all; and it changes nothing.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use KeyauthTest;

my $t = KeyauthTest->new;
$t->ctl('init');
my $db = $t->db;

my ($rc, $json) = $t->ctl_raw('doctor');
is $rc, 0, 'a fresh store: exit 0';
ok !(grep { $_->{level} ne 'ok' } @{ $json->{findings} }), 'every finding ok';
ok((grep { $_->{message} =~ /schema version/ } @{ $json->{findings} }), 'the schema is checked');

chmod 0666, "$db/data.mdb" or die;
($rc, $json) = $t->ctl_raw('doctor');
is $rc, 0, 'loose modes are a warning, not a failure';
ok((grep { $_->{level} eq 'warn' && $_->{message} =~ /data\.mdb is accessible to other users/ }
    @{ $json->{findings} }), 'data.mdb readable by others: warned');
chmod 0660, "$db/data.mdb";

SKIP: {
    skip 'needs root to act as another user', 2 unless $> == 0;
    # the test directory is 0700 root: nobody cannot even reach the store
    ($rc, $json) = $t->ctl_raw('doctor', '--user', 'nobody');
    is $rc, 1, 'a worker user who cannot use the store: exit 1';
    ok((grep { $_->{level} eq 'fail' && $_->{message} =~ /user nobody cannot write lock\.mdb/ }
        @{ $json->{findings} }), 'and it says what to fix');
}

($rc, $json) = $t->ctl_raw('doctor', '--user', 'no-such-user-here');
is $rc, 1, 'an unknown user: exit 1';

my $missing = $t->dir . '/nothing';
my $out = qx{${\ KeyauthTest::root() }/build/keyauthctl --db $missing doctor 2>&1};
is $? >> 8, 1, 'no store: exit 1';
like $out, qr/not a directory.*keyauthctl init/, 'says how to create it';
ok !-e $missing, 'doctor did not create anything';

my $foreign = $t->dir . '/foreign';
mkdir $foreign;
open my $fh, '>', "$foreign/data.mdb" or die; close $fh;
open $fh, '>', "$foreign/lock.mdb" or die; close $fh;
$out = qx{${\ KeyauthTest::root() }/build/keyauthctl --db $foreign doctor 2>&1};
is $? >> 8, 1, 'not an LMDB store: exit 1';
like $out, qr/fail\s+the edge cannot use it/, 'the edge would refuse it, and doctor says so';

done_testing;
