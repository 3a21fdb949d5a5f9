# keyauthctl doctor: a healthy store, loose permissions, a store its group
# can write (a warning), a store other users can write (a failure, which
# keyauthctl and keyauthd refuse to open), a worker user who cannot use it,
# one who can but may not write it (and keyauthctl, run as that user, is
# refused before it writes anything), no store at all; and it changes nothing.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use POSIX ();
use Time::HiRes qw(time);
use KeyauthTest;

my $t = KeyauthTest->new;
$t->ctl('init');
my $db = $t->db;

my ($rc, $json) = $t->ctl_raw('doctor');
is $rc, 0, 'a fresh store: exit 0';
ok !(grep { $_->{level} ne 'ok' } @{ $json->{findings} }), 'every finding ok';
ok((grep { $_->{message} =~ /schema version/ } @{ $json->{findings} }), 'the schema is checked');
my %mode = map { $_ => sprintf '%04o', (stat "$db$_")[2] & 07777 } ('', '/data.mdb', '/lock.mdb');
is_deeply \%mode, { '' => '2750', '/data.mdb' => '0640', '/lock.mdb' => '0660' },
    'created 2750, data.mdb 0640, lock.mdb 0660: the group reads, only the owner writes';

chmod 0664, "$db/data.mdb" or die;
($rc, $json) = $t->ctl_raw('doctor');
is $rc, 0, 'readable by others is a warning, not a failure';
ok((grep { $_->{level} eq 'warn' && $_->{message} =~ /data\.mdb is accessible to other users/ }
    @{ $json->{findings} }), 'data.mdb readable by others: warned');
chmod 0640, "$db/data.mdb";

# the modes of a store made before issue 26: still opened, but the workers'
# group could write it
chmod 02770, $db or die;
chmod 0660, "$db/data.mdb" or die;
($rc, $json) = $t->ctl_raw('doctor');
is $rc, 0, 'a group-writable store (2770, data.mdb 0660): exit 0, warnings';
ok((grep { $_->{level} eq 'warn' && $_->{message} =~ m{\Q$db\E/data\.mdb is group-writable \(mode 0660\).*forge.*chmod g-w \Q$db\E/data\.mdb} }
    @{ $json->{findings} }), 'data.mdb: warned, with the fix');
ok((grep { $_->{level} eq 'warn' && $_->{message} =~ m{\Q$db\E is group-writable \(mode 2770\).*chmod g-w \Q$db\E$} }
    @{ $json->{findings} }), 'the directory: warned, with the fix');
my ($rc_old) = $t->ctl_raw('account', 'list');
is $rc_old, 0, 'and the writers still open it';
chmod 02750, $db;
chmod 0640, "$db/data.mdb";

# Writable by other users: they could forge or revoke keys. doctor fails,
# and keyauthctl and keyauthd refuse to open the store, saying how to fix it.
(my $keyauthd = $t->{ctl}) =~ s/keyauthctl$/keyauthd/;

# keyauthd --db PATH: (exit code, stderr), or (undef, ...) if it is still
# running after the deadline (it is then killed).
sub keyauthd_start_fails {
    my ($path) = @_;
    my $err = $t->dir . '/keyauthd.err';
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open STDERR, '>', $err or die $!;
        open STDOUT, '>&', \*STDERR or die $!;
        exec $keyauthd, '--db', $path, '--listen', '127.0.0.1:' . KeyauthTest::free_port();
        die "exec: $!";
    }
    my $deadline = time + 10;
    my $done = 0;
    until ($done = waitpid($pid, POSIX::WNOHANG()) > 0) {
        last if time > $deadline;
        select undef, undef, undef, 0.05;
    }
    my $rc = $done ? $? >> 8 : undef;
    unless ($done) { kill 'TERM', $pid; waitpid $pid, 0; }
    return ($rc, do { local (@ARGV, $/) = ($err); <> } // '');
}

my @unsafe = (
    ['data.mdb 0666', "$db/data.mdb", 0666, qr{\Q$db\E/data\.mdb is writable by other users \(mode 0666\)},
     qr{fix: chmod o-w \Q$db\E/data\.mdb}],
    ['lock.mdb 0662', "$db/lock.mdb", 0662, qr{\Q$db\E/lock\.mdb is writable by other users \(mode 0662\)},
     qr{fix: chmod o-w \Q$db\E/lock\.mdb}],
    ['directory 2777', $db, 02777, qr{\Q$db\E is writable by other users \(mode 2777\)},
     qr{fix: chmod o-w \Q$db\E(?!/)}],
    ['sticky directory 3777', $db, 03777, qr{\Q$db\E is writable by other users \(mode 3777\)},
     qr{fix: keep the store in a directory of its own, e\.g\. --db \Q$db\E/keyauth}],
);
for my $case (@unsafe) {
    my ($name, $path, $mode, $finding, $fix) = @$case;
    my $before = (stat $path)[2] & 07777;
    chmod $mode, $path or die $!;
    ($rc, $json) = $t->ctl_raw('doctor');
    is $rc, 1, "$name: doctor exits 1";
    my ($fail) = grep { $_->{level} eq 'fail' && $_->{message} =~ $finding } @{ $json->{findings} };
    ok $fail, "$name: reported as a failure";
    like $fail ? $fail->{message} : '', $fix, "$name: with the fix";
    for my $cmd (['init'], ['account', 'list'], ['plans', 'list'], ['fx', 'show']) {
        my ($crc, $out, $err) = $t->ctl_raw(@$cmd);
        is $crc, 1, "$name: keyauthctl @$cmd refuses the store";
        like $err, qr{refusing the store at \Q$db\E: other users can write .*; fix: }, "$name: ... saying why";
    }
    my (undef, undef, $err) = $t->ctl_raw('init');
    like $err, $fix, "$name: keyauthctl says how to fix it";
    my ($krc, $kerr) = keyauthd_start_fails($db);
    is $krc, 1, "$name: keyauthd refuses to start";
    like $kerr, qr{keyauthd: refusing the store at \Q$db\E: .*$fix}s, "$name: keyauthd says why and how to fix it";
    chmod $before, $path or die $!;
    ($rc) = $t->ctl_raw('doctor');
    is $rc, 0, "$name: fixed, doctor passes again";
}
my ($rc_ok) = $t->ctl_raw('account', 'list');
is $rc_ok, 0, 'and keyauthctl opens the store again';

# a store created inside a world-writable directory is refused before LMDB
# makes any file there
my $open_dir = $t->dir . '/open';
mkdir $open_dir or die $!;
chmod 0777, $open_dir or die $!;
my $made = qx{"$t->{ctl}" --db "$open_dir" init 2>&1};
is $? >> 8, 1, 'keyauthctl init in a world-writable directory: exit 1';
like $made, qr{fix: chmod o-w \Q$open_dir\E}, 'says how to fix it';
ok !-e "$open_dir/data.mdb" && !-e "$open_dir/lock.mdb", 'nothing was created there';
$made = qx{"$t->{ctl}" --db "$open_dir/db" init 2>&1};
is $? >> 8, 0, 'a store of its own below it is fine (created 2750)' or diag $made;
is sprintf('%04o', (stat "$open_dir/db")[2] & 07777), '2750', 'mode 2750';

SKIP: {
    skip 'needs root to act as another user', 2 unless $> == 0;
    # the test directory is 0700 root: nobody cannot even reach the store
    ($rc, $json) = $t->ctl_raw('doctor', '--user', 'nobody');
    is $rc, 1, 'a worker user who cannot use the store: exit 1';
    ok((grep { $_->{level} eq 'fail' && $_->{message} =~ /user nobody cannot write lock\.mdb/ }
        @{ $json->{findings} }), 'and it says what to fix');
}

SKIP: {
    skip 'needs root to act as another user', 8 unless $> == 0;
    my $nogroup = getgrnam('nogroup') // skip 'no group nogroup', 8;
    # the store given to the workers' group (nogroup): nobody reads data.mdb
    # and writes lock.mdb, nothing more
    chmod 0711, $t->dir or die $!;
    chown 0, $nogroup, $db, "$db/data.mdb", "$db/lock.mdb" or die $!;
    ($rc, $json) = $t->ctl_raw('doctor', '--user', 'nobody');
    is $rc, 0, 'the workers\' user can use the store: exit 0';
    ok((grep { $_->{level} eq 'ok' && $_->{message} =~ /user nobody can read data\.mdb and write lock\.mdb$/ }
        @{ $json->{findings} }), 'it reads data.mdb and writes lock.mdb')
        or diag explain $json;
    ok !(grep { $_->{level} ne 'ok' } @{ $json->{findings} }), 'every finding ok';

    my $slurp = sub { open my $f, '<:raw', $_[0] or die "$_[0]: $!"; local $/; <$f> };
    my $before = $slurp->("$db/data.mdb");
    opendir my $dh, $db or die $!;
    my @files = sort grep { !/^\.\.?$/ } readdir $dh;
    my $err = qx{runuser -u nobody -- "$t->{ctl}" --db "$db" account create --name intruder --entitlement 5 2>&1 >/dev/null};
    is $? >> 8, 1, 'keyauthctl account create as the workers\' user: exit 1';
    like $err, qr{^keyauthctl: refusing to write the store at \Q$db\E: user nobody may not write \Q$db\E/data\.mdb \(root:nogroup, mode 0640\); only the store's owner writes it, its group only reads it: run this as root \(runuser -u root -- \.\.\.\)$}m,
        'it says who may write the store and how to run as that user';
    ok $before eq $slurp->("$db/data.mdb"), 'data.mdb unchanged';
    rewinddir $dh;
    is_deeply [sort grep { !/^\.\.?$/ } readdir $dh], \@files, 'no file made or removed';
    my $accounts = $t->ctl('account', 'list');
    ok !(grep { $_->{name} eq 'intruder' } @{ ref $accounts eq 'HASH' ? $accounts->{accounts} : $accounts }),
        'no account intruder';
}

($rc, $json) = $t->ctl_raw('doctor', '--user', 'no-such-user-here');
is $rc, 1, 'an unknown user: exit 1';

my $missing = $t->dir . '/nothing';
my $out = qx{"$t->{ctl}" --db "$missing" doctor 2>&1};
is $? >> 8, 1, 'no store: exit 1';
like $out, qr/not a directory.*keyauthctl init/, 'says how to create it';
ok !-e $missing, 'doctor did not create anything';

my $foreign = $t->dir . '/foreign';
mkdir $foreign;
open my $fh, '>', "$foreign/data.mdb" or die; close $fh;
open $fh, '>', "$foreign/lock.mdb" or die; close $fh;
$out = qx{"$t->{ctl}" --db "$foreign" doctor 2>&1};
is $? >> 8, 1, 'not an LMDB store: exit 1';
like $out, qr/fail\s+the edge cannot use it/, 'the edge would refuse it, and doctor says so';

done_testing;
