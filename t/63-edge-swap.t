# A rebuild swaps a new store in under running workers exactly as
# keyauth-syncd does (admin/syncd/mirror.cc: a complete store built beside
# the live one, renameat2 RENAME_EXCHANGE of the two directories, the old
# one removed). Workers that get no request at all must let the swapped-out
# store go within the idle bound (a tick of 0.5 s; 1 s promised): no worker
# keeps the deleted data.mdb mapped or open, which would pin its disk space
# (gigabytes at millions of keys) and leave the worker on a frozen copy.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time);
use KeyauthTest qw(wait_until);

my $LOCATION = 'location /v1/ip/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }';
# The promise is 1 s; the deadline leaves room for a busy machine (and
# a sanitizer build) without letting a worker that never notices pass.
my $IDLE_DEADLINE = 5;

# renameat2(RENAME_EXCHANGE) as mirror.cc calls it: neither perl nor
# bookworm's coreutils have it, python's ctypes reaches glibc's.
sub exchange {
    my ($from, $to) = @_;
    my $py = <<'PY';
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
if libc.renameat2(AT_FDCWD, sys.argv[1].encode(), AT_FDCWD, sys.argv[2].encode(), RENAME_EXCHANGE) != 0:
    sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
PY
    return system('python3', '-c', $py, $from, $to) == 0;
}

# What a process holds of the store's files: "map" and "fd" lines naming
# data.mdb or lock.mdb under $db, each "(deleted)" or not.
sub held {
    my ($pid, $db) = @_;
    my @held;
    if (open my $fh, '<', "/proc/$pid/maps") {
        while (my $line = <$fh>) {
            chomp $line;
            push @held, "map $1" if $line =~ m{\s(\Q$db\E\S*/(?:data|lock)\.mdb(?: \(deleted\))?)$};
        }
    }
    for my $fd (glob "/proc/$pid/fd/*") {
        my $to = readlink $fd // next;
        push @held, "fd $to" if $to =~ m{^\Q$db\E\S*/(?:data|lock)\.mdb(?: \(deleted\))?$};
    }
    return @held;
}

sub deleted_held {
    my ($t) = @_;
    my %out;
    for my $pid ($t->worker_pids) {
        my @gone = grep { /\(deleted\)$/ } held($pid, $t->db);
        $out{$pid} = \@gone if @gone;
    }
    return \%out;
}

my $t = KeyauthTest->new(workers => 2);
my $acc = $t->account;
my $old_key = $t->key(account => $acc->{id});
$t->start_nginx(locations => $LOCATION);
my $db = $t->db;
# the master listens before it forks the workers
my @workers;
ok wait_until(sub { (@workers = $t->worker_pids) == 2 }, 30, 'two workers'), 'two workers';
ok wait_until(sub { !grep { !grep { m{^map \Q$db\E/data\.mdb$} } held($_, $db) } $t->worker_pids },
              30, 'every worker to map the store'),
    'every worker maps the live data.mdb (opened in init_process)';
is $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $old_key->{secret}")->{status}, 200,
    'a key of the live store answers 200';

# the rebuild: a whole new store beside the live one, holding a key the
# live store never had (and not the old key)
my $rebuild = "$db.rebuild";
my ($new_acc, $new_key);
{
    local $t->{db} = $rebuild;
    $t->ctl('init');
    $new_acc = $t->account(name => 'rebuilt');
    $new_key = $t->key(account => $new_acc->{id});
}
my %inode_before = map { $_ => (stat "$db/$_")[1] } qw(data.mdb lock.mdb);

# Quiet from here on: not one request until the workers are checked.
ok exchange($rebuild, $db), 'renameat2(RENAME_EXCHANGE) of the rebuild and the live store';
isnt +(stat "$db/data.mdb")[1], $inode_before{'data.mdb'}, 'the path names the rebuilt store';
my $swapped_at = time;
system('rm', '-rf', '--', $rebuild) == 0 or die "cannot remove $rebuild";
ok !-e $rebuild, 'the old store is removed, as syncd does';

my $left;
ok wait_until(sub { $left = deleted_held($t); !%$left }, $IDLE_DEADLINE,
              'every idle worker to let the deleted store go'),
    'no idle worker keeps the deleted data.mdb or lock.mdb mapped or open'
    or diag explain $left;
my $took = time - $swapped_at;
note sprintf 'the idle workers let the old store go %.2f s after the swap', $took;
is_deeply [sort $t->worker_pids], [sort @workers], 'the same workers (no reload, no restart)';
# and they opened the new one (not merely closed the old)
ok wait_until(sub { !grep { !grep { m{^map \Q$db\E/data\.mdb$} } held($_, $db) } $t->worker_pids },
              $IDLE_DEADLINE, 'every worker to map the new store'),
    'every worker maps the new data.mdb';
my @reopened = $t->error_log =~ /keyauth: key store "\Q$db\E": data\.mdb was replaced or removed; opening it again/g;
cmp_ok scalar(@reopened), '>=', 2, 'each worker logged the replaced store (' . scalar(@reopened) . ' lines)';

# Now traffic: every worker answers from the rebuilt store. New connections
# land on either worker; enough of them reach both.
for my $n (1 .. 20) {
    my $res = $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $new_key->{secret}");
    is $res->{status}, 200, "request $n: a key only the rebuilt store has answers 200" or last;
}
is $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $old_key->{secret}")->{status}, 401,
    'a key only the old store had is refused';
unlike $t->error_log, qr/\[(emerg|alert|crit)\]|cannot open key store/, 'no failure logged';

done_testing;
