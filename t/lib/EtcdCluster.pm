package EtcdCluster;

# Real etcd members on loopback for end-to-end tests (the Perl twin of
# tests/etcd_cluster.h): N members of one cluster on free ports, each with its
# own data directory in a throwaway directory, started with the settings of
# docs/scale-out.md and waited for (GET /health, with a deadline). A member
# can be killed (SIGKILL), stopped (SIGSTOP: alive but silent, as if cut
# off), continued and restarted. Every member is killed when the object goes
# (DESTROY, END), and also if the test process dies first (PR_SET_PDEATHSIG).
# Core Perl only.
#
#   my $etcd = EtcdCluster->new(members => 3);
#   $etcd->endpoints;              # "http://127.0.0.1:A,http://127.0.0.1:B,..."
#   $etcd->etcdctl(qw(put /k v));  # (exit code, output) against every member
#   $etcd->kill_member(0); $etcd->stop_member(1); $etcd->cont_member(1);

use strict;
use warnings;

use Config;
use File::Temp qw(tempdir);
use HTTP::Tiny;
use IO::Socket::INET;
use POSIX ();
use Scalar::Util qw(weaken);
use Time::HiRes qw(sleep time);

my $ETCD = '/usr/bin/etcd';
my $ETCDCTL = '/usr/bin/etcdctl';

# prctl(2) by number: core Perl has no wrapper. PR_SET_PDEATHSIG is 1.
my %SYS_PRCTL = (x86_64 => 157, aarch64 => 167, i686 => 172, i386 => 172);
my ($ARCH) = $Config{archname} =~ /^([^-]+)/;

# Live clusters, killed before File::Temp removes their directories (END
# blocks run last-defined first, and this one is defined after File::Temp's).
my @LIVE;
END {
    local $?;  # the members' exit statuses are not the test's
    for my $c (grep { defined } @LIVE) {
        $c->DESTROY;
    }
}

# Options: members (3), timeout (60 s to start and become healthy), args
# (more etcd flags for every member). Dies if the cluster cannot start.
sub new {
    my ($class, %opt) = @_;
    die "$ETCD is missing: run 'make deps' (etcd-server)\n" unless -x $ETCD;
    my $dir = tempdir('keyauth-etcd-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{KEYAUTH_KEEP});
    my $self = bless {
        dir     => $dir,
        n       => $opt{members} // 3,
        args    => $opt{args} // [],
        owner   => $$,
        members => [],
    }, $class;
    push @LIVE, $self;
    weaken $LIVE[-1];
    # a port picked free can be taken before etcd binds it: start again on new ports
    my $why = '';
    for my $attempt (1 .. 3) {
        return $self if $self->_start($attempt, $opt{timeout} // 60, \$why);
        $self->stop_all;
    }
    die "etcd cluster did not start: $why\n";
}

sub dir       { $_[0]{dir} }
sub size      { $_[0]{n} }
sub endpoint  { my ($self, $i) = @_; "http://127.0.0.1:$self->{members}[$i]{client}" }
sub endpoint_list { my $self = shift; map { $self->endpoint($_) } 0 .. $self->{n} - 1 }
sub endpoints { join ',', $_[0]->endpoint_list }
sub pid       { $_[0]{members}[$_[1]]{pid} }

sub _free_ports {
    my ($count) = @_;
    require KeyauthTest;  # its free_port: ports no other test process is given
    return map { KeyauthTest::free_port() } 1 .. $count;
}

sub _start {
    my ($self, $attempt, $timeout, $why) = @_;
    my @ports = _free_ports(2 * $self->{n});
    $self->{members} = [ map { { client => $ports[2 * $_], peer => $ports[2 * $_ + 1] } } 0 .. $self->{n} - 1 ];
    $self->{token} = "keyauth-t-$$-$attempt";
    for my $i (0 .. $self->{n} - 1) {
        system('rm', '-rf', "$self->{dir}/m$i.etcd");  # a failed attempt's data keeps its ports
        $self->_launch($i);
    }
    for my $i (0 .. $self->{n} - 1) {
        next if $self->wait_healthy($i, $timeout);
        $$why = "member $i not healthy within ${timeout}s:\n" . $self->log_tail($i);
        return 0;
    }
    return 1;
}

sub _args {
    my ($self, $i) = @_;
    my $peer = sub { "http://127.0.0.1:$self->{members}[$_[0]]{peer}" };
    my $cluster = join ',', map { "m$_=" . $peer->($_) } 0 .. $self->{n} - 1;
    return (
        "--name=m$i",
        "--data-dir=$self->{dir}/m$i.etcd",
        '--listen-client-urls=' . $self->endpoint($i),
        '--advertise-client-urls=' . $self->endpoint($i),
        '--listen-peer-urls=' . $peer->($i),
        '--initial-advertise-peer-urls=' . $peer->($i),
        "--initial-cluster=$cluster",
        '--initial-cluster-state=new',
        "--initial-cluster-token=$self->{token}",
        # the settings of docs/scale-out.md
        '--auto-compaction-mode=periodic',
        '--auto-compaction-retention=24h',
        '--quota-backend-bytes=8589934592',
        '--experimental-watch-progress-notify-interval=1s',
        '--logger=zap',
        @{ $self->{args} },
    );
}

sub _launch {
    my ($self, $i) = @_;
    my @args = $self->_args($i);
    my $log = "$self->{dir}/m$i.log";
    my $parent = $$;
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        syscall($SYS_PRCTL{$ARCH}, 1, 9) if $SYS_PRCTL{$ARCH};  # SIGKILL when the test dies
        POSIX::_exit(127) if getppid() != $parent;
        open STDOUT, '>>', $log or POSIX::_exit(127);
        open STDERR, '>&', \*STDOUT or POSIX::_exit(127);
        exec { $ETCD } $ETCD, @args or POSIX::_exit(127);
    }
    $self->{members}[$i]{pid} = $pid;
}

sub healthy {
    my ($self, $i) = @_;
    my $res = HTTP::Tiny->new(timeout => 1)->get($self->endpoint($i) . '/health');
    return $res->{success} && $res->{content} =~ /"health":"true"/;
}

# Polls /health until it says true, the member exits, or $timeout seconds pass.
sub wait_healthy {
    my ($self, $i, $timeout) = @_;
    my $deadline = time + ($timeout // 30);
    my $m = $self->{members}[$i];
    while (1) {
        return 1 if $self->healthy($i);
        if ($m->{pid} && waitpid($m->{pid}, POSIX::WNOHANG()) == $m->{pid}) {
            delete $m->{pid};
            return 0;
        }
        return 0 if time >= $deadline;
        sleep 0.05;
    }
}

sub kill_member {
    my ($self, $i) = @_;
    my $m = $self->{members}[$i];
    return unless $m->{pid};
    kill 'KILL', $m->{pid};
    waitpid $m->{pid}, 0;
    delete $m->{pid};
}

sub stop_member { my ($self, $i) = @_; kill 'STOP', $self->pid($i) if $self->pid($i) }
sub cont_member { my ($self, $i) = @_; kill 'CONT', $self->pid($i) if $self->pid($i) }

# A killed member again, on its ports and data: it rejoins the cluster.
sub restart_member {
    my ($self, $i, $timeout) = @_;
    $self->kill_member($i);
    $self->_launch($i);
    return $self->wait_healthy($i, $timeout);
}

sub stop_all {
    my $self = shift;
    $self->kill_member($_) for 0 .. $#{ $self->{members} };
}

sub log_tail {
    my ($self, $i, $bytes) = @_;
    open my $fh, '<', "$self->{dir}/m$i.log" or return '';
    local $/;
    my $all = <$fh> // '';
    $bytes //= 3000;
    return length $all > $bytes ? substr($all, -$bytes) : $all;
}

# etcdctl (API v3) against every member, or the endpoints given with
# endpoints => [...] first; returns (exit code, stdout and stderr).
sub etcdctl {
    my ($self, @args) = @_;
    my @endpoints = $self->endpoint_list;
    if (@args && ref $args[0] eq 'HASH') {
        my $o = shift @args;
        @endpoints = @{ $o->{endpoints} } if $o->{endpoints};
    }
    local $ENV{ETCDCTL_API} = 3;
    my $pid = open(my $out, '-|') // die "fork: $!";
    if ($pid == 0) {
        open STDERR, '>&', \*STDOUT;
        exec { $ETCDCTL } $ETCDCTL, '--endpoints=' . join(',', @endpoints),
            '--dial-timeout=2s', '--command-timeout=5s', @args
            or POSIX::_exit(127);
    }
    local $/;
    my $text = <$out> // '';
    close $out;
    return ($? >> 8, $text);
}

sub DESTROY {
    my $self = shift;
    local $?;  # waitpid here must not become the test's exit status
    return unless ($self->{owner} // 0) == $$;  # not in a forked child
    $self->stop_all;
}

1;
