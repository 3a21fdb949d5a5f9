#!/usr/bin/env perl
# make bench-maps: BENCH_KEYS keys (10,000,000 by default) in stores opened
# with every program's default map size, no --map-size anywhere: keyauthctl
# makes them in ten commands as an operator would (the store grows its map by
# itself when a batch fills it), nginx serves the first and the newest key,
# and LMDB's compacting copy (what a peer's --snapshot-listen streams) is
# timed beside the disk's own dd. Issue 49: "10M keys fit the default map
# sizes of every program, or grow them by themselves".
use strict;
use warnings;
use FindBin;
$| = 1;
use lib "$FindBin::Bin/../t/lib";
BEGIN { $ENV{KEYAUTH_TEST_DEADLINE} //= 7200 }
BEGIN { $ENV{TMPDIR} = $ENV{BENCH_TMPDIR} if $ENV{BENCH_TMPDIR} }
use Time::HiRes qw(time);
use KeyauthTest;

my $KEYS = $ENV{BENCH_KEYS} // 10_000_000;
my $ctl = KeyauthTest::build_dir() . '/keyauthctl';
my $w = KeyauthTest->new;
my $db = $w->db;
sub map_bytes { `mdb_stat -e $db` =~ /Map size: (\d+)/ ? $1 : 0 }

my $acc = $w->ctl('account', 'create', '--name', 'bench', '--entitlement', 10_000_000, '--max-keys', 100_000_000);
printf "a new store's map: %.0f MiB (the default)\n", map_bytes() / 1048576;
my ($first, $newest);
my $total = 0;
sub create {  # one keyauthctl command of $n keys, as an operator types it
    my ($n) = @_;
    open my $out, '-|', $ctl, '--db', $db, 'key', 'create', '--account', $acc->{id}, '--name', 'big',
        '--scope', 'ip:read', '--rate', 60, '--count', $n or die "keyauthctl: $!";
    while (<$out>) {
        next unless /^secret \(shown once\): (\S+)/;
        $first //= $1;
        $newest = $1;
    }
    close $out or die "keyauthctl key create --count $n failed at $total keys: $?\n";
    $total += $n;
    printf "  %d keys, map %.0f MiB\n", $total, map_bytes() / 1048576;
}
my $t0 = time;
create(int($KEYS / 10) + ($_ == 10 ? $KEYS % 10 : 0)) for 1 .. 10;
my $made = time - $t0;
my $pages = `mdb_stat -e $db` =~ /Number of pages used: (\d+)/ ? $1 : 0;
printf "%d keys in ten commands, default map: %.0f s (%.0f keys/s); map %.0f MiB, %.0f MiB used (%.0f bytes a key)\n",
    $KEYS, $made, $KEYS / $made, map_bytes() / 1048576, $pages * 4096 / 1048576, $pages * 4096 / $KEYS;

$w->start_nginx(no_init => 1, http => 'keyauth_zone keys:16m;',
                locations => 'location /t/ { keyauth on; keyauth_scope ip:read; return 200 "ok\n"; }');
for my $k ([first => $first], [newest => $newest]) {
    my $st = $w->request(GET => '/t/x', "Authorization: Bearer $k->[1]")->{status};
    die "the $k->[0] key answered $st at nginx:\n" . $w->error_log unless $st == 200;
}
print "nginx (default keyauth_db settings): the first and the newest key answer 200\n";

# a tenth more, past the default map while nginx serves: keyauthctl grows
# the map, nginx's workers follow it
my $before = map_bytes();
create(int($KEYS / 10));
my $st = $w->request(GET => '/t/x', "Authorization: Bearer $newest")->{status};
die "the newest key answered $st after the map grew:\n" . $w->error_log unless $st == 200;
printf "%d keys: the map %s; nginx's running workers serve the newest key\n", $total,
    map_bytes() > $before ? sprintf('grew by itself from %.0f to %.0f MiB', $before / 1048576, map_bytes() / 1048576)
                          : sprintf('did not need to grow (%.0f MiB)', $before / 1048576);
die "MDB_MAP_FULL in nginx's log\n" if $w->error_log =~ /MAP_FULL|map full/i;

# LMDB's compacting copy, the body a peer's GET /snapshot streams
my $copy = $w->dir . '/copy.mdb';
$t0 = time;
system("mdb_copy -c -n $db/data.mdb $copy") == 0 or die "mdb_copy failed\n";
my $secs = time - $t0;
my $bytes = -s $copy;
unlink $copy;
my $dd_file = $w->dir . '/dd.bin';
my $dd = `dd if=/dev/zero of=$dd_file bs=1M count=2048 conv=fdatasync 2>&1`;
unlink $dd_file;
my $dd_rate = $dd =~ /, ([\d.]+) ([GM])B\/s/ ? $1 * ($2 eq 'G' ? 1000 : 1) : 0;
printf "compacting copy (mdb_copy -c, as --snapshot-copy makes it): %.0f MB in %.1f s = %.0f MB/s (%.0f bytes a key; the disk's dd: %.0f MB/s)\n",
    $bytes / 1e6, $secs, $bytes / 1e6 / $secs, $bytes / $total, $dd_rate;
